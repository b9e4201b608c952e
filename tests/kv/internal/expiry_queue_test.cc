#include "agentkv/kv/internal/expiry_queue.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>

// Live heap bytes of this test program, so that "memory stays bounded" is something a test can
// observe. Every global allocation carries its size in a 16-byte header (keeping the
// alignment operator new promises); aligned and nothrow forms fall back on these.
namespace {

std::atomic<int64_t> g_live_bytes{0};
constexpr size_t kHeader = 16;

}  // namespace

void* operator new(size_t n) {
  void* base = std::malloc(n + kHeader);
  if (base == nullptr) throw std::bad_alloc();
  *static_cast<size_t*>(base) = n;
  g_live_bytes += static_cast<int64_t>(n);
  return static_cast<char*>(base) + kHeader;
}
void operator delete(void* p) noexcept {
  if (p == nullptr) return;
  char* base = static_cast<char*>(p) - kHeader;
  g_live_bytes -= static_cast<int64_t>(*reinterpret_cast<size_t*>(base));
  std::free(base);
}
void operator delete(void* p, size_t) noexcept { operator delete(p); }
void* operator new[](size_t n) { return operator new(n); }
void operator delete[](void* p) noexcept { operator delete(p); }
void operator delete[](void* p, size_t) noexcept { operator delete(p); }

namespace agentkv::kv::internal {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<int32_t> PopExpired(ExpiryQueue& q, int64_t now) {
  std::vector<int32_t> out;
  q.PopExpired(Step(now), out);
  return out;
}

TEST(ExpiryQueueTest, PopsOnlyWhatIsDueAtOrBeforeNow) {
  ExpiryQueue q;
  q.Schedule(1, Step(5));
  q.Schedule(2, Step(7));
  EXPECT_EQ(q.size(), 2);
  EXPECT_THAT(PopExpired(q, 4), IsEmpty());
  EXPECT_THAT(PopExpired(q, 5), ElementsAre(1));  // exactly at its step, not one later
  EXPECT_FALSE(q.Pending(1));
  EXPECT_TRUE(q.Pending(2));
  EXPECT_THAT(PopExpired(q, 6), IsEmpty());
  EXPECT_THAT(PopExpired(q, 100), ElementsAre(2));
  EXPECT_EQ(q.size(), 0);
  EXPECT_THAT(PopExpired(q, 1000), IsEmpty());
}

TEST(ExpiryQueueTest, OrdersByStepThenSchedulingOrderNotBlockId) {
  ExpiryQueue q;
  q.Schedule(5, Step(3));
  q.Schedule(1, Step(2));
  q.Schedule(9, Step(3));
  q.Schedule(2, Step(3));
  q.Schedule(0, Step(4));
  EXPECT_THAT(PopExpired(q, 10), ElementsAre(1, 5, 9, 2, 0));
}

TEST(ExpiryQueueTest, PopExpiredAppendsToOut) {
  ExpiryQueue q;
  q.Schedule(3, Step(1));
  std::vector<int32_t> out = {42};
  q.PopExpired(Step(1), out);
  EXPECT_THAT(out, ElementsAre(42, 3));
}

TEST(ExpiryQueueTest, RescheduleLaterReplacesThePendingExpiry) {
  ExpiryQueue q;
  q.Schedule(1, Step(5));
  q.Schedule(1, Step(10));
  EXPECT_EQ(q.size(), 1);
  EXPECT_THAT(PopExpired(q, 5), IsEmpty()) << "the replaced entry must be skipped";
  EXPECT_TRUE(q.Pending(1));
  EXPECT_THAT(PopExpired(q, 10), ElementsAre(1));
}

TEST(ExpiryQueueTest, RescheduleEarlierPopsOnceAtTheNewStep) {
  ExpiryQueue q;
  q.Schedule(1, Step(10));
  q.Schedule(1, Step(3));
  EXPECT_THAT(PopExpired(q, 3), ElementsAre(1));
  EXPECT_THAT(PopExpired(q, 10), IsEmpty()) << "the stale entry must not pop a second time";
}

TEST(ExpiryQueueTest, RescheduleAtTheSameStepMovesToTheEndOfTheTie) {
  ExpiryQueue q;
  q.Schedule(1, Step(3));
  q.Schedule(2, Step(3));
  q.Schedule(1, Step(3));
  EXPECT_THAT(PopExpired(q, 3), ElementsAre(2, 1));
}

TEST(ExpiryQueueTest, CancelForgetsThePendingExpiry) {
  ExpiryQueue q;
  q.Schedule(1, Step(2));
  q.Schedule(2, Step(2));
  q.Cancel(1);
  q.Cancel(7);  // never scheduled: a no-op
  EXPECT_FALSE(q.Pending(1));
  EXPECT_EQ(q.size(), 1);
  EXPECT_THAT(PopExpired(q, 2), ElementsAre(2));
  // Scheduling again after a cancel works and pops once.
  q.Schedule(1, Step(4));
  EXPECT_THAT(PopExpired(q, 9), ElementsAre(1));
}

TEST(ExpiryQueueTest, ClearForgetsEverything) {
  ExpiryQueue q;
  q.Schedule(1, Step(1));
  q.Schedule(2, Step(2));
  q.Clear();
  EXPECT_EQ(q.size(), 0);
  EXPECT_FALSE(q.Pending(1));
  EXPECT_THAT(PopExpired(q, 100), IsEmpty());
  q.Schedule(2, Step(3));
  EXPECT_THAT(PopExpired(q, 3), ElementsAre(2));
}

TEST(ExpiryQueueTest, StaleEntriesDoNotAccumulateWhileTheScheduleIsFarAhead) {
  // A block rescheduled every step (a retention renewed on each request) leaves one stale
  // entry per reschedule that never reaches the top of the heap. Memory must stay O(pending).
  ExpiryQueue q;
  q.Schedule(0, Step(1'000'000));
  std::vector<int32_t> out;
  q.PopExpired(Step(0), out);
  const int64_t before = g_live_bytes.load();
  for (int64_t i = 1; i <= 100'000; ++i) {
    q.Schedule(0, Step(1'000'000 + i));
    q.PopExpired(Step(i), out);
  }
  const int64_t growth = g_live_bytes.load() - before;
  // Unbounded, the heap would hold 100,000 entries (>= 1.6 MB).
  EXPECT_LT(growth, 16 * 1024) << "live bytes grew by " << growth;
  EXPECT_THAT(out, IsEmpty());
  EXPECT_EQ(q.size(), 1);
  EXPECT_THAT(PopExpired(q, 1'100'000), ElementsAre(0));
}

TEST(ExpiryQueueTest, CancelledEntriesDoNotAccumulate) {
  ExpiryQueue q;
  std::vector<int32_t> out;
  q.Schedule(0, Step(10));
  q.Cancel(0);
  q.PopExpired(Step(0), out);
  const int64_t before = g_live_bytes.load();
  for (int32_t i = 0; i < 100'000; ++i) {
    q.Schedule(i % 1000, Step(1'000'000));
    q.Cancel(i % 1000);
    q.PopExpired(Step(0), out);
  }
  const int64_t growth = g_live_bytes.load() - before;
  EXPECT_LT(growth, 64 * 1024) << "live bytes grew by " << growth;
  EXPECT_EQ(q.size(), 0);
  EXPECT_THAT(PopExpired(q, 2'000'000), IsEmpty());
}

TEST(ExpiryQueueTest, CompactionKeepsEveryLiveEntryAndItsOrder) {
  // Enough stale entries to trigger the rebuild, then check nothing live was lost or reordered.
  ExpiryQueue q;
  for (int32_t b = 0; b < 50; ++b) q.Schedule(b, Step(1000 - b));  // b=49 due first
  for (int round = 0; round < 10; ++round) {
    for (int32_t b = 0; b < 50; b += 2) q.Schedule(b, Step(2000 + b));  // even: later
  }
  std::vector<int32_t> out;
  q.PopExpired(Step(0), out);
  EXPECT_THAT(out, IsEmpty());
  EXPECT_EQ(q.size(), 50);
  std::vector<int32_t> want;
  for (int32_t b = 49; b >= 1; b -= 2) want.push_back(b);  // odd, by step 951..999
  for (int32_t b = 0; b < 50; b += 2) want.push_back(b);   // even, by step 2000..2048
  EXPECT_EQ(PopExpired(q, 5000), want);
}

}  // namespace
}  // namespace agentkv::kv::internal
