#include "python/src/kv_cache_bindings.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentkv/kv/kv_cache_manager.h"
#include "python/src/block_keys.h"
#include "python/src/errors.h"
#include "python/src/kv_types.h"

namespace agentkv::python {
namespace py = pybind11;
namespace {

using kv::KvCacheManager;

// The largest token count reserve accepts: beyond it the core's block arithmetic would
// overflow (no cache has that many blocks anyway).
constexpr int64_t kMaxReserveTokens = int64_t{1} << 62;

constexpr const char* kKvCacheDoc =
    "One engine's paged KV block cache: agentkv's C++ KvCacheManager (docs/KV_CACHE.md), the "
    "code the simulator, the engine emulator and the command line run. A request is admitted "
    "with the keys of its prompt's full blocks (add_request: it holds the cached prefix), "
    "grows (reserve), enters its computed blocks into the prefix index (commit) and ends "
    "(release); sessions, conversations, sub-agent demotion, priorities and the host tier act "
    "on what it leaves behind.\n\n"
    "Ids (request, session, conversation) are ints in the int64 range; block keys are ints in "
    "[0, 2**64) from keys_from_tokens or BlockKeyHasher; scheduler steps and clock times "
    "(nanoseconds) are ints. A failed call raises an agentkv.Error subclass with the C++ "
    "message and changes nothing.\n\n"
    "Threads: thread-compatible, like the C++ class. A KvCache is one engine's state: use it "
    "from one thread at a time. Every method holds the GIL for its whole call (none releases "
    "it), so calls from several threads are serialized rather than concurrent, but the order "
    "in which they interleave is the callers' to control. Distinct KvCache objects are "
    "independent. Deterministic: equal options and calls give equal results and events.";

// Each payload p as the `run` values p .. p + run - 1. InvalidArgumentError naming a payload
// whose run would pass the int64 range (no value is computed past it).
std::vector<int64_t> Runs(const std::vector<int64_t>& payloads, int64_t run) {
  if (run == 1) return payloads;
  std::vector<int64_t> out;
  out.reserve(payloads.size() * static_cast<size_t>(run));
  for (const int64_t p : payloads) {
    if (p > std::numeric_limits<int64_t>::max() - (run - 1)) {
      throw StatusError(InvalidArgumentError("payload " + std::to_string(p) + " has no run of " +
                                             std::to_string(run) + " within the int64 range"));
    }
    for (int64_t i = 0; i < run; ++i) out.push_back(p + i);
  }
  return out;
}

py::bytearray Int64Bytes(const std::vector<int64_t>& values) {
  return {reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int64_t)};
}

py::list EventTuples(const std::vector<kv::KvEvent>& events) {
  py::list out(events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    out[i] = py::make_tuple(kv::KvEventKindName(events[i].kind), events[i].key.value(),
                            TierName(events[i].tier), events[i].payload);
  }
  return out;
}

kv::Tier TierArg(const std::string& tier) {
  if (tier == "device") return kv::Tier::kDevice;
  if (tier == "host") return kv::Tier::kHost;
  throw StatusError(InvalidArgumentError("tier must be 'device' or 'host', got '" + tier + "'"));
}

kv::RequestOptions RequestOptionsFrom(int64_t prompt_tokens,
                                      std::optional<kv::RetentionConfig> retention,
                                      std::optional<int64_t> session,
                                      std::optional<int64_t> conversation,
                                      std::optional<int64_t> parent_conversation,
                                      bool parent_hint_authenticated, const std::string& next_pause,
                                      std::string next_tool, std::optional<int64_t> arrival_ns) {
  kv::RequestOptions o;
  o.prompt_tokens = prompt_tokens;
  o.retention = std::move(retention);
  if (session.has_value()) o.session = SessionId(*session);
  if (conversation.has_value()) o.conversation = ConversationId(*conversation);
  if (parent_conversation.has_value()) o.parent_conversation = ConversationId(*parent_conversation);
  o.parent_hint_authenticated = parent_hint_authenticated;
  o.next_pause = PauseKindArg(next_pause, "next_pause");
  o.next_tool = std::move(next_tool);
  if (arrival_ns.has_value()) o.arrival = TimeNs(*arrival_ns);
  return o;
}

void BindHandle(py::module_& m) {
  py::class_<kv::CommittedRetentionHandle>(
      m, "CommittedRetentionHandle",
      "A planned retention change for the committed blocks one conversation computed itself "
      "(KvCache.plan_committed_retention): never the prefix it reused, never a block another "
      "path extends. Names blocks by key; applying it re-checks each block, so a handle whose "
      "blocks were evicted since applies safely.")
      .def_property_readonly(
          "conversation",
          [](const kv::CommittedRetentionHandle& h) { return h.conversation().value(); })
      .def_property_readonly(
          "keys", [](const kv::CommittedRetentionHandle& h) { return KeysToList(h.keys()); },
          "The planned blocks' keys, deepest first, each once.")
      .def("__len__", [](const kv::CommittedRetentionHandle& h) { return h.keys().size(); })
      .def("__repr__", [](const kv::CommittedRetentionHandle& h) {
        return "CommittedRetentionHandle(conversation=" + std::to_string(h.conversation().value()) +
               ", blocks=" + std::to_string(h.keys().size()) + ")";
      });
}

// KvCache's options and keys.
void DefOptionsAndKeys(py::class_<KvCacheManager>& cls) {
  cls.def_property_readonly(
         "options", [](const KvCacheManager& c) { return c.options(); },
         "A copy of the options the cache was built with.")
      .def_property_readonly("tokens_per_block", &KvCacheManager::tokens_per_block)
      .def_property_readonly(
          "hasher", [](const KvCacheManager& c) { return c.hasher(); },
          "The BlockKeyHasher of the cache's hash_seed.")
      .def(
          "keys_from_tokens",
          [](const KvCacheManager& c, py::handle tokens, uint64_t extra_key,
             std::optional<uint64_t> parent, int64_t start, std::optional<int64_t> end) {
            if (parent.has_value() && extra_key != 0) {
              ThrowIfError(InvalidArgumentError(
                  "keys_from_tokens: give extra_key or parent, not both (a parent's chain is "
                  "in its namespace already)"));
            }
            const TokenIds ids(tokens, start, end);
            const kv::BlockKeyHasher hasher = c.hasher();
            const int32_t tpb = c.tokens_per_block();
            const kv::BlockKey from =
                parent.has_value() ? kv::BlockKey(*parent) : hasher.RootKey(extra_key);
            std::vector<kv::BlockKey> keys;
            if (ids.span().size() >= kReleaseGilTokens) {
              // Reads only the caller's buffer.
              const py::gil_scoped_release release;
              kv::BlockKeyHasher::AppendChainedKeys(ids.span(), tpb, from, keys);
            } else {
              kv::BlockKeyHasher::AppendChainedKeys(ids.span(), tpb, from, keys);
            }
            return KeysToList(keys);
          },
          py::arg("tokens"), py::arg("extra_key") = 0, py::arg("parent") = py::none(),
          py::arg("start") = 0, py::arg("end") = py::none(),
          "The keys of the full blocks of `tokens` under this cache's hash seed and block size "
          "(BlockKeyHasher.keys_from_tokens), as a list of ints. With `parent` (a block key), "
          "the chain continues after that block: keys_from_tokens(a + b) equals keys_from_tokens"
          "(a) + keys_from_tokens(b, parent=<a's last key>) when a is whole blocks. `start` and "
          "`end` hash only tokens[start:end] (end None: to the end) without copying the list "
          "first; InvalidArgumentError unless 0 <= start <= end <= len(tokens).")
      .def(
          "keys_from_block_ids",
          [](const KvCacheManager& c, py::handle block_ids, uint64_t extra_key) {
            return KeysToList(
                c.hasher().KeysFromBlockIds(ReadUint64s(block_ids, "block_ids"), extra_key));
          },
          py::arg("block_ids"), py::arg("extra_key") = 0,
          "The keys of a chain of precomputed block ids (BlockKeyHasher.keys_from_block_ids).");
}

// KvCache's requests.
void DefRequests(py::class_<KvCacheManager>& cls) {
  cls.def(
         "match", [](const KvCacheManager& c, py::handle keys) { return c.Match(ReadKeys(keys)); },
         py::arg("keys"),
         "How many leading blocks of the chain `keys` are on the device, and how many after "
         "those on the host, as a PrefixMatch. No side effects: recency and stats are "
         "unchanged.")
      .def(
          "match_payloads",
          [](const KvCacheManager& c, py::handle keys, int64_t run) {
            CheckRange(run, 1, 1 << 20, "run", "[1, 1048576]");
            const std::vector<kv::BlockKey> k = ReadKeys(keys);
            std::vector<int64_t> payloads;
            const kv::PrefixMatch m = c.Match(k, payloads);
            return py::make_tuple(m, Int64Bytes(Runs(payloads, run)));
          },
          py::arg("keys"), py::arg("run") = 1,
          "match, and the payloads of the matched device blocks in chain order: each payload p "
          "as the `run` consecutive values p, p + 1, ..., p + run - 1 (an engine page's slots "
          "from its first), as a bytearray of native int64 (torch.frombuffer(b, "
          "dtype=torch.int64) or memoryview(b).cast('q') reads it). Returns (PrefixMatch, "
          "bytearray).")
      .def(
          "add_request",
          [](KvCacheManager& c, int64_t request, py::handle prompt_keys, int64_t prompt_tokens,
             std::optional<kv::RetentionConfig> retention, std::optional<int64_t> session,
             std::optional<int64_t> conversation, std::optional<int64_t> parent_conversation,
             bool parent_hint_authenticated, const std::string& next_pause, std::string next_tool,
             std::optional<int64_t> arrival_ns) {
            const std::vector<kv::BlockKey> keys = ReadKeys(prompt_keys);
            const kv::RequestOptions options = RequestOptionsFrom(
                prompt_tokens, std::move(retention), session, conversation, parent_conversation,
                parent_hint_authenticated, next_pause, std::move(next_tool), arrival_ns);
            return ValueOrThrow(c.AddRequest(RequestId(request), keys, options));
          },
          py::arg("request"), py::arg("prompt_keys"), py::kw_only(), py::arg("prompt_tokens") = 0,
          py::arg("retention") = py::none(), py::arg("session") = py::none(),
          py::arg("conversation") = py::none(), py::arg("parent_conversation") = py::none(),
          py::arg("parent_hint_authenticated") = false, py::arg("next_pause") = "unknown",
          py::arg("next_tool") = "", py::arg("arrival_ns") = py::none(),
          "Starts `request` with the keys of its prompt's full blocks: holds the device-resident "
          "prefix and onboards the host-resident blocks after it while device blocks can be "
          "freed. Returns what the request now holds (PrefixMatch). prompt_tokens: the prompt's "
          "length (uncached_tokens counts the part no tier supplied; blocks from it on are "
          "decode blocks for `retention`). session: SGLang's session_id (its blocks stay "
          "referenced until close_session). conversation: the conversation this request is a "
          "turn of (per_conversation retention); parent_conversation with "
          "parent_hint_authenticated=True registers it as a sub-agent of that conversation. "
          "next_pause ('unknown', 'tool_call', 'subagent_wait', 'human_turn', 'session_end') "
          "and next_tool feed the gap_aware order; arrival_ns: when the request arrived "
          "(default: the cache clock). AlreadyExistsError if `request` is active; "
          "InvalidArgumentError for a negative prompt_tokens, a bad retention config or "
          "next_pause. On failure nothing changes.");
}

// KvCache's requests' blocks: growing, finishing and dropping a request's hold.
void DefRequestBlocks(py::class_<KvCacheManager>& cls) {
  cls.def(
         "reserve",
         [](KvCacheManager& c, int64_t request, int64_t total_tokens) {
           if (total_tokens > kMaxReserveTokens) {
             throw StatusError(InvalidArgumentError("total_tokens must be at most " +
                                                    std::to_string(kMaxReserveTokens) + ", got " +
                                                    std::to_string(total_tokens)));
           }
           ThrowIfError(c.Reserve(RequestId(request), total_tokens));
         },
         py::arg("request"), py::arg("total_tokens"),
         "Makes `request` hold enough blocks for `total_tokens` tokens, allocating the missing "
         "ones and evicting (lowest priority first, least recently used within a priority) "
         "when the device is full. Holding more already is a no-op. ResourceExhaustedError, "
         "with nothing changed, when the device cannot free enough blocks; NotFoundError for "
         "an unknown request.")
      .def(
          "commit",
          [](KvCacheManager& c, int64_t request, py::handle keys, py::handle payloads) {
            const std::vector<kv::BlockKey> k = ReadKeys(keys);
            if (payloads.is_none()) {
              ThrowIfError(c.Commit(RequestId(request), k));
              return;
            }
            ThrowIfError(c.Commit(RequestId(request), k, ReadInt64s(payloads, "payloads")));
          },
          py::arg("request"), py::arg("keys"), py::arg("payloads") = py::none(),
          "Enters the request's next len(keys) full blocks into the prefix index, after those "
          "already committed (the first call starts after the matched prefix, whose keys are "
          "not repeated). A key already cached is shared. FailedPreconditionError when the "
          "request holds fewer blocks; NotFoundError for an unknown request; "
          "AlreadyExistsError when a key is cached under a different parent (the keys before "
          "it stay committed). `payloads` (ints, one per key): each block's payload, an int64 "
          "the cache keeps for the caller (an engine page's first slot), returned by "
          "match_payloads and carried by every event of the block; a block already cached on "
          "the device keeps its own. InvalidArgumentError, with nothing committed, unless "
          "len(payloads) == len(keys).")
      .def(
          "release",
          [](KvCacheManager& c, int64_t request) { ThrowIfError(c.Release(RequestId(request))); },
          py::arg("request"),
          "Ends a finished `request`: applies its retention config, drops its holds (deepest "
          "block first) and frees its uncommitted blocks; its open session references what it "
          "committed and its conversation records the turn. NotFoundError for an unknown "
          "request.")
      .def(
          "release_unfinished",
          [](KvCacheManager& c, int64_t request) {
            ThrowIfError(c.ReleaseUnfinished(RequestId(request)));
          },
          py::arg("request"),
          "release for a request that did not finish (retracted, aborted): its next_pause is "
          "ignored. NotFoundError for an unknown request.")
      .def(
          "evict",
          [](KvCacheManager& c, int64_t blocks) {
            CheckRange(blocks, 0, std::numeric_limits<int64_t>::max(), "blocks", "[0, 2**63)");
            return c.EvictDevice(blocks);
          },
          py::arg("blocks"),
          "Evicts up to `blocks` unheld device blocks beyond those free, in the cache's own "
          "order, exactly as a reserve that needed that much room would (offloads, cascades, "
          "events): for an engine whose own allocator asks the cache for room. Returns the "
          "device blocks freed, at least min(blocks, evictable). InvalidArgumentError for a "
          "negative count.")
      .def_property_readonly("active_requests", &KvCacheManager::active_requests,
                             "Requests added and not released.");
}

// KvCache's priorities and tiers.
void DefPrioritiesAndTiers(py::class_<KvCacheManager>& cls) {
  cls.def(
         "set_priority",
         [](KvCacheManager& c, uint64_t key, int64_t priority, std::optional<int64_t> duration,
            bool evict_first) {
           CheckRange(priority, kv::kMinPriority, kv::kMaxPriority, "priority", "[0, 100]");
           ThrowIfError(c.SetPriority(kv::BlockKey(key), static_cast<kv::Priority>(priority),
                                      DurationArg(duration, "duration"), evict_first));
         },
         py::arg("key"), py::arg("priority"), py::arg("duration") = py::none(),
         py::arg("evict_first") = false,
         "Sets the retention priority of the cached block `key` (0: evicted first .. 100) and "
         "re-queues it (to the front of its priority when evict_first). `duration` scheduler "
         "steps later it reverts to the default. NotFoundError when not cached; "
         "InvalidArgumentError for a priority outside [0, 100] or a non-positive duration.")
      .def(
          "get_priority",
          [](const KvCacheManager& c, uint64_t key) {
            return ValueOrThrow(c.GetPriority(kv::BlockKey(key)));
          },
          py::arg("key"), "The priority of the cached block `key`; NotFoundError when not cached.")
      .def(
          "find_tier",
          [](const KvCacheManager& c, uint64_t key) -> std::optional<std::string> {
            const std::optional<kv::Tier> tier = c.FindTier(kv::BlockKey(key));
            if (!tier.has_value()) return std::nullopt;
            return std::string(TierName(*tier));
          },
          py::arg("key"), "'device' or 'host' for a cached block `key`, else None.")
      .def(
          "set_payload",
          [](KvCacheManager& c, uint64_t key, int64_t payload) {
            ThrowIfError(c.SetPayload(kv::BlockKey(key), payload));
          },
          py::arg("key"), py::arg("payload"),
          "Sets the payload of the cached block `key` (either tier: where the caller moved its "
          "bytes). NotFoundError when not cached.")
      .def(
          "payload",
          [](const KvCacheManager& c, uint64_t key) {
            return ValueOrThrow(c.Payload(kv::BlockKey(key)));
          },
          py::arg("key"),
          "The payload of the cached block `key` (0 when none was given); NotFoundError when "
          "not cached.")
      .def(
          "cached_payloads",
          [](const KvCacheManager& c, const std::string& tier) {
            py::list out;
            for (const auto& [key, payload] : c.CachedPayloads(TierArg(tier))) {
              out.append(py::make_tuple(key.value(), payload));
            }
            return out;
          },
          py::arg("tier") = "device",
          "Every cached block of `tier` ('device' or 'host') as a (key, payload) pair, in no "
          "particular order (a scan of the whole pool: for checks and dumps).")
      .def(
          "offload_chain",
          [](KvCacheManager& c, py::handle keys) { return c.OffloadChain(ReadKeys(keys)); },
          py::arg("keys"),
          "Stall offload: moves the unheld, unshared device blocks of the chain `keys` to the "
          "host tier ahead of demand, deepest first, only into free host room. Returns the "
          "blocks moved (stats: stall_offloaded_blocks).")
      .def(
          "prefetch_chain",
          [](KvCacheManager& c, py::handle keys, int64_t max_blocks) {
            CheckRange(max_blocks, 0, std::numeric_limits<int64_t>::max(), "max_blocks",
                       "[0, 2**63)");
            return c.PrefetchChain(ReadKeys(keys), max_blocks);
          },
          py::arg("keys"), py::arg("max_blocks"),
          "Loads up to `max_blocks` host blocks of the chain `keys` back to the device ahead of "
          "its next request. Returns the blocks moved (stats: prefetched_blocks). "
          "InvalidArgumentError for a negative max_blocks.");
}

// KvCache's sessions, conversations, sub-agents.
void DefSessions(py::class_<KvCacheManager>& cls) {
  cls.def(
         "close_session",
         [](KvCacheManager& c, int64_t session) { return c.CloseSession(SessionId(session)); },
         py::arg("session"),
         "Closes `session` (SGLang's /close_session). In session_close_mode 'release' first "
         "frees every block only this session references, no running request holds and no "
         "other cached block extends; both modes then drop its references, so its blocks are "
         "the first eviction candidates. Idempotent: an unknown or closed id returns 0 and is "
         "remembered. Returns the tokens freed.")
      .def(
          "session_open",
          [](const KvCacheManager& c, int64_t session) {
            return c.SessionOpen(SessionId(session));
          },
          py::arg("session"), "Whether `session` is open (a request opened it, none closed it).")
      .def(
          "plan_committed_retention",
          [](const KvCacheManager& c, int64_t conversation) {
            return c.PlanCommittedRetention(ConversationId(conversation));
          },
          py::arg("conversation"),
          "A CommittedRetentionHandle for the committed blocks `conversation` computed itself, "
          "from its retained turn records (block_reuse_policy 'per_conversation'); empty for an "
          "unknown conversation.")
      .def(
          "apply_committed_retention",
          [](KvCacheManager& c, const kv::CommittedRetentionHandle& handle, int64_t priority) {
            CheckRange(priority, kv::kMinPriority, kv::kMaxPriority, "priority", "[0, 100]");
            std::vector<kv::BlockKey> applied;
            c.ApplyCommittedRetention(handle, static_cast<kv::Priority>(priority), &applied);
            return KeysToList(applied);
          },
          py::arg("handle"), py::arg("priority"),
          "Gives `priority` to the planned blocks that are still cached and still not extended "
          "by another path, re-queueing each. Returns the keys changed. InvalidArgumentError "
          "for a priority outside [0, 100].")
      .def(
          "demote_finished_subagents",
          [](KvCacheManager& c, int64_t parent) {
            return c.DemoteFinishedSubagents(ConversationId(parent));
          },
          py::arg("parent"),
          "The parent conversation `parent` returned through another engine: demotes the "
          "finished, idle children registered here for it, as a request of `parent` admitted "
          "here would, and admits nothing. Returns the children demoted; 0 when demotion is "
          "off (finished_subagent_priority None) or `parent` has no child here.");
}

// KvCache's time.
void DefTime(py::class_<KvCacheManager>& cls) {
  cls.def(
         "step", [](KvCacheManager& c) { c.Step(); },
         "Advances the scheduler step by one and reverts expired retention priorities.")
      .def(
          "advance_steps",
          [](KvCacheManager& c, int64_t n) {
            CheckRange(n, 0, kMaxSteps - c.current_step().value(), "n",
                       "[0, 2**62 - current_step]");
            c.AdvanceSteps(n);
          },
          py::arg("n"),
          "Advances by `n` steps at once, exactly as n calls to step() would. "
          "InvalidArgumentError for a negative n.")
      .def_property_readonly(
          "current_step", [](const KvCacheManager& c) { return c.current_step().value(); },
          "The scheduler step (starts at 0).")
      .def(
          "set_clock",
          [](KvCacheManager& c, int64_t now_ns) {
            if (now_ns < c.clock().ns()) {
              throw StatusError(InvalidArgumentError("set_clock: now_ns " + std::to_string(now_ns) +
                                                     " is before the clock " +
                                                     std::to_string(c.clock().ns())));
            }
            c.SetClock(TimeNs(now_ns));
          },
          py::arg("now_ns"),
          "Sets the caller's clock (nanoseconds, simulated or wall time), read by "
          "finished_subagent_min_idle_s and the gap_aware order. InvalidArgumentError when "
          "now_ns is before the clock.")
      .def(
          "advance_clock",
          [](KvCacheManager& c, int64_t now_ns) { c.AdvanceClock(TimeNs(now_ns)); },
          py::arg("now_ns"), "Sets the clock to now_ns unless that is earlier (then ignored).")
      .def_property_readonly(
          "clock_ns", [](const KvCacheManager& c) { return c.clock().ns(); },
          "The caller's clock in nanoseconds (starts at 0).");
}

// KvCache's state.
void DefState(py::class_<KvCacheManager>& cls) {
  cls.def(
         "reset", [](KvCacheManager& c) { ThrowIfError(c.Reset()); },
         "Removes every cached block from both tiers (counters are kept). "
         "FailedPreconditionError while any request is active.")
      .def("stats", &KvCacheManager::stats, "A KvCacheStats snapshot: counters and gauges.")
      .def(
          "take_events",
          [](KvCacheManager& c, const std::optional<std::vector<std::string>>& kinds,
             bool as_tuples) -> py::object {
            std::vector<kv::KvEvent> events = TakeEvents(c, kinds);
            if (!as_tuples) return py::cast(std::move(events));
            return EventTuples(events);
          },
          py::arg("kinds") = py::none(), py::arg("as_tuples") = false,
          "The KvEvents recorded since the last call, oldest first (empty unless "
          "event_log_capacity > 0; the log keeps the newest events, dropped_events counts the "
          "rest). With `kinds` (event kind names), only those are returned; the others are "
          "taken too and discarded before any becomes a Python object. With as_tuples, each "
          "event is a (kind, key, tier, payload) tuple instead of a KvEvent (cheaper to build "
          "and read).")
      .def(
          "take_dropped_payloads",
          [](KvCacheManager& c, const std::optional<std::vector<std::string>>& kinds, int64_t run) {
            CheckRange(run, 1, 1 << 20, "run", "[1, 1048576]");
            const std::vector<kv::KvEvent> events = TakeEvents(c, kinds);
            std::vector<int64_t> payloads;
            payloads.reserve(events.size());
            for (const kv::KvEvent& e : events) {
              const bool drop =
                  e.tier == kv::Tier::kDevice &&
                  (e.kind == kv::KvEventKind::kDropped || e.kind == kv::KvEventKind::kReleased) &&
                  e.payload >= 0;
              if (!drop) return py::make_tuple(py::bytearray(), EventTuples(events));
              payloads.push_back(e.payload);
            }
            return py::make_tuple(Int64Bytes(Runs(payloads, run)), py::list());
          },
          py::arg("kinds") = py::none(), py::arg("run") = 1,
          "take_events(kinds) for a caller that frees what leaves the device: when every event "
          "is a device block 'dropped' or 'released' whose payload is >= 0, returns (their "
          "payloads as match_payloads gives them, runs of `run`; []); else returns (an empty "
          "bytearray, every event as a (kind, key, tier, payload) tuple, oldest first) for the "
          "caller to follow. Either way the events are taken.")
      .def_property_readonly("dropped_events", &KvCacheManager::dropped_events,
                             "Events the bounded log lost.")
      .def(
          "check_invariants", [](const KvCacheManager& c) { ThrowIfError(c.CheckInvariants()); },
          "Verifies every internal invariant of the cache; InternalError naming the first "
          "broken one. For tests: call it after each mutation.")
      .def("metadata_bytes", &KvCacheManager::MetadataBytes,
           "Bytes of metadata the cache allocated for its blocks.")
      .def("__repr__", [](const KvCacheManager& c) {
        const kv::KvCacheOptions& o = c.options();
        return "KvCache(device_blocks=" + std::to_string(o.device_blocks) +
               ", host_blocks=" + std::to_string(o.host_blocks) +
               ", tokens_per_block=" + std::to_string(o.tokens_per_block) +
               ", active_requests=" + std::to_string(c.active_requests()) + ")";
      });
}

}  // namespace

std::vector<kv::KvEvent> TakeEvents(KvCacheManager& cache,
                                    const std::optional<std::vector<std::string>>& kinds) {
  if (kinds.has_value()) {
    for (const std::string& name : *kinds) {
      bool known = false;
      for (int k = 0; k <= static_cast<int>(kv::KvEventKind::kCleared); ++k) {
        known = known || name == kv::KvEventKindName(static_cast<kv::KvEventKind>(k));
      }
      if (!known) ThrowIfError(InvalidArgumentError("kinds: unknown event kind '" + name + "'"));
    }
  }
  std::vector<kv::KvEvent> events = cache.TakeEvents();
  if (!kinds.has_value()) return events;
  std::erase_if(events, [&kinds](const kv::KvEvent& event) {
    const std::string_view name = kv::KvEventKindName(event.kind);
    return std::find(kinds->begin(), kinds->end(), name) == kinds->end();
  });
  return events;
}

void BindKvCache(py::module_& m) {
  BindHandle(m);
  py::class_<KvCacheManager> cls(m, "KvCache", kKvCacheDoc);
  cls.def(py::init([](const py::object& options, const py::kwargs& fields) {
            return std::make_unique<KvCacheManager>(
                ValueOrThrow(KvCacheManager::Create(OptionsFromPython(options, fields))));
          }),
          py::arg("options") = py::none(),
          "An empty cache with `options` (a KvCacheOptions; None: the defaults), each keyword "
          "argument overriding the option of that name, e.g. KvCache(device_blocks=1024, "
          "tokens_per_block=16). InvalidArgumentError naming the first field out of range; "
          "TypeError for a name that is no option.");
  DefOptionsAndKeys(cls);
  DefRequests(cls);
  DefRequestBlocks(cls);
  DefPrioritiesAndTiers(cls);
  DefSessions(cls);
  DefTime(cls);
  DefState(cls);
}

}  // namespace agentkv::python
