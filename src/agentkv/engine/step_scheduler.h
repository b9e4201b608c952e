// StepScheduler: one engine's continuous-batching step scheduler over kv::KvCacheManager.
//
// It models SGLang's scheduler loop at step granularity: a FIFO waiting queue, a per-step
// prefill token budget with chunked prefill, one decode token per running request per step,
// block allocation through the cache (which evicts and onboards host blocks), and preemption
// (SGLang's "retract": release the newest running request and requeue it at the front; its KV
// is recomputed on re-admission). Each Step() returns the batch shape a cost model prices and
// advances the cache's step counter once. The simulator and the engine emulator drive it; it
// owns its KvCacheManager, so block accounting is the real `kv` code.
//
// Bounded by construction. Submit refuses a request that could never fit the device tier on
// its own (token counts are range-checked with base/bounds.h first, so their sums cannot
// overflow), and every accepted request finishes: retraction always picks the newest running
// request, so the oldest one only waits for requests older than itself, and it fits alone.
// A finished request stays until its caller takes the report (TakeReport), so the scheduler's
// memory follows the requests in flight, not the requests ever served.
//
// Thread-compatible: const methods may run concurrently; mutation needs external
// synchronization. Deterministic: equal options and calls give equal results.
#ifndef AGENTKV_ENGINE_STEP_SCHEDULER_H_
#define AGENTKV_ENGINE_STEP_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <unordered_map>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/strong_id.h"
#include "agentkv/base/time.h"
#include "agentkv/kv/block_key.h"
#include "agentkv/kv/kv_cache_manager.h"
#include "agentkv/kv/pause_estimator.h"

namespace agentkv::engine {

struct StepSchedulerOptions {
  // SGLang --max-running-requests: requests in the running batch at once.
  // Default: 256. Range: [1, 1 << 20].
  int64_t max_running_requests = 256;
  // SGLang --max-prefill-tokens: prefill tokens (new prompt tokens computed) per step.
  // Default: 16384. Range: [1, 1 << 30].
  int64_t max_prefill_tokens = 16384;
  // SGLang --chunked-prefill-size: the most prefill tokens of one request per step; 0 disables
  // chunking (a prompt is prefilled in one step; the first prefill of a step may then exceed
  // max_prefill_tokens, later ones must fit). Default: 8192. Range: [0, 1 << 30].
  int64_t chunked_prefill_size = 8192;
  // Program-level FCFS (Continuum): the waiting queue is ordered by the arrival of each
  // request's program (its parent conversation for a sub-agent, else its conversation; a
  // request of neither is a program of its own) at this engine instead of the request's own
  // arrival, so a continuing program's next turn goes before a newer program's requests.
  // Retracted requests still go to the front. Default: false (SGLang's FIFO).
  bool program_fcfs = false;

  // InvalidArgument naming the first field out of range and its value.
  Status Validate() const;
};

// One request as the engine receives it.
struct SchedulerRequest {
  RequestId id;
  // Keys of the prompt's full blocks, chained from the root (computed by the caller).
  // At most prompt_tokens / tokens_per_block of them.
  std::vector<kv::BlockKey> prompt_keys;
  // Keys of the blocks after prompt_keys, chained on from them: key j names block
  // prompt_keys.size() + j of the sequence prompt + output, normally the full blocks that the
  // output completes (SGLang's cache_finished_req inserts prompt + output). The caller knows
  // the output's content (the emulator's tokens, a trace's next turn); empty when it does not.
  // prompt_keys.size() + output_keys.size() is at most (prompt_tokens + max_new_tokens) /
  // tokens_per_block. Only blocks whose KV the request computed are ever committed: the last
  // output token has no KV, so at most (prompt_tokens + max_new_tokens - 1) / tokens_per_block.
  std::vector<kv::BlockKey> output_keys;
  // Prompt length in tokens. Range: [1, kMaxTokens] (base/bounds.h).
  int64_t prompt_tokens = 0;
  // Output tokens to generate (the request's output length). Range: [1, kMaxTokens].
  int64_t max_new_tokens = 1;
  // Session, conversation and retention inputs passed to KvCacheManager::AddRequest, and the
  // client's hint of the pause that follows this request (kv_options.next_pause: a tool call,
  // a wait for sub-agents, a human's turn, the end of the session; the wire's agentkv_pause):
  // the one copy of it, read by the cache's gap-aware order at Release and by stall offload
  // (Engine::Submit). The scheduler does not read the hint.
  kv::RequestOptions kv_options;
  // The request's program for program_fcfs, when the caller names it apart from the cache's
  // conversations (the engine emulator does, from the wire's session ids); nullopt: the
  // parent conversation, else the conversation of kv_options. Default: nullopt.
  std::optional<ConversationId> program;
};

// What one request did in one step.
struct ScheduledWork {
  RequestId id;
  // Prompt (or recomputed) tokens computed this step; 0 for a decode.
  int64_t prefill_tokens = 0;
  // 1 for a decode step, else 0.
  int64_t decode_tokens = 0;
  // Tokens already in the request's KV before this step (attention context of this work).
  int64_t context_tokens = 0;
  // Whether this step emitted an output token for the request (a decode, or a final chunk).
  bool emitted_token = false;
};

// The shape of one step, as a cost model needs it.
struct StepResult {
  // The step this result is for (the cache's step counter before it advanced).
  Step step;
  // Running requests that computed something, in running order (oldest admission first).
  std::vector<ScheduledWork> batch;
  int64_t prefill_tokens = 0;
  int64_t decode_tokens = 0;
  // Requests that produced their last token this step (released from the cache).
  std::vector<RequestId> finished;
  // Requests retracted this step, newest first (requeued at the front of the waiting queue).
  std::vector<RequestId> preempted;
  // Requests admitted from the waiting queue this step, in admission order.
  std::vector<RequestId> admitted;
};

// Per-request outcome, complete once the request finished.
struct RequestReport {
  RequestId id;
  Step submitted;
  // First admission into the running batch; queue_steps = first_scheduled - submitted.
  std::optional<Step> first_scheduled;
  int64_t queue_steps = 0;
  // The step whose prefill emitted the first output token (TTFT in steps:
  // first_token - submitted + 1 steps of engine work).
  std::optional<Step> first_token;
  std::optional<Step> finished;
  // Prefix tokens found at first admission on the device and onboarded from the host, and the
  // prompt tokens computed then.
  int64_t cached_device_tokens = 0;
  int64_t cached_host_tokens = 0;
  int64_t uncached_tokens = 0;
  // Tokens computed again after preemptions (re-admissions' uncached tokens), and how often
  // the request was preempted.
  int64_t recomputed_tokens = 0;
  int64_t preemptions = 0;
  int64_t output_tokens = 0;
  // Set when the request finished without running: the cache refused it (AddRequest failed,
  // e.g. a bad retention config), or a caller (the simulator) refused it because it could
  // never fit (CheckFits).
  bool rejected = false;
  // Set when Abort() ended the request before it produced max_new_tokens; output_tokens are
  // the tokens produced until then.
  bool aborted = false;
};

// Gauges as SGLang exports them (in tokens of the device tier).
struct SchedulerGauges {
  int64_t max_total_num_tokens = 0;
  // Tokens held by running requests (capacity - available - evictable).
  int64_t num_used_tokens = 0;
  // num_used_tokens / max_total_num_tokens: excludes evictable cached KV.
  double token_usage = 0.0;
  int64_t available_tokens = 0;
  int64_t evictable_tokens = 0;
  int64_t num_running_reqs = 0;
  int64_t num_queue_reqs = 0;
  // Cumulative.
  int64_t num_preemptions = 0;
  int64_t num_finished_reqs = 0;
};

class StepScheduler {
 public:
  // Validates `options` (InvalidArgument naming the field) and takes ownership of `cache`,
  // which must have no active requests (FailedPrecondition otherwise).
  static StatusOr<StepScheduler> Create(const StepSchedulerOptions& options,
                                        kv::KvCacheManager cache);

  StepScheduler(StepScheduler&&) = default;
  StepScheduler& operator=(StepScheduler&&) = default;
  StepScheduler(const StepScheduler&) = delete;
  StepScheduler& operator=(const StepScheduler&) = delete;

  const StepSchedulerOptions& options() const { return options_; }
  const kv::KvCacheManager& cache() const { return cache_; }
  // For session closes and priority changes. Callers must not add or release requests the
  // scheduler runs.
  kv::KvCacheManager& mutable_cache() { return cache_; }

  // OK when a request of `prompt_tokens` prompt and `max_new_tokens` output tokens can run on
  // this engine: both in [1, kMaxTokens] and prompt plus output within the device tier, so
  // that it fits even alone. InvalidArgument naming the field or the capacity otherwise (the
  // request could never run; retried, it would be retracted forever).
  [[nodiscard]] Status CheckFits(int64_t prompt_tokens, int64_t max_new_tokens) const;

  // Appends `request` to the waiting queue (with program_fcfs: after every waiting request of
  // a program that arrived no later than its own). InvalidArgument when CheckFits refuses it,
  // it has more prompt keys than full prompt blocks, or more prompt and output keys than
  // prompt + output has full blocks; AlreadyExists for the id of a request submitted
  // and not yet retired (TakeReport).
  [[nodiscard]] Status Submit(SchedulerRequest request);

  // Forgets when `program` arrived (its program ended): a later request of it counts as a new
  // program. With program_fcfs the scheduler remembers one arrival per program seen until
  // then. A program it does not remember is a no-op.
  void ForgetProgram(ConversationId program);
  int64_t num_programs() const { return static_cast<int64_t>(program_arrival_.size()); }

  // Runs one iteration and advances the cache's step once:
  //   1. Decode: each running request past its prefill, oldest first, reserves one more token;
  //      when the cache cannot supply it, the newest running request is retracted (released
  //      and requeued at the front) until it can or the request itself was retracted.
  //   2. Chunked prefill: running requests mid-prefill continue, oldest first, within the
  //      token budget (a failed reservation waits a step).
  //   3. Admission (skipped in a step that preempted): waiting requests in FIFO order while the
  //      batch has room, the budget lasts and the cache can reserve their first chunk. The
  //      prompt is matched without its last token (which is always recomputed).
  // A prefill that completes emits the first output token; each decode emits one more; a
  // request finishes (and is released) once it has max_new_tokens. Keyed blocks (prompt_keys,
  // then output_keys) are committed as prefill covers them, and a finishing request commits,
  // before its release, every keyed block its KV covers (prompt + output - 1 tokens: SGLang's
  // cache_finished_req), so the next turn of a conversation reuses the previous answer. A
  // retracted request commits nothing more (SGLang retracts without inserting); its
  // recomputation commits the blocks its prefill covers again. If nothing could run while requests
  // are running, the newest is retracted so that the next step progresses.
  StepResult Step();

  // Ends `id` now, wherever it is (SGLang's /abort_request): a waiting request leaves the
  // queue, a running one first commits every keyed block its KV covers, as a finished request
  // does (SGLang caches an aborted request's computed prefix), then releases its KV; the report is
  // marked aborted and keeps the tokens produced so far. Returns true when the request was ended,
  // false when it had already finished (abort is idempotent until the report is taken). NotFound
  // for an id the scheduler does not hold (never submitted, or retired by TakeReport).
  StatusOr<bool> Abort(RequestId id);

  // Retires finished request `id` and returns its report: the scheduler forgets the id (it
  // may be submitted again). Every finished request (StepResult::finished, Abort) stays until
  // its report is taken. NotFound for an id the scheduler does not hold; FailedPrecondition
  // for a request still waiting or running.
  StatusOr<RequestReport> TakeReport(RequestId id);

  SchedulerGauges gauges() const;
  // The report of a request waiting, running, or finished and not yet retired (live while it
  // runs), or nullptr for an id the scheduler does not hold.
  const RequestReport* FindReport(RequestId id) const;

  // Requests ever submitted and ever finished (cumulative), and those held now: waiting,
  // running, or finished with their report not yet taken.
  int64_t num_submitted() const { return num_submitted_; }
  int64_t num_finished() const { return num_finished_; }
  int64_t num_held() const { return static_cast<int64_t>(requests_.size()); }
  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  int64_t num_preemptions() const { return num_preemptions_; }
  agentkv::Step current_step() const { return cache_.current_step(); }

  // Internal naming the first broken invariant: held == running + waiting + finished-untaken,
  // submitted == running + waiting + finished, each request in exactly the place its phase
  // says, every running request holds the KV of the tokens it computed and committed no block
  // its KV does not cover, the cache runs exactly the running requests, and the cache's own
  // invariants hold.
  Status CheckInvariants() const;

 private:
  enum class Phase : uint8_t { kWaiting, kPrefill, kDecode, kFinished };

  struct Entry {
    SchedulerRequest request;
    RequestReport report;
    Phase phase = Phase::kWaiting;
    // Tokens to prefill on this admission: the prompt, plus output already generated when
    // the request was preempted.
    int64_t prefill_target = 0;
    // Tokens whose KV the request holds and has computed (or reused).
    int64_t kv_tokens = 0;
    // The request's keys: prompt_keys then output_keys (moved out of `request`), block i of
    // prompt + output named by keys[i].
    std::vector<kv::BlockKey> keys;
    // Keyed blocks the cache holds committed for the request: the matched prefix plus the
    // ones committed since. commit_failed stops commits after a key collision.
    int64_t committed_blocks = 0;
    bool commit_failed = false;
    // The arrival of the request's program: the waiting queue's order key with program_fcfs.
    uint64_t program_arrival = 0;
    // Where the last admission estimate's match of `keys` ended: a request held at the head of
    // the queue is estimated every step, and resumes there.
    kv::MatchResume estimate_resume;
    // While running: tokens the blocks reserved since its admission cover (at least). A decode
    // step's Reserve within them would change nothing and is skipped.
    int64_t reserved_tokens = 0;
  };
  // A running request and its entry (entries are nodes: the pointer lives as long as the
  // entry), so that a step reaches each running entry without a lookup.
  struct Running {
    RequestId id;
    Entry* entry = nullptr;
  };

  StepScheduler(const StepSchedulerOptions& options, kv::KvCacheManager cache);

  // Reserves KV for `tokens` tokens of running request `index`, retracting the newest running
  // requests as needed. False when the request itself was retracted.
  bool ReserveOrPreempt(size_t index, int64_t tokens, StepResult& result);
  void Preempt(StepResult& result);
  // Commits the keyed blocks (prompt, then output) the request's KV now covers.
  void CommitCoveredBlocks(RequestId id, Entry& entry);
  // Runs one prefill chunk of `chunk` tokens (KV already reserved), emitting the first token
  // when the prefill completes.
  void RunPrefill(RequestId id, Entry& entry, int64_t chunk, StepResult& result);
  void EmitToken(RequestId id, Entry& entry, StepResult& result);
  void Finish(RequestId id, Entry& entry, StepResult& result);
  // Marks `entry` finished at the current step and drops what only a live request needs.
  void MarkFinished(Entry& entry);
  // Tries to admit the front waiting request within `budget`; false stops admission.
  bool AdmitFront(int64_t& budget, bool first_prefill, StepResult& result);
  int64_t BlocksForTokens(int64_t tokens) const;
  // The arrival of `request`'s program, recorded now for a program not seen before.
  uint64_t ProgramArrival(const SchedulerRequest& request);
  // Queues waiting request `id` by its program's arrival (program_fcfs) or at the back.
  void EnqueueWaiting(RequestId id, uint64_t program_arrival);

  StepSchedulerOptions options_;
  kv::KvCacheManager cache_;
  // Waiting, running and finished-untaken requests. Looked up by id only; every ordered walk
  // goes over running_ or waiting_.
  std::unordered_map<RequestId, Entry> requests_;
  std::deque<RequestId> waiting_;
  // Admission order: the back is the newest, the first to be retracted.
  std::vector<Running> running_;
  // Program-level FCFS: each program's arrival, by program; looked up only. Arrivals count
  // submissions (the order, not the time).
  std::unordered_map<ConversationId, uint64_t> program_arrival_;
  uint64_t next_arrival_ = 0;
  int64_t num_submitted_ = 0;
  int64_t num_finished_ = 0;
  int64_t num_preemptions_ = 0;
};

}  // namespace agentkv::engine

#endif  // AGENTKV_ENGINE_STEP_SCHEDULER_H_
