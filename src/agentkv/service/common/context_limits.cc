#include "agentkv/service/common/context_limits.h"

#include <algorithm>
#include <string>

#include "agentkv/base/bounds.h"
#include "agentkv/base/check.h"

namespace agentkv::service {

StatusOr<ContextLimits> ContextLimits::Create(int64_t context_length,
                                              int64_t max_total_num_tokens) {
  AGENTKV_RETURN_IF_ERROR(CheckTokens("--context-length", context_length));
  AGENTKV_RETURN_IF_ERROR(CheckTokens("max_total_num_tokens", max_total_num_tokens));
  const int64_t context = context_length > 0 ? context_length : max_total_num_tokens;
  const int64_t max_req_len = std::min(context - 1, max_total_num_tokens - 1);
  if (max_req_len - 5 < 1) {
    return InvalidArgumentError(
        "Memory pool size is too small: max_req_input_len = min(context length " +
        std::to_string(context) + ", KV pool " + std::to_string(max_total_num_tokens) +
        ") - 6 must be at least 1");
  }
  return ContextLimits(context, max_req_len);
}

Status CheckContextLength(int64_t context_length, int64_t input_tokens,
                          std::optional<int64_t> max_new_tokens) {
  AGENTKV_CHECK(context_length > 0 && input_tokens >= 0 && max_new_tokens.value_or(0) >= 0);
  if (input_tokens >= context_length) {
    return InvalidArgumentError("The input (" + std::to_string(input_tokens) +
                                " tokens) is longer than the model's context length (" +
                                std::to_string(context_length) + " tokens).");
  }
  if (!max_new_tokens.has_value()) return Status::Ok();
  // Both are non-negative int64 values, so their sum fits in uint64: the message carries the
  // exact total even when it does not fit in int64 (SGLang's Python integers never overflow).
  const bool exceeds = !CheckedAdd(input_tokens, *max_new_tokens).has_value() ||
                       input_tokens + *max_new_tokens >= context_length;
  if (!exceeds) return Status::Ok();
  const uint64_t total =
      static_cast<uint64_t>(input_tokens) + static_cast<uint64_t>(*max_new_tokens);
  return InvalidArgumentError(
      "Requested token count exceeds the model's maximum context length of " +
      std::to_string(context_length) + " tokens. You requested a total of " +
      std::to_string(total) + " tokens: " + std::to_string(input_tokens) +
      " tokens from the input messages and " + std::to_string(*max_new_tokens) +
      " tokens for the completion. Please reduce the number of tokens in the input messages "
      "or the completion to fit within the limit.");
}

Status ContextLimits::CheckTokenizer(int64_t input_tokens, int64_t max_new_tokens) const {
  return CheckContextLength(context_length_, input_tokens, max_new_tokens);
}

std::optional<std::string> ContextLimits::SchedulerRefusal(int64_t input_tokens) const {
  AGENTKV_CHECK(input_tokens >= 0);
  if (input_tokens < max_req_input_len_) return std::nullopt;
  return "Input length (" + std::to_string(input_tokens) +
         " tokens) exceeds the maximum allowed length (" + std::to_string(max_req_input_len_) +
         " tokens). Use a shorter input or enable --allow-auto-truncate.";
}

int64_t ContextLimits::ClampMaxNewTokens(int64_t input_tokens, int64_t max_new_tokens) const {
  AGENTKV_CHECK(max_new_tokens >= 0 && input_tokens >= 0 && input_tokens < max_req_input_len_);
  return std::min(max_new_tokens, max_req_len_ - input_tokens - 1);
}

}  // namespace agentkv::service
