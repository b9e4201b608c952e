// Invariants, per upstream: idle.size() + leased <= max_connections_per_host; waiters are
// queued only while that sum equals the maximum (so never while a connection is idle);
// idle.size() <= max_idle_per_host; idle descriptors are owned (closed exactly once) by the pool.
#include "agentkv/net/connection_pool.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <utility>
#include <vector>

#include "agentkv/base/check.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::net::internal {

bool IdleSocketHealthy(int fd) {
  char byte;
  const ssize_t got = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

ConnectionPool::ConnectionPool(Options options) : options_(std::move(options)) {
  AGENTKV_CHECK_GE(options_.max_connections_per_host, size_t{1});
}

ConnectionPool::~ConnectionPool() { CloseAll(); }

void ConnectionPool::CloseIdle(int fd) const {
  if (options_.close_idle) {
    options_.close_idle(fd);
  } else {
    ::close(fd);
  }
}

std::optional<ConnectionPool::Lease> ConnectionPool::Acquire(const std::string& key,
                                                             uint64_t waiter_id, Waiter waiter,
                                                             Clock::time_point now) {
  std::vector<int> to_close;
  std::optional<Lease> lease;
  {
    sync::MutexLock lock(&mu_);
    Host& host = hosts_[key];
    while (!host.idle.empty()) {
      const Idle idle = host.idle.back();
      host.idle.pop_back();
      if (now - idle.since >= options_.idle_timeout || !IdleSocketHealthy(idle.fd)) {
        to_close.push_back(idle.fd);
        continue;
      }
      ++host.leased;
      lease = Lease{idle.fd, idle.family};
      break;
    }
    if (!lease) {
      if (host.idle.size() + host.leased < options_.max_connections_per_host) {
        ++host.leased;
        lease = Lease{};
      } else {
        host.waiters.emplace_back(waiter_id, std::move(waiter));
      }
    }
  }
  for (int fd : to_close) CloseIdle(fd);
  return lease;
}

bool ConnectionPool::CancelWait(const std::string& key, uint64_t waiter_id) {
  sync::MutexLock lock(&mu_);
  auto it = hosts_.find(key);
  if (it == hosts_.end()) return false;
  auto& waiters = it->second.waiters;
  for (auto waiter = waiters.begin(); waiter != waiters.end(); ++waiter) {
    if (waiter->first == waiter_id) {
      waiters.erase(waiter);
      return true;
    }
  }
  return false;
}

ConnectionPool::Waiter ConnectionPool::PassOrFreeSlot(Host& host) {
  if (host.waiters.empty()) {
    --host.leased;
    return Waiter();
  }
  Waiter waiter = std::move(host.waiters.front().second);
  host.waiters.pop_front();
  return waiter;
}

void ConnectionPool::Release(const std::string& key, int fd, int family, Clock::time_point now) {
  Waiter waiter;
  int to_close = -1;
  {
    sync::MutexLock lock(&mu_);
    Host& host = hosts_[key];
    AGENTKV_CHECK_GE(host.leased, size_t{1}) << "Release without a lease for " << key;
    waiter = PassOrFreeSlot(host);
    if (!waiter) {
      if (host.idle.size() >= options_.max_idle_per_host) {
        to_close = fd;
      } else {
        host.idle.push_back(Idle{fd, family, now});
      }
    }
  }
  if (to_close >= 0) CloseIdle(to_close);
  if (waiter) waiter(Lease{fd, family});  // The slot passes on, still leased.
}

void ConnectionPool::Discard(const std::string& key) {
  Waiter waiter;
  {
    sync::MutexLock lock(&mu_);
    Host& host = hosts_[key];
    AGENTKV_CHECK_GE(host.leased, size_t{1}) << "Discard without a lease for " << key;
    waiter = PassOrFreeSlot(host);
  }
  if (waiter) waiter(Lease{});
}

size_t ConnectionPool::CloseExpired(Clock::time_point now) {
  std::vector<int> to_close;
  {
    sync::MutexLock lock(&mu_);
    for (auto& [key, host] : hosts_) {
      // Releases from several threads may arrive slightly out of time order: scan them all.
      std::erase_if(host.idle, [&](const Idle& idle) {
        if (now - idle.since < options_.idle_timeout) return false;
        to_close.push_back(idle.fd);
        return true;
      });
    }
  }
  for (int fd : to_close) CloseIdle(fd);
  return to_close.size();
}

void ConnectionPool::CloseAll() {
  std::vector<int> to_close;
  std::vector<Waiter> dropped;  // Destroyed outside the lock: they may own requests.
  {
    sync::MutexLock lock(&mu_);
    for (auto& [key, host] : hosts_) {
      for (const Idle& idle : host.idle) to_close.push_back(idle.fd);
      host.idle.clear();
      for (auto& [id, waiter] : host.waiters) dropped.push_back(std::move(waiter));
      host.waiters.clear();
    }
  }
  for (int fd : to_close) CloseIdle(fd);
}

int64_t ConnectionPool::SumOverHosts(size_t (*count)(const Host& host)) const {
  sync::MutexLock lock(&mu_);
  int64_t total = 0;
  for (const auto& [key, host] : hosts_) total += static_cast<int64_t>(count(host));
  return total;
}

int64_t ConnectionPool::idle_connections() const {
  return SumOverHosts([](const Host& host) { return host.idle.size(); });
}

int64_t ConnectionPool::leased() const {
  return SumOverHosts([](const Host& host) { return host.leased; });
}

int64_t ConnectionPool::waiting() const {
  return SumOverHosts([](const Host& host) { return host.waiters.size(); });
}

void ConnectionPool::CheckInvariants() const {
  sync::MutexLock lock(&mu_);
  for (const auto& [key, host] : hosts_) {
    AGENTKV_CHECK_LE(host.idle.size() + host.leased, options_.max_connections_per_host) << key;
    AGENTKV_CHECK_LE(host.idle.size(), options_.max_idle_per_host) << key;
    if (!host.waiters.empty()) {
      AGENTKV_CHECK(host.idle.empty()) << key << ": waiters while a connection is idle";
      AGENTKV_CHECK_EQ(host.leased, options_.max_connections_per_host) << key;
    }
  }
}

}  // namespace agentkv::net::internal
