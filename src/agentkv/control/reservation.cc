#include "agentkv/control/reservation.h"

#include <algorithm>

#include "agentkv/base/bounds.h"

namespace agentkv::control {

int64_t ComputeReservationTokens(int64_t prompt_tokens, int64_t remaining_completion_tokens) {
  const int64_t sum = SaturatingAdd(std::max<int64_t>(0, prompt_tokens),
                                    std::max<int64_t>(0, remaining_completion_tokens));
  return std::min(sum, kMaxTokens);
}

int64_t ReservationTokens(const AttemptShape& shape) {
  const int64_t prompt = SaturatingAdd(shape.prefix_tokens, shape.pending_tokens);
  int64_t remaining = SaturatingSub(shape.max_new_tokens, shape.pending_tokens);
  if (shape.expected_decode_cap.has_value()) {
    remaining = std::min(remaining, *shape.expected_decode_cap);
  }
  return ComputeReservationTokens(prompt, remaining);
}

UncachedReservation UncachedReservationTokens(const AttemptShape& shape, int64_t held_tokens,
                                              int64_t shared_prefix_tokens) {
  const int64_t prompt =
      std::clamp<int64_t>(SaturatingAdd(shape.prefix_tokens, shape.pending_tokens), 0, kMaxTokens);
  const int64_t held = std::clamp<int64_t>(held_tokens, 0, prompt);
  const int64_t shared = std::clamp<int64_t>(shared_prefix_tokens, 0, prompt);
  int64_t remaining = SaturatingSub(shape.max_new_tokens, shape.pending_tokens);
  if (shape.expected_decode_cap.has_value()) {
    remaining = std::min(remaining, *shape.expected_decode_cap);
  }
  UncachedReservation out;
  out.own_tokens = ComputeReservationTokens(prompt - std::max(held, shared), remaining);
  out.prefix_tokens = held < shared ? shared : 0;
  return out;
}

}  // namespace agentkv::control
