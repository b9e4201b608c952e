#include "agentkv/base/hash.h"

#include <gtest/gtest.h>

#include <bit>
#include <set>
#include <string>

namespace agentkv {
namespace {

TEST(HashTest, Mix64IsTheSplitMix64Finalizer) {
  // SplitMix64 with state 0: first output is Mix64(0x9E3779B97F4A7C15).
  EXPECT_EQ(Mix64(0x9E3779B97F4A7C15ULL), 0xE220A8397B1DCDAFULL);
}

TEST(HashTest, SeedAndContentChangeTheHash) {
  EXPECT_EQ(Hash64("agentkv", 1), Hash64("agentkv", 1));
  EXPECT_NE(Hash64("agentkv", 1), Hash64("agentkv", 2));
  EXPECT_NE(Hash64("agentkv", 1), Hash64("agentkw", 1));
  EXPECT_NE(Hash64("", 1), Hash64(std::string(1, '\0'), 1));
}

TEST(HashTest, EveryLengthUpTo64IsDistinct) {
  std::set<uint64_t> seen;
  const std::string data(64, 'a');
  for (size_t n = 0; n <= data.size(); ++n)
    seen.insert(Hash64(std::string_view(data).substr(0, n), 7));
  EXPECT_EQ(seen.size(), data.size() + 1);
}

TEST(HashTest, SingleBitFlipsAvalanche) {
  // Flipping any one input bit changes about half the output bits.
  std::string base(64, 'x');
  const uint64_t h0 = Hash64(base, 42);
  double total = 0;
  int trials = 0;
  for (size_t byte = 0; byte < base.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string s = base;
      s[byte] = static_cast<char>(s[byte] ^ (1 << bit));
      total += std::popcount(h0 ^ Hash64(s, 42));
      ++trials;
    }
  }
  const double mean = total / trials;
  EXPECT_GT(mean, 28.0);
  EXPECT_LT(mean, 36.0);
}

TEST(HashTest, HashCombineIsOrderSensitive) {
  EXPECT_NE(HashCombine(1, 2), HashCombine(2, 1));
  EXPECT_EQ(HashCombine(1, 2), HashCombine(1, 2));
}

}  // namespace
}  // namespace agentkv
