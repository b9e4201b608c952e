#include "agentkv/control/reservation.h"

#include <gtest/gtest.h>

namespace agentkv::control {
namespace {

// test_compute_reservation_tokens_uses_expanded_prompt_and_remaining_decode.
TEST(ReservationTest, ComputeAddsPromptAndRemainingDecodeClampedAtZero) {
  EXPECT_EQ(ComputeReservationTokens(100, 50), 150);
  EXPECT_EQ(ComputeReservationTokens(-1, -1), 0);
  EXPECT_EQ(ComputeReservationTokens(-5, 7), 7);
}

// test_admission_lease_uses_train_prefix_and_releases_after_backend_attempt: prefix 100,
// pending 8, max_new_tokens 64, cap 20 -> prompt 108 + min(64 - 8, 20) = 128.
TEST(ReservationTest, ReplayedPrefixIncludesPendingTokensAndTheCapTightensDecode) {
  EXPECT_EQ(ReservationTokens({.prefix_tokens = 100,
                               .pending_tokens = 8,
                               .max_new_tokens = 64,
                               .expected_decode_cap = 20}),
            128);
  EXPECT_EQ(ReservationTokens({.prefix_tokens = 100,
                               .pending_tokens = 8,
                               .max_new_tokens = 64,
                               .expected_decode_cap = std::nullopt}),
            164);
  // More pending tokens than the budget: nothing left to decode.
  EXPECT_EQ(ReservationTokens({.prefix_tokens = 10,
                               .pending_tokens = 70,
                               .max_new_tokens = 64,
                               .expected_decode_cap = 20}),
            80);
}

}  // namespace
}  // namespace agentkv::control
