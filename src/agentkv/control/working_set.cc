#include "agentkv/control/working_set.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "agentkv/base/bounds.h"
#include "agentkv/base/check.h"

// Invariants (CheckInvariants):
// - An agent's footprint is running_tokens (the sum of its admitted tickets' reservations) plus
//   held_tokens; held_tokens > 0 exactly when holds_ has (hold_until, agent).
// - footprint_[t] is the sum of the footprints of the agents whose target is t;
//   total_footprint_ their sum, held_total_ the sum of held_tokens.
// - A program's live_agents counts its agents with a footprint > 0 or a running ticket; every
//   agent is in its program's agents.
// - Every waiting ticket is in exactly one queue (its target's) at (its program's seq, its
//   seq) and in by_wait_ at its enqueue time; every admitted one is in its agent's running set.
// - An ended agent has no hold and no waiting ticket; it is forgotten when nothing runs.

namespace agentkv::control {
namespace {

constexpr size_t kMaxNameBytes = 1024;

Status CheckName(std::string_view field, std::string_view value) {
  if (value.empty() || value.size() > kMaxNameBytes) {
    return InvalidArgumentError(std::string(field) + " must be 1 to " +
                                std::to_string(kMaxNameBytes) + " bytes, got " +
                                std::to_string(value.size()));
  }
  return Status::Ok();
}

kv::PauseEstimator::Options EstimatorOptions(const WorkingSetOptions& options) {
  kv::PauseEstimator::Options estimator;
  estimator.quantile = options.hold_quantile;
  estimator.min_samples = kMinPauseSamples;
  return estimator;
}

int64_t ScaledTokens(int64_t tokens, double factor) {
  const double scaled = std::floor(static_cast<double>(tokens) * factor);
  return static_cast<int64_t>(std::clamp(scaled, 0.0, static_cast<double>(kMaxTokens)));
}

}  // namespace

std::string_view WorkingSetReasonName(WorkingSetReason reason) {
  switch (reason) {
    case WorkingSetReason::kContinuing:
      return "continuing";
    case WorkingSetReason::kFits:
      return "fits";
    case WorkingSetReason::kAged:
      return "aged";
    case WorkingSetReason::kNoCapacity:
      return "no_capacity";
    case WorkingSetReason::kFull:
      return "full";
    case WorkingSetReason::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

Status WorkingSetOptions::Validate() const {
  if (!(headroom > 0.0 && headroom <= 8.0)) {
    return InvalidArgumentError("working-set headroom must be in (0, 8], got " +
                                std::to_string(headroom));
  }
  if (!(host_tier_ratio >= 0.0 && host_tier_ratio <= 100.0)) {
    return InvalidArgumentError("working-set host_tier_ratio must be in [0, 100], got " +
                                std::to_string(host_tier_ratio));
  }
  if (!(hold_quantile > 0.0 && hold_quantile < 1.0)) {
    return InvalidArgumentError("working-set hold_quantile must be in (0, 1), got " +
                                std::to_string(hold_quantile));
  }
  const TimeNs day = TimeNs::Seconds(86'400);
  if (max_hold < TimeNs(0) || max_hold > day) {
    return InvalidArgumentError("working-set max_hold must be in [0, 86400] s, got " +
                                std::to_string(max_hold.seconds()) + " s");
  }
  if (default_hold < TimeNs(0) || default_hold > max_hold) {
    return InvalidArgumentError("working-set default_hold must be in [0, max_hold], got " +
                                std::to_string(default_hold.seconds()) + " s");
  }
  if (max_wait < TimeNs(0) || max_wait > day) {
    return InvalidArgumentError("working-set max_wait must be in [0, 86400] s, got " +
                                std::to_string(max_wait.seconds()) + " s");
  }
  return Status::Ok();
}

WorkingSetAdmission::WorkingSetAdmission(const WorkingSetOptions& options)
    : options_(options), pauses_(EstimatorOptions(options)) {
  AGENTKV_CHECK(options.Validate().ok()) << options.Validate();
}

TimeNs WorkingSetAdmission::PredictedHold(PauseKind kind, std::string_view tool) const {
  if (kind == PauseKind::kSessionEnd) return TimeNs(0);
  const std::optional<TimeNs> estimate = pauses_.Estimate(kind, tool);
  return std::min(estimate.value_or(options_.default_hold), options_.max_hold);
}

int64_t WorkingSetAdmission::CapacityOf(std::string_view target) const {
  if (!target.empty()) {
    if (auto it = capacity_.find(target); it != capacity_.end()) return it->second;
  }
  return fleet_capacity_;
}

int64_t WorkingSetAdmission::NewProgramTokens(int64_t tokens) const {
  if (!options_.reserve_expected_peak || static_cast<int64_t>(peaks_.size()) < kMinPauseSamples) {
    return tokens;
  }
  std::vector<int64_t> peaks(peaks_.begin(), peaks_.end());
  std::nth_element(peaks.begin(), peaks.begin() + static_cast<long>(peaks.size() / 2), peaks.end());
  return std::max(tokens, peaks[peaks.size() / 2]);
}

bool WorkingSetAdmission::Fits(std::string_view target, int64_t tokens) const {
  const bool engine = !target.empty() && capacity_.contains(target);
  const int64_t used = engine ? FootprintOn(target) : total_footprint_;
  // Alone on its target a program runs whatever its size: no release can make more room.
  return used == 0 || SaturatingAdd(used, tokens) <= CapacityOf(target);
}

std::optional<TimeNs> WorkingSetAdmission::HoldUntil(std::string_view agent) const {
  auto it = agents_.find(agent);
  if (it == agents_.end() || it->second.held_tokens == 0) return std::nullopt;
  return it->second.hold_until;
}

int64_t WorkingSetAdmission::FootprintOn(std::string_view target) const {
  auto it = footprint_.find(target);
  return it == footprint_.end() ? 0 : it->second;
}

void WorkingSetAdmission::AddFootprint(const std::string& target, int64_t tokens) {
  if (tokens == 0) return;
  int64_t& sum = footprint_[target];
  sum += tokens;
  total_footprint_ += tokens;
  AGENTKV_CHECK(sum >= 0 && total_footprint_ >= 0);
  if (sum == 0) footprint_.erase(target);
}

void WorkingSetAdmission::Refresh(Agent& agent, int64_t before) {
  const int64_t after = FootprintOf(agent);
  AddFootprint(agent.target, after - before);
  const bool was_live = before > 0;
  const bool is_live = after > 0;
  Program& program = programs_.at(agent.program);
  if (was_live != is_live) program.live_agents += is_live ? 1 : -1;
  program.footprint += after - before;
  program.peak = std::max(program.peak, program.footprint);
}

void WorkingSetAdmission::ReleaseHold(const std::string& name, Agent& agent) {
  if (agent.held_tokens == 0) return;
  const int64_t before = FootprintOf(agent);
  holds_.erase({agent.hold_until, name});
  held_total_ -= agent.held_tokens;
  agent.held_tokens = 0;
  Refresh(agent, before);
}

StatusOr<WorkingSetDecision> WorkingSetAdmission::Acquire(const ProgramRequest& request,
                                                          TimeNs now) {
  AGENTKV_RETURN_IF_ERROR(CheckName("ticket", request.ticket));
  AGENTKV_RETURN_IF_ERROR(CheckName("program", request.program));
  AGENTKV_RETURN_IF_ERROR(CheckName("agent", request.agent));
  if (request.engine.has_value()) AGENTKV_RETURN_IF_ERROR(CheckName("engine", *request.engine));
  if (request.reservation_tokens < 0 || request.reservation_tokens > kMaxTokens) {
    return InvalidArgumentError("reservation_tokens must be in [0, " + std::to_string(kMaxTokens) +
                                "], got " + std::to_string(request.reservation_tokens));
  }
  if (tickets_.contains(request.ticket)) {
    return AlreadyExistsError("ticket " + request.ticket + " is already live");
  }
  auto known = agents_.find(request.agent);
  if (known != agents_.end() && known->second.program != request.program) {
    return InvalidArgumentError("agent " + request.agent + " belongs to program " +
                                known->second.program + ", not " + request.program);
  }
  if (known == agents_.end()) {
    known = agents_.emplace(request.agent, Agent{.program = request.program}).first;
    auto [program, added] = programs_.try_emplace(request.program);
    if (added) program->second.seq = next_program_seq_++;
    program->second.agents.insert(request.agent);
  }
  const std::string& name = known->first;
  Agent& agent = known->second;
  agent.ended = false;
  // Live before the agent's own hold ends: a held agent returning continues its program.
  const Program& program = programs_.at(agent.program);
  const bool live = program.live_agents > 0 || (program.started && !options_.returning_waits);
  // The agent is back: learn its pause and end its hold (a new request carries its context).
  if (agent.paused_since.has_value()) {
    pauses_.Observe(agent.pause_kind, agent.pause_tool, now - *agent.paused_since);
    agent.paused_since.reset();
    if (agent.held_tokens > 0) ++counters_.holds_returned;
    ReleaseHold(name, agent);
  }
  const std::string target = request.engine.value_or("");
  Ticket ticket{.agent = name, .tokens = request.reservation_tokens, .target = target};
  WorkingSetDecision decision{.ticket = request.ticket};
  auto queue = queues_.find(target);
  const bool queue_empty = queue == queues_.end() || queue->second.empty();
  if (live) {
    decision.reason = WorkingSetReason::kContinuing;
  } else if (fleet_capacity_ == 0) {
    decision.reason = WorkingSetReason::kNoCapacity;
  } else if (queue_empty && Fits(target, NewProgramTokens(request.reservation_tokens))) {
    decision.reason = WorkingSetReason::kFits;
  } else {
    // A new program behind an older one, or into a full target: wait first come, first served.
    ticket.waiting = true;
    ticket.enqueued_at = now;
    ticket.seq = next_seq_++;
    ticket.program_seq = programs_.at(agent.program).seq;
    queues_[target].emplace(ticket.program_seq, ticket.seq, request.ticket);
    by_wait_.emplace(now, request.ticket);
    agent.waiting.insert(request.ticket);
    tickets_.emplace(request.ticket, std::move(ticket));
    ++counters_.waited;
    decision.reason = WorkingSetReason::kFull;
    return decision;
  }
  decision.admitted = true;
  Start(agent, request.ticket, request.reservation_tokens, target, decision.reason);
  tickets_.emplace(request.ticket, std::move(ticket));
  return decision;
}

void WorkingSetAdmission::Start(Agent& agent, const std::string& ticket, int64_t tokens,
                                const std::string& target, WorkingSetReason reason) {
  switch (reason) {
    case WorkingSetReason::kContinuing:
      ++counters_.continuing;
      break;
    case WorkingSetReason::kNoCapacity:
      ++counters_.no_capacity;
      break;
    case WorkingSetReason::kAged:
      ++counters_.aged;
      break;
    case WorkingSetReason::kFits:
      ++counters_.fits;
      break;
    case WorkingSetReason::kFull:
    case WorkingSetReason::kCancelled:
      AGENTKV_CHECK(false) << "a ticket starts admitted, not " << WorkingSetReasonName(reason);
  }
  const int64_t before = FootprintOf(agent);
  // An agent moves with its latest request (a router may place it elsewhere after a release).
  if (agent.target != target) {
    AddFootprint(agent.target, -before);
    agent.target = target;
    AddFootprint(agent.target, before);
  }
  programs_.at(agent.program).started = true;
  agent.running.insert(ticket);
  agent.running_tokens += tokens;
  Refresh(agent, before);
}

void WorkingSetAdmission::Finish(std::string_view ticket, const RequestEnd& end, TimeNs now) {
  auto it = tickets_.find(ticket);
  if (it == tickets_.end()) return;
  if (it->second.waiting) {
    Cancel(ticket, now);
    return;
  }
  const std::string name = it->second.agent;
  Agent& agent = agents_.at(name);
  const int64_t before = FootprintOf(agent);
  agent.running_tokens -= it->second.tokens;
  agent.running.erase(std::string(ticket));
  tickets_.erase(it);
  if (agent.running.empty() && !agent.ended) {
    const int64_t context = std::clamp<int64_t>(end.context_tokens, 0, kMaxTokens);
    if (end.next_pause != PauseKind::kSessionEnd) {
      agent.paused_since = now;
      agent.pause_kind = end.next_pause;
      agent.pause_tool = end.tool;
    }
    const TimeNs hold = PredictedHold(end.next_pause, end.tool);
    if (context > 0 && hold > TimeNs(0)) {
      agent.held_tokens = context;
      agent.hold_until = SaturatingAdd(now, hold);
      held_total_ += context;
      holds_.emplace(agent.hold_until, name);
    }
  }
  Refresh(agent, before);
  ForgetIfDone(name);
  Drain(now);
}

void WorkingSetAdmission::Resolve(const std::string& ticket, Ticket& t, WorkingSetReason reason,
                                  TimeNs now) {
  const bool admitted = reason != WorkingSetReason::kCancelled;
  resolved_.push_back(WorkingSetDecision{
      .ticket = ticket, .admitted = admitted, .reason = reason, .wait = now - t.enqueued_at});
  queues_.at(t.target).erase({t.program_seq, t.seq, ticket});
  by_wait_.erase({t.enqueued_at, ticket});
  agents_.at(t.agent).waiting.erase(ticket);
  if (queues_.at(t.target).empty()) queues_.erase(t.target);
  if (!admitted) {
    ++counters_.cancelled;
    const std::string name = t.agent;
    tickets_.erase(ticket);
    ForgetIfDone(name);
    return;
  }
  t.waiting = false;
  Start(agents_.at(t.agent), ticket, t.tokens, t.target, reason);
}

void WorkingSetAdmission::Cancel(std::string_view ticket, TimeNs now) {
  auto it = tickets_.find(ticket);
  if (it == tickets_.end() || !it->second.waiting) return;
  const std::string name(ticket);
  Resolve(name, it->second, WorkingSetReason::kCancelled, now);
  Drain(now);
}

void WorkingSetAdmission::EndAgent(std::string_view agent_name, TimeNs now) {
  auto it = agents_.find(agent_name);
  if (it == agents_.end()) return;
  const std::string name = it->first;
  Agent& agent = it->second;
  agent.ended = true;
  agent.paused_since.reset();
  if (agent.held_tokens > 0) ++counters_.holds_ended;
  ReleaseHold(name, agent);
  const std::vector<std::string> waiting(agent.waiting.begin(), agent.waiting.end());
  for (const std::string& ticket : waiting) {
    Resolve(ticket, tickets_.at(ticket), WorkingSetReason::kCancelled, now);
  }
  ForgetIfDone(name);
  Drain(now);
}

void WorkingSetAdmission::ForgetIfDone(const std::string& name) {
  auto it = agents_.find(name);
  if (it == agents_.end()) return;
  const Agent& agent = it->second;
  if (!agent.ended || !agent.running.empty() || !agent.waiting.empty()) return;
  AGENTKV_CHECK(agent.held_tokens == 0);
  const std::string program = agent.program;
  agents_.erase(it);
  Program& p = programs_.at(program);
  p.agents.erase(name);
  if (p.agents.empty()) {
    AGENTKV_CHECK(p.live_agents == 0);
    peaks_.push_back(p.peak);
    if (peaks_.size() > kPeakHistory) peaks_.pop_front();
    programs_.erase(program);
  }
}

void WorkingSetAdmission::Reconcile(std::span<const EngineSnapshot> snapshots, TimeNs now) {
  for (const EngineSnapshot& s : snapshots) {
    if (!s.healthy || s.max_total_num_tokens <= 0) continue;
    const int64_t device = ScaledTokens(s.max_total_num_tokens, options_.headroom);
    const int64_t host = ScaledTokens(s.max_total_num_tokens, options_.host_tier_ratio);
    capacity_[s.engine_id] = SaturatingAdd(device, host);
  }
  fleet_capacity_ = 0;
  for (const auto& [engine, tokens] : capacity_) {
    fleet_capacity_ = SaturatingAdd(fleet_capacity_, tokens);
  }
  Drain(now);
}

void WorkingSetAdmission::Tick(TimeNs now) {
  while (!holds_.empty() && holds_.begin()->first <= now) {
    const std::string name = holds_.begin()->second;
    ++counters_.holds_expired;
    ReleaseHold(name, agents_.at(name));
  }
  Drain(now);
}

void WorkingSetAdmission::Drain(TimeNs now) {
  // Whoever has waited max_wait goes now, wherever it stands in its queue.
  while (!by_wait_.empty() && now - by_wait_.begin()->first >= options_.max_wait) {
    const std::string name = by_wait_.begin()->second;
    Resolve(name, tickets_.at(name), WorkingSetReason::kAged, now);
  }
  // Each queue admits its head while it fits, in program arrival order; a head whose program
  // became live meanwhile goes as continuing. Admitting one queue's head changes only the
  // footprints other queues compare against, so one pass in a fixed order suffices.
  for (auto queue = queues_.begin(); queue != queues_.end();) {
    const std::string target = queue->first;
    while (queues_.contains(target)) {
      const std::string name = std::get<2>(*queues_.at(target).begin());
      Ticket& t = tickets_.at(name);
      if (programs_.at(agents_.at(t.agent).program).live_agents > 0) {
        Resolve(name, t, WorkingSetReason::kContinuing, now);
      } else if (Fits(target, NewProgramTokens(t.tokens))) {
        Resolve(name, t, WorkingSetReason::kFits, now);
      } else {
        break;
      }
    }
    queue = queues_.upper_bound(target);
  }
}

std::optional<TimeNs> WorkingSetAdmission::NextDeadline() const {
  std::optional<TimeNs> next;
  if (!holds_.empty()) next = holds_.begin()->first;
  if (!by_wait_.empty()) {
    const TimeNs aged = SaturatingAdd(by_wait_.begin()->first, options_.max_wait);
    if (!next.has_value() || aged < *next) next = aged;
  }
  return next;
}

std::vector<WorkingSetDecision> WorkingSetAdmission::TakeResolved() {
  std::vector<WorkingSetDecision> out;
  out.swap(resolved_);
  return out;
}

WorkingSetGauges WorkingSetAdmission::Gauges() const {
  WorkingSetGauges g;
  g.held_tokens = held_total_;
  g.active_tokens = total_footprint_ - held_total_;
  for (const auto& [name, program] : programs_) g.live_programs += program.live_agents > 0;
  for (const auto& [target, queue] : queues_) {
    g.waiting_programs += static_cast<int64_t>(queue.size());
  }
  g.capacity_tokens = fleet_capacity_;
  return g;
}

Status WorkingSetAdmission::CheckInvariants() const {
  std::map<std::string, int64_t, std::less<>> footprint;
  std::map<std::string, int64_t, std::less<>> live;
  int64_t held = 0;
  int64_t holds = 0;
  for (const auto& [name, agent] : agents_) {
    AGENTKV_RETURN_IF_ERROR(CheckAgentTickets(name, agent));
    if ((agent.held_tokens > 0) != holds_.contains({agent.hold_until, name})) {
      return InternalError("agent " + name + " hold disagrees with the hold index");
    }
    if (agent.ended && agent.held_tokens > 0) {
      return InternalError("ended agent " + name + " still holds");
    }
    holds += agent.held_tokens > 0;
    held += agent.held_tokens;
    if (FootprintOf(agent) > 0) {
      footprint[agent.target] += FootprintOf(agent);
      ++live[agent.program];
    }
    auto program = programs_.find(agent.program);
    if (program == programs_.end() || !program->second.agents.contains(name)) {
      return InternalError("agent " + name + " missing from its program");
    }
  }
  if (holds != static_cast<int64_t>(holds_.size()) || held != held_total_) {
    return InternalError("hold index disagrees with the agents");
  }
  int64_t total = 0;
  for (const auto& [target, sum] : footprint) total += sum;
  if (footprint != footprint_ || total != total_footprint_) {
    return InternalError("footprints per target disagree with the agents");
  }
  for (const auto& [name, program] : programs_) {
    auto it = live.find(name);
    if ((it == live.end() ? 0 : it->second) != program.live_agents) {
      return InternalError("program " + name + " live agents disagree");
    }
  }
  return CheckQueues();
}

Status WorkingSetAdmission::CheckAgentTickets(const std::string& name, const Agent& agent) const {
  int64_t running = 0;
  for (const std::string& ticket : agent.running) {
    auto t = tickets_.find(ticket);
    if (t == tickets_.end() || t->second.waiting || t->second.agent != name) {
      std::string message = "agent " + name;
      message += " runs ticket " + ticket;
      message += " it does not hold";
      return InternalError(message);
    }
    running += t->second.tokens;
  }
  if (running != agent.running_tokens) {
    return InternalError("agent " + name + " running tokens disagree with its tickets");
  }
  for (const std::string& ticket : agent.waiting) {
    auto t = tickets_.find(ticket);
    if (t == tickets_.end() || !t->second.waiting || t->second.agent != name) {
      std::string message = "agent " + name;
      message += " waits on ticket " + ticket;
      message += " it does not hold";
      return InternalError(message);
    }
  }
  return Status::Ok();
}

Status WorkingSetAdmission::CheckQueues() const {
  int64_t queued = 0;
  for (const auto& [target, queue] : queues_) {
    if (queue.empty()) return InternalError("empty queue for target " + target);
    for (const auto& [program_seq, seq, ticket] : queue) {
      auto t = tickets_.find(ticket);
      if (t == tickets_.end() || !t->second.waiting || t->second.target != target ||
          t->second.seq != seq || t->second.program_seq != program_seq ||
          !by_wait_.contains({t->second.enqueued_at, ticket})) {
        return InternalError("queue entry " + ticket + " is not a waiting ticket");
      }
      ++queued;
    }
  }
  int64_t waiting = 0;
  int64_t waiting_by_agent = 0;
  for (const auto& [ticket, t] : tickets_) waiting += t.waiting;
  for (const auto& [name, agent] : agents_) {
    waiting_by_agent += static_cast<int64_t>(agent.waiting.size());
  }
  if (waiting_by_agent != waiting) return InternalError("waiting tickets outside their agents");
  if (waiting != queued || queued != static_cast<int64_t>(by_wait_.size())) {
    return InternalError("waiting tickets outside the queues");
  }
  return Status::Ok();
}

}  // namespace agentkv::control
