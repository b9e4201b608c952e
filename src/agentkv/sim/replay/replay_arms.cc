#include "agentkv/sim/replay/replay_arms.h"

#include <array>
#include <charconv>
#include <set>
#include <string>
#include <utility>

namespace agentkv::sim {
namespace {

constexpr std::string_view kValidFeatures =
    "lifecycle, admission, subagent-demotion[=P], per-conversation, host-tier, fixed-ttl, "
    "continuum, stall-offload, admission-v2, gap-retention, working-set, program-fcfs";
constexpr std::string_view kValidBases =
    "baseline, agentkv, all, fixed-ttl, continuum, infinite-cache, oracle";
constexpr std::string_view kOracleAlone =
    "oracle (offline-optimal eviction) takes no features: it is the bound every eviction "
    "policy is judged against";
// The fixed-TTL anchor's former name: refused, naming what replaced it.
constexpr std::string_view kRetiredTtl = "continuum-ttl";
constexpr std::string_view kRetiredTtlHelp =
    "\"continuum-ttl\" was renamed: use \"fixed-ttl\" for a fixed TTL pin after every "
    "tool-call turn, or \"continuum\" for Continuum's cost-aware TTL with program-level FCFS";
constexpr std::string_view kDemotion = "subagent-demotion";
constexpr std::string_view kStallNeedsHost =
    "stall-offload moves paused sessions' KV to the host tier, and this arm has none: add "
    "+host-tier (e.g. \"+stall-offload+host-tier\")";
constexpr std::string_view kAdmissionExclusive =
    "admission and admission-v2 are exclusive admission policies";
constexpr int32_t kMaxPriority = 100;

// agentic-curve's names and their canonical spelling, in its table order.
constexpr std::array<std::pair<std::string_view, std::string_view>, 6> kAliases = {{
    {"lru", "baseline"},
    {"per_conversation", "+per-conversation"},
    {"demote_p1", "+subagent-demotion=1"},
    {"demote_p20", "+subagent-demotion=20"},
    {"session_release", "+lifecycle"},
    {"demote_p1+release", "+subagent-demotion=1+lifecycle"},
}};

Status BadArm(std::string_view name, const std::string& what) {
  return InvalidArgumentError("arm \"" + std::string(name) + "\": " + what);
}

// Sets the flag `feature` names. NotFound for an unknown feature (the caller words the error);
// InvalidArgument (without the arm's name) for a feature named twice or a bad priority.
Status EnableFeature(std::string_view feature, ArmSpec& arm) {
  std::optional<int32_t> priority;
  if (feature.substr(0, kDemotion.size()) == kDemotion && feature.size() > kDemotion.size() &&
      feature[kDemotion.size()] == '=') {
    const std::string_view value = feature.substr(kDemotion.size() + 1);
    int32_t p = -1;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), p);
    if (value.empty() || error != std::errc() || end != value.data() + value.size() || p < 0 ||
        p > kMaxPriority) {
      return InvalidArgumentError("sub-agent demotion priority must be an integer in [0, " +
                                  std::to_string(kMaxPriority) + "], got \"" + std::string(value) +
                                  "\"");
    }
    priority = p;
    feature = kDemotion;
  }
  bool* flag = nullptr;
  if (feature == "lifecycle") flag = &arm.session_lifecycle;
  if (feature == "admission") flag = &arm.program_admission;
  if (feature == "admission-v2") flag = &arm.admission_v2;
  if (feature == kDemotion) flag = &arm.subagent_demotion;
  if (feature == "per-conversation") flag = &arm.per_conversation;
  if (feature == "host-tier") flag = &arm.host_tier;
  if (feature == "fixed-ttl") flag = &arm.fixed_ttl;
  if (feature == "continuum") flag = &arm.continuum;
  if (feature == "stall-offload") flag = &arm.stall_offload;
  if (feature == "gap-retention") flag = &arm.gap_retention;
  if (feature == "working-set") flag = &arm.working_set;
  if (feature == "program-fcfs") flag = &arm.program_fcfs;
  if (flag == nullptr) return NotFoundError(std::string(feature));
  if (*flag) {
    return InvalidArgumentError("feature \"" + std::string(feature) + "\" named twice");
  }
  *flag = true;
  if (priority.has_value()) arm.demotion_priority = priority;
  return Status::Ok();
}

// Whether the '+'-separated features of `name` (after its base) include `feature`.
bool NamesFeature(std::string_view name, std::string_view feature) {
  for (size_t plus = name.find('+'); plus != std::string_view::npos;) {
    const size_t next = name.find('+', plus + 1);
    if (name.substr(plus + 1, next == std::string_view::npos ? next : next - plus - 1) == feature) {
      return true;
    }
    plus = next;
  }
  return false;
}

StatusOr<ArmSpec> ParseCanonical(std::string_view name) {
  ArmSpec arm;
  arm.name = std::string(name);
  const size_t plus = name.find('+');
  const std::string_view base = name.substr(0, plus);
  if (base == kRetiredTtl) return BadArm(name, std::string(kRetiredTtlHelp));
  if (base == "all") {
    arm.session_lifecycle = arm.program_admission = arm.subagent_demotion = arm.host_tier = true;
  } else if (base == "agentkv") {
    // With +host-tier among its features, "agentkv" is the set recommended for a fleet with a
    // host tier (the feature itself then turns the tier on).
    arm = NamesFeature(name, "host-tier") ? AgentkvHostTierArm() : AgentkvArm();
    arm.host_tier = false;
    arm.name = std::string(name);
  } else if (base == "fixed-ttl") {
    arm.fixed_ttl = true;
  } else if (base == "continuum") {
    arm.continuum = true;
  } else if (base == "infinite-cache") {
    arm.infinite_cache = true;
  } else if (base == "oracle") {
    arm.oracle = true;
  } else if (!base.empty() && base != "baseline") {
    return BadArm(name, "unknown arm \"" + std::string(base) +
                            "\" (valid: " + std::string(kValidBases) +
                            ", or +features: " + std::string(kValidFeatures) + ")");
  }
  if (plus == std::string_view::npos) return arm;
  if (arm.oracle) return BadArm(name, std::string(kOracleAlone));
  std::string_view rest = name.substr(plus + 1);
  while (true) {
    const size_t next = rest.find('+');
    const std::string_view feature = rest.substr(0, next);
    if (feature == kRetiredTtl) return BadArm(name, std::string(kRetiredTtlHelp));
    if (Status s = EnableFeature(feature, arm); !s.ok()) {
      if (s.code() == StatusCode::kNotFound) {
        return BadArm(name, "unknown feature \"" + std::string(feature) +
                                "\" (valid: " + std::string(kValidFeatures) + ")");
      }
      return BadArm(name, s.message());
    }
    if (next == std::string_view::npos) break;
    rest = rest.substr(next + 1);
  }
  if (arm.fixed_ttl && arm.continuum) {
    return BadArm(name, "fixed-ttl and continuum are exclusive pin policies");
  }
  if (arm.stall_offload && !arm.host_tier) return BadArm(name, std::string(kStallNeedsHost));
  if (arm.program_admission && arm.admission_v2) {
    return BadArm(name, std::string(kAdmissionExclusive));
  }
  return arm;
}

// The arms of a built-in list of names; CHECKs that they parse.
const std::vector<ArmSpec>* ParsedOrDie(const std::vector<std::string>& names) {
  StatusOr<std::vector<ArmSpec>> arms = ParseArms(names);
  AGENTKV_CHECK(arms.ok()) << arms.status();
  return new std::vector<ArmSpec>(*std::move(arms));
}

}  // namespace

std::string ArmSpec::Description() const {
  std::string out;
  auto add = [&out](std::string_view part) {
    if (!out.empty()) out += ", ";
    out += part;
  };
  if (infinite_cache) add("unbounded device KV (upper bound)");
  if (oracle) add("offline-optimal eviction, Belady's MIN (bound at the same capacity)");
  if (session_lifecycle) add("session close on every engine at session end");
  if (program_admission) add("program-aware admission (token ledger, global FIFO)");
  if (admission_v2) {
    add("admission v2 (uncached reservations, per-engine budget and waiting, program order)");
  }
  if (per_conversation) add("per-conversation retention");
  if (subagent_demotion) {
    add(demotion_priority.has_value()
            ? "finished sub-agent demotion to priority " + std::to_string(*demotion_priority)
            : std::string("finished sub-agent demotion"));
  }
  if (host_tier) add("host KV tier");
  if (stall_offload) add("stall offload of paused sessions to the host tier");
  if (fixed_ttl) add("fixed TTL pin after tool-call turns");
  if (continuum) add("Continuum: cost-aware TTL pins, program-level FCFS");
  if (gap_retention) add("gap-aware retention (pause-kind gaps learned online)");
  if (working_set) add("working-set admission (paused programs hold their context)");
  if (program_fcfs) add("program-level FCFS in every engine's queue");
  if (out.empty()) out = "SGLang default: prefix reuse, LRU, no lifecycle, no admission";
  return out;
}

bool ArmSpec::IsBaseline() const {
  ArmSpec plain;
  plain.name = name;
  return *this == plain;
}

StatusOr<ArmSpec> ParseArm(std::string_view name) {
  if (name.empty()) return InvalidArgumentError("arm name is empty");
  for (const auto& [alias, canonical] : kAliases) {
    if (name != alias) continue;
    StatusOr<ArmSpec> arm = ParseCanonical(canonical);
    AGENTKV_CHECK(arm.ok()) << arm.status();
    arm->name = std::string(name);
    return arm;
  }
  return ParseCanonical(name);
}

Status ValidateArms(const std::vector<ArmSpec>& arms) {
  if (arms.empty()) return InvalidArgumentError("arms must not be empty");
  std::set<std::string_view> seen;
  for (const ArmSpec& arm : arms) {
    if (arm.name.empty()) return InvalidArgumentError("arm name is empty");
    if (!seen.insert(arm.name).second) {
      return InvalidArgumentError("arm \"" + arm.name + "\" is named twice");
    }
    if (arm.fixed_ttl && arm.continuum) {
      return BadArm(arm.name, "fixed-ttl and continuum are exclusive pin policies");
    }
    if (arm.stall_offload && !arm.host_tier) {
      return BadArm(arm.name, std::string(kStallNeedsHost));
    }
    if (arm.program_admission && arm.admission_v2) {
      return BadArm(arm.name, std::string(kAdmissionExclusive));
    }
    if (arm.oracle) {
      ArmSpec alone;
      alone.name = arm.name;
      alone.oracle = true;
      if (!(arm == alone)) return BadArm(arm.name, std::string(kOracleAlone));
    }
    if (!arm.demotion_priority.has_value()) continue;
    if (!arm.subagent_demotion) {
      return BadArm(arm.name, "a demotion priority needs subagent-demotion");
    }
    if (*arm.demotion_priority < 0 || *arm.demotion_priority > kMaxPriority) {
      return BadArm(arm.name, "sub-agent demotion priority must be an integer in [0, " +
                                  std::to_string(kMaxPriority) + "], got " +
                                  std::to_string(*arm.demotion_priority));
    }
  }
  return Status::Ok();
}

StatusOr<std::vector<ArmSpec>> ParseArms(const std::vector<std::string>& names) {
  if (names.empty()) return InvalidArgumentError("arms must not be empty");
  std::vector<ArmSpec> arms;
  arms.reserve(names.size());
  std::set<std::string_view> seen;
  for (const std::string& name : names) {
    AGENTKV_ASSIGN_OR_RETURN(ArmSpec arm, ParseArm(name));
    if (!seen.insert(name).second) {
      return InvalidArgumentError("arm \"" + name + "\" is named twice");
    }
    arms.push_back(std::move(arm));
  }
  return arms;
}

ArmSpec BaselineArm() {
  ArmSpec arm;
  arm.name = "baseline";
  return arm;
}

ArmSpec AgentkvArm() {
  // Chosen by scripts/choose_arms.py on the first half of the WEKA traces (docs/RESULTS.md).
  ArmSpec arm;
  arm.name = "agentkv";
  arm.session_lifecycle = true;
  arm.admission_v2 = true;
  arm.working_set = true;
  return arm;
}

ArmSpec AgentkvHostTierArm() {
  // Chosen by the same rule, against +host-tier.
  ArmSpec arm;
  arm.name = "agentkv+host-tier";
  arm.session_lifecycle = true;
  arm.admission_v2 = true;
  arm.host_tier = true;
  return arm;
}

const std::vector<std::string>& DefaultArmNames() {
  static const std::vector<std::string>* const kNames =
      new std::vector<std::string>{"baseline",
                                   "+lifecycle",
                                   "+admission",
                                   "+admission-v2",
                                   "+subagent-demotion",
                                   "+gap-retention",
                                   "+working-set",
                                   "+program-fcfs",
                                   "+host-tier",
                                   "+stall-offload+host-tier",
                                   "all",
                                   "agentkv",
                                   "agentkv+host-tier",
                                   "continuum",
                                   "oracle",
                                   "infinite-cache"};
  return *kNames;
}

const std::vector<std::string>& AgenticCurveArmNames() {
  static const std::vector<std::string>* const kNames = [] {
    auto* names = new std::vector<std::string>;
    for (const auto& alias : kAliases) names->emplace_back(alias.first);
    return names;
  }();
  return *kNames;
}

const std::vector<ArmSpec>& DefaultArms() {
  static const std::vector<ArmSpec>* const kArms = ParsedOrDie(DefaultArmNames());
  return *kArms;
}

const std::vector<ArmSpec>& AgenticCurveArms() {
  static const std::vector<ArmSpec>* const kArms = ParsedOrDie(AgenticCurveArmNames());
  return *kArms;
}

kv::KvCacheOptions ArmCachePolicy(const ArmSpec& arm, const kv::KvCacheOptions& base,
                                  int32_t default_demotion_priority) {
  kv::KvCacheOptions options = base;
  if (arm.per_conversation || arm.subagent_demotion) {
    options.block_reuse_policy = kv::BlockReusePolicy::kPerConversation;
  }
  if (arm.subagent_demotion) {
    options.finished_subagent_priority =
        static_cast<kv::Priority>(arm.demotion_priority.value_or(default_demotion_priority));
  }
  if (arm.gap_retention) options.eviction_order = kv::EvictionOrder::kGapAware;
  return options;
}

}  // namespace agentkv::sim
