// Randomized model-based runs of GatewayFlow: one checks every emitted action against a small
// reference of what the protocol allows (parent returns included), one compares sessions,
// retention and the session cap with a reference model after every event.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "agentkv/control/gateway_flow.h"
#include "gateway_flow_test_support.h"

namespace agentkv::control {
namespace {

using testing_support::Admit;
using testing_support::At;
using testing_support::BypassOf;
using testing_support::Retain;
using testing_support::Spec;

// --- Sessions, retention and the cap ---

// The sessions not ended, as the flow should hold them (lifecycle off, so a session ends as
// soon as nothing it waits for is in flight).
class RetentionReference {
 public:
  explicit RetentionReference(const GatewayFlowOptions& options) : options_(options) {}

  int64_t Active() const {
    return std::count_if(ref_.begin(), ref_.end(),
                         [](const auto& e) { return !e.second.draining; });
  }
  int64_t Retained() const {
    return std::count_if(ref_.begin(), ref_.end(), [](const auto& e) { return e.second.retained; });
  }
  // The idle unretained active session with the oldest last activity (ties by key).
  std::optional<std::string> OldestIdle() const {
    std::optional<std::string> oldest;
    for (const auto& [key, s] : ref_) {
      if (s.draining || s.retained || !s.live.empty()) continue;
      if (!oldest.has_value() || s.last_activity < ref_.at(*oldest).last_activity) oldest = key;
    }
    return oldest;
  }

  // Checks the flow's answer to a begin of `key` with `retain` and applies it.
  void Begin(GatewayFlow<std::string>& flow, const std::string& key, std::optional<bool> retain,
             const std::string& request, TimeNs now) {
    StatusOr<std::string> rid = flow.BeginAttempt(key, request, Retain(retain), now);
    const bool opens = !ref_.contains(key);
    if (!opens && ref_.at(key).draining) {
      ASSERT_EQ(rid.status().code(), StatusCode::kFailedPrecondition);
    } else if (retain.value_or(false) && (opens || !ref_.at(key).retained) &&
               Retained() >= options_.RetainedSessionBound()) {
      ASSERT_EQ(rid.status().code(), StatusCode::kResourceExhausted) << rid.status();
      ++retain_refused_;
    } else if (opens && Active() >= options_.max_sessions && !OldestIdle().has_value()) {
      ASSERT_EQ(rid.status().code(), StatusCode::kUnavailable) << rid.status();
      ++refused_;
    } else {
      ASSERT_TRUE(rid.ok()) << rid.status();
      if (opens && Active() >= options_.max_sessions) {
        Terminate(*OldestIdle());
        ++evicted_;
      }
      Session& s = ref_[key];
      s.live.insert(*rid);
      s.last_activity = now;
      if (retain.has_value()) s.retained = *retain;
      session_of_[*rid] = key;
      ASSERT_TRUE(flow.Dispatch(*rid).ok());
    }
  }

  // Finishes a random live attempt.
  void FinishOne(GatewayFlow<std::string>& flow, std::mt19937& rng, TimeNs now) {
    if (session_of_.empty()) return;
    auto it = session_of_.begin();
    std::advance(it, static_cast<long>(rng() % session_of_.size()));
    const auto [rid, owner] = *it;
    session_of_.erase(it);
    flow.Finish(rid, now);
    Session& s = ref_.at(owner);
    s.live.erase(rid);
    s.last_activity = now;
    if (s.draining && s.live.empty()) ref_.erase(owner);
  }

  void Close(const std::string& key) {
    if (ref_.contains(key) && !ref_.at(key).draining) Terminate(key);
  }

  void Sweep(TimeNs now) {
    std::vector<std::string> idle;
    for (const auto& [k, s] : ref_) {
      if (!s.draining && !s.retained && s.live.empty() && now - s.last_activity >= At(20)) {
        idle.push_back(k);
      }
    }
    for (const std::string& k : idle) Terminate(k);
  }

  // Compares every session of `keys` and the flow's counts with the reference.
  void Compare(const GatewayFlow<std::string>& flow, const std::vector<std::string>& keys) const {
    for (const std::string& k : keys) {
      SCOPED_TRACE("session " + k);
      const StatusOr<SessionPhase> phase = flow.phase(k);
      if (!ref_.contains(k)) {
        EXPECT_TRUE(!phase.ok() || *phase == SessionPhase::kTerminal);
      } else {
        ASSERT_TRUE(phase.ok());
        EXPECT_EQ(*phase, ref_.at(k).draining ? SessionPhase::kDraining : SessionPhase::kActive);
      }
      EXPECT_EQ(flow.retained(k), ref_.contains(k) && ref_.at(k).retained);
    }
    ASSERT_EQ(flow.active_sessions(), Active());
    ASSERT_EQ(flow.retained_sessions(), Retained());
    ASSERT_LE(flow.retained_sessions(), options_.RetainedSessionBound());
    ASSERT_EQ(flow.live_attempts(), static_cast<int64_t>(session_of_.size()));
    ASSERT_EQ(flow.evicted(), evicted_);
    ASSERT_EQ(flow.refused(), refused_);
    ASSERT_EQ(flow.retain_refused(), retain_refused_);
    const std::optional<std::string> next = OldestIdle();
    ASSERT_EQ(flow.NextIdleDeadline(),
              next.has_value() ? std::optional<TimeNs>(ref_.at(*next).last_activity + At(20))
                               : std::nullopt);
  }

 private:
  struct Session {
    bool draining = false;
    bool retained = false;
    std::set<std::string> live;
    TimeNs last_activity;
  };

  // Ends a session that is not retained (the caller cleared the mark).
  void Terminate(const std::string& key) {
    Session& s = ref_.at(key);
    s.retained = false;
    s.draining = true;
    if (s.live.empty()) ref_.erase(key);
  }

  const GatewayFlowOptions options_;
  std::map<std::string, Session> ref_;
  std::map<std::string, std::string> session_of_;
  int64_t evicted_ = 0;
  int64_t refused_ = 0;
  int64_t retain_refused_ = 0;
};

// Random begins (with and without a retention mark), finishes, closes and sweeps, compared
// after every event with a small reference model of the sessions: which are active, draining
// or ended, which are retained, which one the cap evicts (the longest-idle unretained one,
// ties by key), which newcomers and marks are refused, and when the next idle sweep is due.
TEST(GatewayFlowRetentionModelTest, SessionsRetentionAndTheCapFollowTheReference) {
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    GatewayFlowOptions options;
    options.lifecycle = false;  // Ended sessions end at once: the reference stays small.
    options.idle_timeout = At(20);
    options.drain_timeout = At(1e6);
    options.max_sessions = 1 + static_cast<int64_t>(seed % 4);
    options.max_retained_sessions = std::min<int64_t>(seed % 3, options.max_sessions);
    options.max_closed_sessions = 3;
    GatewayFlow<std::string> flow(options);
    RetentionReference ref(options);
    TimeNs now = At(0);
    const std::vector<std::string> keys = {"s0", "s1", "s2", "s3", "s4", "s5"};
    for (int step = 0; step < 500; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      now = now + TimeNs::Millis(std::uniform_int_distribution<int>(0, 3000)(rng));
      const std::string key = keys[rng() % keys.size()];
      const int op = std::uniform_int_distribution<int>(0, 9)(rng);
      if (op <= 4) {
        std::optional<bool> retain;
        if (const auto r = rng() % 3; r < 2) retain = r == 0;
        ref.Begin(flow, key, retain, "q" + std::to_string(step), now);
      } else if (op <= 6) {
        ref.FinishOne(flow, rng, now);
      } else if (op == 7) {
        flow.Close(key, TerminalReason::kFinished, static_cast<uint64_t>(step) + 1, now);
        ref.Close(key);
      } else {
        flow.Sweep(now);
        ref.Sweep(now);
      }
      if (HasFatalFailure()) return;
      (void)flow.TakeActions();
      flow.CheckInvariants();
      ref.Compare(flow, keys);
      if (HasFatalFailure()) return;
    }
  }
}

// --- The protocol ---

// What the protocol allows the flow to emit, given the events so far: cancels only for
// undispatched attempts, aborts only for dispatched ones, each lease returned exactly once at
// its attempt's finish, one close per ended incarnation and only once nothing it waits for is in
// flight (or its drain deadline passed), every close request answered exactly once, and a
// parent's return exactly when a begun attempt's session is a parent whose return is due.
class ProtocolModel {
 public:
  explicit ProtocolModel(const GatewayFlowOptions& options) : options_(options), flow_(options) {}

  GatewayFlow<std::string>& flow() { return flow_; }

  // Takes the outbox and checks each action against the reference.
  void CheckActions() {
    for (const auto& action : flow_.TakeActions()) {
      if (const auto* cancel = std::get_if<CancelAttempt>(&action)) {
        ASSERT_TRUE(live_.contains(cancel->rid)) << "cancel of a finished attempt";
        EXPECT_FALSE(live_[cancel->rid].dispatched) << "cancel of a dispatched attempt";
        if (cancel->awaiting_admission) {
          EXPECT_TRUE(live_[cancel->rid].admitting);
        }
      } else if (const auto* abort = std::get_if<AbortOnEveryEngine>(&action)) {
        ASSERT_TRUE(live_.contains(abort->rid));
        EXPECT_TRUE(live_[abort->rid].dispatched) << "abort of an undispatched attempt";
      } else if (const auto* cut = std::get_if<CutUpstream>(&action)) {
        ASSERT_TRUE(live_.contains(cut->rid));
        EXPECT_TRUE(live_[cut->rid].dispatched);
      } else if (const auto* lease = std::get_if<ReturnLease>(&action)) {
        EXPECT_EQ(leases_out_.erase(lease->lease_id), 1u) << "lease returned twice or never lent";
      } else if (const auto* close = std::get_if<CloseOnEveryEngine<std::string>>(&action)) {
        EXPECT_TRUE(options_.lifecycle);
        EXPECT_TRUE(closing_.insert(close->session).second) << "second close of one incarnation";
      } else if (const auto* delivery = std::get_if<DeliverParentReturn<std::string>>(&action)) {
        EXPECT_EQ(std::optional<std::string>(delivery->parent), due_delivery_)
            << "a parent's return delivered when none was due";
        due_delivery_.reset();
      } else {
        const auto& answer = std::get<AnswerClose<std::string>>(action);
        EXPECT_EQ(unanswered_.erase(answer.request), 1u) << "close answered twice";
      }
    }
    EXPECT_EQ(due_delivery_, std::nullopt) << "a parent's return due was not delivered";
  }

  void Begin(std::mt19937& rng, bool sessionless, TimeNs now) {
    std::optional<std::string> session;
    if (!sessionless) session = kSessions[rng() % kSessions.size()];
    const bool admission = rng() % 2 == 0;
    Spec spec{.awaits_admission = admission, .streamed = rng() % 2 == 0};
    // Retained sessions end only by a close: the drain and close rules hold for them too.
    if (session.has_value() && rng() % 4 == 0) spec.retain = rng() % 2 == 0;
    if (rng() % 3 == 0) spec.parent = kSessions[rng() % kSessions.size()];
    StatusOr<std::string> rid =
        flow_.BeginAttempt(session, "r" + std::to_string(rng() % 5), spec, now);
    if (!rid.ok()) return;
    live_[*rid] = Attempt{session, false, admission};
    NoteParentReturn(session, spec.parent);
  }

  void OnAdmission(const std::string& rid, std::mt19937& rng) {
    if (!live_[rid].admitting) return;
    AdmissionDecision d = rng() % 2 == 0 ? Admit(rid) : BypassOf(rid, AdmissionReason::kAged);
    ASSERT_TRUE(flow_.OnAdmission(rid, d).ok());
    live_[rid].admitting = false;
    if (d.lease_id.has_value()) leases_out_.insert(*d.lease_id);
  }

  void Dispatch(const std::string& rid) {
    if (!flow_.Dispatch(rid).ok()) return;
    EXPECT_FALSE(live_[rid].admitting);
    live_[rid].dispatched = true;
  }

  void Finish(const std::string& rid, TimeNs now) {
    CheckActions();
    flow_.Finish(rid, now);
    live_.erase(rid);
  }

  void Close(const std::string& session, TimeNs now) {
    CheckActions();
    const uint64_t request = next_request_++;
    unanswered_.insert(request);
    flow_.Close(session, TerminalReason::kFinished, request, now);
  }

  // Outstanding closes answer at random.
  void AnswerSomeCloses(std::mt19937& rng) {
    for (auto it = closing_.begin(); it != closing_.end();) {
      if (rng() % 2 == 0) {
        ASSERT_TRUE(flow_.OnCloseOutcome(*it, rng() % 4 != 0).ok());
        it = closing_.erase(it);
      } else {
        ++it;
      }
    }
  }

  // Every attempt answers, every drain and close completes; nothing is left owed.
  void WindDown(TimeNs now) {
    for (const auto& [rid, a] : live_) {
      if (a.admitting) {
        ASSERT_TRUE(flow_.OnAdmission(rid, BypassOf(rid, AdmissionReason::kCancelled)).ok());
      }
    }
    CheckActions();
    for (const std::string& rid : rids()) Finish(rid, now);
    CheckActions();
    for (const std::string& s : closing_) ASSERT_TRUE(flow_.OnCloseOutcome(s, true).ok());
    closing_.clear();
    CheckActions();
    flow_.CheckInvariants();
    EXPECT_TRUE(leases_out_.empty()) << leases_out_.size() << " leases never returned";
    EXPECT_TRUE(unanswered_.empty()) << unanswered_.size() << " close requests never answered";
    EXPECT_EQ(flow_.terminating_sessions(), 0);
    EXPECT_EQ(flow_.live_attempts(), 0);
  }

  std::vector<std::string> rids() const {
    std::vector<std::string> out;
    for (const auto& [rid, a] : live_) out.push_back(rid);
    return out;
  }
  int64_t live() const { return static_cast<int64_t>(live_.size()); }

  static inline const std::vector<std::string> kSessions = {"s0", "s1", "s2", "s3"};

 private:
  struct Attempt {
    std::optional<std::string> session;
    bool dispatched = false;
    bool admitting = false;
  };

  // The reference of parent returns: parents named (at most max_sessions, oldest forgotten
  // first), each with whether its return is due; a begun attempt of a due parent delivers.
  void NoteParentReturn(const std::optional<std::string>& session,
                        const std::optional<std::string>& parent) {
    if (options_.parent_return == ParentReturnDelivery::kOff) return;
    if (parent.has_value()) {
      if (!due_.contains(*parent)) order_.push_back(*parent);
      due_[*parent] = true;
      if (static_cast<int64_t>(order_.size()) > options_.max_sessions) {
        due_.erase(order_.front());
        order_.pop_front();
      }
    }
    if (!session.has_value() || !due_.contains(*session) || !due_[*session]) return;
    due_delivery_ = *session;
    if (options_.parent_return == ParentReturnDelivery::kOncePerReturn) due_[*session] = false;
  }

  const GatewayFlowOptions options_;
  GatewayFlow<std::string> flow_;
  std::map<std::string, Attempt> live_;
  std::set<std::string> leases_out_;
  std::set<uint64_t> unanswered_;
  std::set<std::string> closing_;
  uint64_t next_request_ = 1;
  std::map<std::string, bool> due_;
  std::deque<std::string> order_;
  std::optional<std::string> due_delivery_;
};

// Drives the flow with random events and checks each outbox against ProtocolModel.
TEST(GatewayFlowModelTest, RandomEventsKeepTheProtocol) {
  for (uint32_t seed = 1; seed <= 30; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    GatewayFlowOptions options;
    options.lifecycle = seed % 3 != 0;
    options.idle_timeout = At(seed % 2 == 0 ? 0 : 20);
    options.drain_timeout = At(3);
    options.max_sessions = 1 + static_cast<int64_t>(seed % 4);
    options.max_closed_sessions = 2;
    options.parent_return = static_cast<ParentReturnDelivery>(seed % 3);
    ProtocolModel model(options);
    TimeNs now = At(0);
    for (int step = 0; step < 400; ++step) {
      now = now + TimeNs::Millis(std::uniform_int_distribution<int>(0, 1500)(rng));
      const int op = std::uniform_int_distribution<int>(0, 9)(rng);
      const std::vector<std::string> rids = model.rids();
      const auto pick = [&]() -> std::string {
        return rids[std::uniform_int_distribution<size_t>(0, rids.size() - 1)(rng)];
      };
      if (op <= 2 || rids.empty()) {
        model.Begin(rng, /*sessionless=*/op == 0, now);
      } else if (op == 3) {
        model.OnAdmission(pick(), rng);
      } else if (op == 4) {
        model.Dispatch(pick());
      } else if (op == 5) {
        model.flow().OnClientGone(pick());
      } else if (op == 6 || op == 7) {
        model.Finish(pick(), now);
      } else if (op == 8) {
        model.Close(ProtocolModel::kSessions[rng() % ProtocolModel::kSessions.size()], now);
      } else {
        model.flow().Sweep(now);
      }
      model.CheckActions();
      model.AnswerSomeCloses(rng);
      model.CheckActions();
      model.flow().CheckInvariants();
      EXPECT_EQ(model.flow().live_attempts(), model.live());
      if (HasFatalFailure()) return;
    }
    model.WindDown(now);
  }
}

}  // namespace
}  // namespace agentkv::control
