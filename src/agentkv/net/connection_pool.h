// ConnectionPool: HttpClient's per-upstream bookkeeping of keep-alive connections.
//
// For each upstream ("host:port") the pool holds idle connections (as socket descriptors; the
// HttpClient keeps each one's socket object, still registered with its event loop, parked
// beside it until the next request leases the descriptor), counts the connections leased
// out, and queues requests that wait because max_connections_per_host are open. Acquire hands
// out the most recently used idle connection that is still healthy (not expired, not closed by
// the peer), or a permission to connect, or queues the caller. Release and Discard pass a freed
// connection or slot to the oldest waiter. The pool does no network I/O
// except closing descriptors and a non-blocking MSG_PEEK health check; time is passed in.
//
// Thread-safe (one mutex, never held while a waiter runs). Owns the idle descriptors and closes
// them (through Options::close_idle) on CloseExpired, CloseAll and destruction.
#ifndef AGENTKV_NET_CONNECTION_POOL_H_
#define AGENTKV_NET_CONNECTION_POOL_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "agentkv/sync/mutex.h"

namespace agentkv::net::internal {

class ConnectionPool {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    // Idle plus leased connections per upstream; further requests wait. Must be > 0.
    size_t max_connections_per_host = 64;
    // Idle connections kept per upstream; a connection released beyond it is closed.
    size_t max_idle_per_host = 16;
    // An idle connection older than this is closed rather than reused.
    std::chrono::milliseconds idle_timeout{30'000};
    // Closes an idle descriptor the pool gives up (expired, unhealthy, beyond max_idle_per_host,
    // CloseAll). Default (empty): ::close. HttpClient passes its own, because it keeps each
    // pooled descriptor open inside a socket object registered with its event loop. Runs
    // outside the pool's lock.
    std::function<void(int fd)> close_idle;
  };

  // A slot for one request: an idle connection to reuse (fd >= 0) or permission to open a new
  // connection (fd < 0). Either way the caller must end it with Release or Discard.
  struct Lease {
    int fd = -1;
    int family = 0;  // AF_INET or AF_INET6 when fd >= 0.
    bool reused() const { return fd >= 0; }
  };

  // Receives the lease of a request that had to wait; runs on the thread that freed the slot,
  // outside the pool's lock, and must not block (HttpClient posts onto the request's strand).
  using Waiter = std::function<void(Lease)>;

  explicit ConnectionPool(Options options);
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;
  ~ConnectionPool();

  // A lease for `key` now, or nullopt after queueing `waiter` (identified by `waiter_id` for
  // CancelWait) to be called with one later.
  std::optional<Lease> Acquire(const std::string& key, uint64_t waiter_id, Waiter waiter,
                               Clock::time_point now);

  // Removes a queued waiter. True when it was still queued (it will never be called); false
  // when its lease is already on its way (or it was never queued).
  bool CancelWait(const std::string& key, uint64_t waiter_id);

  // Returns a leased slot with a healthy keep-alive connection `fd`, which the pool now owns:
  // it goes to the oldest waiter, or becomes idle (or is closed beyond max_idle_per_host).
  void Release(const std::string& key, int fd, int family, Clock::time_point now);

  // Returns a leased slot without a reusable connection (closed, failed or never connected);
  // the oldest waiter, if any, gets permission to connect.
  void Discard(const std::string& key);

  // Closes idle connections past idle_timeout; returns how many.
  size_t CloseExpired(Clock::time_point now);

  // Closes every idle connection and drops every waiter without calling it.
  void CloseAll();

  // Idle connections over all upstreams.
  int64_t idle_connections() const;
  // Leased slots over all upstreams.
  int64_t leased() const;
  // Queued waiters over all upstreams.
  int64_t waiting() const;

  // Aborts when an invariant stated at the top of connection_pool.cc does not hold.
  void CheckInvariants() const;

 private:
  struct Idle {
    int fd;
    int family;
    Clock::time_point since;
  };
  struct Host {
    std::deque<Idle> idle;  // In release order; reuse takes the back (most recent).
    size_t leased = 0;
    std::deque<std::pair<uint64_t, Waiter>> waiters;  // Oldest first.
  };

  // A leased slot of `host` is given back: it passes to the oldest waiter, who is returned
  // (to be called outside mu_, the slot still leased), or, with no waiter, it is freed and an
  // empty Waiter is returned. Call under mu_.
  Waiter PassOrFreeSlot(Host& host);

  // Closes an idle descriptor given up, through options_.close_idle. Outside mu_.
  void CloseIdle(int fd) const;
  // The sum of `count(host)` over all upstreams, under mu_.
  int64_t SumOverHosts(size_t (*count)(const Host& host)) const;

  const Options options_;
  mutable sync::Mutex mu_;
  std::map<std::string, Host, std::less<>> hosts_ AGENTKV_GUARDED_BY(mu_);
};

// Whether an idle connection's socket is still usable: no EOF, error or unexpected bytes are
// waiting on it (non-blocking MSG_PEEK).
bool IdleSocketHealthy(int fd);

}  // namespace agentkv::net::internal

#endif  // AGENTKV_NET_CONNECTION_POOL_H_
