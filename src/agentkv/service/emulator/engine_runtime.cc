#include "agentkv/service/emulator/engine_runtime.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>
#include <utility>

#include "agentkv/base/bounds.h"
#include "agentkv/base/check.h"
#include "agentkv/base/hash.h"
#include "agentkv/kv/block_key.h"
#include "agentkv/kv/kv_cache_manager.h"
#include "agentkv/kv/retention.h"
#include "agentkv/sync/mutex.h"

// Invariants:
// - active_ holds exactly the requests submitted to scheduler_ and not finished; each has
//   delivered <= its report's output_tokens and produced its tokens in order. The scheduler
//   holds exactly these (Finish takes each report), so nothing grows with requests served.
// - Every request given to scheduler_ passed limits_ (prompt < max_req_input_len, output
//   clamped to max_req_len - prompt - 1), so it fits the pool and finishes.
// - active_rids_ (under mu_) holds the rids of queued or active requests.
// - sessions_ holds at most max_sessions entries, or more only while every entry has an
//   active request; an entry's `active` counts its requests in active_.
// - Callbacks run only on the runtime thread; on_finish exactly once per accepted request.

namespace agentkv::service {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kMaxTotalTokens = int64_t{1} << 40;
constexpr int64_t kVocabularyBase = 1000;
constexpr int64_t kVocabularySpan = 31'000;
constexpr uint64_t kOutputSeed = 0x6f7574707574ULL;    // "output"
constexpr uint64_t kPageSeed = 0x70616765ULL;          // "page"
constexpr uint64_t kNamespaceSeed = 0x6e616d65ULL;     // "name"
constexpr uint64_t kConversationSeed = 0x636f6e76ULL;  // "conv"
constexpr std::chrono::milliseconds kRateWindow{1000};

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The KV cache conversation a session name stands for (sub-agent demotion).
ConversationId ConversationOf(std::string_view session) {
  return ConversationId(static_cast<int64_t>(Hash64(session, kConversationSeed) >> 1));
}

// SGLang's default histogram buckets (metrics/collector.py; --bucket-time-to-first-token,
// --bucket-inter-token-latency and --bucket-e2e-request-latency override the first three).
std::vector<double> TimeToFirstTokenBuckets() {
  return {0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400};
}
std::vector<double> InterTokenLatencyBuckets() {
  return {0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060,
          0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.0,   2.0,   4.0,   6.0,   8.0};
}
std::vector<double> E2eRequestLatencyBuckets() {
  return {0.1, 0.2, 0.4, 0.6, 0.8, 1,   2,   4,   6,    8,    10,
          20,  40,  60,  80,  100, 200, 400, 600, 1200, 1800, 2400};
}
std::vector<double> QueueTimeBuckets() {
  return {0.0, 0.1, 0.2, 0.5, 1,    2,    3,    4,    5,    10,   15,   20,
          30,  40,  50,  60,  70,   80,   90,   100,  200,  300,  400,  500,
          600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000};
}
// RadixCacheMetricsCollector's eviction and load-back buckets.
std::vector<double> KvTransferBuckets() {
  return {0.001, 0.002, 0.003, 0.004, 0.005, 0.006, 0.007, 0.008, 0.009,
          0.01,  0.02,  0.03,  0.04,  0.05,  0.1,   0.2,   0.5,   1.0};
}

// Chained block keys of every full page of `tokens` under `namespace_id`.
std::vector<kv::BlockKey> PageKeys(const kv::BlockKeyHasher& hasher,
                                   std::span<const int64_t> tokens, int32_t page_size,
                                   uint64_t namespace_id) {
  const size_t pages = tokens.size() / static_cast<size_t>(page_size);
  std::vector<uint64_t> ids(pages);
  for (size_t p = 0; p < pages; ++p) {
    const auto page =
        tokens.subspan(p * static_cast<size_t>(page_size), static_cast<size_t>(page_size));
    ids[p] = Hash64(std::as_bytes(page), kPageSeed);
  }
  return hasher.KeysFromBlockIds(ids, namespace_id);
}

// Output token `index` (0-based) of the request whose id hashes to `rid_hash`.
int64_t PseudoToken(uint64_t rid_hash, int64_t index) {
  const uint64_t h = Mix64(HashCombine(rid_hash, static_cast<uint64_t>(index)));
  return kVocabularyBase + static_cast<int64_t>(h % static_cast<uint64_t>(kVocabularySpan));
}

}  // namespace

LatencyHistogram::LatencyHistogram(std::vector<double> bounds)
    : upper_bounds(std::move(bounds)), counts(upper_bounds.size() + 1, 0) {}

void LatencyHistogram::ObserveN(double value, int64_t n) {
  const auto it = std::lower_bound(upper_bounds.begin(), upper_bounds.end(), value);
  counts[static_cast<size_t>(it - upper_bounds.begin())] += n;
  sum += value * static_cast<double>(n);
  count += n;
}

void LatencyHistogram::Observe(double value) {
  const auto it = std::lower_bound(upper_bounds.begin(), upper_bounds.end(), value);
  ++counts[static_cast<size_t>(it - upper_bounds.begin())];
  sum += value;
  ++count;
}

std::string_view RadixEvictionPolicyName(RadixEvictionPolicy policy) {
  return policy == RadixEvictionPolicy::kPriority ? "priority" : "lru";
}

StatusOr<RadixEvictionPolicy> ParseRadixEvictionPolicy(std::string_view name) {
  if (name == "lru") return RadixEvictionPolicy::kLru;
  if (name == "priority") return RadixEvictionPolicy::kPriority;
  return InvalidArgumentError("--radix-eviction-policy must be lru or priority, got \"" +
                              std::string(name) + "\"");
}

StatusOr<bool> ParseSchedulePolicy(std::string_view name) {
  if (name == "fcfs") return false;
  if (name == "program-fcfs") return true;
  return InvalidArgumentError(
      "--schedule-policy must be fcfs or program-fcfs, got \"" + std::string(name) +
      "\": SGLang's other policies (lpm, dfs-weight, lof, random, routing-key, ...) are not "
      "modelled by the engine emulator");
}

std::string_view SchedulePolicyName(bool program_fcfs) {
  return program_fcfs ? "program-fcfs" : "fcfs";
}

StatusOr<GenerationPauseMode> ParseGenerationPauseMode(std::string_view name) {
  if (name == "abort") return GenerationPauseMode::kAbort;
  if (name == "in_place") return GenerationPauseMode::kInPlace;
  if (name == "retract") return GenerationPauseMode::kRetract;
  return InvalidArgumentError("mode: expected \"abort\", \"in_place\" or \"retract\", got \"" +
                              std::string(name) + "\"");
}

engine::EngineConfig DefaultEmulatedEngine() {
  engine::EngineConfig config;
  config.cache.session_close_mode = kv::SessionCloseMode::kRelease;
  return config;
}

Status EngineRuntimeOptions::Validate() const {
  const engine::KvPoolOptions& pool = engine.kv_pool;
  // The flags' own messages first; then the config's for what has no flag.
  AGENTKV_RETURN_IF_ERROR(engine.scheduler.Validate());
  if (pool.tokens_per_block < 1 || pool.tokens_per_block > 4096) {
    return InvalidArgumentError("--page-size must be in [1, 4096], got " +
                                std::to_string(pool.tokens_per_block));
  }
  if (pool.max_total_tokens < 0 || pool.max_total_tokens > kMaxTotalTokens) {
    return InvalidArgumentError("--max-total-tokens must be in [0, 2^40], got " +
                                std::to_string(pool.max_total_tokens));
  }
  if (pool.max_total_tokens > 0 && pool.max_total_tokens < pool.tokens_per_block) {
    return InvalidArgumentError("--max-total-tokens " + std::to_string(pool.max_total_tokens) +
                                " is less than one page of " +
                                std::to_string(pool.tokens_per_block) + " tokens");
  }
  AGENTKV_RETURN_IF_ERROR(CheckTokens("--context-length", context_length));
  if (max_sessions < 1 || max_sessions > (int64_t{1} << 24)) {
    return InvalidArgumentError("--max-sessions must be in [1, 2^24], got " +
                                std::to_string(max_sessions));
  }
  if (pool.hicache_tokens < 0 || pool.hicache_tokens > kMaxTotalTokens) {
    return InvalidArgumentError("host_tokens must be in [0, 2^40], got " +
                                std::to_string(pool.hicache_tokens));
  }
  if (pool.hicache_ratio != 0.0) {
    return InvalidArgumentError(
        "engine.kv_pool.hicache_ratio must be 0: the emulator's host tier is hicache_tokens");
  }
  if (!(speed > 0 && speed <= 1e6)) {
    return InvalidArgumentError("--speed must be in (0, 1e6], got " + std::to_string(speed));
  }
  return engine.Validate();
}

struct EngineRuntime::Active {
  GenerateInput input;
  GenerateCallbacks callbacks;
  uint64_t rid_hash = 0;
  Clock::time_point arrival;
  std::optional<Clock::time_point> first_scheduled;
  std::optional<Clock::time_point> first_token;
  // When the latest output tokens were delivered (inter-token latency).
  Clock::time_point last_token;
  // The scheduler runs at least one output token; the client may have asked for none.
  int64_t requested_tokens = 0;
  std::vector<int64_t> output_ids;
};

struct EngineRuntime::Command {
  std::function<void()> work;
};

StatusOr<std::unique_ptr<EngineRuntime>> EngineRuntime::Start(const EngineRuntimeOptions& options) {
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  AGENTKV_ASSIGN_OR_RETURN(engine::Engine engine, engine::Engine::Create(options.engine));
  AGENTKV_ASSIGN_OR_RETURN(
      ContextLimits limits,
      ContextLimits::Create(options.context_length, engine.max_total_num_tokens()));
  std::unique_ptr<EngineRuntime> runtime(new EngineRuntime(options, std::move(engine), limits));
  runtime->PublishSnapshot();
  runtime->thread_ = std::thread([r = runtime.get()] { r->Run(); });
  return runtime;
}

EngineRuntime::EngineRuntime(const EngineRuntimeOptions& options, engine::Engine engine,
                             ContextLimits limits)
    : options_(options),
      limits_(limits),
      page_size_(engine.kv_pool().tokens_per_block),
      engine_(std::move(engine)) {
  counters_.max_total_num_tokens = engine_.max_total_num_tokens();
  counters_.context_length = limits_.context_length();
  counters_.max_req_input_len = limits_.max_req_input_len();
  counters_.time_to_first_token = LatencyHistogram(TimeToFirstTokenBuckets());
  counters_.inter_token_latency = LatencyHistogram(InterTokenLatencyBuckets());
  counters_.e2e_request_latency = LatencyHistogram(E2eRequestLatencyBuckets());
  counters_.queue_time = LatencyHistogram(QueueTimeBuckets());
  counters_.eviction_duration = LatencyHistogram(KvTransferBuckets());
  counters_.load_back_duration = LatencyHistogram(KvTransferBuckets());
}

EngineRuntime::~EngineRuntime() { Shutdown(); }

Status EngineRuntime::Submit(GenerateInput input, GenerateCallbacks callbacks) {
  AGENTKV_RETURN_IF_ERROR(CheckInput(input));
  const Clock::time_point arrival = Clock::now();
  sync::MutexLock lock(&mu_);
  if (stopping_) return UnavailableError("the engine is shutting down");
  if (active_rids_.contains(input.rid)) {
    return AlreadyExistsError("request id \"" + input.rid + "\" is already running");
  }
  active_rids_.emplace(input.rid, 1);
  commands_.push_back(Command{
      [this, input = std::move(input), callbacks = std::move(callbacks), arrival]() mutable {
        StartRequest(std::move(input), std::move(callbacks), arrival);
      }});
  wake_.Signal();
  return Status::Ok();
}

Status EngineRuntime::CheckInput(const GenerateInput& input) const {
  if (input.input_ids.empty()) {
    return InvalidArgumentError("the input is empty: send text or input_ids");
  }
  if (input.max_new_tokens < 0) {
    return InvalidArgumentError("sampling_params.max_new_tokens must be >= 0, got " +
                                std::to_string(input.max_new_tokens));
  }
  const int64_t prompt = static_cast<int64_t>(input.input_ids.size());
  AGENTKV_RETURN_IF_ERROR(limits_.CheckTokenizer(prompt, input.max_new_tokens));
  // Both are now below the context length, itself within kMaxTokens.
  AGENTKV_CHECK(CheckTokens("prompt", prompt).ok() &&
                CheckTokens("max_new_tokens", input.max_new_tokens).ok());
  return Status::Ok();
}

void EngineRuntime::StartRequest(GenerateInput input, GenerateCallbacks callbacks,
                                 Clock::time_point arrival) {
  ++counters_.num_requests_total;
  const int64_t prompt_tokens = static_cast<int64_t>(input.input_ids.size());
  if (std::optional<std::string> refusal = limits_.SchedulerRefusal(prompt_tokens)) {
    // SGLang's scheduler finishes such a request at once as an abort with status 400.
    GenerateResult result;
    result.rid = input.rid;
    result.aborted = true;
    result.abort_message = *std::move(refusal);
    result.abort_status_code = 400;
    result.prompt_tokens = prompt_tokens;
    return FinishUnsubmitted(std::move(result), std::move(callbacks.on_finish));
  }
  const int64_t max_new_tokens = limits_.ClampMaxNewTokens(prompt_tokens, input.max_new_tokens);
  const RequestId id(next_request_++);
  const uint64_t rid_hash = Hash64(input.rid, kOutputSeed);
  engine::SchedulerRequest request =
      SchedulerRequestOf(input, id, max_new_tokens, rid_hash, arrival);
  Session* session = nullptr;
  if (options_.enable_session_radix_cache && input.session_id.has_value()) {
    session = &TouchSession(*input.session_id);
    request.kv_options.session = session->id;
  }
  const std::optional<std::string> program = ProgramOf(input);
  if (program.has_value()) request.program = ConversationOf(*program);
  Active active;
  active.rid_hash = rid_hash;
  active.arrival = arrival;
  active.requested_tokens = max_new_tokens;
  active.input = std::move(input);
  active.callbacks = std::move(callbacks);
  Status submitted = engine_.Submit(std::move(request), Now());
  if (!submitted.ok()) {
    // Checked up front; a refusal here is a bug, reported as an abort.
    GenerateResult result;
    result.rid = active.input.rid;
    result.aborted = true;
    result.abort_message = submitted.ToString();
    return FinishUnsubmitted(std::move(result), std::move(active.callbacks.on_finish));
  }
  if (session != nullptr) ++session->active;
  if (program.has_value()) ++TouchProgram(*program).active;
  id_of_rid_.emplace(active.input.rid, id);
  active_.emplace(id, std::move(active));
}

engine::SchedulerRequest EngineRuntime::SchedulerRequestOf(const GenerateInput& input, RequestId id,
                                                           int64_t max_new_tokens,
                                                           uint64_t rid_hash,
                                                           Clock::time_point arrival) const {
  engine::SchedulerRequest request;
  request.id = id;
  const uint64_t namespace_id =
      input.cache_namespace.empty() ? 0 : Hash64(input.cache_namespace, kNamespaceSeed) | 1;
  request.prompt_tokens = static_cast<int64_t>(input.input_ids.size());
  request.max_new_tokens = std::max<int64_t>(1, max_new_tokens);
  // The output's tokens are known up front (pseudo tokens drawn from the request id), so the
  // keys of every page the request computes, prompt + output[:-1] (the last output token has
  // no KV), are too: the scheduler commits the output's pages when the request finishes, as
  // SGLang's cache_finished_req, and a next turn that re-sends the output reuses them.
  std::vector<int64_t> sequence = input.input_ids;
  const int64_t computed = request.prompt_tokens + request.max_new_tokens - 1;
  sequence.reserve(static_cast<size_t>(computed));
  for (int64_t i = 0; request.prompt_tokens + i < computed; ++i) {
    sequence.push_back(PseudoToken(rid_hash, i));
  }
  std::vector<kv::BlockKey> keys = PageKeys(engine_.hasher(), sequence, page_size_, namespace_id);
  // The last prompt token is always recomputed: a key that covers it is an output key (the
  // scheduler commits it with the prompt's prefill, and never matches it for this prompt).
  const size_t prompt_pages = static_cast<size_t>((request.prompt_tokens - 1) / page_size_);
  request.prompt_keys.assign(keys.begin(),
                             keys.begin() + static_cast<std::ptrdiff_t>(prompt_pages));
  request.output_keys.assign(keys.begin() + static_cast<std::ptrdiff_t>(prompt_pages), keys.end());
  request.kv_options.prompt_tokens = request.prompt_tokens;
  request.kv_options.next_pause = input.pause;
  request.kv_options.arrival =
      TimeNs(std::chrono::duration_cast<std::chrono::nanoseconds>(arrival - epoch_).count());
  // (Now()'s origin, the cache's clock.)
  if (options_.engine.cache.block_reuse_policy == kv::BlockReusePolicy::kPerConversation &&
      input.session_id.has_value()) {
    request.kv_options.conversation = ConversationOf(*input.session_id);
    if (input.parent_session.has_value()) {
      request.kv_options.parent_conversation = ConversationOf(*input.parent_session);
      request.kv_options.parent_hint_authenticated = true;
    }
  }
  if (options_.radix_eviction_policy == RadixEvictionPolicy::kPriority &&
      input.priority.has_value()) {
    kv::RetentionConfig retention;
    retention.token_ranges.push_back(
        kv::TokenRangeRetention{.token_start = 0,
                                .token_end = std::nullopt,
                                .priority = static_cast<kv::Priority>(std::clamp<int64_t>(
                                    *input.priority, kv::kMinPriority, kv::kMaxPriority)),
                                .duration = std::nullopt});
    request.kv_options.retention = retention;
  }
  return request;
}

void EngineRuntime::FinishUnsubmitted(GenerateResult result,
                                      std::function<void(const GenerateResult&)> on_finish) {
  {
    sync::MutexLock inner(&mu_);
    active_rids_.erase(result.rid);
  }
  if (on_finish) deferred_finishes_.emplace_back(std::move(on_finish), std::move(result));
}

void EngineRuntime::Abort(const std::string& rid, bool abort_all) {
  sync::MutexLock lock(&mu_);
  if (stopping_) return;
  commands_.push_back(Command{[this, rid, abort_all] {
    if (abort_all) return AbortAllActive();
    if (auto it = id_of_rid_.find(rid); it != id_of_rid_.end()) AbortActive(it->second);
  }});
  wake_.Signal();
}

void EngineRuntime::AbortActive(RequestId id) {
  StatusOr<bool> aborted = engine_.Abort(id);
  AGENTKV_CHECK(aborted.ok()) << aborted.status();
  if (*aborted) Finish(id, /*aborted=*/true, "Abort request " + active_.at(id).input.rid);
}

void EngineRuntime::AbortAllActive() {
  std::vector<RequestId> ids;
  for (const auto& [id, active] : active_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (RequestId id : ids) AbortActive(id);
}

void EngineRuntime::PauseGeneration(GenerationPauseMode mode) {
  RunOnRuntimeThread([&] {
    if (mode == GenerationPauseMode::kAbort) AbortAllActive();
    generation_paused_ = true;
  });
}

void EngineRuntime::ContinueGeneration() {
  RunOnRuntimeThread([&] { generation_paused_ = false; });
}

Status EngineRuntime::ReleaseMemoryOccupation() {
  Status status = Status::Ok();
  RunOnRuntimeThread([&] {
    if (memory_released_) return;
    if (const int64_t active = InFlight(); active > 0) {
      status = FailedPreconditionError(
          "cannot release the KV cache while " + std::to_string(active) +
          " requests are running or waiting: pause generation (mode abort) first");
      return;
    }
    status = engine_.ResetCache();
    if (status.ok()) memory_released_ = true;
  });
  return status;
}

void EngineRuntime::ResumeMemoryOccupation() {
  RunOnRuntimeThread([&] { memory_released_ = false; });
}

StatusOr<bool> EngineRuntime::ApplyWeightUpdate(bool abort_all_requests, bool flush_cache) {
  StatusOr<bool> flushed = false;
  RunOnRuntimeThread([&] {
    if (abort_all_requests) AbortAllActive();
    if (!flush_cache) return;
    const int64_t active = InFlight();
    if (active == 0) {
      const Status reset = engine_.ResetCache();
      flushed = reset.ok() ? StatusOr<bool>(true) : StatusOr<bool>(reset);
      return;
    }
    if (generation_paused_) return;
    flushed = FailedPreconditionError(
        std::to_string(active) +
        " requests are running: pause generation first or set abort_all_requests (SGLang "
        "waits for them; the emulator does not)");
  });
  return flushed;
}

void EngineRuntime::RunOnRuntimeThread(const std::function<void()>& work) {
  std::promise<void> done;
  std::future<void> finished = done.get_future();
  {
    sync::MutexLock lock(&mu_);
    if (stopping_) return;
    commands_.push_back(Command{[this, &work, &done] {
      work();
      // The caller reads the snapshot next: publish what the work changed first.
      PublishSnapshot();
      done.set_value();
    }});
  }
  wake_.Signal();
  finished.wait();
}

EngineRuntime::Session& EngineRuntime::TouchSession(const std::string& name) {
  bool inserted = false;
  Session* session = &sessions_.Touch(
      name,
      [this] {
        return Session{SessionId(next_session_++), 0};
      },
      &inserted);
  if (!inserted) return *session;
  while (static_cast<int64_t>(sessions_.size()) > options_.max_sessions) {
    // The new session is the most recent; it has no request yet but must stay. Closed
    // sessions go first: forgetting them costs nothing but their tombstone.
    std::optional<std::pair<std::string, Session>> evicted =
        sessions_.EvictOldest([&name](const std::string& key, const Session& s) {
          return s.closed && s.active == 0 && key != name;
        });
    if (!evicted.has_value()) {
      evicted = sessions_.EvictOldest([&name](const std::string& key, const Session& s) {
        return s.active == 0 && key != name;
      });
      if (!evicted.has_value()) break;  // Every other session runs a request: wait for them.
      ++counters_.sessions_evicted_total;
    }
    // Idempotent for a closed session; it also closes one the cache reopened after its
    // tombstone aged out, so that no cache session outlives its id here.
    engine_.CloseSession(evicted->second.id);
  }
  counters_.sessions = static_cast<int64_t>(sessions_.size());
  return *sessions_.Find(name);
}

int64_t EngineRuntime::CloseSession(const std::string& session_id) {
  int64_t freed = 0;
  RunOnRuntimeThread([&] {
    // An unknown id is remembered too, so that a later request of it finds it closed (the
    // cache's tombstone); the LRU bounds what is remembered.
    Session& session = TouchSession(session_id);
    session.closed = true;
    freed = engine_.CloseSession(session.id);
    // The program ended: its next request, if any, is a new program. Its requests still
    // waiting keep their place (each holds its program's arrival).
    engine_.ForgetProgram(ConversationOf(session_id));
    if (const Program* program = programs_.Find(session_id);
        program != nullptr && program->active == 0) {
      programs_.Erase(session_id);
    }
  });
  return freed;
}

std::optional<std::string> EngineRuntime::ProgramOf(const GenerateInput& input) const {
  if (!options_.engine.scheduler.program_fcfs) return std::nullopt;
  if (input.parent_session.has_value()) return input.parent_session;
  return input.session_id;
}

EngineRuntime::Program& EngineRuntime::TouchProgram(const std::string& name) {
  bool inserted = false;
  Program* program = &programs_.Touch(
      name, [] { return Program{}; }, &inserted);
  if (!inserted) return *program;
  while (static_cast<int64_t>(programs_.size()) > options_.max_sessions) {
    std::optional<std::pair<std::string, Program>> forgotten = programs_.EvictOldest(
        [&name](const std::string& key, const Program& p) { return p.active == 0 && key != name; });
    if (!forgotten.has_value()) break;  // Every other program runs a request: wait for them.
    engine_.ForgetProgram(ConversationOf(forgotten->first));
  }
  return *programs_.Find(name);
}

TimeNs EngineRuntime::EmulatedNow() const {
  return TimeNs::Seconds(Seconds(Clock::now() - started_) * options_.speed);
}

int64_t EngineRuntime::DemoteFinishedSubagents(const std::string& parent_session_id) {
  int64_t demoted = 0;
  RunOnRuntimeThread(
      [&] { demoted = engine_.DeliverParentReturn(ConversationOf(parent_session_id), Now()); });
  return demoted;
}

bool EngineRuntime::FlushCache() {
  bool flushed = false;
  RunOnRuntimeThread([&] {
    if (InFlight() > 0) return;
    flushed = engine_.ResetCache().ok();
  });
  return flushed;
}

RuntimeSnapshot EngineRuntime::Snapshot() const {
  sync::MutexLock lock(&mu_);
  return snapshot_;
}

void EngineRuntime::Shutdown() {
  {
    sync::MutexLock lock(&mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  wake_.Signal();
  if (thread_.joinable()) thread_.join();
}

void EngineRuntime::Run() {
  Clock::time_point window_start = Clock::now();
  int64_t window_tokens = 0;
  int64_t window_prompt = 0;
  int64_t window_cached = 0;
  for (;;) {
    std::deque<Command> commands;
    bool stopping = false;
    {
      sync::MutexLock lock(&mu_);
      while (!stopping_ && commands_.empty() && !CanStep()) {
        // An idle engine still wakes for a stall offload prefetch that falls due.
        if (!stall_wake_.has_value()) {
          wake_.Wait(&mu_);
        } else if (wake_.WaitWithDeadline(&mu_, *stall_wake_)) {
          break;
        }
      }
      commands.swap(commands_);
      stopping = stopping_;
    }
    for (Command& command : commands) command.work();
    if (stopping) {
      std::vector<RequestId> ids;
      for (const auto& [id, active] : active_) ids.push_back(id);
      std::sort(ids.begin(), ids.end());
      for (RequestId id : ids) {
        AGENTKV_CHECK(engine_.Abort(id).ok());
        Finish(id, /*aborted=*/true, "The server is shutting down");
      }
      PublishAndRunDeferred();
      return;
    }
    if (CanStep()) {
      const int64_t before_tokens = counters_.generation_tokens_total;
      const int64_t before_prompt = counters_.prompt_tokens_total;
      const int64_t before_cached =
          counters_.cached_tokens_device_total + counters_.cached_tokens_host_total;
      StepOnce();
      window_tokens += counters_.generation_tokens_total - before_tokens;
      window_prompt += counters_.prompt_tokens_total - before_prompt;
      window_cached +=
          counters_.cached_tokens_device_total + counters_.cached_tokens_host_total - before_cached;
    }
    // After the step: a request that finished in it may have started a pause.
    RunStallOffload();
    const Clock::time_point now = Clock::now();
    if (now - window_start >= kRateWindow) {
      counters_.gen_throughput = static_cast<double>(window_tokens) / Seconds(now - window_start);
      counters_.cache_hit_rate = window_prompt > 0 ? static_cast<double>(window_cached) /
                                                         static_cast<double>(window_prompt)
                                                   : 0.0;
      window_start = now;
      window_tokens = window_prompt = window_cached = 0;
    }
    PublishAndRunDeferred();
  }
}

TimeNs EngineRuntime::Now() const {
  return TimeNs(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - epoch_).count());
}

void EngineRuntime::RunStallOffload() {
  const std::optional<TimeNs> wake = engine_.RunStallOffload(Now());
  stall_wake_.reset();
  if (wake.has_value()) stall_wake_ = epoch_ + std::chrono::nanoseconds(wake->ns());
}

void EngineRuntime::PublishAndRunDeferred() {
  PublishSnapshot();
  std::vector<std::pair<std::function<void(const GenerateResult&)>, GenerateResult>> finishes;
  finishes.swap(deferred_finishes_);
  for (auto& [on_finish, result] : finishes) on_finish(result);
}

void EngineRuntime::StepOnce() {
  const Clock::time_point start = Clock::now();
  // One clock for the cache (the sub-agent idle bound in seconds, the gap-aware order): Now(),
  // the wall clock clients pause on; the requests this step finishes count as finished now.
  engine_.AdvanceCacheClock(Now());
  const engine::EngineStep step = engine_.Step();
  const engine::StepResult& result = step.result;
  ++counters_.steps;
  counters_.evicted_tokens_total += step.evicted_blocks * page_size_;
  // The host tier's transfers, priced by the cost model's host link: device -> host evictions
  // (SGLang's eviction_duration_seconds: "from GPU to CPU") and the step's loads back.
  if (engine_.config().kv_pool.hicache_tokens > 0 && step.evicted_blocks > 0) {
    counters_.eviction_duration.Observe(
        engine_.cost_model().HostTransferTime(step.evicted_blocks * page_size_).seconds());
  }
  if (step.shape.host_load_tokens > 0) {
    counters_.load_back_tokens_total += step.shape.host_load_tokens;
    counters_.load_back_duration.Observe(
        engine_.cost_model().HostTransferTime(step.shape.host_load_tokens).seconds());
  }
  if (options_.paced) {
    const TimeNs modelled = step.computed() ? step.cost : TimeNs::Millis(1);
    const auto wall = std::chrono::nanoseconds(
        static_cast<int64_t>(static_cast<double>(modelled.ns()) / options_.speed));
    std::this_thread::sleep_until(start + wall);
  }
  const Clock::time_point now = Clock::now();
  for (RequestId id : result.admitted) {
    Active& active = active_.at(id);
    if (active.first_scheduled.has_value()) continue;
    active.first_scheduled = now;
    const engine::RequestReport* report = engine_.FindReport(id);
    counters_.prompt_tokens_total += static_cast<int64_t>(active.input.input_ids.size());
    counters_.cached_tokens_device_total += report->cached_device_tokens;
    counters_.cached_tokens_host_total += report->cached_host_tokens;
  }
  // Deliver the tokens produced this step, in batch order, then finish the requests that
  // produced their last one.
  for (const engine::ScheduledWork& work : result.batch) {
    auto it = active_.find(work.id);
    if (it == active_.end()) continue;
    Active& active = it->second;
    const engine::RequestReport* report = engine_.FindReport(work.id);
    const int64_t produced = std::min(report->output_tokens, active.requested_tokens);
    const int64_t delivered = static_cast<int64_t>(active.output_ids.size());
    if (produced <= delivered) continue;
    if (!active.first_token.has_value()) {
      active.first_token = now;
      counters_.time_to_first_token.Observe(Seconds(now - active.arrival));
    } else {
      // As SGLang's tokenizer manager: a chunk of n tokens after the previous one is n
      // inter-token gaps of (interval / n) each.
      const int64_t n = produced - delivered;
      counters_.inter_token_latency.ObserveN(
          Seconds(now - active.last_token) / static_cast<double>(n), n);
    }
    active.last_token = now;
    const std::vector<int64_t> tokens = PseudoTokens(active, delivered, produced - delivered);
    active.output_ids.insert(active.output_ids.end(), tokens.begin(), tokens.end());
    counters_.generation_tokens_total += produced - delivered;
    if (active.callbacks.on_tokens) active.callbacks.on_tokens(tokens);
  }
  for (RequestId id : result.finished) Finish(id, /*aborted=*/false, "");
}

std::vector<int64_t> EngineRuntime::PseudoTokens(const Active& active, int64_t from,
                                                 int64_t n) const {
  std::vector<int64_t> tokens(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    tokens[static_cast<size_t>(i)] = PseudoToken(active.rid_hash, from + i);
  }
  return tokens;
}

void EngineRuntime::Finish(RequestId id, bool aborted, const std::string& message) {
  auto it = active_.find(id);
  AGENTKV_CHECK(it != active_.end()) << "finishing unknown request " << id;
  Active active = std::move(it->second);
  active_.erase(it);
  id_of_rid_.erase(active.input.rid);
  if (options_.enable_session_radix_cache && active.input.session_id.has_value()) {
    // A session with an active request is never evicted.
    Session* session = sessions_.Find(*active.input.session_id);
    AGENTKV_CHECK(session != nullptr && session->active > 0);
    --session->active;
  }
  if (const std::optional<std::string> program = ProgramOf(active.input); program.has_value()) {
    // A program with an active request is never forgotten.
    Program* entry = programs_.Find(*program);
    AGENTKV_CHECK(entry != nullptr && entry->active > 0);
    --entry->active;
  }
  // The engine's stall offload learns that the turn ended (completed unless aborted).
  StatusOr<engine::RequestReport> taken = engine_.TakeReport(id, Now());
  AGENTKV_CHECK(taken.ok()) << taken.status();
  const engine::RequestReport* report = &*taken;
  const Clock::time_point now = Clock::now();
  GenerateResult result;
  result.rid = active.input.rid;
  result.output_ids = std::move(active.output_ids);
  result.aborted = aborted;
  result.abort_message = message;
  result.prompt_tokens = static_cast<int64_t>(active.input.input_ids.size());
  result.cached_device_tokens = report->cached_device_tokens;
  result.cached_host_tokens = report->cached_host_tokens;
  result.cached_tokens = result.cached_device_tokens + result.cached_host_tokens;
  result.e2e_latency_s = Seconds(now - active.arrival);
  result.queue_time_s =
      active.first_scheduled.has_value() ? Seconds(*active.first_scheduled - active.arrival) : 0.0;
  counters_.e2e_request_latency.Observe(result.e2e_latency_s);
  if (active.first_scheduled.has_value()) counters_.queue_time.Observe(result.queue_time_s);
  if (aborted) ++counters_.num_aborted_requests_total;
  {
    sync::MutexLock lock(&mu_);
    active_rids_.erase(result.rid);
  }
  // Run after the snapshot is published, so that a caller woken by it sees its effects.
  if (active.callbacks.on_finish) {
    deferred_finishes_.emplace_back(std::move(active.callbacks.on_finish), std::move(result));
  }
}

bool EngineRuntime::CanStep() { return !generation_paused_ && !memory_released_ && InFlight() > 0; }

void EngineRuntime::PublishSnapshot() {
  RuntimeSnapshot snapshot = counters_;
  snapshot.generation_paused = generation_paused_;
  snapshot.memory_released = memory_released_;
  snapshot.gauges = engine_.gauges();
  snapshot.cache = engine_.cache().stats();
  sync::MutexLock lock(&mu_);
  snapshot_ = std::move(snapshot);
}

}  // namespace agentkv::service
