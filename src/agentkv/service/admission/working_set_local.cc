// Invariants (checked by CheckInvariants, true whenever mu_ is free):
// - waiting_ holds exactly the working set's waiting tickets, each with its callback: every
//   call into the working set is followed, under the same lock, by CollectResolvedLocked,
//   which moves a resolved ticket's callback into deliveries_.
// - Each callback runs exactly once: it lives in exactly one place (the caller's stack for an
//   immediate answer, waiting_, deliveries_, then the delivering thread's stack), and
//   deliveries_ is drained by one thread at a time (delivering_), front to back.
// - No callback runs while mu_ is held; timer_mu_ is never taken while mu_ is held.
#include "agentkv/service/admission/working_set_local.h"

#include <algorithm>
#include <optional>
#include <utility>

namespace agentkv::service {
namespace {

using control::WorkingSetDecision;
using control::WorkingSetReason;

TimeNs SteadyNow() {
  return TimeNs(std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now().time_since_epoch())
                    .count());
}

// The longest the timer sleeps without a deadline (a guard against a clock that jumps).
constexpr std::chrono::milliseconds kMaxTimerSleep{1000};

}  // namespace

StatusOr<std::unique_ptr<LocalWorkingSet>> LocalWorkingSet::Create(LocalWorkingSetOptions options) {
  AGENTKV_RETURN_IF_ERROR(options.working_set.Validate());
  if (!options.clock) options.clock = SteadyNow;
  std::unique_ptr<LocalWorkingSet> ws(new LocalWorkingSet(options));
  if (options.timer) ws->timer_ = std::thread([w = ws.get()] { w->TimerLoop(); });
  return ws;
}

LocalWorkingSet::LocalWorkingSet(const LocalWorkingSetOptions& options)
    : clock_(options.clock), working_set_(options.working_set) {}

LocalWorkingSet::~LocalWorkingSet() {
  Shutdown();
  if (timer_.joinable()) timer_.join();
}

void LocalWorkingSet::Shutdown() {
  {
    sync::MutexLock lock(&timer_mu_);
    timer_stop_ = true;
  }
  timer_wake_.SignalAll();
  {
    sync::MutexLock lock(&mu_);
    if (!shut_down_) {
      shut_down_ = true;
      const TimeNs now = clock_();
      std::vector<std::string> tickets;
      for (const auto& [ticket, callback] : waiting_) tickets.push_back(ticket);
      for (const std::string& ticket : tickets) working_set_.Cancel(ticket, now);
      CollectResolvedLocked();
    }
  }
  Deliver();
}

void LocalWorkingSet::WakeTimer() {
  {
    sync::MutexLock lock(&timer_mu_);
    ++timer_generation_;
  }
  timer_wake_.SignalAll();
}

void LocalWorkingSet::TimerLoop() {
  sync::ReleasableMutexLock lock(&timer_mu_);
  while (!timer_stop_) {
    const uint64_t generation = timer_generation_;
    lock.Unlock();
    std::chrono::nanoseconds sleep = kMaxTimerSleep;
    {
      sync::MutexLock ws_lock(&mu_);
      if (const std::optional<TimeNs> deadline = working_set_.NextDeadline()) {
        sleep = std::clamp(std::chrono::nanoseconds((*deadline - clock_()).ns()),
                           std::chrono::nanoseconds(0), std::chrono::nanoseconds(kMaxTimerSleep));
      }
    }
    lock.Lock();
    const auto until = std::chrono::steady_clock::now() + sleep;
    bool timed_out = sleep.count() == 0;
    while (!timer_stop_ && !timed_out && timer_generation_ == generation) {
      timed_out = timer_wake_.WaitWithDeadline(&timer_mu_, until);
    }
    if (timer_stop_) return;
    if (!timed_out) continue;  // Woken: the deadline may have moved.
    lock.Unlock();
    Tick();
    lock.Lock();
  }
}

Status LocalWorkingSet::Acquire(const control::ProgramRequest& request, Callback done) {
  std::optional<WorkingSetDecision> immediate;
  {
    sync::MutexLock lock(&mu_);
    if (shut_down_) {
      immediate = WorkingSetDecision{
          .ticket = request.ticket, .admitted = true, .reason = WorkingSetReason::kNoCapacity};
    } else {
      AGENTKV_ASSIGN_OR_RETURN(WorkingSetDecision decision,
                               working_set_.Acquire(request, clock_()));
      if (decision.admitted) {
        immediate = std::move(decision);
      } else {
        waiting_.emplace(request.ticket, std::move(done));
      }
      CollectResolvedLocked();
    }
  }
  if (immediate.has_value()) done(*immediate);
  WakeTimer();
  Deliver();
  return Status::Ok();
}

bool LocalWorkingSet::Cancel(const std::string& ticket) {
  bool was_waiting = false;
  {
    sync::MutexLock lock(&mu_);
    was_waiting = waiting_.contains(ticket);
    if (was_waiting) working_set_.Cancel(ticket, clock_());
    CollectResolvedLocked();
  }
  Deliver();
  return was_waiting;
}

void LocalWorkingSet::Finish(const std::string& ticket, const control::RequestEnd& end) {
  {
    sync::MutexLock lock(&mu_);
    working_set_.Finish(ticket, end, clock_());
    CollectResolvedLocked();
  }
  WakeTimer();
  Deliver();
}

void LocalWorkingSet::EndAgent(const std::string& agent) {
  {
    sync::MutexLock lock(&mu_);
    working_set_.EndAgent(agent, clock_());
    CollectResolvedLocked();
  }
  WakeTimer();
  Deliver();
}

void LocalWorkingSet::Reconcile(std::span<const control::EngineSnapshot> snapshots) {
  {
    sync::MutexLock lock(&mu_);
    if (shut_down_) return;
    working_set_.Reconcile(snapshots, clock_());
    CollectResolvedLocked();
  }
  WakeTimer();
  Deliver();
}

void LocalWorkingSet::Tick() {
  {
    sync::MutexLock lock(&mu_);
    working_set_.Tick(clock_());
    CollectResolvedLocked();
  }
  Deliver();
}

void LocalWorkingSet::CollectResolvedLocked() {
  for (WorkingSetDecision& decision : working_set_.TakeResolved()) {
    auto it = waiting_.find(decision.ticket);
    if (it == waiting_.end()) continue;  // Answered at once by its own Acquire.
    deliveries_.push_back(Delivery{std::move(decision), std::move(it->second)});
    waiting_.erase(it);
  }
}

void LocalWorkingSet::Deliver() {
  sync::ReleasableMutexLock lock(&mu_);
  if (delivering_) return;  // That thread delivers ours too, in order.
  delivering_ = true;
  while (!deliveries_.empty()) {
    Delivery delivery = std::move(deliveries_.front());
    deliveries_.pop_front();
    lock.Unlock();
    delivery.callback(delivery.decision);
    lock.Lock();
  }
  delivering_ = false;
}

bool LocalWorkingSet::Waiting(const std::string& ticket) const {
  sync::MutexLock lock(&mu_);
  return waiting_.contains(ticket);
}

control::WorkingSetGauges LocalWorkingSet::Gauges() const {
  sync::MutexLock lock(&mu_);
  return working_set_.Gauges();
}

control::WorkingSetCounters LocalWorkingSet::Counters() const {
  sync::MutexLock lock(&mu_);
  return working_set_.counters();
}

Status LocalWorkingSet::CheckInvariants() const {
  sync::MutexLock lock(&mu_);
  AGENTKV_RETURN_IF_ERROR(working_set_.CheckInvariants());
  // Every program waiting has at least one waiting ticket, each with its callback.
  if (static_cast<int64_t>(waiting_.size()) < working_set_.Gauges().waiting_programs) {
    return InternalError(std::to_string(waiting_.size()) + " tickets hold callbacks but " +
                         std::to_string(working_set_.Gauges().waiting_programs) + " programs wait");
  }
  for (const auto& [ticket, callback] : waiting_) {
    if (!callback) return InternalError("waiting ticket " + ticket + " has no callback");
  }
  return Status::Ok();
}

std::vector<protocol::MetricFamily> WorkingSetFamilies(
    const control::WorkingSetGauges& gauges, const control::WorkingSetCounters& counters) {
  std::vector<protocol::MetricFamily> families;
  auto one = [&families](std::string name, std::string help, std::string type, int64_t value) {
    families.push_back(protocol::MetricFamily{
        std::move(name),
        std::move(help),
        std::move(type),
        {protocol::Sample{"", {}, static_cast<double>(value), std::nullopt}}});
  };
  auto labelled = [&families](std::string name, std::string help, std::string label,
                              std::vector<std::pair<std::string, int64_t>> values) {
    protocol::MetricFamily family{std::move(name), std::move(help), "counter", {}};
    for (auto& [value_label, value] : values) {
      family.samples.push_back(protocol::Sample{"",
                                                {protocol::Label{label, std::move(value_label)}},
                                                static_cast<double>(value),
                                                std::nullopt});
    }
    families.push_back(std::move(family));
  };
  one("agentic_kv_working_set_held_tokens",
      "Tokens of context held by agents paused between requests (working-set admission).", "gauge",
      gauges.held_tokens);
  one("agentic_kv_working_set_active_tokens",
      "Tokens reserved by running requests of the working set (prompt plus expected decode).",
      "gauge", gauges.active_tokens);
  one("agentic_kv_working_set_live_programs",
      "Programs with an agent running or holding its context.", "gauge", gauges.live_programs);
  one("agentic_kv_working_set_waiting_programs",
      "New programs waiting for their first request to fit.", "gauge", gauges.waiting_programs);
  one("agentic_kv_working_set_capacity_tokens",
      "Tokens the working set may fill across the fleet (device KV x headroom plus host tier); 0 "
      "before any engine reported.",
      "gauge", gauges.capacity_tokens);
  labelled("agentic_kv_working_set_admitted_total",
           "Requests admitted by the working set since start, by reason (continuing: a live "
           "program; fits; aged: after the maximum wait; no_capacity: no engine reported).",
           "reason",
           {{"continuing", counters.continuing},
            {"fits", counters.fits},
            {"aged", counters.aged},
            {"no_capacity", counters.no_capacity}});
  one("agentic_kv_working_set_waits_total",
      "Requests of new programs that had to wait since start.", "counter", counters.waited);
  one("agentic_kv_working_set_cancelled_total",
      "Waiting requests cancelled (client gone, session closed, shutdown) since start.", "counter",
      counters.cancelled);
  labelled("agentic_kv_working_set_holds_total",
           "Context holds ended since start, by how (returned: the agent's next request came; "
           "expired: the pause outlived its prediction; ended: the session closed).",
           "end",
           {{"returned", counters.holds_returned},
            {"expired", counters.holds_expired},
            {"ended", counters.holds_ended}});
  return families;
}

}  // namespace agentkv::service
