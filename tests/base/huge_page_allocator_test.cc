#include "agentkv/base/huge_page_allocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

namespace agentkv {
namespace {

constexpr uintptr_t kHugePage = uintptr_t{2} << 20;

TEST(HugePageAllocatorTest, LargeArraysAreAlignedToAHugePageAndHoldTheirValues) {
  // 3 MiB and a bit: not a multiple of the huge page, so the rounding is exercised.
  std::vector<uint64_t, HugePageAllocator<uint64_t>> v((size_t{3} << 17) + 5);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % kHugePage, 0U);
  for (uint64_t x : v) ASSERT_EQ(x, 0U) << "value-initialized";
  std::iota(v.begin(), v.end(), uint64_t{7});
  EXPECT_EQ(v.front(), 7U);
  EXPECT_EQ(v.back(), 7U + v.size() - 1);
  // Growing moves the contents to a new mapping and unmaps the old one.
  v.resize(v.size() * 2, 1);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % kHugePage, 0U);
  EXPECT_EQ(v[3], 10U);
  EXPECT_EQ(v.back(), 1U);
}

TEST(HugePageAllocatorTest, SmallArraysUseTheDefaultAllocatorAndWork) {
  std::vector<int32_t, HugePageAllocator<int32_t>> v(1000, 3);
  v.push_back(4);
  EXPECT_EQ(v.size(), 1001U);
  EXPECT_EQ(v[999], 3);
  EXPECT_EQ(v.back(), 4);
}

TEST(HugePageAllocatorTest, RepeatedMapsAndUnmapsKeepTheLiveArraysIntact) {
  // Each round maps 4 MiB and unmaps the oldest array: unmapping a neighbour's pages (a wrong
  // lead or trail length) would crash the reads of the arrays still live.
  std::vector<std::vector<char, HugePageAllocator<char>>> live;
  for (int round = 0; round < 32; ++round) {
    live.emplace_back(size_t{4} << 20, static_cast<char>(round));
    if (live.size() > 3) live.erase(live.begin());
    for (const auto& block : live) ASSERT_EQ(block[block.size() / 2], block.front());
  }
}

}  // namespace
}  // namespace agentkv
