// What the admission coordinator's test fixtures share (admission_coordinator_test.cc, the seed's
// policy; admission_coordinator_v2_test.cc, v2 and the fair shares): time in seconds, the
// options with admission on, and a harness that owns the coordinator under test and checks its
// invariants after every step.
#ifndef AGENTKV_TESTS_CONTROL_ADMISSION_COORDINATOR_TEST_SUPPORT_H_
#define AGENTKV_TESTS_CONTROL_ADMISSION_COORDINATOR_TEST_SUPPORT_H_

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/time.h"
#include "agentkv/control/admission_coordinator.h"
#include "agentkv/control/agentic_options.h"

namespace agentkv::control::testing_support {

inline TimeNs At(double seconds) { return TimeNs::Seconds(seconds); }

inline AgenticOptions AdmissionOptions() {
  AgenticOptions options;
  options.agentic_program_admission = true;
  return options;
}

// Owns the coordinator a fixture builds (coordinator_.emplace(...)).
class CoordinatorHarness {
 protected:
  void Check() {
    const Status s = coordinator_->CheckInvariants();
    ASSERT_TRUE(s.ok()) << s;
  }
  // The waiters resolved since the last call, as "ticket:action:reason" (or "ticket:action"
  // without `with_reason`).
  std::vector<std::string> ResolvedAs(bool with_reason) {
    std::vector<std::string> out;
    for (const AdmissionDecision& d : coordinator_->TakeResolved()) {
      std::string line = d.ticket + ":" + std::string(AdmissionActionName(d.action));
      if (with_reason) line += ":" + std::string(AdmissionReasonName(d.reason));
      out.push_back(std::move(line));
    }
    return out;
  }
  std::vector<std::string> Resolved() { return ResolvedAs(/*with_reason=*/true); }
  AdmissionCoordinator& c() { return *coordinator_; }

  std::optional<AdmissionCoordinator> coordinator_;
};

}  // namespace agentkv::control::testing_support

#endif  // AGENTKV_TESTS_CONTROL_ADMISSION_COORDINATOR_TEST_SUPPORT_H_
