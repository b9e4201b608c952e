// ServerCore's bookkeeping without sockets: the stop gate for posted work and the connection
// registry that shutdown waits on. Accepting and draining real connections is covered by
// http_server_test.cc.
#include "agentkv/net/server_core.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>

namespace agentkv::net::internal {
namespace {

using std::chrono::milliseconds;

std::shared_ptr<ServerCore> MakeCore(std::shared_ptr<IoLoops> loops = nullptr) {
  return std::make_shared<ServerCore>(
      HttpServerOptions{}, [](Request, std::shared_ptr<ResponseWriter>) {}, std::move(loops));
}

// Polls `condition` every millisecond for up to 5 s.
bool Eventually(const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + milliseconds(5'000);
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return true;
}

TEST(ServerCoreTest, PostIfRunningPostsUntilStopped) {
  auto loops = std::make_shared<IoLoops>(1, IoLoops::Shape::kShared, "a test", "test-io");
  auto core = MakeCore(loops);
  std::atomic<int> ran{0};
  EXPECT_TRUE(core->PostIfRunning(loops->context(0).get_executor(), [&] { ++ran; }));
  EXPECT_TRUE(Eventually([&] { return ran.load() == 1; }));
  core->MarkStopped();
  EXPECT_FALSE(core->PostIfRunning(loops->context(0).get_executor(), [&] { ++ran; }));
  loops->Join(IoLoops::JoinMode::kFinishWork);
  EXPECT_EQ(ran.load(), 1);
}

TEST(ServerCoreTest, OwnLoopsAreSharedAndLoopsGivenAreNotOwned) {
  auto own = MakeCore();
  EXPECT_TRUE(own->owns_loops());
  EXPECT_EQ(own->loops().size(), 1U);  // HttpServerOptions::threads (2) on one io_context.
  auto loops = std::make_shared<IoLoops>(3, IoLoops::Shape::kPerThread, "a test", "test-io");
  auto given = MakeCore(loops);
  EXPECT_FALSE(given->owns_loops());
  EXPECT_EQ(&given->loops(), loops.get());
}

TEST(ServerCoreTest, RegistryCountsConnectionsLateOnesWhileDrainingAndRefusesThemOnceClosed) {
  auto core = MakeCore();
  EXPECT_TRUE(core->WaitForConnections(std::chrono::steady_clock::now()));
  ASSERT_TRUE(core->Register(nullptr, 1));
  ASSERT_TRUE(core->Register(nullptr, 2));
  EXPECT_EQ(core->open_connections(), 2);
  EXPECT_FALSE(core->draining());

  core->BeginDrain();
  EXPECT_TRUE(core->draining());
  // The listener stays open while draining: a connection accepted now is registered (late).
  ASSERT_TRUE(core->Register(nullptr, 3));
  EXPECT_EQ(core->open_connections(), 3);
  EXPECT_FALSE(core->WaitForConnections(std::chrono::steady_clock::now() + milliseconds(10),
                                        /*include_late=*/false));

  core->Unregister(1);
  core->Unregister(2);
  EXPECT_EQ(core->open_connections(), 1);
  // The in-flight connections are gone; the late one is not waited for, unless asked.
  EXPECT_TRUE(core->WaitForConnections(std::chrono::steady_clock::now(), /*include_late=*/false));
  EXPECT_FALSE(core->WaitForConnections(std::chrono::steady_clock::now()));

  // Returns once the acceptor's close ran on its loop.
  core->StopAccepting(std::chrono::steady_clock::now() + milliseconds(5'000));
  EXPECT_FALSE(core->Register(nullptr, 4));
  core->Unregister(3);
  EXPECT_EQ(core->open_connections(), 0);
  EXPECT_TRUE(core->WaitForConnections(std::chrono::steady_clock::now()));
}

TEST(ServerCoreTest, CountsServedRequests) {
  auto core = MakeCore();
  core->CountServed();
  core->CountServed();
  EXPECT_EQ(core->requests_served(), 2);
}

}  // namespace
}  // namespace agentkv::net::internal
