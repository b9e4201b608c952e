#include "agentkv/sim/instant_sources.h"

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "agentkv/base/bounds.h"
#include "agentkv/base/check.h"
#include "agentkv/kv/block_key.h"
#include "agentkv/sim/output_keys.h"
#include "agentkv/sim/pause_type.h"

namespace agentkv::sim {
namespace {

// Keys are namespaced by extra key, so one seed serves every source.
constexpr uint64_t kHashSeed = 0;
constexpr int64_t kSubagentIdStride = 1000;

const WekaRequest& RequestOf(const std::vector<WekaConversation>& conversations,
                             const AgenticScheduleEntry& e) {
  const WekaConversation& c = conversations[static_cast<size_t>(e.conversation)];
  const std::vector<WekaRequest>& requests =
      e.subagent < 0 ? c.requests : c.subagents[static_cast<size_t>(e.subagent)].requests;
  return requests[static_cast<size_t>(e.request)];
}

// The request after `e` of the same main agent or sub-agent, or nullptr for its last.
const WekaRequest* NextOf(const std::vector<WekaConversation>& conversations,
                          const AgenticScheduleEntry& e) {
  const WekaConversation& c = conversations[static_cast<size_t>(e.conversation)];
  const std::vector<WekaRequest>& requests =
      e.subagent < 0 ? c.requests : c.subagents[static_cast<size_t>(e.subagent)].requests;
  const auto next = static_cast<size_t>(e.request) + 1;
  return next < requests.size() ? &requests[next] : nullptr;
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

// What the agent of `e` does after its request `r` (the gap-aware order's hint), as the agent
// driver classifies it: the session ends after its last request; a main agent's next request
// that comes after a waited-for sub-agent completed waits for it; else ClassifyPause.
PauseKind NextPauseOf(const WekaConversation& conversation, const AgenticScheduleEntry& e,
                      const WekaRequest& r, const WekaRequest* next) {
  if (next == nullptr) return PauseKind::kSessionEnd;
  if (e.subagent < 0) {
    for (const WekaSubagent& sub : conversation.subagents) {
      if (sub.status != SubagentStatus::kAsyncLaunched && sub.completion > r.t &&
          sub.completion <= next->t) {
        return PauseKind::kSubagentWait;
      }
    }
  }
  return ClassifyPause(r, *next);
}

// Checks what the timeline needs: the inputs fit the id scheme and one cache.
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

}  // namespace

InstantWorkload OpenLoopInOrder(const std::vector<OpenLoopRequest>& requests,
                                int32_t tokens_per_block) {
  const kv::BlockKeyHasher hasher(kHashSeed);
  InstantWorkload workload;
  workload.tokens_per_block = tokens_per_block;
  workload.requests.reserve(requests.size());
  for (const OpenLoopRequest& r : requests) {
    InstantRequest request;
    request.time = r.arrival;
    request.keys = hasher.KeysFromBlockIds(r.hash_ids);
    request.options.prompt_tokens = r.prompt_tokens;
    workload.requests.push_back(std::move(request));
  }
  return workload;
}

ConversationId AgenticConversationId(int64_t index, int64_t subagent) {
  AGENTKV_CHECK(index >= 0 && index < kMaxAgenticConversations) << index;
  AGENTKV_CHECK(subagent >= -1 && subagent < kMaxSubagentsPerConversation) << subagent;
  if (subagent < 0) return ConversationId(index + 1);
  return ConversationId((index + 1) * kSubagentIdStride + subagent + 1);
}

std::vector<TimeNs> StaggeredStarts(int64_t n, TimeNs stagger) {
  AGENTKV_CHECK(n >= 0 && stagger.ns() >= 0);
  std::vector<TimeNs> starts;
  starts.reserve(static_cast<size_t>(n));
  // Saturating: a stagger of up to 1e6 s times thousands of files passes int64 nanoseconds.
  for (int64_t k = 0; k < n; ++k) starts.emplace_back(SaturatingMul(k, stagger.ns()));
  return starts;
}

std::vector<AgenticScheduleEntry> MergedSchedule(const std::vector<WekaConversation>& conversations,
                                                 std::span<const TimeNs> starts) {
  AGENTKV_CHECK(starts.size() == conversations.size());
  std::vector<AgenticScheduleEntry> schedule;
  for (size_t k = 0; k < conversations.size(); ++k) {
    const WekaConversation& c = conversations[k];
    const TimeNs start = starts[k];
    const auto add = [&](const std::vector<WekaRequest>& requests, TimeNs origin, int32_t sub) {
      for (size_t r = 0; r < requests.size(); ++r) {
        schedule.push_back(AgenticScheduleEntry{SaturatingAdd(origin, requests[r].t),
                                                static_cast<int32_t>(k), sub,
                                                static_cast<int32_t>(r), false});
      }
    };
    add(c.requests, start, -1);
    for (size_t j = 0; j < c.subagents.size(); ++j) {
      add(c.subagents[j].requests, SaturatingAdd(start, c.subagents[j].spawn()),
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

std::vector<AgenticScheduleEntry> BuildAgenticSchedule(
    const std::vector<WekaConversation>& conversations, TimeNs stagger) {
  AGENTKV_CHECK(stagger.ns() >= 0);
  return MergedSchedule(conversations,
                        StaggeredStarts(static_cast<int64_t>(conversations.size()), stagger));
}

StatusOr<InstantWorkload> MergedTimeline(const std::vector<WekaConversation>& conversations,
                                         std::span<const TimeNs> starts) {
  AGENTKV_RETURN_IF_ERROR(CheckConversations(conversations));
  auto schedule = std::make_shared<const std::vector<AgenticScheduleEntry>>(
      MergedSchedule(conversations, starts));
  const kv::BlockKeyHasher hasher(kHashSeed);
  InstantWorkload workload;
  workload.tokens_per_block = conversations.front().block_size;
  workload.requests.reserve(schedule->size());
  for (const AgenticScheduleEntry& e : *schedule) {
    const WekaRequest& r = RequestOf(conversations, e);
    const ConversationId id = AgenticConversationId(e.conversation, e.subagent);
    InstantRequest request;
    request.time = e.time;
    const uint64_t extra_key = static_cast<uint64_t>(e.conversation) + 1;
    request.keys = hasher.KeysFromBlockIds(r.hash_ids, extra_key);
    const WekaRequest* next = NextOf(conversations, e);
    request.options.next_pause =
        NextPauseOf(conversations[static_cast<size_t>(e.conversation)], e, r, next);
    if (next != nullptr) {
      request.output_keys = ReusedOutputKeys(
          r, *next, workload.tokens_per_block,
          [&](std::span<const uint64_t> ids) { return hasher.KeysFromBlockIds(ids, extra_key); });
    }
    request.options.prompt_tokens = r.input_tokens;
    request.options.session = SessionId(id.value());
    request.options.conversation = id;
    if (e.subagent >= 0) {
      request.options.parent_conversation = AgenticConversationId(e.conversation);
      request.options.parent_hint_authenticated = true;
    }
    request.ends_session = e.last_of_conversation;
    workload.requests.push_back(std::move(request));
  }
  workload.describe = [&conversations, schedule](size_t i) {
    return Describe(conversations, (*schedule)[i]);
  };
  return workload;
}

}  // namespace agentkv::sim
