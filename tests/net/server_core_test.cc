// ServerCore's bookkeeping without sockets: the stop gate for posted work and the connection
// registry that shutdown waits on. Accepting and draining real connections is covered by
// http_server_test.cc.
#include "agentkv/net/server_core.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>

namespace agentkv::net::internal {
namespace {

using std::chrono::milliseconds;

std::shared_ptr<ServerCore> MakeCore() {
  return std::make_shared<ServerCore>(HttpServerOptions{},
                                      [](Request, std::shared_ptr<ResponseWriter>) {});
}

TEST(ServerCoreTest, PostIfRunningPostsUntilStopped) {
  auto core = MakeCore();
  int ran = 0;
  EXPECT_TRUE(core->PostIfRunning(core->io_context().get_executor(), [&] { ++ran; }));
  core->io_context().poll();
  EXPECT_EQ(ran, 1);
  core->MarkStopped();
  EXPECT_FALSE(core->PostIfRunning(core->io_context().get_executor(), [&] { ++ran; }));
  core->io_context().restart();
  core->io_context().poll();
  EXPECT_EQ(ran, 1);
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

  core->StopAccepting();
  EXPECT_FALSE(core->Register(nullptr, 4));
  core->Unregister(3);
  EXPECT_EQ(core->open_connections(), 0);
  EXPECT_TRUE(core->WaitForConnections(std::chrono::steady_clock::now()));
  core->io_context().poll();  // Runs the posted acceptor close, which holds the core.
}

TEST(ServerCoreTest, CountsServedRequests) {
  auto core = MakeCore();
  core->CountServed();
  core->CountServed();
  EXPECT_EQ(core->requests_served(), 2);
}

}  // namespace
}  // namespace agentkv::net::internal
