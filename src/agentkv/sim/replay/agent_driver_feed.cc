// The driver owns the replay of the workload; this feed only sizes the arm for it, builds the
// oracle's view of its future, and reads its result after the loop. Conversation k's blocks
// live in namespace k + 1, as the driver keys them.
#include "agentkv/sim/replay/agent_driver_feed.h"

#include <algorithm>
#include <string>
#include <utility>

#include "agentkv/base/bounds.h"
#include "agentkv/base/check.h"
#include "agentkv/sim/replay/arm_summary.h"

namespace agentkv::sim {
namespace {

std::string Str(size_t value) { return std::to_string(value); }

// Whether `r` of a conversation with `block_size`-token blocks fits one engine.
bool Fits(const WekaRequest& r, int32_t block_size, int64_t device_blocks) {
  return FitsOneEngine(SubmittedPromptTokens(r.input_tokens, r.hash_ids.size(), block_size),
                       std::max<int64_t>(1, r.output_tokens), device_blocks, block_size);
}

}  // namespace

// The oracle arm's view of the agent driver: agent (workload_index, subagent) is the ranking's
// agent agent_of[workload_index][subagent + 1].
class AgentDriverFeed::OracleProgress final : public AgentProgressHook {
 public:
  OracleProgress(FleetNextUse* ranking, const std::vector<std::vector<int32_t>>& agent_of)
      : ranking_(ranking), agent_of_(agent_of) {}
  void Submitted(int32_t workload_index, int32_t subagent, int32_t request, TimeNs now) override {
    ranking_->Submitted(AgentOf(workload_index, subagent), request, now);
  }
  void Completed(int32_t workload_index, int32_t subagent, int32_t request,
                 TimeNs next_ready) override {
    ranking_->Completed(AgentOf(workload_index, subagent), request, next_ready);
  }

 private:
  int32_t AgentOf(int32_t workload_index, int32_t subagent) const {
    const int32_t agent =
        agent_of_[static_cast<size_t>(workload_index)][static_cast<size_t>(subagent + 1)];
    AGENTKV_CHECK_GE(agent, 0);
    return agent;
  }
  FleetNextUse* ranking_;
  const std::vector<std::vector<int32_t>>& agent_of_;
};

AgentDriverFeed::AgentDriverFeed(const AgenticWorkload& workload, const ReplayOptions& options)
    : owned_source_(std::make_unique<const InMemoryConversations>(workload)),
      source_(*owned_source_),
      workload_(&workload),
      options_(options),
      tokens_per_block_(
          workload.conversations.empty() ? 0 : workload.conversations.front().block_size) {}

AgentDriverFeed::AgentDriverFeed(const ConversationSource& source, const ReplayOptions& options)
    : source_(source),
      workload_(source.in_memory()),
      options_(options),
      tokens_per_block_(source.size() == 0 ? 0 : source.Load(0)->block_size) {}

AgentDriverFeed::~AgentDriverFeed() = default;

Status AgentDriverFeed::Validate() const {
  if (source_.size() == 0) return InvalidArgumentError("the workload has no conversations");
  // A streamed source checks its token counts as it is built (StreamSyntheticAgentic).
  if (workload_ == nullptr) return Status::Ok();
  // The readers and generators keep token counts within their bound; a workload built by hand
  // must too, so that the report's sums over requests cannot overflow.
  for (size_t k = 0; k < workload_->conversations.size(); ++k) {
    const WekaConversation& c = workload_->conversations[k];
    const auto check = [&](const WekaRequest& r, const std::string& name) {
      AGENTKV_RETURN_IF_ERROR(CheckTokens(name + ".input_tokens", r.input_tokens));
      return CheckTokens(name + ".output_tokens", r.output_tokens);
    };
    for (size_t i = 0; i < c.requests.size(); ++i) {
      AGENTKV_RETURN_IF_ERROR(
          check(c.requests[i], "conversations[" + Str(k) + "].requests[" + Str(i) + "]"));
    }
    for (const WekaSubagent& sub : c.subagents) {
      for (size_t i = 0; i < sub.requests.size(); ++i) {
        AGENTKV_RETURN_IF_ERROR(check(sub.requests[i], "conversations[" + Str(k) + "] sub-agent " +
                                                           sub.agent_id + " requests[" + Str(i) +
                                                           "]"));
      }
    }
  }
  return Status::Ok();
}

int32_t AgentDriverFeed::tokens_per_block() const { return tokens_per_block_; }

int64_t AgentDriverFeed::InfiniteCapacityBlocks(int64_t device_blocks) const {
  const int32_t tokens_per_block = this->tokens_per_block();
  InfiniteCapacityCount count(tokens_per_block);
  for (int64_t k = 0; k < source_.size(); ++k) {
    const std::shared_ptr<const WekaConversation> held = source_.Load(k);
    const WekaConversation& c = *held;
    auto add = [&](const WekaRequest& r) {
      if (!FitsOneEngine(SubmittedPromptTokens(r.input_tokens, r.hash_ids.size(), c.block_size),
                         std::max<int64_t>(1, r.output_tokens), device_blocks, tokens_per_block)) {
        return;
      }
      count.Add(r.hash_ids, static_cast<uint64_t>(k) + 1,
                r.output_tokens + r.input_tokens % tokens_per_block);
    };
    for (const WekaRequest& r : c.requests) add(r);
    for (const WekaSubagent& s : c.subagents) {
      if (!IsReplayed(c, s, options_.subagent_models)) continue;
      for (const WekaRequest& r : s.requests) add(r);
    }
  }
  return count.Blocks();
}

std::unique_ptr<FleetNextUse> AgentDriverFeed::Future(const kv::BlockKeyHasher& hasher,
                                                      int64_t device_blocks, TimeNs origin) {
  auto ranking = std::make_unique<FleetNextUse>();
  agent_of_.assign(static_cast<size_t>(source_.size()), {});
  for (size_t k = 0; k < agent_of_.size(); ++k) {
    const std::shared_ptr<const WekaConversation> held = source_.Load(static_cast<int64_t>(k));
    const WekaConversation& c = *held;
    const uint64_t namespace_id = static_cast<uint64_t>(k) + 1;
    const auto add = [&](const std::vector<WekaRequest>& requests, TimeNs start) {
      std::vector<std::vector<kv::BlockKey>> keys;
      std::vector<TimeNs> offsets;
      for (size_t j = 0; j < requests.size(); ++j) {
        const WekaRequest& r = requests[j];
        // A request no engine can hold is rejected: it looks nothing up.
        keys.push_back(
            Fits(r, c.block_size, device_blocks)
                ? DriverKeysOf(hasher, options_.shared_prefix_ids, r.hash_ids, namespace_id)
                : std::vector<kv::BlockKey>{});
        offsets.push_back(
            j == 0 ? TimeNs(0)
                   : SaturatingAdd(offsets.back(),
                                   SaturatingAdd(RecordedApiTime(requests[j - 1]),
                                                 RecordedGap(requests[j - 1], requests[j]))));
      }
      const TimeNs first = requests.empty() ? start : SaturatingAdd(start, requests.front().t);
      return ranking->AddAgent(std::move(keys), std::move(offsets), first);
    };
    const TimeNs start = SaturatingAdd(origin, source_.start(static_cast<int64_t>(k)));
    agent_of_[k].assign(c.subagents.size() + 1, -1);
    agent_of_[k][0] = add(c.requests, start);
    for (size_t j = 0; j < c.subagents.size(); ++j) {
      const WekaSubagent& sub = c.subagents[j];
      if (!IsReplayed(c, sub, options_.subagent_models)) continue;
      agent_of_[k][j + 1] = add(sub.requests, SaturatingAdd(start, sub.spawn()));
    }
  }
  return ranking;
}

Status AgentDriverFeed::Attach(ArmFleet& arm_fleet, RequestTally& tally) {
  if (arm_fleet.oracle != nullptr) {
    oracle_progress_ = std::make_unique<OracleProgress>(arm_fleet.oracle.get(), agent_of_);
  }
  // A session is a main agent with its sub-agents: conversation k's main agent is the k-th
  // (Sessions checks it), so k is the session's index.
  const AgentDriverOptions driver_options{
      .shared_prefix_ids = options_.shared_prefix_ids,
      .subagent_models = options_.subagent_models,
      .subagent_routing = options_.subagent_routing,
      .progress_hook = oracle_progress_.get(),
      .keep_request_log = false,
      .on_request_completed = [&tally](const DriverCompletion& done) {
        tally.Add(RequestView{.gateway = &done.gateway,
                              .engine = &done.engine,
                              .agentic = true,
                              .pause_before = done.pause_before},
                  static_cast<size_t>(done.workload_index));
      }};
  AGENTKV_ASSIGN_OR_RETURN(driver_, AgentDriver::Create(&arm_fleet.loop, arm_fleet.gateway.get(),
                                                        &source_, driver_options));
  AGENTKV_RETURN_IF_ERROR(driver_->Start());
  total_requests_ = source_.ReplayedRequests(options_.subagent_models);
  return Status::Ok();
}

double AgentDriverFeed::CompletedFraction() const {
  return total_requests_ > 0 ? static_cast<double>(driver_->result().requests_completed) /
                                   static_cast<double>(total_requests_)
                             : 1.0;
}

StatusOr<FedCounts> AgentDriverFeed::Ended() const {
  AGENTKV_RETURN_IF_ERROR(driver_->status());
  if (!driver_->done()) return InternalError("the loop went idle before every agent ended");
  const AgentDriverResult& driven = driver_->result();
  return FedCounts{.issued = driven.requests_issued, .completed = driven.requests_completed};
}

FedSessions AgentDriverFeed::Sessions() const {
  const AgentDriverResult& driven = driver_->result();
  FedSessions sessions;
  TimeNs first_start = driven.makespan_end;
  for (const DriverConversationResult& c : driven.conversations) {
    ++sessions.conversations;
    first_start = std::min(first_start, c.start);
    if (c.subagent >= 0) continue;
    // The tally's session index is the workload index (Attach).
    AGENTKV_CHECK_EQ(c.workload_index, sessions.sessions);
    ++sessions.sessions;
    AGENTKV_CHECK(c.end.has_value());
    sessions.session_times.push_back((*c.end - c.start).seconds());
  }
  sessions.makespan = driven.makespan_end - first_start;
  return sessions;
}

void AgentDriverFeed::SummarizeWorkload(const ArmFleet& arm_fleet, ArmResult& result) const {
  if (workload_ != nullptr && !workload_->groups.empty()) {
    result.rollout = SummarizeRollout(arm_fleet, *workload_, driver_->result(), result);
  }
}

}  // namespace agentkv::sim
