// Helpers shared by GatewayFlow's tests: times, one-line renderings of actions (so a scenario
// compares whole outboxes at once), admission decisions, and the scenario fixture over string
// keys.
#ifndef AGENTKV_TESTS_CONTROL_GATEWAY_FLOW_TEST_SUPPORT_H_
#define AGENTKV_TESTS_CONTROL_GATEWAY_FLOW_TEST_SUPPORT_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "agentkv/control/gateway_flow.h"

namespace agentkv::control::testing_support {

using Spec = AttemptSpec<std::string>;

inline TimeNs At(double seconds) { return TimeNs::Seconds(seconds); }

// A session key as a line names it.
template <typename Key>
std::string KeyText(const Key& key) {
  if constexpr (std::is_same_v<Key, std::string>) {
    return key;
  } else {
    return std::to_string(key.value());
  }
}

// Renders an action as one short line so a scenario compares whole outboxes at once.
template <typename Key>
std::string Describe(const FlowAction<Key>& action) {
  if (const auto* a = std::get_if<CancelAttempt>(&action)) {
    return std::string(a->awaiting_admission ? "cancel-admission " : "cancel ") + a->rid;
  }
  if (const auto* a = std::get_if<AbortOnEveryEngine>(&action)) return "abort " + a->rid;
  if (const auto* a = std::get_if<CutUpstream>(&action)) return "cut " + a->rid;
  if (const auto* a = std::get_if<ReturnLease>(&action)) return "return " + a->lease_id;
  if (const auto* a = std::get_if<CloseOnEveryEngine<Key>>(&action)) {
    return "close " + KeyText(a->session);
  }
  if (const auto* a = std::get_if<DeliverParentReturn<Key>>(&action)) {
    return "deliver " + KeyText(a->parent);
  }
  const auto& answer = std::get<AnswerClose<Key>>(action);
  return "answer " + std::to_string(answer.request) + " " + KeyText(answer.outcome.session) +
         (answer.outcome.closed ? " closed" : " failed") +
         " aborted=" + std::to_string(answer.outcome.aborted);
}

inline AdmissionDecision Admit(const std::string& rid) {
  AdmissionDecision d;
  d.action = AdmissionAction::kAdmit;
  d.reason = AdmissionReason::kCapacityAvailable;
  d.ticket = rid;
  d.lease_id = "lease-" + rid;
  return d;
}

inline AdmissionDecision BypassOf(const std::string& rid, AdmissionReason reason) {
  AdmissionDecision d;
  d.action = AdmissionAction::kBypass;
  d.reason = reason;
  d.ticket = rid;
  return d;
}

inline Spec Retain(std::optional<bool> retain) { return Spec{.retain = retain}; }

class GatewayFlowTest : public ::testing::Test {
 protected:
  void Make(bool lifecycle = true, int64_t max_sessions = 100'000,
            ParentReturnDelivery parent_return = ParentReturnDelivery::kOff) {
    GatewayFlowOptions options;
    options.lifecycle = lifecycle;
    options.parent_return = parent_return;
    options.idle_timeout = At(60);
    options.drain_timeout = At(5);
    options.max_sessions = max_sessions;
    flow_.emplace(options);
  }
  GatewayFlow<std::string>& flow() { return *flow_; }

  std::string Begin(const std::optional<std::string>& session, const std::string& request,
                    bool admission = false, bool streamed = false) {
    StatusOr<std::string> rid =
        flow().BeginAttempt(session, request, Spec{admission, streamed}, now_);
    EXPECT_TRUE(rid.ok()) << rid.status();
    flow().CheckInvariants();
    return rid.ok() ? *rid : "";
  }
  void Dispatch(const std::string& rid) {
    StatusOr<DispatchIdentity<std::string>> identity = flow().Dispatch(rid);
    EXPECT_TRUE(identity.ok()) << identity.status();
    flow().CheckInvariants();
  }
  void Finish(const std::string& rid) {
    flow().Finish(rid, now_);
    flow().CheckInvariants();
  }
  void Close(const std::string& session, uint64_t request) {
    flow().Close(session, TerminalReason::kFinished, request, now_);
    flow().CheckInvariants();
  }
  std::vector<std::string> Actions() {
    std::vector<std::string> out;
    for (const auto& action : flow().TakeActions()) out.push_back(Describe<std::string>(action));
    return out;
  }

  std::optional<GatewayFlow<std::string>> flow_;
  TimeNs now_ = At(1000);
};

}  // namespace agentkv::control::testing_support

#endif  // AGENTKV_TESTS_CONTROL_GATEWAY_FLOW_TEST_SUPPORT_H_
