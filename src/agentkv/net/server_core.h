// ServerCore: what an HttpServer shares with its connections and their writers: the
// io_context and its threads' work, the acceptor and accept loop, the registry of open
// connections used by shutdown, the counters, and the gate that stops writers from posting once
// the server stopped. Internal to the net module (http_server.h is the API).
//
// Ownership: HttpServer, every connection and every writer hold the core (shared), so the
// io_context outlives every socket and timer bound to it, even when a handler keeps a writer
// after the server shut down. The core keeps only weak references to connections.
// Thread-safe, except where a method states a precondition on the I/O threads.
#ifndef AGENTKV_NET_SERVER_CORE_H_
#define AGENTKV_NET_SERVER_CORE_H_

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "agentkv/net/http_server.h"
#include "agentkv/net/response_writer.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::net::internal {

class ServerConnection;

// An io_context whose pending handlers can be destroyed while the context itself stays alive:
// after the I/O threads are joined, the server destroys queued work (which may hold writers and
// connections) so that no reference cycle through the queue outlives the server. Sockets and
// timers may still be destroyed afterwards; Asio supports that once services are shut down.
class ServerIoContext : public boost::asio::io_context {
 public:
  using boost::asio::io_context::io_context;
  void DestroyPendingWork() { shutdown(); }
};

// What the server, its connections and their writers share. Thread-safe.
class ServerCore : public std::enable_shared_from_this<ServerCore> {
 public:
  ServerCore(const HttpServerOptions& options, Handler handler);

  ServerIoContext& io_context() { return io_context_; }
  boost::asio::ip::tcp::acceptor& acceptor() { return acceptor_; }
  const HttpServerOptions& options() const { return options_; }

  // Runs the handler for a request of connection `connection_id`; only called on I/O threads
  // while the server runs. A connection accepted while the server drains never reaches the
  // handler: the server answers 503 itself (DrainAnswer).
  void Handle(uint64_t connection_id, Request request, std::shared_ptr<ResponseWriter> writer);

  // Starts the accept loop. Call once, before the I/O threads start.
  void StartAccepting();
  // Lets the I/O threads return once no work is left (until then they run even while nothing
  // is pending, since a handler may answer later from another thread).
  void ReleaseWorkGuard() { work_guard_.reset(); }

  // Posts `work` onto `executor` unless the server has stopped (then drops it and returns
  // false). Writers post through this so that nothing is queued on a stopped io_context.
  template <typename Executor, typename Work>
  bool PostIfRunning(const Executor& executor, Work&& work) {
    sync::ReaderMutexLock lock(&stop_mu_);
    if (stopped_) return false;
    boost::asio::post(executor, std::forward<Work>(work));
    return true;
  }

  // Adds an accepted connection; one accepted while draining is registered as late (the server
  // answers its requests with 503); false (and the caller closes it) once accepting stopped.
  bool Register(const std::shared_ptr<ServerConnection>& connection, uint64_t id);
  // Removes a closed connection and wakes a waiting Shutdown.
  void Unregister(uint64_t id);

  // Shutdown steps, in order: BeginDrain (returns the open connections; the listener stays
  // open and answers every new request 503, so /health reads "shutting down" rather than
  // refusing connections), WaitForConnections (the in-flight ones), StopAccepting (the
  // listener closes), ForceClose on the rest and WaitForConnections(late too), stop and join
  // the I/O threads, MarkStopped (writers stop posting), FinishStop.
  std::vector<std::shared_ptr<ServerConnection>> BeginDrain();
  // Waits until every connection closed or `deadline` passed; true when none is left. Unless
  // `include_late`, connections accepted while draining are not waited for.
  bool WaitForConnections(std::chrono::steady_clock::time_point deadline, bool include_late = true);
  // Closes the listener: later connects are refused, and a connection accepted meanwhile is
  // closed unregistered.
  void StopAccepting();
  std::vector<std::shared_ptr<ServerConnection>> OpenConnections();
  void MarkStopped();
  // Precondition: the I/O threads are joined and MarkStopped() ran. Closes the acceptor and
  // every connection still open, destroys queued work and releases the handler.
  void FinishStop();

  bool draining() const { return draining_.load(std::memory_order_acquire); }
  int64_t open_connections() const { return open_connections_.load(std::memory_order_relaxed); }
  int64_t requests_served() const { return requests_served_.load(std::memory_order_relaxed); }
  void CountServed() { requests_served_.fetch_add(1, std::memory_order_relaxed); }

  // The in-flight byte budget (HttpServerOptions::max_inflight_bytes), shared by every
  // connection: each adds what it starts holding and releases exactly that much again.
  void HoldInflight(size_t bytes) {
    const int64_t now =
        inflight_bytes_.fetch_add(static_cast<int64_t>(bytes), std::memory_order_acq_rel) +
        static_cast<int64_t>(bytes);
    int64_t peak = inflight_peak_.load(std::memory_order_relaxed);
    while (now > peak && !inflight_peak_.compare_exchange_weak(peak, now)) {
    }
  }
  void ReleaseInflight(size_t bytes) {
    inflight_bytes_.fetch_sub(static_cast<int64_t>(bytes), std::memory_order_acq_rel);
  }
  // Whether holding `more` bytes would take the total past max_inflight_bytes (never when it is
  // 0); counts the refusal when it would.
  bool RefuseInflight(size_t more) {
    const size_t bound = options_.max_inflight_bytes;
    if (bound == 0) return false;
    const int64_t held = inflight_bytes_.load(std::memory_order_acquire);
    if (held >= 0 && static_cast<size_t>(held) <= bound &&
        more <= bound - static_cast<size_t>(held)) {
      return false;
    }
    inflight_refused_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  int64_t inflight_bytes() const { return inflight_bytes_.load(std::memory_order_acquire); }
  int64_t TakeInflightPeak() {
    return inflight_peak_.exchange(inflight_bytes_.load(std::memory_order_acquire));
  }
  int64_t inflight_refused() const { return inflight_refused_.load(std::memory_order_relaxed); }

 private:
  void AcceptNext();
  void OnAccept(const boost::system::error_code& error, boost::asio::ip::tcp::socket socket);

  const HttpServerOptions options_;
  Handler handler_;  // Reset by FinishStop after the I/O threads are joined.
  ServerIoContext io_context_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_guard_;
  boost::asio::strand<boost::asio::io_context::executor_type> accept_strand_;
  boost::asio::ip::tcp::acceptor acceptor_;       // On accept_strand_.
  boost::asio::steady_timer accept_retry_timer_;  // On accept_strand_.
  uint64_t next_connection_id_ = 0;               // On accept_strand_.

  std::atomic<bool> draining_{false};
  bool accepting_ AGENTKV_GUARDED_BY(registry_mu_) = true;
  std::atomic<int64_t> open_connections_{0};
  std::atomic<int64_t> requests_served_{0};
  std::atomic<int64_t> inflight_bytes_{0};
  std::atomic<int64_t> inflight_peak_{0};
  std::atomic<int64_t> inflight_refused_{0};

  sync::Mutex registry_mu_;
  sync::CondVar registry_cv_;
  struct Registered {
    std::weak_ptr<ServerConnection> connection;
    bool late = false;  // Accepted while draining.
  };
  std::unordered_map<uint64_t, Registered> registry_ AGENTKV_GUARDED_BY(registry_mu_);
  // Entries of registry_ that are not late.
  size_t in_flight_ AGENTKV_GUARDED_BY(registry_mu_) = 0;

  sync::SharedMutex stop_mu_;
  bool stopped_ AGENTKV_GUARDED_BY(stop_mu_) = false;
};

}  // namespace agentkv::net::internal

#endif  // AGENTKV_NET_SERVER_CORE_H_
