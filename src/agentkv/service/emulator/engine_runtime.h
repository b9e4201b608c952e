// EngineRuntime: one emulated SGLang engine running in real time. It owns an engine::Engine
// (the real StepScheduler over the real KvCacheManager, priced by the CostModel, built from
// one engine::EngineConfig) and steps it on its own thread, each step lasting what the cost
// model says divided by `speed` (or not waiting at all, unpaced).
// The HTTP layer (engine_emulator.h) turns /generate, /abort_request, /close_session,
// /flush_cache and /metrics into calls on this class; the runtime knows nothing of HTTP.
//
// Tokens. The emulator has no model and no tokenizer: prompts are token ids (the HTTP layer
// turns text into 4-byte pseudo tokens), the KV block keys are chained hashes of each full
// page of token ids (namespaced by `extra_key`/`cache_salt`), and output tokens are
// deterministic pseudo tokens drawn from the request id. Equal prompts therefore share KV as in
// SGLang's radix cache, page by page. A request's output is cached as SGLang's
// cache_finished_req caches it: its tokens are known up front, so the request carries the keys
// of the pages prompt + output[:-1] fills, and the scheduler commits them when it finishes (or
// is aborted); a turn that re-sends the previous turn's input_ids + output_ids reuses them.
//
// Limits. Request lengths follow SGLang (context_limits.h): an input of the context length or
// more, or an input plus max_new_tokens reaching it, is refused by Submit with SGLang's
// message; an input of max_req_input_len or more ends at once as an abort with status 400;
// max_new_tokens is clamped to max_req_len - input - 1, so every request fits the KV pool and
// finishes. Per-request state lives only while the request is active; session ids are kept in
// an LRU of `max_sessions` entries (the least recently used idle session is closed, as
// /close_session would, when a new one would exceed it).
//
// Threads. Submit, Abort, CloseSession, FlushCache and Snapshot may be called from any thread
// but a callback (CloseSession and FlushCache wait for the runtime thread); commands are queued
// and applied by the runtime thread between steps. Callbacks of a request run on the runtime
// thread, in order: zero or more on_tokens, then exactly one on_finish (also on Shutdown,
// which aborts every request still active), after the snapshot that includes the request's
// end is published. A callback must not block.
#ifndef AGENTKV_SERVICE_EMULATOR_ENGINE_RUNTIME_H_
#define AGENTKV_SERVICE_EMULATOR_ENGINE_RUNTIME_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/strong_id.h"
#include "agentkv/base/time.h"
#include "agentkv/engine/cost_model.h"
#include "agentkv/engine/engine.h"
#include "agentkv/engine/engine_config.h"
#include "agentkv/engine/step_scheduler.h"
#include "agentkv/kv/kv_cache_options.h"
#include "agentkv/kv/kv_cache_stats.h"
#include "agentkv/kv/pause_estimator.h"
#include "agentkv/service/common/context_limits.h"
#include "agentkv/service/emulator/lru_map.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::service {

// SGLang --radix-eviction-policy: what orders the eviction of a request's prompt KV.
enum class RadixEvictionPolicy : uint8_t {
  // Least recently used; request priorities are ignored.
  kLru,
  // A request's `priority`, clamped to [0, 100], is its prompt KV's retention priority.
  kPriority,
};

// SGLang's /pause_generation modes (PauseGenerationReqInput.mode).
enum class GenerationPauseMode : uint8_t {
  // Abort and return every request being processed (SGLang's default).
  kAbort,
  // Stop the scheduler; requests stay where they are with their KV and continue after
  // /continue_generation.
  kInPlace,
  // SGLang moves running requests back to the waiting queue (their KV may be flushed and is
  // recomputed). The emulator keeps them in place, as kInPlace: the difference is what a
  // flush during the pause may drop, and the emulator refuses a flush while any request is
  // active (see FlushCache).
  kRetract,
};

// "abort", "in_place" or "retract" -> the mode; InvalidArgument naming `mode` otherwise.
[[nodiscard]] StatusOr<GenerationPauseMode> ParseGenerationPauseMode(std::string_view name);

// "lru" or "priority": the flag value and /server_info's radix_eviction_policy.
std::string_view RadixEvictionPolicyName(RadixEvictionPolicy policy);
// The policy named `name`; InvalidArgument "--radix-eviction-policy must be lru or priority,
// got \"NAME\"" otherwise.
[[nodiscard]] StatusOr<RadixEvictionPolicy> ParseRadixEvictionPolicy(std::string_view name);

// SGLang --schedule-policy as the emulator models it: "fcfs" (SGLang's default: the waiting
// queue in arrival order) or agentkv's "program-fcfs" (program-level FCFS, Continuum: ordered
// by the arrival of each request's program; engine::StepSchedulerOptions::program_fcfs).
// Returns whether program-level FCFS is on. InvalidArgument naming --schedule-policy and the
// value for anything else: SGLang's other policies (lpm, dfs-weight, lof, random, routing-key,
// ...) are not modelled.
[[nodiscard]] StatusOr<bool> ParseSchedulePolicy(std::string_view name);
// "program-fcfs" when `program_fcfs`, else "fcfs".
std::string_view SchedulePolicyName(bool program_fcfs);

// The engine config EngineRuntimeOptions starts from: EngineConfig's defaults (llama-3.1-8b on
// h100, tp 1, 16-token pages, the KV pool from the cost model, no host tier) with /close_session
// releasing a session's KV at once (kv::SessionCloseMode::kRelease).
engine::EngineConfig DefaultEmulatedEngine();

struct EngineRuntimeOptions {
  // The engine, as SGLang's flags set it: --model/--gpu/--tp (the cost model presets),
  // --max-running-requests, --max-prefill-tokens and --chunked-prefill-size (scheduler),
  // --page-size (kv_pool.tokens_per_block; range [1, 4096] here), --max-total-tokens
  // (kv_pool.max_total_tokens; 0 derives the pool from the cost model), the host (HiCache) tier
  // in tokens (kv_pool.hicache_tokens; hicache_ratio must stay 0), and the KV cache's policies
  // (cache.session_close_mode: what /close_session does; cache.eviction_order: agentkv's
  // gap-aware order, fed by the requests' pause hints and the runtime's clock), and stall
  // offload (engine.stall_offload, which needs the host tier: paused sessions' KV goes to host
  // memory under pressure and comes back before their predicted return, on the wall clock;
  // requests name their pause with agentkv_pause, their program with session_id).
  engine::EngineConfig engine = DefaultEmulatedEngine();
  // SGLang --context-length: the model's context length in tokens; 0 means the KV pool.
  // Default: 0. Range: [0, 2^40].
  int64_t context_length = 0;
  // Session ids remembered (with enable_session_radix_cache): past it, the least recently
  // used closed session is forgotten, else the least recently used session without an active
  // request is closed (as /close_session would) and forgotten. Each costs a few hundred bytes
  // plus the keys of the blocks it referenced. Default: 16384. Range: [1, 2^24].
  int64_t max_sessions = 16384;
  // Program-level FCFS (engine.scheduler.program_fcfs, `--schedule-policy program-fcfs`): a
  // request's program is its agentkv_parent_session when set, else its session_id (none: a
  // program of its own); the waiting queue is ordered by when each program first arrived.
  // /close_session forgets the session's program, and past max_sessions programs the least
  // recently used one without an active request is forgotten, so the scheduler's memory of
  // programs stays bounded however many sessions a long run sees.
  // SGLang --enable-session-radix-cache: a request's `session_id` tags its KV; /close_session
  // releases or dereferences it (engine.cache.session_close_mode). Without it session ids are
  // ignored.
  bool enable_session_radix_cache = false;
  // SGLang --radix-eviction-policy. Default: kLru.
  RadixEvictionPolicy radix_eviction_policy = RadixEvictionPolicy::kLru;
  // Simulated seconds per wall second; 2.0 runs twice as fast as the modelled GPU.
  // Default: 1. Range: (0, 1e6].
  double speed = 1.0;
  // When false, steps do not wait at all (benchmarks). Default: true.
  bool paced = true;

  // InvalidArgument naming the first bad field (as its SGLang flag where there is one).
  Status Validate() const;
};

// What a request asks for.
struct GenerateInput {
  // The request id (/abort_request key). Must be unique among active requests.
  std::string rid;
  std::vector<int64_t> input_ids;
  // sampling_params.max_new_tokens. Range: >= 0 (0 finishes at once after the prefill);
  // values past the context are refused, see Submit.
  int64_t max_new_tokens = 128;
  // Top-level session_id (used with enable_session_radix_cache).
  std::optional<std::string> session_id;
  // Request priority (used with radix_eviction_policy "priority").
  std::optional<int64_t> priority;
  // The pause expected after it (the body's agentkv_pause, protocol::ParsePauseHint): the gap-aware
  // order ranks by it, and stall offload (engine.stall_offload with enable_session_radix_cache: the
  // session names the program) moves a paused session's KV by it (engine::StallPauseClass).
  PauseKind pause = PauseKind::kUnknown;
  // extra_key / cache_salt: requests with different namespaces never share KV.
  std::string cache_namespace;
  // The body's agentkv_parent_session: this request's session is a sub-agent of that session.
  // Read only under per_conversation retention and with a session_id (see Submit).
  std::optional<std::string> parent_session;
};

// How a request ended.
struct GenerateResult {
  std::string rid;
  std::vector<int64_t> output_ids;
  // True when /abort_request (or shutdown) ended it; output_ids are the tokens produced.
  bool aborted = false;
  std::string abort_message;
  // 400 when the engine refused the request before running it (SGLang's scheduler abort with
  // status_code 400, err_type "BadRequestError": the input is over max_req_input_len); 0 for
  // every other end.
  int abort_status_code = 0;
  int64_t prompt_tokens = 0;
  // Prompt tokens found in the prefix cache at first admission: on the device, from the host.
  int64_t cached_tokens = 0;
  int64_t cached_device_tokens = 0;
  int64_t cached_host_tokens = 0;
  // Wall seconds from Submit to the end, and to first admission into the running batch.
  double e2e_latency_s = 0;
  double queue_time_s = 0;
};

struct GenerateCallbacks {
  // New output tokens, in order (streaming). May be empty.
  std::function<void(std::span<const int64_t> tokens)> on_tokens;
  // Exactly once.
  std::function<void(const GenerateResult& result)> on_finish;
};

// A fixed-bucket histogram (cumulative counts are computed when written).
struct LatencyHistogram {
  std::vector<double> upper_bounds;
  // counts[i]: observations <= upper_bounds[i] and > upper_bounds[i-1]; the last entry counts
  // the observations above every bound.
  std::vector<int64_t> counts;
  double sum = 0;
  int64_t count = 0;

  explicit LatencyHistogram(std::vector<double> bounds);
  void Observe(double value);
  // `n` observations of `value` at once. Precondition: n >= 0.
  void ObserveN(double value, int64_t n);
};

// The engine's state for /metrics and /server_info, refreshed after every step and command.
struct RuntimeSnapshot {
  engine::SchedulerGauges gauges;
  kv::KvCacheStats cache;
  int64_t max_total_num_tokens = 0;
  int64_t context_length = 0;
  int64_t max_req_input_len = 0;
  // Counters since start.
  int64_t num_requests_total = 0;
  int64_t num_aborted_requests_total = 0;
  int64_t prompt_tokens_total = 0;
  int64_t generation_tokens_total = 0;
  int64_t cached_tokens_device_total = 0;
  int64_t cached_tokens_host_total = 0;
  int64_t evicted_tokens_total = 0;
  // Tokens of KV loaded back from the host tier (SGLang's load_back_tokens_total).
  int64_t load_back_tokens_total = 0;
  int64_t steps = 0;
  // /pause_generation is in effect (no step runs), and the KV pool is released
  // (/release_memory_occupation; no step runs either).
  bool generation_paused = false;
  bool memory_released = false;
  // Session ids remembered now, and sessions closed because max_sessions was reached.
  int64_t sessions = 0;
  int64_t sessions_evicted_total = 0;
  // Output tokens per wall second over the last interval of about one second.
  double gen_throughput = 0;
  // Prefix hit rate of the requests admitted since the previous snapshot interval.
  double cache_hit_rate = 0;
  LatencyHistogram time_to_first_token{{}};
  LatencyHistogram inter_token_latency{{}};
  LatencyHistogram e2e_request_latency{{}};
  LatencyHistogram queue_time{{}};
  // Host tier transfers as the cost model prices them (SGLang's RadixCacheMetricsCollector):
  // device -> host evictions per step, and per step the load of host KV back to the device.
  LatencyHistogram eviction_duration{{}};
  LatencyHistogram load_back_duration{{}};
};

class EngineRuntime {
 public:
  // Validates, builds the cost model, KV cache and scheduler, and starts the runtime thread.
  static StatusOr<std::unique_ptr<EngineRuntime>> Start(const EngineRuntimeOptions& options);

  EngineRuntime(const EngineRuntime&) = delete;
  EngineRuntime& operator=(const EngineRuntime&) = delete;
  // Shutdown(), then joins.
  ~EngineRuntime();

  // Sub-agents (engine.cache.block_reuse_policy per_conversation, with finished-sub-agent
  // demotion when finished_subagent_priority is set): a request with a session_id is a turn of
  // the conversation that session names, and its parent_session registers it as that
  // session's child. The hint is taken as authenticated: only the gateway, which verifies the
  // signed header, sets agentkv_parent_session (it refuses the member in a client's body).
  //
  // Queues a request. InvalidArgument for an empty prompt, a negative max_new_tokens, or the
  // tokenizer manager's length errors (ContextLimits::CheckTokenizer: "The input (N tokens) is
  // longer than the model's context length ...", "Requested token count exceeds the model's
  // maximum context length ..."); AlreadyExists for the rid of an active request;
  // Unavailable after Shutdown. On error no callback runs. An accepted input over
  // max_req_input_len finishes at once with abort_status_code 400.
  Status Submit(GenerateInput input, GenerateCallbacks callbacks);

  // Aborts the active request `rid` (its on_finish reports aborted with the tokens so far);
  // unknown and finished rids are ignored. With `abort_all`, aborts every active request.
  void Abort(const std::string& rid, bool abort_all = false);

  // Closes `session_id` on the KV cache (release or dereference per the options; idempotent,
  // unknown ids are a no-op) and, with program-level FCFS, forgets when its program arrived (a
  // later request of it is a new program). Returns the tokens freed. Waits for the runtime
  // thread.
  int64_t CloseSession(const std::string& session_id);

  // The parent session `parent_session_id` sent its next request (the gateway's
  // /demote_finished_subagents fan-out): demotes the finished children of that parent this
  // engine holds (kv::KvCacheManager::DemoteFinishedSubagents), with the cache's clock at the
  // emulated time. Returns the children demoted; 0 when demotion is off. Waits for the runtime
  // thread.
  int64_t DemoteFinishedSubagents(const std::string& parent_session_id);

  // Empties the prefix cache when no request is running or waiting (SGLang's /flush_cache);
  // returns whether it did. Waits for the runtime thread.
  bool FlushCache();

  // SGLang's /pause_generation: no scheduler step runs until ContinueGeneration; requests
  // submitted meanwhile queue. kAbort first aborts every active request (each on_finish
  // reports aborted, "Abort request RID"); the other modes keep them. Idempotent. Waits for the
  // runtime thread.
  void PauseGeneration(GenerationPauseMode mode);
  // Lifts PauseGeneration. Idempotent. Waits for the runtime thread.
  void ContinueGeneration();

  // SGLang's /release_memory_occupation of the KV cache: empties the prefix cache and takes no
  // step until ResumeMemoryOccupation (requests submitted meanwhile queue).
  // FailedPrecondition when a request is running or waiting (release memory after pausing
  // with kAbort, or when idle, as RL frameworks do). Idempotent. Waits for the runtime thread.
  [[nodiscard]] Status ReleaseMemoryOccupation();
  // Gives the KV pool back (empty). Idempotent. Waits for the runtime thread.
  void ResumeMemoryOccupation();

  // A weight update (/update_weights_from_disk, /update_weights_from_distributed): the
  // emulator has no weights, so what it does is what new weights do to the cache. With
  // `abort_all_requests`, aborts every active request first. Without `flush_cache`, that is all
  // (returns false). Otherwise, when no request is active,
  // empties the prefix cache (KV computed by the old weights is stale) and returns true; when
  // requests are active but generation is paused, keeps the cache (SGLang's in-place pause
  // keeps their KV) and returns false. FailedPrecondition when requests are running and
  // generation is not paused: SGLang would wait for them; the emulator answers at once, so
  // the caller pauses first or aborts. Waits for the runtime thread.
  [[nodiscard]] StatusOr<bool> ApplyWeightUpdate(bool abort_all_requests, bool flush_cache);

  RuntimeSnapshot Snapshot() const;
  const EngineRuntimeOptions& options() const { return options_; }
  const engine::CostModel& cost_model() const { return engine_.cost_model(); }
  int64_t max_total_num_tokens() const { return engine_.max_total_num_tokens(); }
  const ContextLimits& limits() const { return limits_; }

  // Aborts every active request ("server is shutting down"), stops and joins the thread.
  // Idempotent.
  void Shutdown();

 private:
  struct Active;
  struct Command;

  struct Session {
    SessionId id;
    // Requests of the session submitted to the scheduler and not finished.
    int64_t active = 0;
    // Closed by CloseSession (remembered so that a later request finds it closed).
    bool closed = false;
  };

  // A program the scheduler remembers the arrival of (program-level FCFS).
  struct Program {
    // Requests of the program submitted to the scheduler and not finished.
    int64_t active = 0;
  };

  EngineRuntime(const EngineRuntimeOptions& options, engine::Engine engine, ContextLimits limits);

  // The program of `input` under program-level FCFS: its parent session, else its session;
  // nullopt without program-level FCFS or a session.
  std::optional<std::string> ProgramOf(const GenerateInput& input) const;
  // Marks program `name` the most recently used (remembered when new). Past max_sessions,
  // the scheduler forgets the least recently used program without an active request.
  Program& TouchProgram(const std::string& name);

  // The session named `name`, made the most recently used (opened when new). Past
  // max_sessions, forgets the least recently used closed session, else closes and forgets the
  // least recently used idle one.
  Session& TouchSession(const std::string& name);

  // Requests running plus waiting in the engine (runtime thread only).
  int64_t InFlight() const { return engine_.num_running() + engine_.num_waiting(); }

  void Run();
  // Whether the runtime thread takes a step now: a request is running or waiting and neither
  // PauseGeneration nor ReleaseMemoryOccupation is in effect (runtime thread only).
  bool CanStep();
  // Aborts one active request / every active request, in id order (runtime thread only).
  void AbortActive(RequestId id);
  void AbortAllActive();
  // Stall offload (engine.stall_offload): runs the engine's policy now and keeps the time of
  // its next prefetch in stall_wake_, which bounds the runtime thread's idle wait.
  void RunStallOffload();
  // Wall time since the runtime started: the clock stall offload learns pauses on.
  TimeNs Now() const;
  void StepOnce();
  void Finish(RequestId id, bool aborted, const std::string& message);
  void PublishSnapshot();
  // Publishes the snapshot, then runs the on_finish callbacks deferred since the last call.
  void PublishAndRunDeferred();
  std::vector<int64_t> PseudoTokens(const Active& active, int64_t from, int64_t n) const;
  // Emulated time since the start (wall time times `speed`), the KV cache's clock.
  TimeNs EmulatedNow() const;
  // Runs `work` on the runtime thread and waits for it.
  void RunOnRuntimeThread(const std::function<void()>& work);

  const EngineRuntimeOptions options_;
  const ContextLimits limits_;
  // The origin of Now(): the KV cache's clock (arrivals and finishes in the gap-aware order, the
  // sub-agent idle bound in seconds) and stall offload's times.
  const std::chrono::steady_clock::time_point epoch_ = std::chrono::steady_clock::now();
  // Tokens per KV page (the engine's block size).
  const int32_t page_size_;

  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  // Owned by the runtime thread (its const parts: cost model, pool, config, are read anywhere).
  engine::Engine engine_;
  std::unordered_map<RequestId, Active> active_;
  std::unordered_map<std::string, RequestId> id_of_rid_;
  LruMap<std::string, Session> sessions_;
  // Program-level FCFS: the programs whose arrival the scheduler remembers (runtime thread).
  LruMap<std::string, Program> programs_;
  // PauseGeneration / ReleaseMemoryOccupation in effect (runtime thread only): no step runs.
  bool generation_paused_ = false;
  bool memory_released_ = false;
  int64_t next_request_ = 0;
  int64_t next_session_ = 1;
  // The next stall offload prefetch (runtime thread only; the idle wait that reads it runs on
  // the runtime thread too).
  std::optional<std::chrono::steady_clock::time_point> stall_wake_;
  RuntimeSnapshot counters_;
  std::vector<std::pair<std::function<void(const GenerateResult&)>, GenerateResult>>
      deferred_finishes_;

  // Shared with callers.
  mutable sync::Mutex mu_;
  sync::CondVar wake_;
  std::deque<Command> commands_ AGENTKV_GUARDED_BY(mu_);
  // Rids submitted and not finished (duplicate check on the caller's thread).
  std::unordered_map<std::string, int> active_rids_ AGENTKV_GUARDED_BY(mu_);
  bool stopping_ AGENTKV_GUARDED_BY(mu_) = false;
  RuntimeSnapshot snapshot_ AGENTKV_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_EMULATOR_ENGINE_RUNTIME_H_
