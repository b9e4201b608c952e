// Tests of BoundedLog: it keeps the newest entries in order and counts what it dropped.
#include "agentkv/service/emulator/bounded_log.h"

#include <gtest/gtest.h>

#include <deque>

namespace agentkv::service {
namespace {

TEST(BoundedLogTest, KeepsTheNewestEntriesAndCountsTheDropped) {
  BoundedLog<int> log(3);
  for (int i = 1; i <= 2; ++i) log.Append(i);
  EXPECT_EQ(log.entries(), (std::deque<int>{1, 2}));
  EXPECT_EQ(log.dropped(), 0);
  for (int i = 3; i <= 10; ++i) log.Append(i);
  EXPECT_EQ(log.entries(), (std::deque<int>{8, 9, 10}));
  EXPECT_EQ(log.size(), 3u);
  EXPECT_EQ(log.dropped(), 7);
}

TEST(BoundedLogTest, ZeroCapacityKeepsNothing) {
  BoundedLog<int> log(0);
  log.Append(1);
  log.Append(2);
  EXPECT_TRUE(log.entries().empty());
  EXPECT_EQ(log.dropped(), 2);
}

}  // namespace
}  // namespace agentkv::service
