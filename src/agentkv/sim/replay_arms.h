// The policy arms of `agentkv replay`: which agentkv features each one turns on over the SGLang
// baseline, and how arm names are spelled on the command line and in config files.
//
// An arm name is a base arm optionally followed by features, each prefixed with '+':
//   base    := "baseline" | "all" | "continuum-ttl" | "infinite-cache" | ""
//   feature := "lifecycle" | "admission" | "subagent-demotion" | "host-tier" | "continuum-ttl"
// so "+lifecycle", "all", "baseline+host-tier" and "all+continuum-ttl" are arms. "baseline" is
// SGLang's default (prefix reuse, LRU, no session lifecycle, no admission); "all" is the four
// agentkv features together; "continuum-ttl" is the Continuum anchor (pin a session's KV for a
// time-to-live after a turn that ends in a tool call); "infinite-cache" gives every engine
// enough KV for the whole workload (the hit-ratio upper bound). Pure functions; thread-safe.
#ifndef AGENTKV_SIM_REPLAY_ARMS_H_
#define AGENTKV_SIM_REPLAY_ARMS_H_

#include <string>
#include <string_view>
#include <vector>

#include "agentkv/base/status.h"

namespace agentkv::sim {

struct ArmSpec {
  // The name as given (the report's column header).
  std::string name;
  // +lifecycle: --agentic-session-lifecycle; sessions are closed on every engine at their end.
  bool session_lifecycle = false;
  // +admission: --agentic-program-admission; the token ledger and the global FIFO.
  bool program_admission = false;
  // +subagent-demotion: per-conversation retention and demotion of finished sub-agents when
  // their parent returns.
  bool subagent_demotion = false;
  // +host-tier: a host (cold) KV tier of --hicache-ratio times the device tier.
  bool host_tier = false;
  // continuum-ttl: TTL pins after tool-call turns.
  bool continuum_ttl = false;
  // infinite-cache: device KV for the whole workload.
  bool infinite_cache = false;

  // What the arm enables, in words: "SGLang default: ..." for the baseline, else the features
  // joined by ", ".
  std::string Description() const;

  friend bool operator==(const ArmSpec&, const ArmSpec&) = default;
};

// Parses `name` (grammar above). InvalidArgument naming the arm and the unknown part, with the
// valid spellings, e.g. `arm "+lifecycel": unknown feature "lifecycel" (valid: lifecycle,
// admission, subagent-demotion, host-tier, continuum-ttl)`; also for an empty name and a
// feature named twice.
[[nodiscard]] StatusOr<ArmSpec> ParseArm(std::string_view name);

// The arms run when none are given: baseline, +lifecycle, +admission, +subagent-demotion,
// +host-tier, all, continuum-ttl, infinite-cache.
const std::vector<std::string>& DefaultArmNames();

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_REPLAY_ARMS_H_
