// SubagentDemotion: parent/child registry, idle tracking, demotion and restoration.
//
// Invariants (CheckInvariants verifies them):
//  - A conversation listed as a child of P has parent P, is listed once, and is not P.
//  - in_flight >= 0.
//  - A conversation not demoted holds an empty demotion handle.
//  - Nothing is demoted while demotion is off.
#include "agentkv/kv/subagent_demotion.h"

#include <algorithm>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace agentkv::kv {

namespace {

// The priority demoted blocks get: finished_subagent_priority, raised to the offload threshold
// when the option asks for it and an eviction could offload (a host tier, a threshold that is
// a priority).
std::optional<Priority> DemotionPriority(const KvCacheOptions& options) {
  std::optional<Priority> p = options.finished_subagent_priority;
  if (p.has_value() && options.finished_subagent_offloadable && options.host_blocks > 0 &&
      options.offload_threshold <= kMaxPriority) {
    p = std::max(*p, options.offload_threshold);
  }
  return p;
}

}  // namespace

SubagentDemotion::SubagentDemotion(const KvCacheOptions& options)
    : default_priority_(options.default_priority),
      finished_priority_(DemotionPriority(options)),
      min_idle_(options.finished_subagent_min_idle_iterations) {
  if (options.finished_subagent_min_idle_s.has_value()) {
    min_idle_time_ = TimeNs::Seconds(*options.finished_subagent_min_idle_s);
  }
}

void SubagentDemotion::Admit(ConversationId conversation, std::optional<ConversationId> parent,
                             bool parent_authenticated, agentkv::Step now, TimeNs now_time,
                             const ConversationRetention& records, BlockCache& cache) {
  internal::SubagentState& conv = conversations_[conversation];
  ++conv.in_flight;
  if (parent.has_value()) {
    if (!parent_authenticated) {
      ++counters_.unauthenticated_parent_hints;
    } else if (!conv.parent.has_value() && *parent != conversation) {
      conv.parent = *parent;
      conversations_[*parent].children.push_back(conversation);
    }
  }
  if (conv.demoted) {
    // A demoted child that comes back gets the default priority again on every block that
    // was demoted and is still cached, whatever has extended it since.
    for (const BlockKey key : conv.demotion.keys()) {
      if (const std::optional<BlockId> b = cache.Find(key)) {
        cache.SetBlockPriority(*b, default_priority_);
      }
    }
    conv.demoted = false;
    conv.demotion = CommittedRetentionHandle();
    ++counters_.restored_children;
  }
  if (finished_priority_.has_value() && !conv.children.empty()) {
    DemoteFinishedChildren(conv, now, now_time, records, cache);
  }
}

void SubagentDemotion::EndTurn(ConversationId conversation, agentkv::Step now, TimeNs now_time) {
  internal::SubagentState& conv = conversations_.at(conversation);
  --conv.in_flight;
  conv.last_context_end = now;
  conv.last_context_end_time = now_time;
}

int64_t SubagentDemotion::DeliverParentReturn(ConversationId parent, agentkv::Step now,
                                              TimeNs now_time, const ConversationRetention& records,
                                              BlockCache& cache) {
  if (!finished_priority_.has_value()) return 0;
  auto it = conversations_.find(parent);
  if (it == conversations_.end() || it->second.children.empty()) return 0;
  return DemoteFinishedChildren(it->second, now, now_time, records, cache);
}

bool SubagentDemotion::IdleLongEnough(const internal::SubagentState& child, agentkv::Step now,
                                      TimeNs now_time) const {
  if (min_idle_time_.has_value()) return now_time - child.last_context_end_time >= *min_idle_time_;
  return now - child.last_context_end >= min_idle_;
}

int64_t SubagentDemotion::DemoteFinishedChildren(const internal::SubagentState& parent,
                                                 agentkv::Step now, TimeNs now_time,
                                                 const ConversationRetention& records,
                                                 BlockCache& cache) {
  int64_t demoted_now = 0;
  for (const ConversationId child_id : parent.children) {
    internal::SubagentState& child = conversations_.at(child_id);
    if (child.demoted || child.in_flight > 0) continue;
    if (!IdleLongEnough(child, now, now_time)) continue;
    // The child keeps a handle of exactly the blocks demoted, to restore them if it returns.
    std::vector<BlockKey> demoted;
    counters_.demoted_blocks += ConversationRetention::Apply(records.Plan(child_id, cache),
                                                             *finished_priority_, cache, &demoted);
    child.demotion = CommittedRetentionHandle(child_id, std::move(demoted));
    child.demoted = true;
    ++counters_.demoted_children;
    ++demoted_now;
  }
  return demoted_now;
}

Status SubagentDemotion::CheckInvariants() const {
  const auto broken = [](const std::string& what) {
    return InternalError("invariant broken: " + what);
  };
  for (const auto& [id, conv] : conversations_) {
    if (conv.in_flight < 0) return broken("a conversation has negative requests in flight");
    if (!conv.demoted && !conv.demotion.empty()) return broken("a demotion kept after restore");
    if (conv.demoted && !finished_priority_.has_value()) return broken("demoted while off");
    std::unordered_set<ConversationId> listed;
    for (const ConversationId child : conv.children) {
      if (child == id || !listed.insert(child).second) return broken("a child listed twice");
      auto c = conversations_.find(child);
      if (c == conversations_.end() || c->second.parent != id) {
        return broken("a listed child names another parent");
      }
    }
  }
  return Status::Ok();
}

}  // namespace agentkv::kv
