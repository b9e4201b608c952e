// AgentDriver: replays an AgenticWorkload through an AgentTarget in closed loop, as agents behave
// in production (issue 5 item 4): a conversation sends its next request only after its previous
// response completed plus the recorded client gap, so a slow fleet stretches session time. The
// target is the simulator's GatewayModel (and its fleet), or a live endpoint (`agentkv load`,
// load/live_target.h) with the loop kept on real time; "the gateway" below is the target.
//
// Identities. Conversation k (its index in the workload) runs under ConversationId(k + 1)
// (ConversationId((k + 1) * 1000) from k = 1000 on, which only a streamed workload reaches);
// its sub-agent j runs under ConversationId((k + 1) * 1000 + j + 1) with
// parent_conversation = ConversationId(k + 1) and parent_hint_authenticated = true (the driver
// is the trusted client). Session ids equal conversation ids (the gateway attaches them to
// the engine request only with the session lifecycle on); the routing key is
// routing::SessionRoutingKey(session), or for a sub-agent under SubagentRouting::kParent its
// parent's session's; a request whose trace entry stops with `tool_use` is marked
// as ending in a tool call. Prompt keys are hasher.KeysFromBlockIds(hash_ids, extra_key = k + 1)
// (sub-agents share the parent's namespace, as in the WEKA files; with shared_prefix_ids, ids below
// it share one namespace across conversations, see AgentDriverOptions), with the target's hasher
// (engine 0's KV cache's in the simulator); prompt_tokens = `in` (at least the block-covered
// tokens, hash_ids.size() * block_size, and at least 1) and max_new_tokens = max(1, `out`). Output
// keys are the blocks of the answer that the agent's next request re-sends (sim/output_keys.h),
// keyed as that request's prompt, so the engine caches the answer for the next turn. Request ids
// are first_request_id, +1, ... in submission order.
//
// Timing rules (`api(i)` is request i's recorded server time, `api_time`, 0 when absent):
// - Start: request 0 of conversation k is submitted at start_k + t_0 (start_k from
//   AgenticWorkload::starts, relative to the loop time at Start()).
// - Gate (AgenticWorkload::groups and start_after_group, e.g. rollout steps): a conversation
//   whose gate is g >= 0 begins at max(start_k, the time the last agent of the groups <= g
//   ended); its unanchored sub-agents spawn relative to that begin. Gates refer to earlier
//   groups only, so every gate opens.
// - Gap: request i+1 becomes ready at completion(i) + gap(i+1), where gap(i+1) = think_time of
//   request i+1 when it is > 0 (WEKA records it on every request), else
//   max(0, t_{i+1} - t_i - api(i)).
// - Spawn: sub-agent j runs from spawn_j = completion_j - duration_j (WekaSubagent::spawn(): the
//   trace's `t` is the sub-agent's completion). It anchors on the parent's last request a (in
//   file order, which is time order) with t_a <= spawn_j and spawns at completion(a) +
//   max(0, spawn_j - t_a - api(a)); with no such request it spawns at start_k + spawn_j. Its
//   request 0 is submitted at spawn time + its own t_0, the rest follow the gap rule on its own
//   timeline.
// - Join: unless its status is `async_launched`, the parent's request n that waits for
//   sub-agent j is the first one after the anchor with t_n >= completion_j (the Task tool's
//   result comes back with it). Request n is submitted at the latest of its ready time by the
//   gap rule and end_j + (t_n - completion_j) over every sub-agent j it joins (end_j: the
//   sub-agent's end in the replay; t_n - completion_j: what the trace spent between the
//   sub-agent's result and request n). An `async_launched` sub-agent, or one the trace
//   completes after the parent's last request, runs in the background and nobody waits for it.
//   A `completed` or unknown status is waited for.
// - Sub-agent models: with AgentDriverOptions::subagent_models = kExclude, a sub-agent that
//   does not share its main agent's model (WekaConversation::SharesMainModel) is left out: it
//   is not replayed and nothing waits for it (its ids stay those of its index).
// - Pauses: every issued request records the pause that follows it (DriverRequest::next_pause,
//   base/pause.h), the same value the gateway gets (GatewayRequest::next_pause), which passes
//   it on to the engine as the request's one pause hint (kv_options.next_pause): kSessionEnd after
//   an agent's last request, kSubagentWait when the agent's next request joins sub-agents, else
//   ClassifyPause(request, next request) (pause_type.h). The pause before request n is request
//   n-1's; the first has none.
// - End: a conversation (main agent or sub-agent) ends at the completion of its last request
//   (at its start when it has none); the driver then calls GatewayModel::EndSession(its
//   session), inside the completion callback, and the gateway closes it on every engine when
//   its lifecycle is on. Once every agent of a conversation has ended (and none failed), the
//   driver hands the target the keys only that conversation could name
//   (AgentTarget::RetireKeys), so that the simulated engines forget them.
// - Retention: every request of a conversation the workload marks retained
//   (AgenticWorkload::retained) carries GatewayRequest::retain = true, so the gateway's idle
//   timeout never ends its sessions between requests.
// A rejected request (its report says rejected) counts as completed and the agent goes on.
// A Submit() error, or a dispatch error reported after an admission wait, ends that agent at
// once and is reported by status().
//
// Streaming. The driver reads its conversations from a ConversationSource
// (conversation_source.h). It schedules every conversation's start up front (each under a
// sequence number reserved then, so that ties break as if everything were scheduled at once),
// but a streamed source's conversation k is loaded only when its start comes (with every
// earlier one not yet loaded, so agents stay in workload order), and released, with its agents'
// per-request state, once all its agents have ended (unless one failed). While it is held, its
// block ids are kept once per agent (AgentBlockIds: a turn that extends the previous one shares
// its ids), not once per request. A workload held in memory is loaded whole at Create, as
// before. Results are the same either way.
//
// The driver owns the gateway's completion callback from Start() on. Deterministic: a pure
// function of the workload, the options and the fleet; every event goes through the loop
// (ties by sequence number) and agents are kept in vectors. Single-threaded; not copyable or
// movable (scheduled events point at it). Must outlive every run of the loop after Start().
#ifndef AGENTKV_SIM_FLEET_AGENT_DRIVER_H_
#define AGENTKV_SIM_FLEET_AGENT_DRIVER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "agentkv/base/pause.h"
#include "agentkv/base/status.h"
#include "agentkv/base/strong_id.h"
#include "agentkv/base/time.h"
#include "agentkv/kv/block_key.h"
#include "agentkv/sim/fleet/agent_target.h"
#include "agentkv/sim/fleet/event_loop.h"
#include "agentkv/sim/fleet/fleet_model.h"
#include "agentkv/sim/fleet/gateway_model.h"
#include "agentkv/sim/workload/agent_block_ids.h"
#include "agentkv/sim/workload/agentic_workload.h"
#include "agentkv/sim/workload/conversation_source.h"
#include "agentkv/sim/workload/pause_type.h"
#include "agentkv/sim/workload/weka_trace.h"

namespace agentkv::sim {

// Told of every agent's progress (the oracle arm's next-use estimates follow it). An agent is
// (workload_index, subagent), subagent -1 for the main agent; requests by index in its
// requests[].
class AgentProgressHook {
 public:
  virtual ~AgentProgressHook() = default;
  // Request `request` is about to be submitted, at `now`.
  virtual void Submitted(int32_t workload_index, int32_t subagent, int32_t request, TimeNs now) = 0;
  // Request `request` completed; `next_ready` is when the gap rule makes the next one ready
  // (the completion time after the last request).
  virtual void Completed(int32_t workload_index, int32_t subagent, int32_t request,
                         TimeNs next_ready) = 0;
};

// The delay between the completion of `previous` and the readiness of `next` (header: gap rule).
TimeNs RecordedGap(const WekaRequest& previous, const WekaRequest& next);

// Chained keys of trace block ids in conversation namespace `namespace_id`, as the driver
// submits them (see AgentDriverOptions::shared_prefix_ids).
std::vector<kv::BlockKey> DriverKeysOf(const kv::BlockKeyHasher& hasher, uint64_t shared_prefix_ids,
                                       std::span<const uint64_t> ids, uint64_t namespace_id);

// Which session's routing key a sub-agent's requests carry (under consistent_hashing, which
// engine it lands on): its own (kOwn, "own": each conversation is a session of its own), or its
// parent's (kParent, "parent": a child runs on its parent's engine, where the parent's own
// requests reach its cached prefix and its return demotes the child).
enum class SubagentRouting : uint8_t { kOwn, kParent };

// "own" or "parent"; and back (nullopt for any other name).
std::string_view SubagentRoutingName(SubagentRouting routing);
std::optional<SubagentRouting> ParseSubagentRouting(std::string_view name);

struct DriverCompletion;

struct AgentDriverOptions {
  // Block ids below this stand for the same content in every conversation (the tools+system
  // prompt that opens every session): they hash under one namespace shared by all
  // conversations, while ids at or above it are namespaced per conversation as usual. With it
  // set, every block id must be below 2^40. Default: 0 (every id namespaced per conversation).
  uint64_t shared_prefix_ids = 0;
  // Id of the first request submitted. Range: >= 0.
  int64_t first_request_id = 0;
  // Whether sub-agents on another model than their main agent are replayed (kShare) or left
  // out (kExclude). Default: kShare.
  SubagentModels subagent_models = SubagentModels::kShare;
  // The routing key of a sub-agent's requests. Default: kOwn.
  SubagentRouting subagent_routing = SubagentRouting::kOwn;
  // Told of each submit and completion when set; must outlive the driver. Default: none.
  AgentProgressHook* progress_hook = nullptr;
  // Log every issued request in AgentDriverResult::requests. Default: true. Off, the driver
  // holds a request from its submit to its completion only (memory follows the requests in
  // flight) and result().requests stays empty: on_request_completed is its last sight.
  bool keep_request_log = true;
  // Told of each request that completes with an engine record (served, rejected or refused),
  // from inside the target's completion callback. Default: none.
  std::function<void(const DriverCompletion&)> on_request_completed = nullptr;

  // InvalidArgument naming the first bad field.
  Status Validate() const;
};

// The prompt length the drivers submit for a trace request of `input_tokens` over `hash_ids`
// full blocks: the recorded length, or the blocks' when they hold more (at least 1).
int64_t SubmittedPromptTokens(int64_t input_tokens, size_t hash_ids, int32_t tokens_per_block);

// The server time a trace recorded for `request`: its `api_time` (0 when absent).
TimeNs RecordedApiTime(const WekaRequest& request);

// One request as the driver issued it.
struct DriverRequest {
  RequestId id;
  ConversationId conversation;
  // Set for a sub-agent's request: the parent conversation (sent as an authenticated hint).
  std::optional<ConversationId> parent;
  // Index of the request in its agent's requests[].
  int32_t index = 0;
  // When the gap rule made it ready (before any join wait), and when it was submitted to the
  // gateway.
  TimeNs ready;
  TimeNs submitted;
  // What the agent does after this request (header: pauses); kSessionEnd after its last.
  PauseKind next_pause = PauseKind::kSessionEnd;
  // Set once the request completed.
  std::optional<TimeNs> completed;
  // The engine that served it; unset until dispatched (or when dispatch failed).
  std::optional<EngineId> engine;

  friend bool operator==(const DriverRequest&, const DriverRequest&) = default;
};

// A request that completed, as AgentDriverOptions::on_request_completed is told of it. The
// references live for the call only.
struct DriverCompletion {
  // Its log entry (completed and engine set).
  const DriverRequest& request;
  // What the target recorded of it.
  const GatewayRecord& gateway;
  const EngineRequestRecord& engine;
  // Its conversation's index in the workload (a sub-agent's: its main agent's).
  int32_t workload_index = 0;
  // Its agent's previous request's next_pause; unset for the agent's first request.
  std::optional<PauseKind> pause_before;
};

// One conversation: a main agent or a sub-agent.
struct DriverConversationResult {
  ConversationId conversation;
  std::optional<ConversationId> parent;
  // Index of the main conversation in the workload, and the sub-agent index (-1: main agent).
  int32_t workload_index = 0;
  int32_t subagent = -1;
  // Start (start time, or spawn time) and end (completion of the last request); end is unset
  // until the conversation finished.
  TimeNs start;
  std::optional<TimeNs> end;
  int64_t requests_issued = 0;
  int64_t requests_completed = 0;
  int64_t requests_rejected = 0;
  // Aggregated over its completed requests' EngineRequestRecords.
  // Queueing delay as the engine saw it: first_token - arrival, summed and maximum (the record
  // has no separate queue time; TTFT includes the prefill).
  TimeNs total_ttft;
  TimeNs max_ttft;
  // finished - arrival, summed.
  TimeNs total_latency;
  // Time requests waited beyond their gap for a sub-agent join (submitted - ready), summed.
  TimeNs total_join_wait;
  int64_t cached_tokens = 0;
  int64_t uncached_tokens = 0;
  int64_t recomputed_tokens = 0;
  int64_t preemptions = 0;
  // Tokens freed by the session close at its end, over every engine (lifecycle on only).
  int64_t closed_session_tokens = 0;

  friend bool operator==(const DriverConversationResult&,
                         const DriverConversationResult&) = default;
};

struct AgentDriverResult {
  // Main agents in workload order, each followed by its sub-agents in order (those the options
  // exclude are left out).
  std::vector<DriverConversationResult> conversations;
  // Every issued request, in submission order.
  std::vector<DriverRequest> requests;
  int64_t requests_issued = 0;
  int64_t requests_completed = 0;
  // Completion of the last request (the loop time at Start() when none ran).
  TimeNs makespan_end;

  friend bool operator==(const AgentDriverResult&, const AgentDriverResult&) = default;
};

class AgentDriver {
 public:
  // Validates the options and the workload (starts.size() == conversations.size(), at most 1000
  // conversations and 999 sub-agents per conversation so ids stay distinct, one block_size
  // that matches the target's tokens_per_block, gates as AgenticWorkload documents them: groups
  // and start_after_group both empty or both sized, groups in [0, 2^20), -1 <= gate < group;
  // retained empty or sized). `loop`, `gateway` and `workload` must outlive the driver.
  static StatusOr<std::unique_ptr<AgentDriver>> Create(EventLoop* loop, AgentTarget* gateway,
                                                       const AgenticWorkload* workload,
                                                       const AgentDriverOptions& options);
  // The same over a source. An in-memory source is validated as above; a streamed one is
  // checked for its size (at most kMaxStreamedConversations) here and each conversation when
  // it is loaded: one the rules above refuse ends nothing but itself, and status() reports it.
  // `source` must outlive the driver.
  static StatusOr<std::unique_ptr<AgentDriver>> Create(EventLoop* loop, AgentTarget* gateway,
                                                       const ConversationSource* source,
                                                       const AgentDriverOptions& options);

  AgentDriver(const AgentDriver&) = delete;
  AgentDriver& operator=(const AgentDriver&) = delete;
  ~AgentDriver();

  // Installs the gateway's completion callback and schedules every conversation's start and
  // every unanchored spawn relative to loop->now(). Once only (FailedPrecondition after).
  Status Start();

  // Whether every agent has ended.
  bool done() const;
  // Conversations loaded and not yet released (header: streaming): what the driver holds of
  // the workload now.
  int64_t held_conversations() const;
  // The first Submit() error, or OK.
  const Status& status() const { return status_; }
  // The results so far (complete once done()).
  const AgentDriverResult& result() const { return result_; }

 private:
  struct Agent;

  AgentDriver(EventLoop* loop, AgentTarget* gateway, const ConversationSource* source,
              const AgentDriverOptions& options);

  // Loads every conversation up to `k` not loaded yet, in order (AddConversation each).
  void LoadThrough(int32_t k);
  // Building the agents of loaded conversation `k` (at Create for an in-memory source, at its
  // start for a streamed one): its main agent, then its sub-agents (those the options keep),
  // then the main agent's pauses (which depend on the joins its sub-agents add). A streamed
  // conversation the rules refuse gets no agent and sets status_.
  void AddConversation(size_t k);
  // Sub-agent `j` of conversation `k`, whose main agent is agents_[main_index]: anchored on
  // (spawned after) the parent's last request at or before its spawn, and joined by the
  // parent's first request after the anchor sent once it completed (none when launched in the
  // background).
  void AddSubagent(size_t k, size_t j, int32_t main_index);

  // Schedules the begin of conversation `k`'s main agent and unanchored sub-agents at
  // `start` (or later, by their spawn delays). With `reserved` >= 0 they take the sequence
  // numbers reserved for `k` at Start (reserved + 1 + j for the j-th unanchored sub-agent).
  void ScheduleConversation(int32_t k, TimeNs start, int64_t reserved = -1);
  // Conversation `k`'s start has come (its reserved sequence number `reserved`): loads it and
  // begins it.
  void StartConversation(int32_t k, int64_t reserved);
  // Releases conversation `k` and its agents' per-request state once every agent has ended,
  // after retiring its keys (RetireKeysOf).
  void MaybeRelease(size_t k);
  // Hands the target the keys of agents [first, end) (one ended conversation's) that no other
  // conversation can name: each chain's keys from its first id past the shared prefix on,
  // which KeysOf chains under the conversation's namespace (AgentTarget::RetireKeys). A
  // request whose chain the agent's next request extends is covered by that one.
  void RetireKeysOf(size_t first, size_t end);
  // Start gating: counts `agent`'s end against its group and begins every conversation whose
  // gate opened.
  void OnAgentEndedForGates(int32_t agent);
  void BeginAgent(int32_t agent);
  // The gap of request `index` has elapsed: submit it unless joins are pending.
  void RequestReady(int32_t agent, int32_t index);
  // Submits `agent`'s next request: builds it (EngineRequestOf, GatewayRequestOf), logs it
  // with its pause, moves the agent on, and hands it to the gateway; a refusal ends the agent
  // and records the first error.
  void SubmitNext(int32_t agent);
  // Request `i` of `agent` as the engine gets it, with id `id`: keys, lengths, conversation,
  // parent hint and the pause that follows (the gap-aware order's and stall offload's hint).
  engine::SchedulerRequest EngineRequestOf(const Agent& agent, int32_t i, RequestId id) const;
  // `request` (request `i` of `agent`) as the gateway gets it: session, routing key, tool-call
  // stop, the pause that follows, the retention mark and the shared prefix.
  GatewayRequest GatewayRequestOf(const Agent& agent, int32_t i,
                                  engine::SchedulerRequest request) const;
  // The hash ids of request `i` of `agent` (from held_ids_ for a streamed conversation).
  std::span<const uint64_t> IdsOf(const Agent& agent, int32_t i) const;
  // Chained keys of trace block ids in conversation namespace `namespace_id` (see
  // AgentDriverOptions::shared_prefix_ids).
  std::vector<kv::BlockKey> KeysOf(std::span<const uint64_t> ids, uint64_t namespace_id) const;
  void OnComplete(const GatewayRecord& gateway_record, const EngineRequestRecord* record);
  void EndAgent(int32_t agent);
  // The sub-agent `agent`'s join delay has passed: its parent's joined request waits for one
  // sub-agent fewer.
  void ReleaseJoin(int32_t agent);

  EventLoop* loop_;
  AgentTarget* gateway_;
  // Set when the driver was created over a workload: the source over it.
  std::unique_ptr<const ConversationSource> owned_source_;
  const ConversationSource* source_;
  // source_->in_memory(): gates and retention marks (null for a streamed source).
  const AgenticWorkload* workload_;
  // Conversations loaded (0, 1, ... in order) and held: held_[k] is null once released.
  std::vector<std::shared_ptr<const WekaConversation>> held_;
  // Per held streamed conversation: its agents' ids, the main agent's first, then sub-agent j's
  // at j + 1 (their requests' hash_ids are emptied); empty for an in-memory one.
  std::vector<std::vector<AgentBlockIds>> held_ids_;
  // Per loaded conversation: its agents not yet ended, and whether one failed (kept then).
  std::vector<int32_t> live_agents_;
  std::vector<bool> conversation_failed_;
  AgentDriverOptions options_;
  kv::BlockKeyHasher hasher_;
  TimeNs origin_;
  bool started_ = false;
  Status status_;
  std::vector<Agent> agents_;
  int64_t agents_ended_ = 0;
  // Start gating (empty without gates): agents not yet ended per group; the last group g such
  // that every group <= g has ended; conversations waiting for their gate, in workload order.
  std::vector<int64_t> group_agents_pending_;
  int32_t groups_ended_through_ = -1;
  std::vector<int32_t> gated_conversations_;
  // Index in agents_ of each conversation's main agent.
  std::vector<int32_t> main_agent_of_;
  // Requests submitted and not completed, by slot (request id - first_request_id): the agent,
  // and the log entry when it is not kept in result_.requests[slot].
  struct InFlight {
    int32_t agent = 0;
    DriverRequest log;
  };
  std::unordered_map<int64_t, InFlight> in_flight_;
  // Slots taken so far (a request the target refused gives its slot back).
  int64_t slots_ = 0;
  AgentDriverResult result_;
};

// Creates a driver, starts it, runs the loop until idle and returns the result, or the first
// error (Create's, or a Submit() error).
StatusOr<AgentDriverResult> RunAgentWorkload(EventLoop* loop, AgentTarget* gateway,
                                             const AgenticWorkload& workload,
                                             const AgentDriverOptions& options);

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_FLEET_AGENT_DRIVER_H_
