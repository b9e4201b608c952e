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

TEST(ReservationTest, UncachedReservationSkipsTheHeldPromptAndTheSharedPrefix) {
  const AttemptShape shape{
      .prefix_tokens = 1000, .pending_tokens = 0, .max_new_tokens = 200, .expected_decode_cap = 50};
  // A new session without a shared prefix reserves what the seed does.
  EXPECT_EQ(UncachedReservationTokens(shape, 0, 0), (UncachedReservation{1050, 0}));
  EXPECT_EQ(UncachedReservationTokens(shape, 0, 0).own_tokens, ReservationTokens(shape));
  // A continuing session reserves only the tokens its last prompt did not have.
  EXPECT_EQ(UncachedReservationTokens(shape, 800, 0), (UncachedReservation{250, 0}));
  // A first request with a shared prefix: its own part, plus the prefix under its key.
  EXPECT_EQ(UncachedReservationTokens(shape, 0, 600), (UncachedReservation{450, 600}));
  // A session that holds the prefix already does not reserve it again.
  EXPECT_EQ(UncachedReservationTokens(shape, 700, 600), (UncachedReservation{350, 0}));
  // Held and shared are clamped to the prompt; negative values count as 0.
  EXPECT_EQ(UncachedReservationTokens(shape, 5000, 0), (UncachedReservation{50, 0}));
  EXPECT_EQ(UncachedReservationTokens(shape, -5, 5000), (UncachedReservation{50, 1000}));
  // Replayed tokens of earlier attempts are prompt; saturation holds for any input.
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const UncachedReservation huge = UncachedReservationTokens({.prefix_tokens = kMax,
                                                              .pending_tokens = kMax,
                                                              .max_new_tokens = kMax,
                                                              .expected_decode_cap = std::nullopt},
                                                             -1, kMax);
  EXPECT_LE(huge.own_tokens, kMaxTokens);
  EXPECT_LE(huge.prefix_tokens, kMaxTokens);
}

}  // namespace
}  // namespace agentkv::control
