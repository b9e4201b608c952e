#include "agentkv/sim/fleet/agent_driver.h"

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>

#include "agentkv/base/bounds.h"
#include "agentkv/base/check.h"
#include "agentkv/engine/step_scheduler.h"
#include "agentkv/kv/kv_cache_manager.h"
#include "agentkv/routing/routing_key.h"
#include "agentkv/sim/workload/output_keys.h"

namespace agentkv::sim {
namespace {

constexpr int64_t kMaxConversations = kMaxReplayConversations;
constexpr int64_t kMaxSubagents = 999;
// Groups are counted in a vector indexed by group.
constexpr int32_t kMaxGroups = 1 << 20;
// With a shared prefix, conversation k's own ids are offset by (k + 1) << 40.
constexpr int kSharedPrefixIdBits = 40;
// Sequence numbers reserved per conversation at Start: its main agent's begin and one per
// sub-agent spawned without an anchor.
constexpr int64_t kSequencesPerConversation = 1 + kMaxSubagents;

// The id of conversation k's main agent (header: identities).
ConversationId MainConversationId(int64_t k) {
  return ConversationId(k < kMaxConversations ? k + 1 : (k + 1) * 1000);
}

TimeNs NonNegative(TimeNs t) { return t < TimeNs(0) ? TimeNs(0) : t; }

// The pause that follows each of `requests` (base/pause.h: a request carries the pause after
// it); `joins[i]` counts the sub-agents request i joins (empty for a sub-agent, which joins
// none). The last request's is kSessionEnd.
std::vector<PauseKind> PausesOf(const std::vector<WekaRequest>& requests,
                                const std::vector<int32_t>& joins) {
  AGENTKV_CHECK(joins.empty() || joins.size() == requests.size());
  std::vector<PauseKind> pauses(requests.size(), PauseKind::kSessionEnd);
  for (size_t i = 0; i + 1 < requests.size(); ++i) {
    pauses[i] = !joins.empty() && joins[i + 1] > 0 ? PauseKind::kSubagentWait
                                                   : ClassifyPause(requests[i], requests[i + 1]);
  }
  return pauses;
}

// Whether the workload gates conversation starts on groups (AgenticWorkload::groups).
bool IsGated(const AgenticWorkload& workload) {
  return !workload.groups.empty() || !workload.start_after_group.empty();
}

// The workload's shape: one start per conversation, conversation ids kept distinct, gates
// (groups and start_after_group) and retention marks sized to the conversations.
Status ValidateWorkloadShape(const AgenticWorkload& workload) {
  if (workload.starts.size() != workload.conversations.size()) {
    return InvalidArgumentError("workload has " + std::to_string(workload.starts.size()) +
                                " starts for " + std::to_string(workload.conversations.size()) +
                                " conversations");
  }
  if (static_cast<int64_t>(workload.conversations.size()) > kMaxConversations) {
    return InvalidArgumentError("at most " + std::to_string(kMaxConversations) +
                                " conversations keep conversation ids distinct, got " +
                                std::to_string(workload.conversations.size()));
  }
  const bool gated = IsGated(workload);
  if (gated && (workload.groups.size() != workload.conversations.size() ||
                workload.start_after_group.size() != workload.conversations.size())) {
    return InvalidArgumentError("workload has " + std::to_string(workload.groups.size()) +
                                " groups and " + std::to_string(workload.start_after_group.size()) +
                                " gates for " + std::to_string(workload.conversations.size()) +
                                " conversations");
  }
  if (!workload.retained.empty() && workload.retained.size() != workload.conversations.size()) {
    return InvalidArgumentError("workload has " + std::to_string(workload.retained.size()) +
                                " retention marks for " +
                                std::to_string(workload.conversations.size()) + " conversations");
  }
  for (size_t k = 0; gated && k < workload.conversations.size(); ++k) {
    const int32_t group = workload.groups[k];
    const int32_t gate = workload.start_after_group[k];
    if (group < 0 || group >= kMaxGroups || gate < -1 || gate >= group) {
      return InvalidArgumentError(
          "conversations[" + std::to_string(k) + "] is in group " + std::to_string(group) +
          " gated on group " + std::to_string(gate) + ": a group is in [0, " +
          std::to_string(kMaxGroups) + ") and a gate is -1 or an earlier group");
    }
  }
  return Status();
}

// Whether a block id of `requests` is too large for a shared prefix to namespace.
bool HasUnnamespacedBlockId(const std::vector<WekaRequest>& requests) {
  for (const WekaRequest& r : requests) {
    for (uint64_t id : r.hash_ids) {
      if (id >> kSharedPrefixIdBits != 0) return true;
    }
  }
  return false;
}

// Conversation `k`, starting at `start`: its start, its sub-agent count, its block ids (with
// a shared prefix) and its block size (engine 0's `tokens_per_block`).
Status ValidateConversation(size_t k, const WekaConversation& c, TimeNs start,
                            const AgentDriverOptions& options, int32_t tokens_per_block) {
  if (start < TimeNs(0)) {
    return InvalidArgumentError("conversations[" + std::to_string(k) + "] starts before 0");
  }
  if (static_cast<int64_t>(c.subagents.size()) > kMaxSubagents) {
    return InvalidArgumentError("conversations[" + std::to_string(k) + "] has " +
                                std::to_string(c.subagents.size()) + " sub-agents, at most " +
                                std::to_string(kMaxSubagents));
  }
  if (options.shared_prefix_ids > 0) {
    bool bad = HasUnnamespacedBlockId(c.requests);
    for (const WekaSubagent& sub : c.subagents) bad = bad || HasUnnamespacedBlockId(sub.requests);
    if (bad) {
      return InvalidArgumentError("conversations[" + std::to_string(k) + "] (" + c.source +
                                  ") has a block id >= 2^40, which a shared prefix cannot "
                                  "namespace");
    }
  }
  if (c.block_size != tokens_per_block) {
    return InvalidArgumentError("conversations[" + std::to_string(k) + "] (" + c.source +
                                ") has block_size " + std::to_string(c.block_size) +
                                ", the engines' tokens_per_block is " +
                                std::to_string(tokens_per_block));
  }
  return Status();
}

}  // namespace

struct AgentDriver::Agent {
  int32_t workload_index = 0;
  // -1 for a main agent.
  int32_t subagent = -1;
  ConversationId conversation;
  std::optional<ConversationId> parent;
  const std::vector<WekaRequest>* requests = nullptr;
  // pauses[i]: the pause after request i (kSessionEnd after the last).
  std::vector<PauseKind> pauses;
  // Next request to submit, and whether its gap has elapsed.
  int32_t next = 0;
  bool gap_elapsed = false;
  bool begun = false;
  bool ended = false;
  // Set when a Submit() failed.
  bool failed = false;
  // When the gap of request `next` elapsed.
  TimeNs ready_time;
  // joins_pending[i]: sub-agents not yet ended that request i joins (main agents only).
  std::vector<int32_t> joins_pending;
  // spawn_after[i]: sub-agents (agent indices) anchored on request i (main agents only).
  std::vector<std::vector<int32_t>> spawn_after;
  // Sub-agents: the parent's agent index, the joined request (-1: none) and how long after
  // this sub-agent's end the join is released (the recorded time from its completion to the
  // joined request), the delay after the anchor's completion (or after the conversation start
  // when unanchored).
  int32_t parent_agent = -1;
  int32_t join_index = -1;
  TimeNs join_delay;
  bool anchored = false;
  TimeNs spawn_delay;
};

AgentDriver::~AgentDriver() = default;

int64_t AgentDriver::held_conversations() const {
  return std::count_if(
      held_.begin(), held_.end(),
      [](const std::shared_ptr<const WekaConversation>& c) { return c != nullptr; });
}

bool AgentDriver::done() const {
  return static_cast<int64_t>(held_.size()) == source_->size() &&
         agents_ended_ == static_cast<int64_t>(agents_.size());
}

std::string_view SubagentRoutingName(SubagentRouting routing) {
  return routing == SubagentRouting::kParent ? "parent" : "own";
}

std::optional<SubagentRouting> ParseSubagentRouting(std::string_view name) {
  if (name == "own") return SubagentRouting::kOwn;
  if (name == "parent") return SubagentRouting::kParent;
  return std::nullopt;
}

Status AgentDriverOptions::Validate() const {
  if (first_request_id < 0) {
    return InvalidArgumentError("first_request_id must be >= 0, got " +
                                std::to_string(first_request_id));
  }
  return Status();
}

TimeNs RecordedApiTime(const WekaRequest& request) { return request.api_time; }

int64_t SubmittedPromptTokens(int64_t input_tokens, size_t hash_ids, int32_t tokens_per_block) {
  return std::max<int64_t>(
      {input_tokens, SaturatingMul(static_cast<int64_t>(hash_ids), tokens_per_block), 1});
}

TimeNs RecordedGap(const WekaRequest& previous, const WekaRequest& next) {
  if (next.think_time > TimeNs(0)) return next.think_time;
  return NonNegative(next.t - previous.t - RecordedApiTime(previous));
}

std::vector<kv::BlockKey> DriverKeysOf(const kv::BlockKeyHasher& hasher, uint64_t shared_prefix_ids,
                                       std::span<const uint64_t> ids, uint64_t namespace_id) {
  if (shared_prefix_ids == 0) return hasher.KeysFromBlockIds(ids, namespace_id);
  std::vector<uint64_t> shifted(ids.begin(), ids.end());
  for (uint64_t& block_id : shifted) {
    if (block_id >= shared_prefix_ids) block_id += namespace_id << kSharedPrefixIdBits;
  }
  return hasher.KeysFromBlockIds(shifted, 0);
}

AgentDriver::AgentDriver(EventLoop* loop, AgentTarget* gateway, const ConversationSource* source,
                         const AgentDriverOptions& options)
    : loop_(loop),
      gateway_(gateway),
      source_(source),
      workload_(source->in_memory()),
      options_(options),
      hasher_(gateway->hasher()) {}

StatusOr<std::unique_ptr<AgentDriver>> AgentDriver::Create(EventLoop* loop, AgentTarget* gateway,
                                                           const AgenticWorkload* workload,
                                                           const AgentDriverOptions& options) {
  auto source = std::make_unique<const InMemoryConversations>(*workload);
  StatusOr<std::unique_ptr<AgentDriver>> driver = Create(loop, gateway, source.get(), options);
  if (driver.ok()) (*driver)->owned_source_ = std::move(source);
  return driver;
}

StatusOr<std::unique_ptr<AgentDriver>> AgentDriver::Create(EventLoop* loop, AgentTarget* gateway,
                                                           const ConversationSource* source,
                                                           const AgentDriverOptions& options) {
  if (Status s = options.Validate(); !s.ok()) return s;
  const AgenticWorkload* workload = source->in_memory();
  if (workload == nullptr && source->size() > kMaxStreamedConversations) {
    return InvalidArgumentError("at most " + std::to_string(kMaxStreamedConversations) +
                                " streamed conversations keep conversation ids distinct, got " +
                                std::to_string(source->size()));
  }
  if (workload != nullptr) {
    if (Status s = ValidateWorkloadShape(*workload); !s.ok()) return s;
    const int32_t tokens_per_block = gateway->tokens_per_block();
    for (size_t k = 0; k < workload->conversations.size(); ++k) {
      if (Status s = ValidateConversation(k, workload->conversations[k], workload->starts[k],
                                          options, tokens_per_block);
          !s.ok()) {
        return s;
      }
    }
  }
  std::unique_ptr<AgentDriver> driver(new AgentDriver(loop, gateway, source, options));
  // A workload in memory is loaded whole (gates count every group's agents up front).
  if (workload != nullptr && source->size() > 0) {
    driver->LoadThrough(static_cast<int32_t>(source->size() - 1));
  }
  return driver;
}

void AgentDriver::LoadThrough(int32_t k) {
  while (static_cast<int64_t>(held_.size()) <= k) {
    const size_t next = held_.size();
    // A streamed conversation is the driver's own: its ids are kept once per agent below.
    std::shared_ptr<WekaConversation> owned;
    if (workload_ == nullptr) owned = source_->Take(static_cast<int64_t>(next));
    held_.push_back(owned != nullptr ? owned : source_->Load(static_cast<int64_t>(next)));
    held_ids_.emplace_back();
    live_agents_.push_back(0);
    conversation_failed_.push_back(false);
    const size_t first_agent = agents_.size();
    AddConversation(next);
    if (owned != nullptr && held_[next] != nullptr) {
      std::vector<AgentBlockIds>& ids = held_ids_[next];
      ids.emplace_back(owned->requests);
      for (WekaSubagent& sub : owned->subagents) ids.emplace_back(sub.requests);
    }
    // Result conversations mirror the agents: each main agent followed by its sub-agents.
    for (size_t a = first_agent; a < agents_.size(); ++a) {
      const Agent& agent = agents_[a];
      DriverConversationResult r;
      r.conversation = agent.conversation;
      r.parent = agent.parent;
      r.workload_index = agent.workload_index;
      r.subagent = agent.subagent;
      result_.conversations.push_back(r);
    }
    live_agents_[next] = static_cast<int32_t>(agents_.size() - first_agent);
  }
}

void AgentDriver::AddConversation(size_t k) {
  const WekaConversation& c = *held_[k];
  const int32_t main_index = static_cast<int32_t>(agents_.size());
  main_agent_of_.push_back(main_index);
  if (workload_ == nullptr) {
    // A streamed conversation is checked as it arrives; one refused gets no agent.
    if (Status s = ValidateConversation(k, c, source_->start(static_cast<int64_t>(k)), options_,
                                        gateway_->tokens_per_block());
        !s.ok()) {
      if (status_.ok()) status_ = s;
      held_[k].reset();
      return;
    }
  }
  if (workload_ != nullptr && IsGated(*workload_)) {
    const size_t group = static_cast<size_t>(workload_->groups[k]);
    if (group_agents_pending_.size() <= group) group_agents_pending_.resize(group + 1, 0);
    group_agents_pending_[group] += 1 + static_cast<int64_t>(c.subagents.size());
  }
  Agent main;
  main.workload_index = static_cast<int32_t>(k);
  main.conversation = MainConversationId(static_cast<int64_t>(k));
  main.requests = &c.requests;
  main.joins_pending.assign(c.requests.size(), 0);
  main.spawn_after.resize(c.requests.size());
  agents_.push_back(std::move(main));
  for (size_t j = 0; j < c.subagents.size(); ++j) {
    if (options_.subagent_models == SubagentModels::kExclude &&
        !c.SharesMainModel(c.subagents[j])) {
      continue;
    }
    AddSubagent(k, j, main_index);
  }
  // Once the sub-agents are in: a request that joins sub-agents is followed by their wait.
  Agent& main_agent = agents_[static_cast<size_t>(main_index)];
  main_agent.pauses = PausesOf(c.requests, main_agent.joins_pending);
}

void AgentDriver::AddSubagent(size_t k, size_t j, int32_t main_index) {
  const WekaConversation& c = *held_[k];
  const WekaSubagent& sub = c.subagents[j];
  Agent agent;
  agent.workload_index = static_cast<int32_t>(k);
  agent.subagent = static_cast<int32_t>(j);
  agent.conversation =
      ConversationId((static_cast<int64_t>(k) + 1) * 1000 + static_cast<int64_t>(j) + 1);
  agent.parent = MainConversationId(static_cast<int64_t>(k));
  agent.requests = &sub.requests;
  agent.joins_pending.assign(sub.requests.size(), 0);
  agent.pauses = PausesOf(sub.requests, {});
  agent.parent_agent = main_index;
  // Anchor: the parent's last request with t <= spawn.
  const TimeNs spawn = sub.spawn();
  int32_t anchor = -1;
  for (size_t i = 0; i < c.requests.size(); ++i) {
    if (c.requests[i].t <= spawn) anchor = static_cast<int32_t>(i);
  }
  Agent& parent = agents_[static_cast<size_t>(main_index)];
  if (anchor >= 0) {
    const WekaRequest& a = c.requests[static_cast<size_t>(anchor)];
    agent.anchored = true;
    agent.spawn_delay = NonNegative(spawn - a.t - RecordedApiTime(a));
    parent.spawn_after[static_cast<size_t>(anchor)].push_back(static_cast<int32_t>(agents_.size()));
  } else {
    agent.spawn_delay = spawn;
  }
  // Join: the parent's first request after the anchor sent once the sub-agent completed,
  // unless the sub-agent was launched in the background.
  if (sub.status != SubagentStatus::kAsyncLaunched) {
    for (size_t n = static_cast<size_t>(anchor + 1); n < c.requests.size(); ++n) {
      if (c.requests[n].t >= sub.completion) {
        agent.join_index = static_cast<int32_t>(n);
        agent.join_delay = c.requests[n].t - sub.completion;
        ++parent.joins_pending[n];
        break;
      }
    }
  }
  agents_.push_back(std::move(agent));
}

Status AgentDriver::Start() {
  if (started_) return FailedPreconditionError("AgentDriver::Start called twice");
  started_ = true;
  origin_ = loop_->now();
  result_.makespan_end = origin_;
  gateway_->set_completion_callback(
      [this](const GatewayRecord& gateway_record, const EngineRequestRecord* record) {
        OnComplete(gateway_record, record);
      });
  // Groups with no agent have ended; a gate on one of them is open from the start.
  while (static_cast<size_t>(groups_ended_through_ + 1) < group_agents_pending_.size() &&
         group_agents_pending_[static_cast<size_t>(groups_ended_through_ + 1)] == 0) {
    ++groups_ended_through_;
  }
  const int64_t size = source_->size();
  const int64_t first = loop_->ReserveSequences(size * kSequencesPerConversation);
  for (int64_t k = 0; k < size; ++k) {
    const auto conversation = static_cast<int32_t>(k);
    if (workload_ != nullptr && !workload_->start_after_group.empty() &&
        workload_->start_after_group[static_cast<size_t>(k)] > groups_ended_through_) {
      gated_conversations_.push_back(conversation);
      continue;
    }
    const int64_t reserved = first + k * kSequencesPerConversation;
    loop_->ScheduleReserved(
        SaturatingAdd(origin_, source_->start(k)), reserved,
        [this, conversation, reserved] { StartConversation(conversation, reserved); });
  }
  return Status();
}

void AgentDriver::StartConversation(int32_t k, int64_t reserved) {
  LoadThrough(k);
  if (held_[static_cast<size_t>(k)] == nullptr) return;  // Refused as it arrived.
  ScheduleConversation(k, loop_->now(), reserved);
}

void AgentDriver::ScheduleConversation(int32_t k, TimeNs start, int64_t reserved) {
  const WekaConversation& c = *held_[static_cast<size_t>(k)];
  const int32_t main_index = main_agent_of_[static_cast<size_t>(k)];
  // Under reserved numbers this event is the main agent's begin, run below once the unanchored
  // sub-agents are scheduled (their numbers sort after it whatever is scheduled meanwhile).
  if (reserved < 0) loop_->Schedule(start, [this, main_index] { BeginAgent(main_index); });
  int64_t next_reserved = reserved + 1;
  for (size_t j = 0, added = 0; j < c.subagents.size(); ++j) {
    if (options_.subagent_models == SubagentModels::kExclude &&
        !c.SharesMainModel(c.subagents[j])) {
      continue;
    }
    const int32_t index = main_index + 1 + static_cast<int32_t>(added++);
    const Agent& agent = agents_[static_cast<size_t>(index)];
    if (agent.anchored) continue;
    const TimeNs at = SaturatingAdd(start, agent.spawn_delay);
    if (reserved >= 0) {
      loop_->ScheduleReserved(at, next_reserved++, [this, index] { BeginAgent(index); });
    } else {
      loop_->Schedule(at, [this, index] { BeginAgent(index); });
    }
  }
  if (reserved >= 0) BeginAgent(main_index);
}

void AgentDriver::OnAgentEndedForGates(int32_t index) {
  if (group_agents_pending_.empty()) return;
  const size_t k = static_cast<size_t>(agents_[static_cast<size_t>(index)].workload_index);
  --group_agents_pending_[static_cast<size_t>(workload_->groups[k])];
  const int32_t before = groups_ended_through_;
  while (static_cast<size_t>(groups_ended_through_ + 1) < group_agents_pending_.size() &&
         group_agents_pending_[static_cast<size_t>(groups_ended_through_ + 1)] == 0) {
    ++groups_ended_through_;
  }
  if (groups_ended_through_ == before) return;
  const TimeNs now = loop_->now();
  std::vector<int32_t> still_gated;
  for (int32_t conversation : gated_conversations_) {
    const size_t c = static_cast<size_t>(conversation);
    if (workload_->start_after_group[c] > groups_ended_through_) {
      still_gated.push_back(conversation);
      continue;
    }
    ScheduleConversation(conversation, std::max(now, SaturatingAdd(origin_, workload_->starts[c])));
  }
  gated_conversations_ = std::move(still_gated);
}

void AgentDriver::BeginAgent(int32_t index) {
  Agent& agent = agents_[static_cast<size_t>(index)];
  if (agent.begun || agent.ended) return;
  agent.begun = true;
  result_.conversations[static_cast<size_t>(index)].start = loop_->now();
  if (agent.requests->empty()) {
    EndAgent(index);
    return;
  }
  loop_->ScheduleAfter(agent.requests->front().t, [this, index] { RequestReady(index, 0); });
}

void AgentDriver::RequestReady(int32_t index, int32_t request) {
  Agent& agent = agents_[static_cast<size_t>(index)];
  if (agent.ended || agent.next != request) return;
  agent.gap_elapsed = true;
  agent.ready_time = loop_->now();
  if (agent.joins_pending[static_cast<size_t>(request)] == 0) SubmitNext(index);
}

std::span<const uint64_t> AgentDriver::IdsOf(const Agent& agent, int32_t i) const {
  const std::vector<AgentBlockIds>& kept = held_ids_[static_cast<size_t>(agent.workload_index)];
  if (kept.empty()) return (*agent.requests)[static_cast<size_t>(i)].hash_ids;
  // The main agent (subagent -1) first, then sub-agent j at j + 1.
  const auto slot = static_cast<size_t>(int64_t{agent.subagent} + 1);
  return kept[slot].At(static_cast<size_t>(i));
}

std::vector<kv::BlockKey> AgentDriver::KeysOf(std::span<const uint64_t> ids,
                                              uint64_t namespace_id) const {
  return DriverKeysOf(hasher_, options_.shared_prefix_ids, ids, namespace_id);
}

engine::SchedulerRequest AgentDriver::EngineRequestOf(const Agent& agent, int32_t i,
                                                      RequestId id) const {
  const WekaRequest& w = (*agent.requests)[static_cast<size_t>(i)];
  const int32_t block_size = held_[static_cast<size_t>(agent.workload_index)]->block_size;
  engine::SchedulerRequest request;
  request.id = id;
  const uint64_t namespace_id = static_cast<uint64_t>(agent.workload_index) + 1;
  const std::span<const uint64_t> ids = IdsOf(agent, i);
  request.prompt_keys = KeysOf(ids, namespace_id);
  if (static_cast<size_t>(i) + 1 < agent.requests->size()) {
    request.output_keys = ReusedOutputKeys(
        w, ids, IdsOf(agent, i + 1), block_size,
        [&](std::span<const uint64_t> chain) { return KeysOf(chain, namespace_id); });
  }
  request.prompt_tokens = SubmittedPromptTokens(w.input_tokens, ids.size(), block_size);
  request.max_new_tokens = std::max<int64_t>(1, w.output_tokens);
  request.kv_options.prompt_tokens = request.prompt_tokens;
  request.kv_options.conversation = agent.conversation;
  if (agent.parent.has_value()) {
    request.kv_options.parent_conversation = agent.parent;
    request.kv_options.parent_hint_authenticated = true;
  }
  return request;
}

GatewayRequest AgentDriver::GatewayRequestOf(const Agent& agent, int32_t i,
                                             engine::SchedulerRequest request) const {
  const WekaRequest& w = (*agent.requests)[static_cast<size_t>(i)];
  const std::span<const uint64_t> ids = IdsOf(agent, i);
  const SessionId session(agent.conversation.value());
  const SessionId routed_as =
      agent.parent.has_value() && options_.subagent_routing == SubagentRouting::kParent
          ? SessionId(agent.parent->value())
          : session;
  GatewayRequest sent{std::move(request), session, routing::SessionRoutingKey(routed_as),
                      w.stop == "tool_use"};
  // What the agent does after this response (its stop reason and tool calls tell the client as
  // it generates them); the gateway passes it on to the engine (kv_options.next_pause).
  sent.next_pause = agent.pauses[static_cast<size_t>(i)];
  // Sent with every request, as a client should (a restarted gateway forgets the mark).
  if (workload_ != nullptr && !workload_->retained.empty() &&
      workload_->retained[static_cast<size_t>(agent.workload_index)]) {
    sent.retain = true;
  }
  // The leading blocks hashed in the shared namespace: the prefix sessions share.
  while (options_.shared_prefix_ids > 0 &&
         static_cast<size_t>(sent.shared_prefix_blocks) < ids.size() &&
         ids[static_cast<size_t>(sent.shared_prefix_blocks)] < options_.shared_prefix_ids) {
    ++sent.shared_prefix_blocks;
  }
  return sent;
}

void AgentDriver::SubmitNext(int32_t index) {
  Agent& agent = agents_[static_cast<size_t>(index)];
  const int32_t i = agent.next;
  // Decide: the request, as the engine and the gateway get it, and its log entry.
  const int64_t slot = slots_;
  const RequestId id(options_.first_request_id + slot);
  GatewayRequest sent = GatewayRequestOf(agent, i, EngineRequestOf(agent, i, id));
  DriverRequest log;
  log.id = id;
  log.conversation = agent.conversation;
  log.parent = agent.parent;
  log.index = i;
  log.submitted = loop_->now();
  log.ready = agent.ready_time;
  log.next_pause = sent.next_pause;
  // Apply: the agent moves on; the request is logged before the gateway runs (its callbacks
  // look the request up), and taken back when the gateway refuses it.
  agent.gap_elapsed = false;
  ++agent.next;
  ++slots_;
  InFlight& in_flight = in_flight_[slot];
  in_flight.agent = index;
  if (options_.keep_request_log) {
    result_.requests.push_back(log);
  } else {
    in_flight.log = log;
  }
  if (options_.progress_hook != nullptr) {
    options_.progress_hook->Submitted(agent.workload_index, agent.subagent, i, log.submitted);
  }
  if (Status s = gateway_->Submit(std::move(sent)); !s.ok()) {
    --slots_;
    in_flight_.erase(slot);
    if (options_.keep_request_log) result_.requests.pop_back();
    if (status_.ok()) status_ = s;
    agent.failed = true;
    EndAgent(index);
    return;
  }
  DriverConversationResult& r = result_.conversations[static_cast<size_t>(index)];
  ++r.requests_issued;
  r.total_join_wait = r.total_join_wait + (log.submitted - log.ready);
  ++result_.requests_issued;
}

void AgentDriver::OnComplete(const GatewayRecord& gateway_record,
                             const EngineRequestRecord* engine_record) {
  // Not the driver's, or completed already: ignored.
  const auto found = in_flight_.find(gateway_record.id.value() - options_.first_request_id);
  if (found == in_flight_.end()) return;
  const auto slot = static_cast<size_t>(found->first);
  const int32_t index = found->second.agent;
  // A copy: the entry leaves in_flight_ now, and the callbacks below may grow result_.requests.
  DriverRequest log =
      options_.keep_request_log ? result_.requests[slot] : std::move(found->second.log);
  in_flight_.erase(found);
  const TimeNs now = loop_->now();
  if (engine_record == nullptr) {
    // Dispatch failed after an admission wait: the agent cannot go on.
    if (status_.ok()) status_ = gateway_record.dispatch_error;
    agents_[static_cast<size_t>(index)].failed = true;
    EndAgent(index);
    return;
  }
  const EngineRequestRecord& record = *engine_record;
  log.engine = gateway_record.engine;
  log.completed = now;
  if (options_.keep_request_log) result_.requests[slot] = log;
  ++result_.requests_completed;
  result_.makespan_end = std::max(result_.makespan_end, now);
  DriverConversationResult& r = result_.conversations[static_cast<size_t>(index)];
  ++r.requests_completed;
  if (record.report.rejected) ++r.requests_rejected;
  if (record.first_token.has_value()) {
    const TimeNs ttft = *record.first_token - record.arrival;
    r.total_ttft = r.total_ttft + ttft;
    r.max_ttft = std::max(r.max_ttft, ttft);
  }
  if (record.finished.has_value())
    r.total_latency = r.total_latency + (*record.finished - record.arrival);
  r.cached_tokens += record.cached_tokens();
  r.uncached_tokens += record.report.uncached_tokens;
  r.recomputed_tokens += record.report.recomputed_tokens;
  r.preemptions += record.report.preemptions;

  Agent& agent = agents_[static_cast<size_t>(index)];
  const size_t i = static_cast<size_t>(log.index);
  if (options_.on_request_completed) {
    options_.on_request_completed(DriverCompletion{
        .request = log,
        .gateway = gateway_record,
        .engine = record,
        .workload_index = agent.workload_index,
        .pause_before = i > 0 ? std::optional<PauseKind>(agent.pauses[i - 1]) : std::nullopt});
  }
  if (agent.subagent < 0) {
    for (int32_t sub : agent.spawn_after[i]) {
      loop_->ScheduleAfter(agents_[static_cast<size_t>(sub)].spawn_delay,
                           [this, sub] { BeginAgent(sub); });
    }
  }
  if (i + 1 >= agent.requests->size()) {
    if (options_.progress_hook != nullptr) {
      options_.progress_hook->Completed(agent.workload_index, agent.subagent, log.index, now);
    }
    EndAgent(index);
    return;
  }
  const TimeNs gap = RecordedGap((*agent.requests)[i], (*agent.requests)[i + 1]);
  if (options_.progress_hook != nullptr) {
    options_.progress_hook->Completed(agent.workload_index, agent.subagent, log.index,
                                      SaturatingAdd(now, gap));
  }
  const int32_t next = static_cast<int32_t>(i + 1);
  loop_->ScheduleAfter(gap, [this, index, next] { RequestReady(index, next); });
}

void AgentDriver::EndAgent(int32_t index) {
  Agent& agent = agents_[static_cast<size_t>(index)];
  if (agent.ended) return;
  agent.ended = true;
  ++agents_ended_;
  const auto k = static_cast<size_t>(agent.workload_index);
  // A failed agent's conversation is kept: its requests may still complete.
  if (agent.failed) conversation_failed_[k] = true;
  const TimeNs now = loop_->now();
  DriverConversationResult& r = result_.conversations[static_cast<size_t>(index)];
  if (!agent.begun) r.start = now;
  r.end = now;
  const bool failed = agent.failed;
  for (int64_t freed : gateway_->EndSession(SessionId(agent.conversation.value()))) {
    r.closed_session_tokens += freed;
  }
  OnAgentEndedForGates(index);
  if (agent.subagent < 0 && failed) {
    // A failed main agent never spawns its remaining sub-agents.
    for (size_t i = static_cast<size_t>(std::max(agent.next - 1, 0)); i < agent.spawn_after.size();
         ++i) {
      for (int32_t sub : agent.spawn_after[i]) {
        if (!agents_[static_cast<size_t>(sub)].begun) EndAgent(sub);
      }
    }
  }
  if (agent.join_index >= 0) {
    if (agent.join_delay > TimeNs(0) && !failed) {
      loop_->ScheduleAfter(agent.join_delay, [this, index] { ReleaseJoin(index); });
    } else {
      ReleaseJoin(index);
    }
  }
  --live_agents_[k];
  MaybeRelease(k);
}

void AgentDriver::MaybeRelease(size_t k) {
  if (live_agents_[k] > 0 || conversation_failed_[k] || held_[k] == nullptr) return;
  const auto first = static_cast<size_t>(main_agent_of_[k]);
  const size_t end =
      k + 1 < main_agent_of_.size() ? static_cast<size_t>(main_agent_of_[k + 1]) : agents_.size();
  RetireKeysOf(first, end);
  for (size_t a = first; a < end; ++a) {
    Agent& agent = agents_[a];
    agent.requests = nullptr;
    std::vector<PauseKind>().swap(agent.pauses);
    std::vector<int32_t>().swap(agent.joins_pending);
    std::vector<std::vector<int32_t>>().swap(agent.spawn_after);
  }
  held_[k].reset();
  std::vector<AgentBlockIds>().swap(held_ids_[k]);
}

void AgentDriver::RetireKeysOf(size_t first, size_t end) {
  std::vector<kv::BlockKey> retired;
  for (size_t a = first; a < end; ++a) {
    const Agent& agent = agents_[a];
    if (agent.requests == nullptr) continue;
    const auto n = static_cast<int32_t>(agent.requests->size());
    const uint64_t namespace_id = static_cast<uint64_t>(agent.workload_index) + 1;
    for (int32_t i = 0; i < n; ++i) {
      const std::span<const uint64_t> ids = IdsOf(agent, i);
      if (i + 1 < n) {
        const std::span<const uint64_t> next = IdsOf(agent, i + 1);
        if (next.size() >= ids.size() && std::equal(ids.begin(), ids.end(), next.begin())) {
          continue;
        }
      }
      size_t own = 0;  // The first key chained under the namespace.
      if (options_.shared_prefix_ids > 0) {
        while (own < ids.size() && ids[own] < options_.shared_prefix_ids) ++own;
      }
      const std::vector<kv::BlockKey> keys = KeysOf(ids, namespace_id);
      retired.insert(retired.end(), keys.begin() + static_cast<std::ptrdiff_t>(own), keys.end());
    }
  }
  if (!retired.empty()) gateway_->RetireKeys(retired);
}

void AgentDriver::ReleaseJoin(int32_t index) {
  const Agent& agent = agents_[static_cast<size_t>(index)];
  Agent& parent = agents_[static_cast<size_t>(agent.parent_agent)];
  // An ended parent submits nothing more (and its state may be released).
  if (parent.ended) return;
  int32_t& pending = parent.joins_pending[static_cast<size_t>(agent.join_index)];
  --pending;
  if (pending == 0 && parent.gap_elapsed && parent.next == agent.join_index) {
    SubmitNext(agent.parent_agent);
  }
}

StatusOr<AgentDriverResult> RunAgentWorkload(EventLoop* loop, AgentTarget* gateway,
                                             const AgenticWorkload& workload,
                                             const AgentDriverOptions& options) {
  StatusOr<std::unique_ptr<AgentDriver>> driver =
      AgentDriver::Create(loop, gateway, &workload, options);
  if (!driver.ok()) return driver.status();
  if (Status s = (*driver)->Start(); !s.ok()) return s;
  loop->RunUntilIdle();
  if (!(*driver)->status().ok()) return (*driver)->status();
  return (*driver)->result();
}

}  // namespace agentkv::sim
