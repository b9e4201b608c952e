#include "python/src/kv_types.h"

#include <pybind11/stl.h>

#include <array>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>

#include "agentkv/kv/block_cache.h"
#include "agentkv/kv/retention.h"
#include "python/src/errors.h"

namespace agentkv::python {
namespace py = pybind11;
namespace {

using kv::KvCacheOptions;

// Every option, in the order of kv_cache_options.h: what keyword arguments may set, what
// repr, to_dict and == read.
constexpr std::array<const char*, 16> kOptionFields = {
    "tokens_per_block",
    "device_blocks",
    "host_blocks",
    "offload_threshold",
    "default_priority",
    "hash_seed",
    "eviction_order",
    "event_log_capacity",
    "session_close_mode",
    "closed_session_tombstones",
    "block_reuse_policy",
    "max_num_turns",
    "finished_subagent_priority",
    "finished_subagent_min_idle_iterations",
    "finished_subagent_min_idle_s",
    "finished_subagent_offloadable",
};

// An int32 field set from a Python int: a value beyond int32 is out of every option's range,
// reported as Validate reports it.
void CheckInt32(int64_t value, const char* field, const char* range) {
  if (value < std::numeric_limits<int32_t>::min() || value > std::numeric_limits<int32_t>::max()) {
    throw StatusError(InvalidArgumentError(std::string(field) + " must be in " + range + ", got " +
                                           std::to_string(value)));
  }
}

std::optional<Step> StepsArg(std::optional<int64_t> value, const char* field) {
  if (!value.has_value()) return std::nullopt;
  if (*value > kMaxSteps) {
    throw StatusError(InvalidArgumentError(std::string(field) + " must be at most " +
                                           std::to_string(kMaxSteps) + " steps, got " +
                                           std::to_string(*value)));
  }
  return Step(*value);
}

std::optional<int64_t> StepsValue(const std::optional<Step>& steps) {
  if (!steps.has_value()) return std::nullopt;
  return steps->value();
}

// InvalidArgumentError: `field` must be one of `values` (spelled by `name_of`), got `name`.
template <typename Values, typename NameOf>
StatusError NotOneOf(const std::string& name, const Values& values, NameOf name_of,
                     const char* field) {
  std::string spellings;
  for (const auto value : values) {
    if (!spellings.empty()) spellings += ", ";
    spellings += std::string(name_of(value));
  }
  return StatusError(InvalidArgumentError(std::string(field) + " must be one of " + spellings +
                                          ", got '" + name + "'"));
}

// Parses `name` as one of `values`, spelled by `name_of`.
template <typename Enum, typename NameOf, size_t N>
Enum ParseName(const std::string& name, const std::array<Enum, N>& values, NameOf name_of,
               const char* field) {
  for (const Enum value : values) {
    if (name == std::string_view(name_of(value))) return value;
  }
  throw NotOneOf(name, values, name_of, field);
}

constexpr std::array<kv::EvictionOrder, 2> kEvictionOrders = {kv::EvictionOrder::kLru,
                                                              kv::EvictionOrder::kGapAware};
constexpr std::array<kv::SessionCloseMode, 2> kCloseModes = {kv::SessionCloseMode::kRelease,
                                                             kv::SessionCloseMode::kDereference};
constexpr std::array<kv::BlockReusePolicy, 2> kReusePolicies = {
    kv::BlockReusePolicy::kDefault, kv::BlockReusePolicy::kPerConversation};
constexpr std::array<kv::Tier, 2> kTiers = {kv::Tier::kDevice, kv::Tier::kHost};
constexpr std::array<kv::KvEventKind, 7> kEventKinds = {
    kv::KvEventKind::kStored,  kv::KvEventKind::kOffloaded, kv::KvEventKind::kDropped,
    kv::KvEventKind::kEvicted, kv::KvEventKind::kReleased,  kv::KvEventKind::kOnboarded,
    kv::KvEventKind::kCleared};

py::dict OptionsDict(const py::object& options) {
  py::dict d;
  for (const char* field : kOptionFields) d[field] = options.attr(field);
  return d;
}

// "Name(a=1, b=2)" from a dict.
std::string ReprOf(const char* name, const py::dict& fields) {
  std::string out = std::string(name) + "(";
  bool first = true;
  for (const auto& [key, value] : fields) {
    if (!first) out += ", ";
    first = false;
    out += py::str(key).cast<std::string>() + "=" + py::repr(value).cast<std::string>();
  }
  return out + ")";
}

py::dict GaugesDict(const kv::TierGauges& g) {
  py::dict d;
  d["capacity"] = g.capacity;
  d["free"] = g.free;
  d["held"] = g.held;
  d["evictable"] = g.evictable;
  d["cached"] = g.cached;
  return d;
}

// Every counter of KvCacheStats, in declaration order (the gauges come after them).
struct Counter {
  const char* name;
  int64_t kv::KvCacheStats::*field;
  const char* doc;
};
constexpr std::array<Counter, 24> kCounters = {{
    {"lookups", &kv::KvCacheStats::lookups,
     "Requests admitted (add_request calls that succeeded)."},
    {"lookup_blocks", &kv::KvCacheStats::lookup_blocks,
     "Full prompt blocks offered for matching, over all lookups."},
    {"matched_device_blocks", &kv::KvCacheStats::matched_device_blocks,
     "Leading prompt blocks found on the device."},
    {"matched_host_blocks", &kv::KvCacheStats::matched_host_blocks,
     "Prompt blocks after those found on the host and onboarded."},
    {"matched_device_tokens", &kv::KvCacheStats::matched_device_tokens,
     "Tokens of matched_device_blocks."},
    {"matched_host_tokens", &kv::KvCacheStats::matched_host_tokens,
     "Tokens of matched_host_blocks."},
    {"uncached_tokens", &kv::KvCacheStats::uncached_tokens,
     "Prompt tokens of admitted requests that no tier supplied (to be computed)."},
    {"stored_blocks", &kv::KvCacheStats::stored_blocks,
     "Blocks newly entered into the prefix index."},
    {"device_evictions", &kv::KvCacheStats::device_evictions,
     "Blocks that left the device to make room: offloaded plus dropped from the device."},
    {"offloads", &kv::KvCacheStats::offloads, "Device -> host moves."},
    {"drops", &kv::KvCacheStats::drops, "Blocks removed from the cache without a colder copy."},
    {"onboards", &kv::KvCacheStats::onboards, "Host -> device moves."},
    {"expirations", &kv::KvCacheStats::expirations,
     "Blocks whose retention duration ran out (priority back to the default)."},
    {"stall_offloaded_blocks", &kv::KvCacheStats::stall_offloaded_blocks,
     "Device -> host moves ahead of demand (offload_chain)."},
    {"prefetched_blocks", &kv::KvCacheStats::prefetched_blocks,
     "Host -> device moves ahead of a predicted return (prefetch_chain)."},
    {"open_sessions", &kv::KvCacheStats::open_sessions, "Sessions open now (a gauge)."},
    {"closed_sessions", &kv::KvCacheStats::closed_sessions, "Sessions closed by close_session."},
    {"tokens_freed_by_close", &kv::KvCacheStats::tokens_freed_by_close,
     "Tokens whose blocks a close freed (session_close_mode 'release')."},
    {"late_session_requests", &kv::KvCacheStats::late_session_requests,
     "Requests of closed sessions that referenced nothing."},
    {"retention_dropped_blocks", &kv::KvCacheStats::retention_dropped_blocks,
     "Blocks released when the retention record of their turn fell out (per_conversation)."},
    {"unauthenticated_parent_hints", &kv::KvCacheStats::unauthenticated_parent_hints,
     "Parent hints ignored because they were not authenticated."},
    {"demoted_children", &kv::KvCacheStats::demoted_children, "Finished sub-agents demoted."},
    {"demoted_blocks", &kv::KvCacheStats::demoted_blocks,
     "Blocks that got finished_subagent_priority."},
    {"restored_children", &kv::KvCacheStats::restored_children,
     "Demoted sub-agents that came back and got the default priority again."},
}};

py::dict StatsDict(const kv::KvCacheStats& s) {
  py::dict d;
  for (const Counter& c : kCounters) d[c.name] = s.*(c.field);
  d["device"] = GaugesDict(s.device);
  d["host"] = GaugesDict(s.host);
  return d;
}

template <int32_t KvCacheOptions::*Field>
void DefInt32Option(py::class_<KvCacheOptions>& cls, const char* name, const char* field,
                    const char* range, const char* doc) {
  cls.def_property(
      name, [](const KvCacheOptions& o) { return o.*Field; },
      [field, range](KvCacheOptions& o, int64_t value) {
        CheckInt32(value, field, range);
        o.*Field = static_cast<int32_t>(value);
      },
      doc);
}

// KvCacheOptions' tiers, priorities, eviction, events and sessions.
void DefCacheOptions(py::class_<KvCacheOptions>& cls) {
  DefInt32Option<&KvCacheOptions::tokens_per_block>(cls, "tokens_per_block", "tokens_per_block",
                                                    "[1, 1048576]",
                                                    "Tokens per KV block (page). Default 32.");
  cls.def_readwrite("device_blocks", &KvCacheOptions::device_blocks,
                    "Blocks of the device (GPU, hot) tier. Default 0; [0, 2**30].");
  cls.def_readwrite("host_blocks", &KvCacheOptions::host_blocks,
                    "Blocks of the host (cold) tier; 0 disables offloading. Default 0; "
                    "[0, 2**30].");
  DefInt32Option<&KvCacheOptions::offload_threshold>(
      cls, "offload_threshold", "offload_threshold", "[0, 101]",
      "A block evicted from the device is offloaded to the host when its priority is at least "
      "this, else dropped. Default 30; [0, 101] (101: never offload).");
  DefInt32Option<&KvCacheOptions::default_priority>(
      cls, "default_priority", "default_priority", "[0, 100]",
      "Priority of blocks no retention config covers. Default 35; [0, 100].");
  cls.def_readwrite("hash_seed", &KvCacheOptions::hash_seed,
                    "Seed of the block key chain (BlockKeyHasher). Default 0.");
  cls.def_property(
      "eviction_order",
      [](const KvCacheOptions& o) { return std::string(kv::EvictionOrderName(o.eviction_order)); },
      [](KvCacheOptions& o, const std::string& name) {
        o.eviction_order =
            ParseName(name, kEvictionOrders, kv::EvictionOrderName, "eviction_order");
      },
      "Order of eviction within a priority: 'lru' (default) or 'gap_aware'.");
  cls.def_readwrite("event_log_capacity", &KvCacheOptions::event_log_capacity,
                    "Capacity of the event log (take_events); 0 disables it. Default 0; "
                    "[0, 2**26].");
  cls.def_property(
      "session_close_mode",
      [](const KvCacheOptions& o) {
        return std::string(kv::SessionCloseModeName(o.session_close_mode));
      },
      [](KvCacheOptions& o, const std::string& name) {
        o.session_close_mode =
            ParseName(name, kCloseModes, kv::SessionCloseModeName, "session_close_mode");
      },
      "What close_session does: 'dereference' (default, current SGLang: drop the references "
      "only) or 'release' (free the session's unique blocks at once).");
  cls.def_readwrite("closed_session_tombstones", &KvCacheOptions::closed_session_tombstones,
                    "Closed session ids remembered so that a late request of one references "
                    "nothing. Default 8192; [1, 2**24].");
}

// KvCacheOptions' block_reuse_config: per-conversation records and sub-agent demotion.
void DefBlockReuseOptions(py::class_<KvCacheOptions>& cls) {
  cls.def_property(
      "block_reuse_policy",
      [](const KvCacheOptions& o) {
        return std::string(kv::BlockReusePolicyName(o.block_reuse_policy));
      },
      [](KvCacheOptions& o, const std::string& name) {
        o.block_reuse_policy =
            ParseName(name, kReusePolicies, kv::BlockReusePolicyName, "block_reuse_policy");
      },
      "block_reuse_config.policy: 'default' or 'per_conversation' (retention records per "
      "conversation, needed by sub-agent demotion).");
  DefInt32Option<&KvCacheOptions::max_num_turns>(
      cls, "max_num_turns", "block_reuse_config.max_num_turns", "[1, 1048576]",
      "block_reuse_config.max_num_turns: finished turns whose records a conversation keeps. "
      "Default 1.");
  cls.def_property(
      "finished_subagent_priority",
      [](const KvCacheOptions& o) { return o.finished_subagent_priority; },
      [](KvCacheOptions& o, std::optional<int64_t> value) {
        if (value.has_value()) {
          CheckInt32(*value, "block_reuse_config.finished_subagent_priority", "[0, 100]");
          o.finished_subagent_priority = static_cast<int32_t>(*value);
        } else {
          o.finished_subagent_priority.reset();
        }
      },
      "block_reuse_config.finished_subagent_priority: the priority a finished sub-agent's own "
      "blocks get when its parent returns; None (default) turns demotion off. Requires "
      "block_reuse_policy 'per_conversation'. [0, 100].");
  cls.def_readwrite("finished_subagent_min_idle_iterations",
                    &KvCacheOptions::finished_subagent_min_idle_iterations,
                    "block_reuse_config.finished_subagent_min_idle_iterations: scheduler steps a "
                    "child must have been idle to be demoted. Default 32; [0, 2**40].");
  cls.def_readwrite("finished_subagent_min_idle_s", &KvCacheOptions::finished_subagent_min_idle_s,
                    "The idle bound in seconds of the caller's clock (KvCache.set_clock) "
                    "instead of steps; replaces finished_subagent_min_idle_iterations when set. "
                    "Default None; [0, 1e6].");
  cls.def_readwrite("finished_subagent_offloadable", &KvCacheOptions::finished_subagent_offloadable,
                    "With a host tier, demoted blocks get max(finished_subagent_priority, "
                    "offload_threshold), so they are offloaded rather than dropped. Default "
                    "False.");
}

void BindOptions(py::module_& m) {
  py::class_<KvCacheOptions> cls(
      m, "KvCacheOptions",
      "Options of a KvCache, with the names, defaults and ranges of the C++ "
      "agentkv::kv::KvCacheOptions (docs/KV_CACHE.md). KvCacheOptions(**fields) sets any of "
      "them by keyword; a value beyond a field's C++ type raises InvalidArgumentError at once, "
      "every other range is checked by validate() and by KvCache(), which raise "
      "InvalidArgumentError naming the field. Enumerations are strings. A plain value: "
      "KvCache copies it.");
  cls.def(py::init([](const py::kwargs& fields) { return OptionsFromPython(py::none(), fields); }),
          "The defaults, with each keyword argument set as the option of that name "
          "(TypeError for a name that is no option).");
  DefCacheOptions(cls);
  DefBlockReuseOptions(cls);
  cls.def(
      "validate", [](const KvCacheOptions& o) { ThrowIfError(o.Validate()); },
      "Raises InvalidArgumentError naming the first field out of range; None when valid.");
  cls.def(
      "to_dict", [](const py::object& self) { return OptionsDict(self); },
      "Every option by name, enumerations as strings.");
  cls.def(
      "__eq__",
      [](const py::object& self, const py::object& other) {
        if (!py::isinstance<KvCacheOptions>(other)) return false;
        return OptionsDict(self).equal(OptionsDict(other));
      },
      py::is_operator());
  cls.def("__repr__",
          [](const py::object& self) { return ReprOf("KvCacheOptions", OptionsDict(self)); });
  cls.attr("__hash__") = py::none();
}

void BindRetention(py::module_& m) {
  py::class_<kv::TokenRangeRetention>(
      m, "TokenRangeRetention",
      "A retention priority (and optional duration in scheduler steps) for the prompt tokens "
      "[token_start, token_end); token_end None means to the end of the prompt. A block takes "
      "the range containing its first token.")
      .def(py::init([](int64_t token_start, std::optional<int64_t> token_end, int64_t priority,
                       std::optional<int64_t> duration) {
             kv::TokenRangeRetention r;
             r.token_start = token_start;
             r.token_end = token_end;
             CheckInt32(priority, "priority", "[0, 100]");
             r.priority = static_cast<int32_t>(priority);
             r.duration = StepsArg(duration, "duration");
             return r;
           }),
           py::arg("token_start") = 0, py::arg("token_end") = py::none(),
           py::arg("priority") = kv::kDefaultPriority, py::arg("duration") = py::none())
      .def_readonly("token_start", &kv::TokenRangeRetention::token_start, "First token.")
      .def_readonly("token_end", &kv::TokenRangeRetention::token_end,
                    "Exclusive end, or None: to the end of the prompt.")
      .def_readonly("priority", &kv::TokenRangeRetention::priority, "0 (evicted first) to 100.")
      .def_property_readonly(
          "duration", [](const kv::TokenRangeRetention& r) { return StepsValue(r.duration); },
          "Steps after which the priority reverts to the default; None: forever.")
      .def("__repr__", [](const kv::TokenRangeRetention& r) {
        py::dict d;
        d["token_start"] = r.token_start;
        d["token_end"] = r.token_end;
        d["priority"] = r.priority;
        d["duration"] = StepsValue(r.duration);
        return ReprOf("TokenRangeRetention", d);
      });

  py::class_<kv::RetentionConfig>(
      m, "RetentionConfig",
      "TensorRT-LLM's KvCacheRetentionConfig: non-overlapping token ranges of the prompt with a "
      "priority each, plus a priority (and duration) for the blocks of generated tokens. "
      "Applied when the request is released. Checked by add_request (InvalidArgumentError "
      "naming the field).")
      .def(py::init([](std::vector<kv::TokenRangeRetention> token_ranges, int64_t decode_priority,
                       std::optional<int64_t> decode_duration) {
             kv::RetentionConfig c;
             c.token_ranges = std::move(token_ranges);
             CheckInt32(decode_priority, "decode_priority", "[0, 100]");
             c.decode_priority = static_cast<int32_t>(decode_priority);
             c.decode_duration = StepsArg(decode_duration, "decode_duration");
             return c;
           }),
           py::arg("token_ranges") = std::vector<kv::TokenRangeRetention>(),
           py::arg("decode_priority") = kv::kDefaultPriority,
           py::arg("decode_duration") = py::none())
      .def_readonly("token_ranges", &kv::RetentionConfig::token_ranges,
                    "The ranges (a copy: build a new config to change them).")
      .def_readonly("decode_priority", &kv::RetentionConfig::decode_priority,
                    "Priority of blocks whose first token is a generated token.")
      .def_property_readonly(
          "decode_duration",
          [](const kv::RetentionConfig& c) { return StepsValue(c.decode_duration); },
          "Steps after which decode blocks revert to the default priority; None: forever.");
}

// PrefixMatch: what a request holds of its prompt.
void BindPrefixMatch(py::module_& m) {
  py::class_<kv::PrefixMatch>(
      m, "PrefixMatch",
      "How many leading blocks of a key chain are on the device (device_blocks), and how many "
      "right after those are on the host (host_blocks). Returned by KvCache.match and "
      "KvCache.add_request (there: what the request now holds).")
      .def(py::init([](int64_t device_blocks, int64_t host_blocks) {
             return kv::PrefixMatch{device_blocks, host_blocks};
           }),
           py::arg("device_blocks") = 0, py::arg("host_blocks") = 0)
      .def_readonly("device_blocks", &kv::PrefixMatch::device_blocks)
      .def_readonly("host_blocks", &kv::PrefixMatch::host_blocks)
      .def_property_readonly("total_blocks", &kv::PrefixMatch::total_blocks,
                             "device_blocks + host_blocks.")
      .def(
          "__eq__",
          [](const kv::PrefixMatch& a, const py::object& b) {
            return py::isinstance<kv::PrefixMatch>(b) && a == b.cast<kv::PrefixMatch>();
          },
          py::is_operator())
      .def("__repr__",
           [](const kv::PrefixMatch& p) {
             return "PrefixMatch(device_blocks=" + std::to_string(p.device_blocks) +
                    ", host_blocks=" + std::to_string(p.host_blocks) + ")";
           })
      .attr("__hash__") = py::none();
}

// TierGauges: one tier's blocks.
void BindTierGauges(py::module_& m) {
  py::class_<kv::TierGauges>(m, "TierGauges",
                             "Block counts of one tier now: free + held + evictable == capacity; "
                             "cached counts the committed blocks resident in the tier.")
      .def_readonly("capacity", &kv::TierGauges::capacity)
      .def_readonly("free", &kv::TierGauges::free)
      .def_readonly("held", &kv::TierGauges::held, "Blocks requests reference.")
      .def_readonly("evictable", &kv::TierGauges::evictable, "Blocks in the eviction queue.")
      .def_readonly("cached", &kv::TierGauges::cached)
      .def("to_dict", &GaugesDict, "The five gauges by name.")
      .def(
          "__eq__",
          [](const kv::TierGauges& a, const py::object& b) {
            return py::isinstance<kv::TierGauges>(b) && a == b.cast<kv::TierGauges>();
          },
          py::is_operator())
      .def("__repr__", [](const kv::TierGauges& g) { return ReprOf("TierGauges", GaugesDict(g)); })
      .attr("__hash__") = py::none();
}

// KvCacheStats: the counters and gauges.
void BindKvCacheStats(py::module_& m) {
  py::class_<kv::KvCacheStats> stats(
      m, "KvCacheStats",
      "A snapshot of a KvCache's cumulative counters (since creation; reset keeps them) and its "
      "current gauges per tier (device, host). Every field of the C++ KvCacheStats; to_dict() "
      "gives them as a dict.");
  for (const Counter& c : kCounters) {
    const auto field = c.field;
    stats.def_property_readonly(
        c.name, [field](const kv::KvCacheStats& s) { return s.*field; }, c.doc);
  }
  stats.def_readonly("device", &kv::KvCacheStats::device, "Gauges of the device tier.")
      .def_readonly("host", &kv::KvCacheStats::host, "Gauges of the host tier.")
      .def("to_dict", &StatsDict, "Every counter by name; device and host as dicts.")
      .def(
          "__eq__",
          [](const kv::KvCacheStats& a, const py::object& b) {
            return py::isinstance<kv::KvCacheStats>(b) && a == b.cast<kv::KvCacheStats>();
          },
          py::is_operator())
      .def("__repr__",
           [](const kv::KvCacheStats& s) { return ReprOf("KvCacheStats", StatsDict(s)); })
      .attr("__hash__") = py::none();
}

// KvEvent: one entry of the event log.
void BindKvEvent(py::module_& m) {
  py::class_<kv::KvEvent>(
      m, "KvEvent",
      "One entry of the event log (KvCache.take_events): kind ('stored', 'offloaded', "
      "'dropped', 'evicted', 'released', 'onboarded', 'cleared'), the block's key, the tier it "
      "was in before the event ('device' or 'host'), the scheduler step and the block's payload "
      "then (KvCache.commit, set_payload; 0 when none was given).")
      .def(py::init([](const std::string& kind, uint64_t key, const std::string& tier, int64_t step,
                       int64_t payload) {
             return kv::KvEvent{ParseName(kind, kEventKinds, kv::KvEventKindName, "kind"),
                                kv::BlockKey(key), ParseName(tier, kTiers, TierName, "tier"),
                                Step(step), payload};
           }),
           py::arg("kind"), py::arg("key"), py::arg("tier") = "device", py::arg("step") = 0,
           py::arg("payload") = 0)
      .def_property_readonly("kind",
                             [](const kv::KvEvent& e) { return kv::KvEventKindName(e.kind); })
      .def_property_readonly("key", [](const kv::KvEvent& e) { return e.key.value(); })
      .def_property_readonly("tier", [](const kv::KvEvent& e) { return TierName(e.tier); })
      .def_property_readonly("step", [](const kv::KvEvent& e) { return e.step.value(); })
      .def_property_readonly("payload", [](const kv::KvEvent& e) { return e.payload; })
      .def(
          "__eq__",
          [](const kv::KvEvent& a, const py::object& b) {
            return py::isinstance<kv::KvEvent>(b) && a == b.cast<kv::KvEvent>();
          },
          py::is_operator())
      .def("__repr__",
           [](const kv::KvEvent& e) {
             return std::string("KvEvent(kind='") + kv::KvEventKindName(e.kind) +
                    "', key=" + std::to_string(e.key.value()) + ", tier='" + TierName(e.tier) +
                    "', step=" + std::to_string(e.step.value()) +
                    ", payload=" + std::to_string(e.payload) + ")";
           })
      .attr("__hash__") = py::none();
}

void BindResults(py::module_& m) {
  BindPrefixMatch(m);
  BindTierGauges(m);
  BindKvCacheStats(m);
  BindKvEvent(m);
}

}  // namespace

kv::KvCacheOptions OptionsFromPython(py::handle base, const py::kwargs& overrides) {
  KvCacheOptions options;
  if (!base.is_none()) {
    if (!py::isinstance<KvCacheOptions>(base)) {
      throw py::type_error("options must be a KvCacheOptions or None");
    }
    options = base.cast<KvCacheOptions>();
  }
  if (overrides.empty()) return options;
  py::object copy = py::cast(options);
  for (const auto& [key, value] : overrides) {
    const std::string name = py::str(key);
    bool known = false;
    for (const char* field : kOptionFields) known = known || name == field;
    if (!known) throw py::type_error("'" + name + "' is not a KvCacheOptions field");
    py::setattr(copy, key, value);
  }
  return copy.cast<KvCacheOptions>();
}

PauseKind PauseKindArg(const std::string& name, const char* field) {
  if (const std::optional<PauseKind> kind = agentkv::ParsePauseKind(name)) return *kind;
  throw NotOneOf(name, kAllPauseKinds, PauseKindName, field);
}

const char* TierName(kv::Tier tier) { return tier == kv::Tier::kHost ? "host" : "device"; }

std::optional<Step> DurationArg(std::optional<int64_t> value, const char* field) {
  return StepsArg(value, field);
}

void BindKvTypes(py::module_& m) {
  BindOptions(m);
  BindRetention(m);
  BindResults(m);
}

}  // namespace agentkv::python
