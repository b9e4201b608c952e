// The policy arms of every replay (`agentkv replay`, `agentic-curve`, `cache-curve`): which
// agentkv features each one turns on over the SGLang baseline, and how arm names are spelled on
// the command line and in config files. One grammar for the simulated fleet and the instant
// single cache (instant_replay.h); the mapping of an arm to the KV cache's policy options
// (ArmCachePolicy) is shared by both, so an arm means the same cache policy wherever it runs.
//
// An arm name is a base arm optionally followed by features, each prefixed with '+':
//   base    := "baseline" | "agentkv" | "all" | "fixed-ttl" | "continuum" | "infinite-cache"
//            | "oracle" | ""
//   feature := "lifecycle" | "admission" | "subagent-demotion" ["=" P] | "per-conversation"
//            | "host-tier" | "fixed-ttl" | "continuum" | "stall-offload" | "admission-v2"
//            | "gap-retention" | "working-set" | "program-fcfs"
// so "+lifecycle", "all", "baseline+host-tier", "all+continuum" and
// "+subagent-demotion=20+lifecycle" are arms. "baseline" is SGLang's default (prefix reuse,
// LRU, no session lifecycle, no admission); "agentkv" is the recommended policy set without a
// host tier (AgentkvArm: the features chosen by a stated rule on half of the WEKA traces,
// docs/RESULTS.md), and "agentkv+host-tier" the set the same rule chose for a fleet with a host
// tier (AgentkvHostTierArm; it differs: the host tier makes the working set's holds pointless);
// "all" is the seeds' four agentkv features lifecycle, admission, subagent-demotion and host-tier
// together; "continuum" is Continuum (arXiv 2511.02230): a cost-aware TTL pin after a tool-call
// turn learned per pause class (engine::ContinuumPolicy), program-level FCFS in every engine's
// waiting queue, pins released when their program is admitted again or under memory pressure;
// "fixed-ttl" pins a session's KV for a fixed time-to-live after every tool-call turn (the simple
// anchor; exclusive with continuum); "infinite-cache" gives every engine enough KV for the whole
// workload (the hit-ratio upper bound); "oracle" evicts with knowledge of the future requests and
// takes no features: in the instant single cache offline-optimally (Belady's MIN: the bound of
// what any eviction policy can reach at the same capacity), in the simulated fleet by each
// agent's future requests in recorded order timed by their recorded gaps (fleet_next_use.h: a
// clairvoyant heuristic, not a proven bound). The name "continuum-ttl", which an
// earlier fixed-TTL anchor used, is refused with a message naming both replacements, so that a run
// asking for it cannot silently get either. "per-conversation" is per-conversation retention alone
// (a turn's blocks no one else uses are dropped when its retention record falls out);
// "subagent-demotion" implies it and demotes finished sub-agents to priority P (an integer in
// [0, 100]; without "=P", the run's configured priority). "stall-offload" moves paused
// sessions' KV to the host tier under memory pressure and back before their predicted return
// (Tokencake's stall offload); it needs the host tier and is refused without "+host-tier"
// rather than implying it, so that an arm's name shows every tier it has. "gap-retention" is
// gap-aware retention (kv::EvictionOrder::kGapAware): within a priority, a finished request's
// blocks rank by their finish less the pause its session is expected to take (learned online per
// pause kind from the requests' hints), an ended session's own blocks first. "working-set" is
// program-level working-set admission at the gateway (control::WorkingSetAdmission): each live
// program's footprint (its agents' running reservations and the contexts they hold through
// their predicted pauses) counts against its engine's KV (plus the host tier with
// "+host-tier"); a new program waits, first come first served with an aging bound, until it
// fits; a continuing one never waits. "program-fcfs" is Continuum's program-level FCFS on its
// own: every engine's waiting queue ordered by the arrival of each request's program.
//
// The names `agentkv agentic-curve` has always used are whole-name aliases (the arm keeps the
// alias as its name; the spec is the canonical spelling's):
//   lru = baseline                       per_conversation = +per-conversation
//   demote_p1 = +subagent-demotion=1     demote_p20 = +subagent-demotion=20
//   session_release = +lifecycle         demote_p1+release = +subagent-demotion=1+lifecycle
// Pure functions; thread-safe.
#ifndef AGENTKV_SIM_REPLAY_REPLAY_ARMS_H_
#define AGENTKV_SIM_REPLAY_REPLAY_ARMS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/kv/kv_cache_options.h"

namespace agentkv::sim {

struct ArmSpec {
  // The name as given (the report's column header), alias spelling included.
  std::string name;
  // +lifecycle: --agentic-session-lifecycle; sessions are closed on every engine at their end
  // (in the instant single cache: each session right after its last request).
  bool session_lifecycle = false;
  // +admission: --agentic-program-admission; the token ledger and the global FIFO.
  bool program_admission = false;
  // +admission-v2: --agentic-program-admission --agentic-admission-policy v2 (uncached
  // reservations, per-engine budget and waiting, program-aware order). Exclusive with
  // +admission.
  bool admission_v2 = false;
  // +subagent-demotion: per-conversation retention and demotion of finished sub-agents when
  // their parent returns.
  bool subagent_demotion = false;
  // +subagent-demotion=P: the priority finished sub-agents get; unset: the run's option.
  // Range: [0, 100]. Only with subagent_demotion.
  std::optional<int32_t> demotion_priority;
  // +per-conversation: per-conversation retention records (block_reuse_policy
  // per_conversation) without demotion. subagent_demotion implies it.
  bool per_conversation = false;
  // +host-tier: a host (cold) KV tier of --hicache-ratio times the device tier.
  bool host_tier = false;
  // +stall-offload: paused sessions' KV moves to the host tier under memory pressure and is
  // prefetched before their predicted return (engine::StallOffloadPolicy). Needs host_tier.
  bool stall_offload = false;
  // fixed-ttl: a fixed TTL pin after every tool-call turn.
  bool fixed_ttl = false;
  // continuum: Continuum's cost-aware TTL pins and program-level FCFS.
  bool continuum = false;
  // +gap-retention: the KV cache's gap-aware eviction order; requests carry their next pause.
  bool gap_retention = false;
  // +working-set: program-level working-set admission at the gateway
  // (control::WorkingSetAdmission): a paused program holds its context for its predicted
  // pause, and a new program waits until it fits beside the live ones.
  bool working_set = false;
  // +program-fcfs: every engine orders its waiting queue by program (Continuum's program-level
  // FCFS, without its pins).
  bool program_fcfs = false;
  // infinite-cache: device KV for the whole workload.
  bool infinite_cache = false;
  // oracle: offline-optimal eviction (Belady's MIN) from the workload's known future; exclusive
  // with every feature.
  bool oracle = false;

  // What the arm enables, in words: "SGLang default: ..." for the baseline, else the features
  // joined by ", ".
  std::string Description() const;
  // Whether the arm turns nothing on: SGLang's default (LRU), the reference of the change
  // columns.
  bool IsBaseline() const;

  friend bool operator==(const ArmSpec&, const ArmSpec&) = default;
};

// Parses `name` (grammar and aliases above). InvalidArgument naming the arm and the unknown
// part, with the valid spellings, e.g. `arm "+lifecycel": unknown feature "lifecycel" (valid:
// lifecycle, admission, subagent-demotion[=P], per-conversation, host-tier, fixed-ttl,
// continuum, stall-offload, admission-v2)`; also for an empty name, a feature named twice, a
// demotion priority out of [0, 100], fixed-ttl with continuum, admission with admission-v2,
// oracle with a feature, stall-offload without host-tier, and the retired name continuum-ttl.
[[nodiscard]] StatusOr<ArmSpec> ParseArm(std::string_view name);

// Parses every name of a run's arm list, in order: InvalidArgument "arms must not be empty",
// ParseArm's error for a bad name, or `arm "NAME" is named twice`. The one place a list of arm
// names becomes typed arms (the command line's --arms and config files).
[[nodiscard]] StatusOr<std::vector<ArmSpec>> ParseArms(const std::vector<std::string>& names);

// Whether `arms` is a run's arm list: InvalidArgument "arms must not be empty", `arm "NAME" is
// named twice`, "arm name is empty", or `arm "NAME": ...` for a demotion priority without
// subagent_demotion or out of [0, 100], for fixed_ttl with continuum, for stall_offload
// without host_tier, or for oracle with any other flag. Every ParseArms
// result passes.
[[nodiscard]] Status ValidateArms(const std::vector<ArmSpec>& arms);

// The one arm loop of every replay, whatever its engine mode: checks `arms` (ValidateArms) and
// calls run(index, arm) for each arm in order, collecting the results. A failed arm stops the
// loop and returns its status with "arm NAME: " prefixed to the message.
template <typename Result, typename RunArm>
StatusOr<std::vector<Result>> ForEachArm(const std::vector<ArmSpec>& arms, RunArm&& run) {
  AGENTKV_RETURN_IF_ERROR(ValidateArms(arms));
  std::vector<Result> results;
  results.reserve(arms.size());
  for (size_t i = 0; i < arms.size(); ++i) {
    StatusOr<Result> result = run(i, arms[i]);
    if (!result.ok()) {
      return Status(result.status().code(),
                    "arm " + arms[i].name + ": " + std::string(result.status().message()));
    }
    results.push_back(*std::move(result));
  }
  return results;
}

// The arm named "baseline": SGLang's default, nothing turned on (ParseArm("baseline")).
ArmSpec BaselineArm();

// The arm named "agentkv": the recommended policy set without a host tier, lifecycle,
// admission-v2 and working-set (ParseArm("agentkv")), chosen by scripts/choose_arms.py on the
// first half of the WEKA traces.
ArmSpec AgentkvArm();
// The arm named "agentkv+host-tier": the recommended set with a host tier, chosen by the same
// rule against +host-tier: host-tier, lifecycle and admission-v2 (ParseArm("agentkv+host-tier")).
// "agentkv+host-tier+F" adds feature F to it.
ArmSpec AgentkvHostTierArm();

// The arms `agentkv replay` runs when none are given: baseline, every policy on its own
// (+lifecycle, +admission, +admission-v2, +subagent-demotion, +gap-retention, +working-set,
// +program-fcfs, +host-tier, +stall-offload+host-tier), all, agentkv, agentkv+host-tier,
// continuum, oracle, infinite-cache.
const std::vector<std::string>& DefaultArmNames();
// DefaultArmNames() parsed.
const std::vector<ArmSpec>& DefaultArms();

// The arms `agentkv agentic-curve` runs when none are given, its table order: lru,
// per_conversation, demote_p1, demote_p20, session_release, demote_p1+release.
const std::vector<std::string>& AgenticCurveArmNames();
// AgenticCurveArmNames() parsed.
const std::vector<ArmSpec>& AgenticCurveArms();

// The KV cache policy of `arm`: `base` with block_reuse_policy per_conversation for
// +per-conversation and +subagent-demotion, and finished_subagent_priority =
// arm.demotion_priority or `default_demotion_priority` for +subagent-demotion. Every other field
// (sizes, session_close_mode, max_num_turns, the idle bound) is kept. +gap-retention sets
// eviction_order = kGapAware.
kv::KvCacheOptions ArmCachePolicy(const ArmSpec& arm, const kv::KvCacheOptions& base,
                                  int32_t default_demotion_priority);

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_REPLAY_REPLAY_ARMS_H_
