// A helper for the simulator's tests: typed arms (ArmSpec) from arm names, the way the command
// line parses --arms, so that option structs can be written as lists of names.
#ifndef AGENTKV_TESTS_SIM_ARM_NAMES_H_
#define AGENTKV_TESTS_SIM_ARM_NAMES_H_

#include <initializer_list>
#include <string_view>
#include <utility>
#include <vector>

#include "agentkv/base/check.h"
#include "agentkv/sim/replay/replay_arms.h"

namespace agentkv::sim::testing_support {

// ParseArm of each name, in order; CHECKs that each parses. The list itself is not validated
// (a name may repeat), so that tests can hand the simulator a list it must refuse.
inline std::vector<ArmSpec> Arms(std::initializer_list<std::string_view> names) {
  std::vector<ArmSpec> arms;
  for (std::string_view name : names) {
    StatusOr<ArmSpec> arm = ParseArm(name);
    AGENTKV_CHECK(arm.ok()) << arm.status();
    arms.push_back(*std::move(arm));
  }
  return arms;
}

}  // namespace agentkv::sim::testing_support

#endif  // AGENTKV_TESTS_SIM_ARM_NAMES_H_
