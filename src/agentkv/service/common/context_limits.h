// ContextLimits: SGLang's rules for how long a request may be, in one place, for the engine
// emulator (EngineRuntime) and its tests.
//
// SGLang checks a request twice (docs/PROTOCOL.md, sections 3.5 and 7):
//   1. tokenizer_manager._validate_one_request, against the model's context length C: an
//      input of C tokens or more is a ValueError "The input (N tokens) is longer than the
//      model's context length (C tokens)."; an input plus max_new_tokens of C or more is a
//      ValueError "Requested token count exceeds the model's maximum context length of C
//      tokens. ..." (HTTP 400; in a stream, an error event then [DONE]).
//   2. the scheduler, against max_req_len = min(C - 1, max_total_num_tokens - 1) and
//      max_req_input_len = max_req_len - 5: a longer input finishes at once as an abort with
//      status_code 400 ("Input length (N tokens) exceeds the maximum allowed length (M
//      tokens). ..."; HTTP 400 when not streaming); otherwise max_new_tokens is clamped to
//      max_req_len - N - 1, so that every admitted request fits the KV pool.
// Sums are computed without overflow for any non-negative int64 inputs (a max_new_tokens of
// 2^63-1 is refused with the exact total in the message). Pure value type; thread-safe.
#ifndef AGENTKV_SERVICE_COMMON_CONTEXT_LIMITS_H_
#define AGENTKV_SERVICE_COMMON_CONTEXT_LIMITS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "agentkv/base/status.h"

namespace agentkv::service {

// Step 1 alone, for callers that know only the context length (the gateway): OK, or
// InvalidArgument with SGLang's message when `input_tokens` reach `context_length`, or
// `input_tokens` plus `max_new_tokens` (when the request sets it; SGLang skips the check
// otherwise) do. Exact for any non-negative int64 inputs. Preconditions: context_length > 0,
// input_tokens >= 0, max_new_tokens >= 0 when set.
[[nodiscard]] Status CheckContextLength(int64_t context_length, int64_t input_tokens,
                                        std::optional<int64_t> max_new_tokens);

class ContextLimits {
 public:
  // `context_length` is the model's context length (SGLang --context-length), 0 meaning the
  // KV pool; `max_total_num_tokens` the KV pool. Both in [0, kMaxTokens] (base/bounds.h),
  // the pool at least 1. InvalidArgument naming the field when out of range, or when
  // max_req_input_len would be below 1 (SGLang: "Memory pool size is too small").
  static StatusOr<ContextLimits> Create(int64_t context_length, int64_t max_total_num_tokens);

  int64_t context_length() const { return context_length_; }
  int64_t max_req_len() const { return max_req_len_; }
  int64_t max_req_input_len() const { return max_req_input_len_; }

  // Step 1 (the tokenizer manager): CheckContextLength against this context length.
  // Preconditions: input_tokens >= 0, max_new_tokens >= 0.
  [[nodiscard]] Status CheckTokenizer(int64_t input_tokens, int64_t max_new_tokens) const;

  // Step 2 (the scheduler): SGLang's abort message for an input of max_req_input_len tokens
  // or more, else nullopt. Precondition: input_tokens >= 0.
  std::optional<std::string> SchedulerRefusal(int64_t input_tokens) const;

  // Step 2: max_new_tokens clamped to max_req_len - input_tokens - 1. Preconditions:
  // max_new_tokens >= 0 and SchedulerRefusal(input_tokens) is nullopt (so the bound is >= 5).
  int64_t ClampMaxNewTokens(int64_t input_tokens, int64_t max_new_tokens) const;

 private:
  ContextLimits(int64_t context_length, int64_t max_req_len)
      : context_length_(context_length),
        max_req_len_(max_req_len),
        max_req_input_len_(max_req_len - 5) {}

  int64_t context_length_;
  int64_t max_req_len_;
  int64_t max_req_input_len_;
};

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_COMMON_CONTEXT_LIMITS_H_
