#include "agentkv/service/gateway/gateway_prerequisites.h"

#include <algorithm>

#include "agentkv/base/bounds.h"
#include "agentkv/control/agentic_options.h"
#include "agentkv/protocol/json_util.h"

namespace agentkv::service {

StatusOr<PrerequisiteOutcome> CheckPrerequisites(const std::vector<EngineServerInfo>& engines,
                                                 bool lifecycle, bool admission,
                                                 PrerequisitePolicy policy) {
  PrerequisiteOutcome outcome{lifecycle, admission, {}};
  if (!lifecycle && !admission) return outcome;
  const bool refuse = policy == PrerequisitePolicy::kRefuse;
  if (engines.empty()) {
    if (refuse) return UnavailableError("no engine to check prerequisites on");
    outcome.warnings.push_back(
        LogLine("prerequisites_unchecked").Quoted("reason", "no engine found"));
    return outcome;
  }
  // A missing flag: refuse, or turn the feature off.
  auto missing = [&](const std::string& engine, std::string_view flag, std::string_view found,
                     std::string_view feature, bool& enabled) -> Status {
    if (refuse) {
      return FailedPreconditionError("engine " + engine + " lacks " + std::string(flag) + " (" +
                                     std::string(found) + "), needed by " + std::string(feature));
    }
    if (enabled) {
      outcome.warnings.push_back(LogLine("feature_disabled")
                                     .Add("feature", feature)
                                     .Add("engine", engine)
                                     .Add("flag", flag)
                                     .Quoted("found", found));
    }
    enabled = false;
    return Status::Ok();
  };
  for (const EngineServerInfo& engine : engines) {
    if (!engine.info.ok()) {
      if (refuse) {
        return UnavailableError("engine " + engine.engine +
                                ": GET /server_info failed: " + engine.info.status().message());
      }
      outcome.warnings.push_back(LogLine("prerequisites_unchecked")
                                     .Add("engine", engine.engine)
                                     .Quoted("error", engine.info.status().message()));
      continue;
    }
    const protocol::ServerInfo& info = *engine.info;
    if (info.version != protocol::kSupportedSglangVersion &&
        info.version != protocol::kEmulatorVersion) {
      outcome.warnings.push_back(
          LogLine("engine_version")
              .Add("engine", engine.engine)
              .Quoted("version", info.version.empty() ? std::string("unreported") : info.version)
              .Quoted("supported", protocol::kSupportedSglangVersion)
              .Quoted("note",
                      "agentkv is checked against this SGLang release; others differ in what "
                      "/close_session frees and in their metrics"));
    }
    if (lifecycle) {
      if (!info.enable_session_radix_cache) {
        AGENTKV_RETURN_IF_ERROR(missing(engine.engine, "--enable-session-radix-cache",
                                        "enable_session_radix_cache=false",
                                        control::kSessionLifecycleFlag, outcome.lifecycle));
      }
      if (info.radix_eviction_policy == "lru") {
        outcome.warnings.push_back(
            LogLine("prerequisite_warning")
                .Add("engine", engine.engine)
                .Add("flag", "--radix-eviction-policy")
                .Add("found", "lru")
                .Add("expected", "priority")
                .Quoted("note",
                        "the seed runs priority; without request priorities it evicts like lru"));
      } else if (info.radix_eviction_policy != "priority") {
        AGENTKV_RETURN_IF_ERROR(missing(engine.engine, "--radix-eviction-policy priority",
                                        "radix_eviction_policy=" + info.radix_eviction_policy,
                                        control::kSessionLifecycleFlag, outcome.lifecycle));
      }
    }
    if (admission && !info.enable_metrics) {
      AGENTKV_RETURN_IF_ERROR(missing(engine.engine, "--enable-metrics", "enable_metrics=false",
                                      control::kProgramAdmissionFlag, outcome.admission));
    }
  }
  return outcome;
}

std::optional<int64_t> FleetContextLength(const std::vector<EngineServerInfo>& engines) {
  std::optional<int64_t> longest;
  for (const EngineServerInfo& engine : engines) {
    if (!engine.info.ok()) continue;
    const auto it = engine.info->extra.find("context_length");
    if (it == engine.info->extra.end()) continue;
    const std::optional<int64_t> value = protocol::AsInt64(it->value());
    if (!value.has_value() || *value <= 0 || *value > kMaxTokens) continue;
    longest = std::max(longest.value_or(0), *value);
  }
  return longest;
}

}  // namespace agentkv::service
