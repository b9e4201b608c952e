// StandardTrace generates the standard prefix-cache benchmark trace (v1): a synthetic multi-turn
// trace, fixed bit for bit by its seed, that times the KV cache core the same way other engines'
// prefix caches are timed. It depends only on `base` (the SplitMix64 stream and CHECK), so that
// any benchmark or test can replay it. A trace owns every token it hands out;
// requests are views into that storage. Thread-compatible: const methods may run concurrently;
// mutation (assignment) needs external synchronization.
#ifndef AGENTKV_BENCH_STANDARD_TRACE_H_
#define AGENTKV_BENCH_STANDARD_TRACE_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace agentkv::bench {

// Shape of a generated trace. The defaults are the v1 parameters; any other values give a
// different, equally deterministic trace whose check values are not published.
struct StandardTraceParams {
  // Seed of the counter-based SplitMix64 stream. Default: 20250701. Any value.
  uint64_t seed = 20250701;
  // Number of sessions served round robin. Default: 200. Range: >= 1.
  int sessions = 200;
  // Number of turns (requests) per session. Default: 20. Range: >= 1.
  int turns = 20;
  // Length of the system prefix every session starts with. Default: 2000. Range: >= 0.
  int prefix_tokens = 2000;
  // Inclusive range of new prompt tokens per turn. Default: 200..2000. Range: 0 <= min <= max.
  int new_min = 200;
  int new_max = 2000;
  // Inclusive range of output tokens per turn. Default: 100..500. Range: 0 <= min <= max.
  int out_min = 100;
  int out_max = 500;
  // Token ids are drawn from [0, vocab). Default: 32000. Range: >= 1.
  uint32_t vocab = 32000;
  // Tokens per KV block, used by full_blocks() and CapacityTokens(). Default: 16. Range: >= 1.
  int block_size = 16;
};

// One request in issue order. `prompt` is the session's whole history followed by this turn's new
// tokens; `output` is the tokens the request produces, which become part of the session's history.
// Both spans point into storage owned by the StandardTrace that returned them and stay valid for
// as long as that trace is alive and not assigned to.
struct StandardRequest {
  int session = 0;
  int turn = 0;
  std::span<const uint32_t> prompt;
  std::span<const uint32_t> output;
};

// A fully generated trace. Because every prompt is the previous sequence of its session plus new
// tokens, the trace stores one contiguous buffer per session (prefix, then each turn's new and
// output tokens) and a request is two spans into it. The ~67M tokens of all requests are never
// materialized; memory is the working set plus one prefix copy per session (about 24 MB for v1),
// which keeps every prompt contiguous for consumers that match `prompt[:-1]` directly.
class StandardTrace {
 public:
  // Generates the trace described by `params`. Returns std::nullopt and, when `error` is not null,
  // stores a message naming the offending field when `params` is out of range. Takes O(draws)
  // time; v1 draws 5,629,956 values.
  [[nodiscard]] static std::optional<StandardTrace> Generate(const StandardTraceParams& params,
                                                             std::string* error = nullptr);

  StandardTrace(StandardTrace&&) = default;
  StandardTrace& operator=(StandardTrace&&) = default;
  // A copy would duplicate every session buffer; traces are meant to be generated once.
  StandardTrace(const StandardTrace&) = delete;
  StandardTrace& operator=(const StandardTrace&) = delete;

  const StandardTraceParams& params() const { return params_; }

  // Number of requests, sessions * turns.
  int64_t num_requests() const { return static_cast<int64_t>(requests_.size()); }

  // The request at `index` in issue order: turn-major, round robin over sessions, so
  // session == index % sessions and turn == index / sessions. Precondition:
  // 0 <= index < num_requests(); violating it aborts.
  StandardRequest request(int64_t index) const;

  // The system prefix shared by every session.
  std::span<const uint32_t> prefix() const;

  // The final sequence of `session` (prefix plus all of its turns), equal to the prompt plus
  // output of its last request. Precondition: 0 <= session < sessions; violating it aborts.
  std::span<const uint32_t> session_tokens(int session) const;

  // FNV-1a-64 over the little-endian bytes of the uint32 values
  // [new_len, new tokens..., out_len, out tokens...] of every request in issue order.
  uint64_t request_fingerprint() const { return request_fingerprint_; }
  // FNV-1a-64 over the little-endian bytes of the prefix tokens.
  uint64_t prefix_fingerprint() const { return prefix_fingerprint_; }

  // Values drawn from the random stream: the prefix, two lengths per request and its tokens.
  int64_t draws() const { return draws_; }
  // Sum of prompt lengths over all requests.
  int64_t prompt_tokens() const { return prompt_tokens_; }
  // Sum of prompt plus output lengths over all requests; the denominator of ns per token.
  int64_t total_tokens() const { return total_tokens_; }
  // Sum over requests of floor((prompt + output) / block_size): the blocks a cache commits.
  int64_t full_blocks() const { return full_blocks_; }
  // Longest prompt plus output of any request.
  int64_t longest_sequence() const { return longest_sequence_; }
  // Distinct tokens of the trace: the prefix once plus each session's final length minus the
  // prefix. This is the size of a cache that never has to evict.
  int64_t working_set_tokens() const { return working_set_tokens_; }

  // floor(fraction * working_set_tokens()) rounded down to a multiple of block_size, the cache
  // capacity the benchmark runs at. Precondition: fraction is finite and >= 0; violating it aborts.
  int64_t CapacityTokens(double fraction) const;

 private:
  // Lengths of one request; the prompt always starts at offset 0 of its session's buffer.
  struct RequestExtent {
    int64_t prompt_len = 0;
    int32_t output_len = 0;
  };

  StandardTrace() = default;

  StandardTraceParams params_;
  // One buffer per session: prefix, then new and output tokens of each turn.
  std::vector<std::vector<uint32_t>> session_tokens_;
  // Indexed by request number in issue order.
  std::vector<RequestExtent> requests_;
  uint64_t request_fingerprint_ = 0;
  uint64_t prefix_fingerprint_ = 0;
  int64_t draws_ = 0;
  int64_t prompt_tokens_ = 0;
  int64_t total_tokens_ = 0;
  int64_t full_blocks_ = 0;
  int64_t longest_sequence_ = 0;
  int64_t working_set_tokens_ = 0;
};

// Compares `trace` with every check value published for v1: the params, the totals, both
// fingerprints, the first prefix tokens, the working set and the capacities at 50 % and 100 %.
// Returns an empty string when all match; otherwise one line per mismatch naming the value with
// its expected and actual figures. A mismatch means timings from this trace do not count.
[[nodiscard]] std::string VerifyStandardTraceV1(const StandardTrace& trace);

}  // namespace agentkv::bench

#endif  // AGENTKV_BENCH_STANDARD_TRACE_H_
