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

}  // namespace agentkv::control
