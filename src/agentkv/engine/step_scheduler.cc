// StepScheduler implementation.
//
// Invariants (CheckInvariants makes them executable):
// - Every held request is in exactly one place: waiting_ (phase kWaiting), running_
//   (kPrefill or kDecode), or finished with its report not yet taken (kFinished, in requests_
//   only); the counts add up to requests_, and running + waiting + finished == submitted.
// - Every held request passed CheckFits: its prompt and output are in [1, kMaxTokens] and fit
//   the device tier together, so token sums below cannot overflow and a request alone in the
//   batch can always reserve its KV (it is never retracted forever).
// - The cache's active requests are exactly running_; waiting and finished requests hold
//   nothing. A running request's kv_tokens never exceeds its prefill target plus its output.
// - A request's keys (prompt keys, then output keys) name blocks of prompt + output by
//   position; a running request has committed at most the keyed blocks its KV covers
//   (committed_blocks <= min(keys, kv_tokens / tokens_per_block)). Blocks are committed as
//   prefill covers them and, at finish or abort, as far as the KV covers the output (never
//   during decode, never at retraction: SGLang inserts a request into its radix tree after a
//   prefill and when it finishes, and retracts without inserting).
// - A request in kDecode has emitted at least one and fewer than max_new_tokens tokens and
//   holds the KV of prompt + output - 1 tokens (the last emitted token is not yet computed).
// - Reports: first_scheduled is set once a request was admitted; first_token once it emitted.
#include "agentkv/engine/step_scheduler.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <string>
#include <utility>

#include "agentkv/base/bounds.h"
#include "agentkv/base/check.h"

namespace agentkv::engine {
namespace {

Status OutOfRange(const char* field, int64_t value) {
  return InvalidArgumentError(std::string("StepSchedulerOptions.") + field +
                              " out of range: " + std::to_string(value));
}

}  // namespace

Status StepSchedulerOptions::Validate() const {
  if (max_running_requests < 1 || max_running_requests > (int64_t{1} << 20)) {
    return OutOfRange("max_running_requests", max_running_requests);
  }
  if (max_prefill_tokens < 1 || max_prefill_tokens > (int64_t{1} << 30)) {
    return OutOfRange("max_prefill_tokens", max_prefill_tokens);
  }
  if (chunked_prefill_size < 0 || chunked_prefill_size > (int64_t{1} << 30)) {
    return OutOfRange("chunked_prefill_size", chunked_prefill_size);
  }
  return Status::Ok();
}

StatusOr<StepScheduler> StepScheduler::Create(const StepSchedulerOptions& options,
                                              kv::KvCacheManager cache) {
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  if (cache.active_requests() != 0) {
    return FailedPreconditionError("StepScheduler needs a cache without active requests");
  }
  return StepScheduler(options, std::move(cache));
}

StepScheduler::StepScheduler(const StepSchedulerOptions& options, kv::KvCacheManager cache)
    : options_(options), cache_(std::move(cache)) {}

uint64_t StepScheduler::ProgramArrival(const SchedulerRequest& request) {
  const uint64_t arrival = next_arrival_++;
  if (!options_.program_fcfs) return arrival;
  const std::optional<ConversationId> program = request.program.has_value() ? request.program
                                                : request.kv_options.parent_conversation.has_value()
                                                    ? request.kv_options.parent_conversation
                                                    : request.kv_options.conversation;
  if (!program.has_value()) return arrival;
  return program_arrival_.try_emplace(*program, arrival).first->second;
}

void StepScheduler::EnqueueWaiting(RequestId id, uint64_t program_arrival) {
  if (!options_.program_fcfs) {
    waiting_.push_back(id);
    return;
  }
  // After the last waiting request whose program arrived no later (FIFO within a program and
  // among equals); retracted requests at the front keep their place ahead of it.
  auto pos = waiting_.end();
  while (pos != waiting_.begin() &&
         requests_.at(*std::prev(pos)).program_arrival > program_arrival &&
         requests_.at(*std::prev(pos)).report.preemptions == 0) {
    --pos;
  }
  waiting_.insert(pos, id);
}

void StepScheduler::ForgetProgram(ConversationId program) { program_arrival_.erase(program); }

int64_t StepScheduler::BlocksForTokens(int64_t tokens) const {
  const int64_t tpb = cache_.tokens_per_block();
  return (tokens + tpb - 1) / tpb;
}

Status StepScheduler::CheckFits(int64_t prompt_tokens, int64_t max_new_tokens) const {
  if (prompt_tokens < 1) {
    return InvalidArgumentError("prompt_tokens must be >= 1, got " + std::to_string(prompt_tokens));
  }
  if (max_new_tokens < 1) {
    return InvalidArgumentError("max_new_tokens must be >= 1, got " +
                                std::to_string(max_new_tokens));
  }
  AGENTKV_RETURN_IF_ERROR(CheckTokens("prompt_tokens", prompt_tokens));
  AGENTKV_RETURN_IF_ERROR(CheckTokens("max_new_tokens", max_new_tokens));
  // Both are at most 2^40 now, so neither the sum nor the capacity product overflows.
  const int64_t capacity = cache_.options().device_blocks * cache_.tokens_per_block();
  if (BlocksForTokens(prompt_tokens + max_new_tokens) > cache_.options().device_blocks) {
    return InvalidArgumentError("prompt_tokens " + std::to_string(prompt_tokens) +
                                " + max_new_tokens " + std::to_string(max_new_tokens) +
                                " exceed the device KV capacity of " + std::to_string(capacity) +
                                " tokens: the request could never run");
  }
  return Status::Ok();
}

Status StepScheduler::Submit(SchedulerRequest request) {
  if (Status fits = CheckFits(request.prompt_tokens, request.max_new_tokens); !fits.ok()) {
    return InvalidArgumentError("request " + std::to_string(request.id.value()) + ": " +
                                fits.message());
  }
  if (static_cast<int64_t>(request.prompt_keys.size()) >
      request.prompt_tokens / cache_.tokens_per_block()) {
    return InvalidArgumentError("prompt_keys has more keys than the prompt has full blocks");
  }
  // Both token counts passed CheckFits, so the sum cannot overflow.
  if (static_cast<int64_t>(request.prompt_keys.size() + request.output_keys.size()) >
      (request.prompt_tokens + request.max_new_tokens) / cache_.tokens_per_block()) {
    return InvalidArgumentError(
        "prompt_keys and output_keys have more keys than prompt + output has full blocks");
  }
  if (requests_.contains(request.id)) {
    return AlreadyExistsError("request " + std::to_string(request.id.value()) +
                              " is already held (submitted and not retired)");
  }
  const RequestId id = request.id;
  Entry entry;
  entry.report.id = id;
  entry.report.submitted = cache_.current_step();
  entry.prefill_target = request.prompt_tokens;
  entry.keys = std::move(request.prompt_keys);
  entry.keys.insert(entry.keys.end(), request.output_keys.begin(), request.output_keys.end());
  request.prompt_keys.clear();
  std::vector<kv::BlockKey>().swap(request.output_keys);
  entry.program_arrival = ProgramArrival(request);
  const uint64_t program_arrival = entry.program_arrival;
  entry.request = std::move(request);
  requests_.emplace(id, std::move(entry));
  EnqueueWaiting(id, program_arrival);
  ++num_submitted_;
  return Status::Ok();
}

void StepScheduler::MarkFinished(Entry& entry) {
  entry.phase = Phase::kFinished;
  entry.report.finished = cache_.current_step();
  // Only a live request needs its keys; a finished one waiting for TakeReport keeps its report
  // alone.
  std::vector<kv::BlockKey>().swap(entry.keys);
  ++num_finished_;
}

StatusOr<RequestReport> StepScheduler::TakeReport(RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) {
    return NotFoundError("request " + std::to_string(id.value()) +
                         " is not held (never submitted, or already retired)");
  }
  if (it->second.phase != Phase::kFinished) {
    return FailedPreconditionError("request " + std::to_string(id.value()) + " has not finished");
  }
  RequestReport report = std::move(it->second.report);
  requests_.erase(it);
  return report;
}

void StepScheduler::Preempt(StepResult& result) {
  AGENTKV_CHECK(!running_.empty());
  const RequestId victim = running_.back().id;
  Entry& entry = *running_.back().entry;
  running_.pop_back();
  // Released without committing what decode computed: SGLang retracts without inserting.
  AGENTKV_CHECK(cache_.ReleaseUnfinished(victim).ok());
  // SGLang's retract: the request comes back with prompt + output as its new prompt.
  entry.phase = Phase::kWaiting;
  entry.prefill_target = entry.request.prompt_tokens + entry.report.output_tokens;
  entry.kv_tokens = 0;
  entry.reserved_tokens = 0;
  entry.committed_blocks = 0;
  entry.commit_failed = false;
  ++entry.report.preemptions;
  ++num_preemptions_;
  waiting_.push_front(victim);
  result.preempted.push_back(victim);
}

bool StepScheduler::ReserveOrPreempt(size_t index, int64_t tokens, StepResult& result) {
  const Running running = running_[index];
  if (tokens <= running.entry->reserved_tokens) return true;  // Holding them already.
  while (!cache_.Reserve(running.id, tokens).ok()) {
    const bool self = running_.size() == index + 1;
    Preempt(result);
    if (self) return false;
  }
  running.entry->reserved_tokens = BlocksForTokens(tokens) * cache_.tokens_per_block();
  return true;
}

void StepScheduler::CommitCoveredBlocks(RequestId id, Entry& entry) {
  if (entry.commit_failed) return;
  const auto& keys = entry.keys;
  const int64_t covered = std::min<int64_t>(static_cast<int64_t>(keys.size()),
                                            entry.kv_tokens / cache_.tokens_per_block());
  if (covered <= entry.committed_blocks) return;
  const std::span<const kv::BlockKey> next(keys.data() + entry.committed_blocks,
                                           static_cast<size_t>(covered - entry.committed_blocks));
  // A collision (AlreadyExists) leaves the rest uncommitted; they are freed on Release.
  if (cache_.Commit(id, next).ok()) {
    entry.committed_blocks = covered;
  } else {
    entry.commit_failed = true;
  }
}

void StepScheduler::Finish(RequestId id, Entry& entry, StepResult& result) {
  // SGLang's cache_finished_req: prompt + output, as far as the KV covers it.
  CommitCoveredBlocks(id, entry);
  AGENTKV_CHECK(cache_.Release(id).ok());
  MarkFinished(entry);
  result.finished.push_back(id);
}

StatusOr<bool> StepScheduler::Abort(RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) {
    return NotFoundError("request " + std::to_string(id.value()) +
                         " is not held (never submitted, or already retired)");
  }
  Entry& entry = it->second;
  switch (entry.phase) {
    case Phase::kFinished:
      return false;
    case Phase::kWaiting: {
      auto pos = std::find(waiting_.begin(), waiting_.end(), id);
      AGENTKV_CHECK(pos != waiting_.end()) << "waiting request " << id << " not queued";
      waiting_.erase(pos);
      break;
    }
    case Phase::kPrefill:
    case Phase::kDecode: {
      auto pos = std::find_if(running_.begin(), running_.end(),
                              [id](const Running& r) { return r.id == id; });
      AGENTKV_CHECK(pos != running_.end()) << "running request " << id << " not in the batch";
      running_.erase(pos);
      // Its computed prefix stays cached, as SGLang's abort finishes through
      // cache_finished_req.
      CommitCoveredBlocks(id, entry);
      AGENTKV_CHECK(cache_.ReleaseUnfinished(id).ok());
      break;
    }
  }
  entry.report.aborted = true;
  MarkFinished(entry);
  return true;
}

void StepScheduler::EmitToken(RequestId id, Entry& entry, StepResult& result) {
  ++entry.report.output_tokens;
  if (!entry.report.first_token.has_value()) entry.report.first_token = cache_.current_step();
  if (entry.report.output_tokens >= entry.request.max_new_tokens) {
    // The caller removes the request from running_.
    Finish(id, entry, result);
  }
}

void StepScheduler::RunPrefill(RequestId id, Entry& entry, int64_t chunk, StepResult& result) {
  ScheduledWork work{id, chunk, 0, entry.kv_tokens, false};
  entry.kv_tokens += chunk;
  CommitCoveredBlocks(id, entry);
  result.prefill_tokens += chunk;
  if (entry.kv_tokens == entry.prefill_target) {
    work.emitted_token = true;
    entry.phase = Phase::kDecode;
    result.batch.push_back(work);
    EmitToken(id, entry, result);
    return;
  }
  result.batch.push_back(work);
}

bool StepScheduler::AdmitFront(int64_t& budget, bool first_prefill, StepResult& result) {
  const RequestId id = waiting_.front();
  Entry& entry = requests_.at(id);
  const int64_t tpb = cache_.tokens_per_block();
  // Match prompt[:-1]: the last prompt token is always computed to produce the next token.
  // A retracted request's prompt is prompt + output so far, matched over its output keys too.
  const auto& keys = entry.keys;
  const size_t match_blocks = static_cast<size_t>(
      std::min<int64_t>(static_cast<int64_t>(keys.size()), (entry.prefill_target - 1) / tpb));
  const std::span<const kv::BlockKey> match_keys(keys.data(), match_blocks);
  const int64_t limit = options_.chunked_prefill_size > 0 ? options_.chunked_prefill_size
                                                          : std::numeric_limits<int64_t>::max();

  // A side-effect-free estimate first, so that refusals leave the cache's counters alone.
  const kv::PrefixMatch estimate = cache_.Match(match_keys, entry.estimate_resume);
  const int64_t est_remaining = entry.prefill_target - estimate.total_blocks() * tpb;
  if (options_.chunked_prefill_size == 0 && est_remaining > budget && !first_prefill) {
    return false;
  }
  int64_t est_chunk = std::min(est_remaining, limit);
  if (options_.chunked_prefill_size > 0 || !first_prefill) est_chunk = std::min(est_chunk, budget);
  const kv::TierGauges device = cache_.device_gauges();
  // Conservative: assume every matched device block is now evictable and becomes held.
  const int64_t needed =
      BlocksForTokens(estimate.total_blocks() * tpb + est_chunk) - estimate.device_blocks;
  if (needed > device.free + device.evictable - estimate.device_blocks) return false;

  StatusOr<kv::PrefixMatch> match = cache_.AddRequest(id, match_keys, entry.request.kv_options);
  waiting_.pop_front();
  if (!match.ok()) {
    entry.report.rejected = true;
    MarkFinished(entry);
    result.finished.push_back(id);
    return true;
  }
  const int64_t cached = match->total_blocks() * tpb;
  const int64_t remaining = entry.prefill_target - cached;
  int64_t chunk = std::min(remaining, limit);
  if (options_.chunked_prefill_size > 0 || !first_prefill) chunk = std::min(chunk, budget);
  if (chunk < 1 || !cache_.Reserve(id, cached + chunk).ok()) {
    AGENTKV_CHECK(cache_.ReleaseUnfinished(id).ok());
    waiting_.push_front(id);
    return false;
  }
  RequestReport& report = entry.report;
  if (!report.first_scheduled.has_value()) {
    report.first_scheduled = cache_.current_step();
    report.queue_steps = (cache_.current_step() - report.submitted).value();
    report.cached_device_tokens = match->device_blocks * tpb;
    report.cached_host_tokens = match->host_blocks * tpb;
    report.uncached_tokens = remaining;
  } else {
    report.recomputed_tokens += remaining;
  }
  entry.phase = Phase::kPrefill;
  entry.kv_tokens = cached;
  entry.reserved_tokens = 0;
  // The matched prefix is committed already; Commit continues after it.
  entry.committed_blocks = match->total_blocks();
  running_.push_back(Running{id, &entry});
  result.admitted.push_back(id);
  budget -= chunk;
  RunPrefill(id, entry, chunk, result);
  if (entry.phase == Phase::kFinished) running_.pop_back();
  return true;
}

StepResult StepScheduler::Step() {
  StepResult result;
  result.step = cache_.current_step();

  // 1. Decode, oldest first. Retraction only removes requests behind the current one.
  for (size_t i = 0; i < running_.size();) {
    const RequestId id = running_[i].id;
    Entry& entry = *running_[i].entry;
    if (entry.phase != Phase::kDecode) {
      ++i;
      continue;
    }
    if (!ReserveOrPreempt(i, entry.kv_tokens + 1, result)) break;
    result.batch.push_back(ScheduledWork{id, 0, 1, entry.kv_tokens, true});
    ++entry.kv_tokens;
    ++result.decode_tokens;
    EmitToken(id, entry, result);
    if (entry.phase == Phase::kFinished) {
      running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }

  // 2. Continue chunked prefills, oldest first, within the budget.
  int64_t budget = options_.max_prefill_tokens;
  const int64_t limit = options_.chunked_prefill_size > 0 ? options_.chunked_prefill_size
                                                          : std::numeric_limits<int64_t>::max();
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    const RequestId id = running_[i].id;
    Entry& entry = *running_[i].entry;
    if (entry.phase != Phase::kPrefill) {
      ++i;
      continue;
    }
    const int64_t chunk = std::min({entry.prefill_target - entry.kv_tokens, limit, budget});
    if (!cache_.Reserve(id, entry.kv_tokens + chunk).ok()) {
      ++i;
      continue;
    }
    budget -= chunk;
    RunPrefill(id, entry, chunk, result);
    if (entry.phase == Phase::kFinished) {
      running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }

  // 3. Admit new requests in FIFO order.
  if (result.preempted.empty()) {
    while (!waiting_.empty() && budget > 0 &&
           static_cast<int64_t>(running_.size()) < options_.max_running_requests) {
      const bool first_prefill = result.prefill_tokens == 0;
      if (!AdmitFront(budget, first_prefill, result)) break;
    }
  }

  // Mid-prefill requests can hold the whole device between them; retract one to progress.
  if (result.batch.empty() && !running_.empty()) Preempt(result);

  cache_.Step();
  return result;
}

SchedulerGauges StepScheduler::gauges() const {
  const kv::TierGauges device = cache_.device_gauges();
  const int64_t tpb = cache_.tokens_per_block();
  SchedulerGauges g;
  g.max_total_num_tokens = device.capacity * tpb;
  g.available_tokens = device.free * tpb;
  g.evictable_tokens = device.evictable * tpb;
  g.num_used_tokens = g.max_total_num_tokens - g.available_tokens - g.evictable_tokens;
  g.token_usage = g.max_total_num_tokens > 0 ? static_cast<double>(g.num_used_tokens) /
                                                   static_cast<double>(g.max_total_num_tokens)
                                             : 0.0;
  g.num_running_reqs = num_running();
  g.num_queue_reqs = num_waiting();
  g.num_preemptions = num_preemptions_;
  g.num_finished_reqs = num_finished();
  return g;
}

const RequestReport* StepScheduler::FindReport(RequestId id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : &it->second.report;
}

Status StepScheduler::CheckInvariants() const {
  if (num_running() + num_waiting() + num_finished_ != num_submitted_) {
    return InternalError("running + waiting + finished != submitted");
  }
  if (cache_.active_requests() != num_running()) {
    return InternalError("cache active requests != running requests");
  }
  int64_t untaken = 0;
  for (const auto& [id, entry] : requests_) {
    if (entry.phase == Phase::kFinished) ++untaken;
    if (!CheckFits(entry.request.prompt_tokens, entry.request.max_new_tokens).ok()) {
      return InternalError("held request does not fit the device tier");
    }
  }
  if (num_running() + num_waiting() + untaken != num_held()) {
    return InternalError("held != running + waiting + finished-untaken");
  }
  for (RequestId id : waiting_) {
    if (requests_.at(id).phase != Phase::kWaiting) return InternalError("waiting not kWaiting");
  }
  int64_t held_lower_bound = 0;
  for (const Running& r : running_) {
    const auto found = requests_.find(r.id);
    if (found == requests_.end() || &found->second != r.entry) {
      return InternalError("a running request's entry is not its own");
    }
    const Entry& e = *r.entry;
    if (e.phase != Phase::kPrefill && e.phase != Phase::kDecode) {
      return InternalError("running request not in prefill or decode");
    }
    if (e.kv_tokens < 1 && e.phase == Phase::kDecode) return InternalError("decode without KV");
    if (e.phase == Phase::kDecode &&
        (e.report.output_tokens < 1 || e.report.output_tokens >= e.request.max_new_tokens)) {
      return InternalError("decoding request has an impossible output count");
    }
    if (e.phase == Phase::kPrefill && e.kv_tokens >= e.prefill_target) {
      return InternalError("prefill request past its target");
    }
    const int64_t covered = std::min<int64_t>(static_cast<int64_t>(e.keys.size()),
                                              e.kv_tokens / cache_.tokens_per_block());
    if (e.committed_blocks > covered) {
      return InternalError("running request committed blocks its KV does not cover");
    }
    held_lower_bound = std::max(held_lower_bound, BlocksForTokens(e.kv_tokens));
  }
  // Blocks are shared, so only the largest request bounds the distinct held blocks below.
  const kv::KvCacheStats stats = cache_.stats();
  if (stats.device.held < held_lower_bound) {
    return InternalError("device holds fewer blocks than a running request computed");
  }
  return cache_.CheckInvariants();
}

}  // namespace agentkv::engine
