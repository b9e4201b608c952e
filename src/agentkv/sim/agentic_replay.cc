// Invariants of one arm: requests run one at a time, so after each Release no block is held
// and every cached device block is evictable; no request has more blocks than the device
// (checked before replaying), so Reserve always finds room; the step counter only moves
// forward because the schedule is sorted by time. Any non-OK status from the cache therefore
// means a bug, reported as Internal, and CheckInvariants() runs once at the end of each arm.
// Every arm replays the same schedule and key chains, computed once, so arms differ only in
// the cache options and the closing of sessions.
#include "agentkv/sim/agentic_replay.h"

#include <algorithm>
#include <array>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>

#include "agentkv/base/bounds.h"
#include "agentkv/engine/kv_pool.h"
#include "agentkv/kv/block_key.h"
#include "agentkv/kv/kv_cache_manager.h"

namespace agentkv::sim {
namespace {

// Hash ids are namespaced by extra key, so one seed serves every arm and every file.
constexpr uint64_t kHashSeed = 0;
constexpr int64_t kMaxCapacityBlocks = int64_t{1} << 30;
constexpr int64_t kMaxSteps = int64_t{1} << 30;
constexpr int32_t kMaxNumTurns = 1 << 20;
constexpr int64_t kMaxMinIdleSteps = int64_t{1} << 40;
constexpr TimeNs kMaxStagger = TimeNs::Seconds(1e6);
constexpr TimeNs kMinStepInterval = TimeNs(1000);
constexpr TimeNs kMaxStepInterval = TimeNs::Seconds(1e6);
constexpr int64_t kSubagentIdStride = 1000;

constexpr std::array<AgenticArm, 6> kAllArms = {
    AgenticArm::kLru,       AgenticArm::kPerConversation, AgenticArm::kDemoteP1,
    AgenticArm::kDemoteP20, AgenticArm::kSessionRelease,  AgenticArm::kDemoteP1Release,
};

std::string Format(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

std::string Seconds(TimeNs t) { return Format(t.seconds()) + " s"; }

const WekaRequest& RequestOf(const std::vector<WekaConversation>& conversations,
                             const AgenticScheduleEntry& e) {
  const WekaConversation& c = conversations[static_cast<size_t>(e.conversation)];
  const std::vector<WekaRequest>& requests =
      e.subagent < 0 ? c.requests : c.subagents[static_cast<size_t>(e.subagent)].requests;
  return requests[static_cast<size_t>(e.request)];
}

std::string Describe(const std::vector<WekaConversation>& conversations,
                     const AgenticScheduleEntry& e) {
  const WekaConversation& c = conversations[static_cast<size_t>(e.conversation)];
  std::string where =
      c.source.empty() ? "conversation " + std::to_string(e.conversation) : c.source;
  if (e.subagent >= 0) {
    where += " sub-agent " + c.subagents[static_cast<size_t>(e.subagent)].agent_id;
  }
  return where + " request " + std::to_string(e.request);
}

// Checks what the options cannot: the inputs fit the id scheme and one cache.
Status CheckConversations(const std::vector<WekaConversation>& conversations) {
  if (conversations.empty()) return InvalidArgumentError("no conversations to replay");
  if (static_cast<int64_t>(conversations.size()) > kMaxAgenticConversations) {
    return InvalidArgumentError("at most " + std::to_string(kMaxAgenticConversations) +
                                " conversations can share one replay, got " +
                                std::to_string(conversations.size()));
  }
  for (const WekaConversation& c : conversations) {
    if (static_cast<int64_t>(c.subagents.size()) > kMaxSubagentsPerConversation) {
      return InvalidArgumentError(c.source + " has " + std::to_string(c.subagents.size()) +
                                  " sub-agents; at most " +
                                  std::to_string(kMaxSubagentsPerConversation) + " are supported");
    }
    if (c.block_size != conversations.front().block_size) {
      return InvalidArgumentError(
          "all traces of one replay need the same block_size: " + conversations.front().source +
          " has " + std::to_string(conversations.front().block_size) + ", " + c.source + " has " +
          std::to_string(c.block_size));
    }
  }
  return Status::Ok();
}

using Chains = std::vector<std::vector<kv::BlockKey>>;

// The key chain of every schedule entry, in schedule order.
Chains ChainKeys(const std::vector<WekaConversation>& conversations,
                 const std::vector<AgenticScheduleEntry>& schedule) {
  const kv::BlockKeyHasher hasher(kHashSeed);
  Chains chains;
  chains.reserve(schedule.size());
  for (const AgenticScheduleEntry& e : schedule) {
    const uint64_t extra_key = static_cast<uint64_t>(e.conversation) + 1;
    chains.push_back(hasher.KeysFromBlockIds(RequestOf(conversations, e).hash_ids, extra_key));
  }
  return chains;
}

int64_t CountUniqueKeys(const Chains& chains) {
  std::vector<kv::BlockKey> all;
  size_t total = 0;
  for (const std::vector<kv::BlockKey>& chain : chains) total += chain.size();
  all.reserve(total);
  for (const std::vector<kv::BlockKey>& chain : chains) {
    all.insert(all.end(), chain.begin(), chain.end());
  }
  std::sort(all.begin(), all.end());
  return std::unique(all.begin(), all.end()) - all.begin();
}

Status ReplayBug(AgenticArm arm, const std::vector<WekaConversation>& conversations,
                 const AgenticScheduleEntry& e, const char* call, const Status& status) {
  return InternalError("agentic replay, arm " + std::string(AgenticArmName(arm)) + ", " +
                       Describe(conversations, e) + ": " + call + " failed: " + status.ToString());
}

struct Timeline {
  std::vector<AgenticScheduleEntry> schedule;
  Chains chains;
  int64_t step_ns = 1;
};

StatusOr<AgenticArmResult> ReplayArm(AgenticArm arm, const kv::KvCacheOptions& base,
                                     const std::vector<WekaConversation>& conversations,
                                     const Timeline& timeline) {
  AGENTKV_ASSIGN_OR_RETURN(kv::KvCacheManager cache,
                           kv::KvCacheManager::Create(AgenticArmCacheOptions(arm, base)));
  const bool close_sessions = AgenticArmClosesSessions(arm);
  const int64_t tokens_per_block = cache.tokens_per_block();
  for (size_t i = 0; i < timeline.schedule.size(); ++i) {
    const AgenticScheduleEntry& e = timeline.schedule[i];
    const int64_t target_step = e.time.ns() / timeline.step_ns;
    if (cache.current_step().value() < target_step) {
      cache.AdvanceSteps(target_step - cache.current_step().value());
    }

    const std::span<const kv::BlockKey> keys(timeline.chains[i]);
    const ConversationId id = AgenticConversationId(e.conversation, e.subagent);
    kv::RequestOptions request_options;
    request_options.prompt_tokens = RequestOf(conversations, e).input_tokens;
    request_options.session = SessionId(id.value());
    request_options.conversation = id;
    if (e.subagent >= 0) {
      request_options.parent_conversation = AgenticConversationId(e.conversation);
      request_options.parent_hint_authenticated = true;
    }
    const RequestId request(static_cast<int64_t>(i));
    StatusOr<kv::PrefixMatch> match = cache.AddRequest(request, keys, request_options);
    if (!match.ok()) return ReplayBug(arm, conversations, e, "AddRequest", match.status());
    const auto blocks = static_cast<int64_t>(keys.size());
    if (Status s = cache.Reserve(request, blocks * tokens_per_block); !s.ok()) {
      return ReplayBug(arm, conversations, e, "Reserve", s);
    }
    if (Status s = cache.Commit(request, keys.subspan(static_cast<size_t>(match->total_blocks())));
        !s.ok()) {
      return ReplayBug(arm, conversations, e, "Commit", s);
    }
    if (Status s = cache.Release(request); !s.ok()) {
      return ReplayBug(arm, conversations, e, "Release", s);
    }
    // The freed tokens are counted in stats().tokens_freed_by_close.
    if (close_sessions && e.last_of_conversation) {
      static_cast<void>(cache.CloseSession(SessionId(id.value())));
    }
  }
  if (Status s = cache.CheckInvariants(); !s.ok()) {
    return InternalError("agentic replay, arm " + std::string(AgenticArmName(arm)) +
                         ": the cache broke an invariant: " + s.ToString());
  }
  AgenticArmResult result;
  result.arm = arm;
  result.stats = cache.stats();
  const int64_t hits = result.stats.matched_device_blocks + result.stats.matched_host_blocks;
  result.hit_ratio =
      result.stats.lookup_blocks == 0
          ? 0.0
          : static_cast<double>(hits) / static_cast<double>(result.stats.lookup_blocks);
  return result;
}

}  // namespace

std::span<const AgenticArm> AllAgenticArms() { return kAllArms; }

std::string_view AgenticArmName(AgenticArm arm) {
  switch (arm) {
    case AgenticArm::kLru:
      return "lru";
    case AgenticArm::kPerConversation:
      return "per_conversation";
    case AgenticArm::kDemoteP1:
      return "demote_p1";
    case AgenticArm::kDemoteP20:
      return "demote_p20";
    case AgenticArm::kSessionRelease:
      return "session_release";
    case AgenticArm::kDemoteP1Release:
      return "demote_p1+release";
  }
  return "unknown";
}

std::optional<AgenticArm> AgenticArmFromName(std::string_view name) {
  for (const AgenticArm arm : kAllArms) {
    if (AgenticArmName(arm) == name) return arm;
  }
  return std::nullopt;
}

kv::KvCacheOptions AgenticArmCacheOptions(AgenticArm arm, const kv::KvCacheOptions& base) {
  kv::KvCacheOptions options = base;
  options.block_reuse_policy = kv::BlockReusePolicy::kDefault;
  options.finished_subagent_priority.reset();
  options.session_close_mode = kv::SessionCloseMode::kDereference;
  switch (arm) {
    case AgenticArm::kLru:
      break;
    case AgenticArm::kPerConversation:
      options.block_reuse_policy = kv::BlockReusePolicy::kPerConversation;
      break;
    case AgenticArm::kDemoteP1:
    case AgenticArm::kDemoteP20:
    case AgenticArm::kDemoteP1Release:
      options.block_reuse_policy = kv::BlockReusePolicy::kPerConversation;
      options.finished_subagent_priority = arm == AgenticArm::kDemoteP20 ? 20 : 1;
      break;
    case AgenticArm::kSessionRelease:
      break;
  }
  if (AgenticArmClosesSessions(arm)) {
    options.session_close_mode = kv::SessionCloseMode::kRelease;
  }
  return options;
}

bool AgenticArmClosesSessions(AgenticArm arm) {
  return arm == AgenticArm::kSessionRelease || arm == AgenticArm::kDemoteP1Release;
}

ConversationId AgenticConversationId(int64_t index, int64_t subagent) {
  AGENTKV_CHECK(index >= 0 && index < kMaxAgenticConversations) << index;
  AGENTKV_CHECK(subagent >= -1 && subagent < kMaxSubagentsPerConversation) << subagent;
  if (subagent < 0) return ConversationId(index + 1);
  return ConversationId((index + 1) * kSubagentIdStride + subagent + 1);
}

std::vector<AgenticScheduleEntry> BuildAgenticSchedule(
    const std::vector<WekaConversation>& conversations, TimeNs stagger) {
  AGENTKV_CHECK(stagger.ns() >= 0);
  std::vector<AgenticScheduleEntry> schedule;
  for (size_t k = 0; k < conversations.size(); ++k) {
    const WekaConversation& c = conversations[k];
    // Saturating: a stagger of up to 1e6 s times thousands of files passes int64 nanoseconds.
    const TimeNs start(SaturatingMul(static_cast<int64_t>(k), stagger.ns()));
    const auto add = [&](const std::vector<WekaRequest>& requests, TimeNs origin, int32_t sub) {
      for (size_t r = 0; r < requests.size(); ++r) {
        schedule.push_back(AgenticScheduleEntry{SaturatingAdd(origin, requests[r].t),
                                                static_cast<int32_t>(k), sub,
                                                static_cast<int32_t>(r), false});
      }
    };
    add(c.requests, start, -1);
    for (size_t j = 0; j < c.subagents.size(); ++j) {
      add(c.subagents[j].requests, SaturatingAdd(start, c.subagents[j].spawn),
          static_cast<int32_t>(j));
    }
  }
  // -1 (main agent) sorts before every sub-agent index.
  std::sort(schedule.begin(), schedule.end(),
            [](const AgenticScheduleEntry& a, const AgenticScheduleEntry& b) {
              return std::tie(a.time, a.conversation, a.subagent, a.request) <
                     std::tie(b.time, b.conversation, b.subagent, b.request);
            });
  // Walking backwards, the first entry seen of each main agent or sub-agent is its last.
  std::set<std::pair<int32_t, int32_t>> seen;
  for (size_t i = schedule.size(); i-- > 0;) {
    if (seen.emplace(schedule[i].conversation, schedule[i].subagent).second) {
      schedule[i].last_of_conversation = true;
    }
  }
  return schedule;
}

Status AgenticReplayOptions::Validate() const {
  if (capacity_blocks.has_value()) {
    if (*capacity_blocks < 1 || *capacity_blocks > kMaxCapacityBlocks) {
      return InvalidArgumentError("capacity_blocks must be in [1, " +
                                  std::to_string(kMaxCapacityBlocks) + "], got " +
                                  std::to_string(*capacity_blocks));
    }
  } else if (!(capacity_fraction > 0.0 && capacity_fraction <= 1.0)) {  // NaN fails too.
    return InvalidArgumentError("capacity_fraction must be in (0, 1], got " +
                                Format(capacity_fraction));
  }
  if (host_blocks < 0 || host_blocks > kMaxCapacityBlocks) {
    return InvalidArgumentError("host_blocks must be in [0, " + std::to_string(kMaxCapacityBlocks) +
                                "], got " + std::to_string(host_blocks));
  }
  if (stagger.ns() < 0 || stagger > kMaxStagger) {
    return InvalidArgumentError("stagger must be in [0, 1e6] s, got " + Seconds(stagger));
  }
  if (step_interval < kMinStepInterval || step_interval > kMaxStepInterval) {
    return InvalidArgumentError("step_interval must be in [1e-06, 1e6] s, got " +
                                Seconds(step_interval));
  }
  if (max_num_turns < 1 || max_num_turns > kMaxNumTurns) {
    return InvalidArgumentError("max_num_turns must be in [1, " + std::to_string(kMaxNumTurns) +
                                "], got " + std::to_string(max_num_turns));
  }
  if (min_idle_steps < 0 || min_idle_steps > kMaxMinIdleSteps) {
    return InvalidArgumentError("min_idle_steps must be in [0, 2^40], got " +
                                std::to_string(min_idle_steps));
  }
  if (arms.empty()) return InvalidArgumentError("arms must not be empty");
  for (size_t i = 0; i < arms.size(); ++i) {
    if (std::find(arms.begin(), arms.begin() + static_cast<std::ptrdiff_t>(i), arms[i]) !=
        arms.begin() + static_cast<std::ptrdiff_t>(i)) {
      return InvalidArgumentError("arms lists " + std::string(AgenticArmName(arms[i])) + " twice");
    }
  }
  return Status::Ok();
}

StatusOr<AgenticReplayResult> RunAgenticReplay(const std::vector<WekaConversation>& conversations,
                                               const AgenticReplayOptions& options) {
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  AGENTKV_RETURN_IF_ERROR(CheckConversations(conversations));

  Timeline timeline;
  timeline.schedule = BuildAgenticSchedule(conversations, options.stagger);
  timeline.chains = ChainKeys(conversations, timeline.schedule);
  timeline.step_ns = options.step_interval.ns();

  AgenticReplayResult result;
  result.conversations = static_cast<int64_t>(conversations.size());
  for (const WekaConversation& c : conversations) {
    result.subagents += static_cast<int64_t>(c.subagents.size());
    result.requests += c.TotalRequests();
  }
  result.unique_blocks = CountUniqueKeys(timeline.chains);
  result.tokens_per_block = conversations.front().block_size;
  result.device_blocks =
      options.capacity_blocks.has_value()
          ? *options.capacity_blocks
          : engine::BlocksForFraction(options.capacity_fraction, result.unique_blocks);
  result.host_blocks = options.host_blocks;
  if (!timeline.schedule.empty()) {
    result.span = timeline.schedule.back().time;
    result.steps = result.span.ns() / timeline.step_ns;
  }
  if (result.steps > kMaxSteps) {
    return InvalidArgumentError("the replay spans " + Seconds(result.span) + ", " +
                                std::to_string(result.steps) + " steps of " +
                                Seconds(options.step_interval) + "; at most " +
                                std::to_string(kMaxSteps) + " steps are supported");
  }
  for (size_t i = 0; i < timeline.chains.size(); ++i) {
    const auto blocks = static_cast<int64_t>(timeline.chains[i].size());
    if (blocks > result.device_blocks) {
      return InvalidArgumentError("the device capacity of " + std::to_string(result.device_blocks) +
                                  " blocks is below the longest request (" +
                                  Describe(conversations, timeline.schedule[i]) + ": " +
                                  std::to_string(blocks) + " blocks); raise the capacity");
    }
  }

  kv::KvCacheOptions base;
  base.tokens_per_block = result.tokens_per_block;
  base.device_blocks = result.device_blocks;
  base.host_blocks = result.host_blocks;
  base.hash_seed = kHashSeed;
  base.max_num_turns = options.max_num_turns;
  base.finished_subagent_min_idle_iterations = options.min_idle_steps;

  std::optional<int64_t> lru_uncached;
  for (size_t a = 0; a < options.arms.size(); ++a) {
    AGENTKV_ASSIGN_OR_RETURN(AgenticArmResult arm,
                             ReplayArm(options.arms[a], base, conversations, timeline));
    if (options.on_arm_done) options.on_arm_done(a, arm);
    if (arm.arm == AgenticArm::kLru) lru_uncached = arm.stats.uncached_tokens;
    result.arms.push_back(std::move(arm));
  }
  if (lru_uncached.has_value() && *lru_uncached > 0) {
    for (AgenticArmResult& arm : result.arms) {
      arm.uncached_change_vs_lru_percent =
          100.0 * static_cast<double>(arm.stats.uncached_tokens - *lru_uncached) /
          static_cast<double>(*lru_uncached);
    }
  }
  return result;
}

}  // namespace agentkv::sim
