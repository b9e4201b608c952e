// ServerCore: what an HttpServer shares with its connections and their writers: the
// event loops (its own, or ones it was given), the acceptor and accept loop, the registry of open
// connections used by shutdown, the counters, and the gate that stops writers from posting once
// the server stopped. Internal to the net module (http_server.h is the API).
//
// Ownership: HttpServer, every connection and every writer hold the core (shared), and the core
// holds the loops (shared), so the loops outlive every socket and timer bound to them, even when a
// handler keeps a writer after the server shut down. The core keeps only weak references to
// connections. Thread-safe, except where a method states a precondition on the I/O threads.
#ifndef AGENTKV_NET_SERVER_CORE_H_
#define AGENTKV_NET_SERVER_CORE_H_

#include <atomic>
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
#include "agentkv/net/io_loops.h"
#include "agentkv/net/response_writer.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::net::internal {

class ServerConnection;

// What the server, its connections and their writers share. Thread-safe.
class ServerCore : public std::enable_shared_from_this<ServerCore> {
 public:
  // Serves on `loops` when given (they belong to the caller, who joins them after the server's
  // Shutdown), else on loops of its own: options.threads threads on one shared io_context.
  ServerCore(const HttpServerOptions& options, Handler handler, std::shared_ptr<IoLoops> loops);

  IoLoops& loops() { return *loops_; }
  bool owns_loops() const { return owns_loops_; }
  boost::asio::ip::tcp::acceptor& acceptor() { return acceptor_; }
  const HttpServerOptions& options() const { return options_; }

  // Runs the handler for a request of connection `connection_id`; only called on I/O threads,
  // and a no-op once the server stopped. A connection accepted while the server drains never
  // reaches the handler: the server answers 503 itself (DrainAnswer).
  void Handle(uint64_t connection_id, Request request, std::shared_ptr<ResponseWriter> writer);

  // Starts the accept loop. Call once. Each accepted connection goes to the next loop in turn.
  void StartAccepting();

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
  // the I/O threads when the server owns them, MarkStopped (writers stop posting), FinishStop.
  std::vector<std::shared_ptr<ServerConnection>> BeginDrain();
  // Waits until every connection closed or `deadline` passed; true when none is left. Unless
  // `include_late`, connections accepted while draining are not waited for.
  bool WaitForConnections(std::chrono::steady_clock::time_point deadline, bool include_late = true);
  // Closes the listener: later connects are refused, and a connection accepted meanwhile is
  // closed unregistered. Waits (up to `deadline`) for the close to run on the accept strand.
  void StopAccepting(std::chrono::steady_clock::time_point deadline);
  std::vector<std::shared_ptr<ServerConnection>> OpenConnections();
  // Writers stop posting and no request reaches the handler any more.
  void MarkStopped();
  // Precondition: MarkStopped() ran and, when the server owns its loops, they are joined.
  // Forgets every connection. With its own loops it also closes the acceptor and every
  // connection still open and destroys queued work; on loops it was given, a connection that
  // did not close by now (its loop is blocked) is left to the loops' owner. Then releases the
  // handler (a request still being dispatched keeps it until it returns).
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

  const bool owns_loops_;  // Initialized before loops_ (which takes the given loops over).
  // Declared before what is bound to them: sockets and timers below must not outlive the loops.
  const std::shared_ptr<IoLoops> loops_;
  const HttpServerOptions options_;
  boost::asio::strand<boost::asio::io_context::executor_type> accept_strand_;  // On loop 0.
  boost::asio::ip::tcp::acceptor acceptor_;                                    // On accept_strand_.
  boost::asio::steady_timer accept_retry_timer_;                               // On accept_strand_.
  uint64_t next_connection_id_ = 0;                                            // On accept_strand_.

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
  // Released by FinishStop; shared so that a request being dispatched keeps it meanwhile.
  std::shared_ptr<const Handler> handler_ AGENTKV_GUARDED_BY(stop_mu_);
};

}  // namespace agentkv::net::internal

#endif  // AGENTKV_NET_SERVER_CORE_H_
