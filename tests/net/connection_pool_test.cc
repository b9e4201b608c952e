#include "agentkv/net/connection_pool.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <optional>
#include <vector>

namespace agentkv::net::internal {
namespace {

using Clock = ConnectionPool::Clock;
using Lease = ConnectionPool::Lease;
using std::chrono::milliseconds;

bool IsOpen(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

// A connected socket pair: the pool gets `local`, the test plays the peer with `peer`.
struct Pair {
  Pair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    local = fds[0];
    peer = fds[1];
  }
  ~Pair() {
    if (peer >= 0) ::close(peer);
  }
  int local = -1;
  int peer = -1;
};

class ConnectionPoolTest : public ::testing::Test {
 protected:
  ConnectionPool::Options Options(size_t max_connections, size_t max_idle = 16) {
    ConnectionPool::Options options;
    options.max_connections_per_host = max_connections;
    options.max_idle_per_host = max_idle;
    options.idle_timeout = milliseconds(1'000);
    return options;
  }

  // Acquires for "h:1"; a waiter records the lease it is eventually given.
  std::optional<Lease> Acquire(ConnectionPool& pool, uint64_t id) {
    auto lease = pool.Acquire(
        "h:1", id,
        [this, id](Lease granted) {
          granted_.push_back({id, granted});
        },
        now_);
    pool.CheckInvariants();
    return lease;
  }
  void Release(ConnectionPool& pool, int fd, Clock::time_point at) {
    pool.Release("h:1", fd, AF_UNIX, at);
    pool.CheckInvariants();
  }
  void Discard(ConnectionPool& pool) {
    pool.Discard("h:1");
    pool.CheckInvariants();
  }

  Clock::time_point now_ = Clock::now();
  std::vector<std::pair<uint64_t, Lease>> granted_;
};

TEST_F(ConnectionPoolTest, GrantsConnectPermissionsUpToTheLimitThenQueues) {
  ConnectionPool pool(Options(2));
  auto first = Acquire(pool, 1);
  auto second = Acquire(pool, 2);
  ASSERT_TRUE(first && second);
  EXPECT_FALSE(first->reused());
  EXPECT_FALSE(Acquire(pool, 3).has_value());
  EXPECT_FALSE(Acquire(pool, 4).has_value());
  EXPECT_EQ(pool.leased(), 2);
  EXPECT_EQ(pool.waiting(), 2);

  // A failed connection frees its slot for the oldest waiter, as a connect permission.
  Discard(pool);
  ASSERT_EQ(granted_.size(), 1u);
  EXPECT_EQ(granted_[0].first, 3u);
  EXPECT_FALSE(granted_[0].second.reused());
  EXPECT_EQ(pool.leased(), 2);

  // A healthy connection goes straight to the next waiter.
  Pair pair;
  Release(pool, pair.local, now_);
  ASSERT_EQ(granted_.size(), 2u);
  EXPECT_EQ(granted_[1].first, 4u);
  EXPECT_EQ(granted_[1].second.fd, pair.local);
  EXPECT_EQ(pool.idle_connections(), 0);
  EXPECT_EQ(pool.waiting(), 0);
  ::close(pair.local);
}

TEST_F(ConnectionPoolTest, ReusesTheMostRecentIdleConnection) {
  ConnectionPool pool(Options(4));
  Pair older, newer;
  ASSERT_TRUE(Acquire(pool, 1) && Acquire(pool, 2));
  Release(pool, older.local, now_);
  Release(pool, newer.local, now_ + milliseconds(1));
  EXPECT_EQ(pool.idle_connections(), 2);
  EXPECT_EQ(pool.leased(), 0);
  auto lease = Acquire(pool, 3);
  ASSERT_TRUE(lease && lease->reused());
  EXPECT_EQ(lease->fd, newer.local);
  EXPECT_EQ(lease->family, AF_UNIX);
  EXPECT_EQ(pool.idle_connections(), 1);
  ::close(newer.local);
}

TEST_F(ConnectionPoolTest, UpstreamsAreIndependent) {
  ConnectionPool pool(Options(1));
  ASSERT_TRUE(Acquire(pool, 1));
  EXPECT_TRUE(pool.Acquire(
                      "other:2", 2, [](Lease) {}, now_)
                  .has_value());
  EXPECT_FALSE(Acquire(pool, 3).has_value());
}

TEST_F(ConnectionPoolTest, SkipsConnectionsThePeerClosedOrThatExpired) {
  ConnectionPool pool(Options(4));
  Pair closed_by_peer, expired, fresh;
  for (uint64_t id = 1; id <= 3; ++id) ASSERT_TRUE(Acquire(pool, id));
  Release(pool, fresh.local, now_ + milliseconds(900));
  Release(pool, expired.local, now_ - milliseconds(500));
  Release(pool, closed_by_peer.local, now_ + milliseconds(900));
  ::close(closed_by_peer.peer);
  closed_by_peer.peer = -1;

  now_ += milliseconds(600);  // `expired` is now 1.1 s old.
  auto lease = Acquire(pool, 4);
  ASSERT_TRUE(lease && lease->reused());
  EXPECT_EQ(lease->fd, fresh.local);
  EXPECT_FALSE(IsOpen(closed_by_peer.local));
  EXPECT_FALSE(IsOpen(expired.local));
  ::close(fresh.local);
}

TEST_F(ConnectionPoolTest, UnexpectedBytesMakeAConnectionUnhealthy) {
  Pair pair;
  EXPECT_TRUE(IdleSocketHealthy(pair.local));
  ASSERT_EQ(::write(pair.peer, "x", 1), 1);
  EXPECT_FALSE(IdleSocketHealthy(pair.local));
  ::close(pair.local);
}

TEST_F(ConnectionPoolTest, KeepsAtMostMaxIdle) {
  ConnectionPool pool(Options(4, /*max_idle=*/1));
  Pair a, b;
  ASSERT_TRUE(Acquire(pool, 1) && Acquire(pool, 2));
  Release(pool, a.local, now_);
  Release(pool, b.local, now_);
  EXPECT_EQ(pool.idle_connections(), 1);
  EXPECT_TRUE(IsOpen(a.local));
  EXPECT_FALSE(IsOpen(b.local));
}

TEST_F(ConnectionPoolTest, CloseExpiredClosesOnlyOldIdleConnections) {
  ConnectionPool pool(Options(4));
  Pair old_one, young;
  ASSERT_TRUE(Acquire(pool, 1) && Acquire(pool, 2));
  Release(pool, old_one.local, now_);
  Release(pool, young.local, now_ + milliseconds(800));
  EXPECT_EQ(pool.CloseExpired(now_ + milliseconds(1'000)), 1u);
  pool.CheckInvariants();
  EXPECT_FALSE(IsOpen(old_one.local));
  EXPECT_TRUE(IsOpen(young.local));
  EXPECT_EQ(pool.idle_connections(), 1);
}

TEST_F(ConnectionPoolTest, CancelWaitRemovesOnlyQueuedWaiters) {
  ConnectionPool pool(Options(1));
  ASSERT_TRUE(Acquire(pool, 1));
  EXPECT_FALSE(Acquire(pool, 2));
  EXPECT_TRUE(pool.CancelWait("h:1", 2));
  EXPECT_FALSE(pool.CancelWait("h:1", 2));
  Discard(pool);
  EXPECT_TRUE(granted_.empty());
  EXPECT_EQ(pool.leased(), 0);
}

TEST_F(ConnectionPoolTest, CloseAllClosesIdleAndDropsWaiters) {
  ConnectionPool pool(Options(1));
  Pair pair;
  ASSERT_TRUE(Acquire(pool, 1));
  Release(pool, pair.local, now_);
  ASSERT_TRUE(Acquire(pool, 2));  // Reuses it.
  EXPECT_FALSE(Acquire(pool, 3));
  pool.CloseAll();
  EXPECT_EQ(pool.waiting(), 0);
  Release(pool, pair.local, now_);
  EXPECT_TRUE(granted_.empty());
  pool.CloseAll();
  EXPECT_FALSE(IsOpen(pair.local));
}

// Every descriptor the pool gives up goes through Options::close_idle exactly once (HttpClient
// closes its parked socket there), and a leased or reused one never does.
TEST_F(ConnectionPoolTest, GivesUpIdleDescriptorsThroughTheCloser) {
  std::vector<int> closed;
  ConnectionPool::Options options = Options(4, /*max_idle=*/1);
  options.close_idle = [&closed](int fd) {
    closed.push_back(fd);
    ::close(fd);
  };
  Pair expired;
  Pair beyond_cap;
  Pair peer_closed;
  Pair kept;
  {
    ConnectionPool pool(options);
    ASSERT_TRUE(Acquire(pool, 1) && Acquire(pool, 2));
    Release(pool, expired.local, now_);
    Release(pool, beyond_cap.local, now_);  // Over max_idle: given up at once.
    EXPECT_EQ(closed, std::vector<int>{beyond_cap.local});
    EXPECT_EQ(pool.CloseExpired(now_ + milliseconds(1'000)), size_t{1});
    EXPECT_EQ(closed, (std::vector<int>{beyond_cap.local, expired.local}));

    ASSERT_TRUE(Acquire(pool, 3) && Acquire(pool, 4));
    Release(pool, peer_closed.local, now_);
    ::close(peer_closed.peer);
    peer_closed.peer = -1;
    EXPECT_FALSE(Acquire(pool, 5)->reused());  // Unhealthy: given up, a connect instead.
    EXPECT_EQ(closed.back(), peer_closed.local);
    Discard(pool);
    Release(pool, kept.local, now_);
    const std::optional<Lease> reused = Acquire(pool, 6);
    ASSERT_TRUE(reused.has_value());
    EXPECT_EQ(reused->fd, kept.local);  // Handed out, not closed.
    EXPECT_EQ(closed.size(), size_t{3});
    Release(pool, kept.local, now_);
  }  // Destruction gives up the last idle one.
  EXPECT_EQ(closed,
            (std::vector<int>{beyond_cap.local, expired.local, peer_closed.local, kept.local}));
}

}  // namespace
}  // namespace agentkv::net::internal
