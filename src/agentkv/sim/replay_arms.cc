#include "agentkv/sim/replay_arms.h"

#include <string>

namespace agentkv::sim {
namespace {

constexpr std::string_view kValidFeatures =
    "lifecycle, admission, subagent-demotion, host-tier, continuum-ttl";
constexpr std::string_view kValidBases = "baseline, all, continuum-ttl, infinite-cache";

Status BadArm(std::string_view name, const std::string& what) {
  return InvalidArgumentError("arm \"" + std::string(name) + "\": " + what);
}

// Sets the flag `feature` names; false for an unknown feature. `repeated` tells whether it was
// already set.
bool EnableFeature(std::string_view feature, ArmSpec& arm, bool& repeated) {
  bool* flag = nullptr;
  if (feature == "lifecycle") flag = &arm.session_lifecycle;
  if (feature == "admission") flag = &arm.program_admission;
  if (feature == "subagent-demotion") flag = &arm.subagent_demotion;
  if (feature == "host-tier") flag = &arm.host_tier;
  if (feature == "continuum-ttl") flag = &arm.continuum_ttl;
  if (flag == nullptr) return false;
  repeated = *flag;
  *flag = true;
  return true;
}

}  // namespace

std::string ArmSpec::Description() const {
  std::string out;
  auto add = [&out](std::string_view part) {
    if (!out.empty()) out += ", ";
    out += part;
  };
  if (infinite_cache) add("unbounded device KV (upper bound)");
  if (session_lifecycle) add("session close on every engine at session end");
  if (program_admission) add("program-aware admission (token ledger, global FIFO)");
  if (subagent_demotion) add("finished sub-agent demotion");
  if (host_tier) add("host KV tier");
  if (continuum_ttl) add("TTL pin after tool-call turns (Continuum)");
  if (out.empty()) out = "SGLang default: prefix reuse, LRU, no lifecycle, no admission";
  return out;
}

StatusOr<ArmSpec> ParseArm(std::string_view name) {
  if (name.empty()) return InvalidArgumentError("arm name is empty");
  ArmSpec arm;
  arm.name = std::string(name);
  const size_t plus = name.find('+');
  const std::string_view base = name.substr(0, plus);
  if (base == "all") {
    arm.session_lifecycle = arm.program_admission = arm.subagent_demotion = arm.host_tier = true;
  } else if (base == "continuum-ttl") {
    arm.continuum_ttl = true;
  } else if (base == "infinite-cache") {
    arm.infinite_cache = true;
  } else if (!base.empty() && base != "baseline") {
    return BadArm(name, "unknown arm \"" + std::string(base) + "\" (valid: " +
                            std::string(kValidBases) + ", or +features: " +
                            std::string(kValidFeatures) + ")");
  }
  if (plus == std::string_view::npos) return arm;
  std::string_view rest = name.substr(plus + 1);
  while (true) {
    const size_t next = rest.find('+');
    const std::string_view feature = rest.substr(0, next);
    bool repeated = false;
    if (!EnableFeature(feature, arm, repeated)) {
      return BadArm(name, "unknown feature \"" + std::string(feature) + "\" (valid: " +
                              std::string(kValidFeatures) + ")");
    }
    if (repeated) return BadArm(name, "feature \"" + std::string(feature) + "\" named twice");
    if (next == std::string_view::npos) break;
    rest = rest.substr(next + 1);
  }
  return arm;
}

const std::vector<std::string>& DefaultArmNames() {
  static const std::vector<std::string>* const kNames = new std::vector<std::string>{
      "baseline",  "+lifecycle", "+admission",    "+subagent-demotion",
      "+host-tier", "all",       "continuum-ttl", "infinite-cache"};
  return *kNames;
}

}  // namespace agentkv::sim
