// ClientGoneSignal, the part of the writer that needs no connection. The writer's calls are
// exercised end to end in server_connection_test.cc.
#include "agentkv/net/connection_response_writer.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <thread>
#include <vector>

namespace agentkv::net::internal {
namespace {

TEST(ClientGoneSignalTest, FireRunsEachCallbackOnceAndLaterOnesAtOnce) {
  ClientGoneSignal signal;
  int first = 0;
  int second = 0;
  signal.Register([&] { ++first; });
  signal.Register([&] { ++second; });
  EXPECT_FALSE(signal.fired());
  signal.Fire();
  signal.Fire();
  EXPECT_TRUE(signal.fired());
  EXPECT_EQ(first, 1);
  EXPECT_EQ(second, 1);
  int late = 0;
  signal.Register([&] { ++late; });
  EXPECT_EQ(late, 1);
}

TEST(ClientGoneSignalTest, DisarmDropsCallbacksAndSilencesFire) {
  ClientGoneSignal signal;
  int calls = 0;
  signal.Register([&] { ++calls; });
  signal.Disarm();
  signal.Fire();
  signal.Register([&] { ++calls; });
  EXPECT_EQ(calls, 0);
  EXPECT_FALSE(signal.fired());
}

TEST(ClientGoneSignalTest, AThrowingCallbackDoesNotStopTheOthers) {
  ClientGoneSignal signal;
  int calls = 0;
  signal.Register([] { throw std::runtime_error("callback failed"); });
  signal.Register([&] { ++calls; });
  signal.Fire();
  EXPECT_EQ(calls, 1);
}

TEST(ClientGoneSignalTest, ConcurrentRegisterAndFireRunEveryCallbackExactlyOnce) {
  ClientGoneSignal signal;
  std::atomic<int> calls{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1'000; ++i) signal.Register([&] { calls.fetch_add(1); });
    });
  }
  threads.emplace_back([&] { signal.Fire(); });
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(calls.load(), 4'000);
}

}  // namespace
}  // namespace agentkv::net::internal
