#include "agentkv/control/reservation.h"

#include <gtest/gtest.h>

#include <limits>

#include "agentkv/base/bounds.h"

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

// Client-controlled numbers at the int64 limits never overflow (UBSan would report it) and
// never come out negative: the reservation saturates at kMaxTokens, above any ceiling.
TEST(ReservationTest, SaturatesAtTheTokenBoundForAnyInputs) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(ComputeReservationTokens(kMax, kMax), kMaxTokens);
  EXPECT_EQ(ComputeReservationTokens(kMaxTokens, 1), kMaxTokens);
  EXPECT_EQ(ComputeReservationTokens(kMaxTokens - 1, 1), kMaxTokens);
  EXPECT_EQ(ComputeReservationTokens(kMin, kMin), 0);
  EXPECT_EQ(ReservationTokens({.prefix_tokens = 9223372036854775000,
                               .pending_tokens = 0,
                               .max_new_tokens = 2000,
                               .expected_decode_cap = std::nullopt}),
            kMaxTokens);
  EXPECT_EQ(ReservationTokens({.prefix_tokens = kMax,
                               .pending_tokens = kMax,
                               .max_new_tokens = kMin,
                               .expected_decode_cap = kMax}),
            kMaxTokens);
  EXPECT_EQ(ReservationTokens({.prefix_tokens = 2,
                               .pending_tokens = kMin,
                               .max_new_tokens = kMax,
                               .expected_decode_cap = std::nullopt}),
            kMaxTokens);
  EXPECT_EQ(ReservationTokens({.prefix_tokens = 2,
                               .pending_tokens = 0,
                               .max_new_tokens = kMax,
                               .expected_decode_cap = std::nullopt}),
            kMaxTokens);
}

}  // namespace
}  // namespace agentkv::control
