// Internals of HttpClient: the state its requests share (ClientCore) and one request in flight
// (ClientCall), which leases a connection from the pool, connects if needed, sends the request,
// reads the response under per-phase deadlines and hands the connection back. Not part of the
// module's API; http_client.h is.
//
// Ownership: HttpClient holds one core per event loop it runs on, and every call holds its core
// (shared), so a core outlives the calls still queued on its loop; a call is owned by its
// pending operations (and, while it waits for a connection, by the pool's waiter queue); the
// core keeps weak references to cancel calls at destruction, and StreamHandle keeps a weak one.
// Thread-safety: ClientCore is thread-safe; a call's state is only touched on its own strand, and
// Start/Cancel may be called from any thread.
#ifndef AGENTKV_NET_CLIENT_CALL_H_
#define AGENTKV_NET_CLIENT_CALL_H_

#include <atomic>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "agentkv/net/connection_pool.h"
#include "agentkv/net/http_client.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::net::internal {

// What the calls of an HttpClient on one event loop share: the loop, the connection pool and
// the parked sockets registered with that loop. Thread-safe.
class ClientCore : public std::enable_shared_from_this<ClientCore> {
 public:
  // Runs on `io_context`, which must outlive the core (HttpClient's own loops, or the ones it
  // was given).
  ClientCore(const HttpClientOptions& options, boost::asio::io_context& io_context);

  boost::asio::io_context& io_context() { return io_context_; }
  const HttpClientOptions& options() const { return options_; }
  ConnectionPool& pool() { return pool_; }

  uint64_t NextCallId() { return next_call_id_.fetch_add(1, std::memory_order_relaxed) + 1; }
  // Lists a started call; false (the call then fails) once the client is shutting down.
  bool Register(const std::shared_ptr<ClientCall>& call, uint64_t id);
  void Unregister(uint64_t id);
  // Refuses new calls from now on and returns the calls in flight, to be cancelled.
  std::vector<std::shared_ptr<ClientCall>> BeginShutdown();
  // A call was built (CallBuilt) or finished, its callback run (CallFinished); the count lets
  // the destructor of a client on loops it does not own wait for its calls.
  void CallBuilt();
  void CallFinished();
  // Waits until every call built finished, or `gave_up()` turns true (checked every ms).
  void WaitForCalls(const std::function<bool()>& gave_up);

  void CountConnectionOpened() { connections_opened_.fetch_add(1, std::memory_order_relaxed); }
  int64_t connections_opened() const { return connections_opened_.load(std::memory_order_relaxed); }

  // Closes expired idle connections periodically until StopSweeper.
  void StartSweeper();
  void StopSweeper();

  // A keep-alive connection stays a socket object registered with the event loop while it is
  // idle in the pool, so that reusing it costs no epoll_ctl (the pool itself deals in
  // descriptors). Park stores the socket of descriptor `fd` before its slot goes back to the
  // pool; Unpark hands it to the call that leased `fd` (null if absent); the pool's closer
  // destroys it (which closes `fd`). Thread-safe.
  void Park(int fd, boost::asio::ip::tcp::socket socket);
  std::unique_ptr<boost::asio::ip::tcp::socket> Unpark(int fd);

 private:
  void ArmSweep();
  void CloseParked(int fd);

  const HttpClientOptions options_;
  boost::asio::io_context& io_context_;
  // Declared before pool_, whose destructor closes idle connections through CloseParked.
  sync::Mutex parked_mu_;
  std::unordered_map<int, std::unique_ptr<boost::asio::ip::tcp::socket>> parked_
      AGENTKV_GUARDED_BY(parked_mu_);
  ConnectionPool pool_;
  boost::asio::strand<boost::asio::io_context::executor_type> sweep_strand_;
  boost::asio::steady_timer sweep_timer_;  // On sweep_strand_.
  bool sweeping_ = false;                  // On sweep_strand_.
  std::atomic<uint64_t> next_call_id_{0};
  std::atomic<int64_t> connections_opened_{0};

  sync::Mutex registry_mu_;
  bool shutting_down_ AGENTKV_GUARDED_BY(registry_mu_) = false;
  std::unordered_map<uint64_t, std::weak_ptr<ClientCall>> registry_
      AGENTKV_GUARDED_BY(registry_mu_);
  std::atomic<int64_t> calls_unfinished_{0};
};

// One request; see the invariants at the top of client_call.cc.
class ClientCall : public std::enable_shared_from_this<ClientCall> {
 public:
  struct Spec {
    http::verb method = http::verb::get;
    HttpEndpoint endpoint;
    std::string target;
    HeaderList headers;
    std::string body;
  };
  struct Callbacks {
    // Buffered requests.
    std::function<void(StatusOr<ClientResponse>)> on_response;
    // Streams.
    std::function<void(int, const HeaderList&)> on_headers;
    std::function<void(std::string_view)> on_chunk;
    std::function<void(Status)> on_done;
    // Asked before each body read of a stream (HttpClient::ReadGate).
    std::function<bool(std::function<void()>)> read_gate;
  };

  // `initial` non-OK makes the call fail with it at Start (e.g. a bad URL), asynchronously like
  // any other failure. `streaming` selects on_headers/on_chunk/on_done over on_response.
  ClientCall(std::shared_ptr<ClientCore> core, Spec spec, bool streaming, Callbacks callbacks,
             Status initial);
  ClientCall(const ClientCall&) = delete;
  ClientCall& operator=(const ClientCall&) = delete;

  // Runs the call. Thread-safe; call once.
  void Start();
  // Ends the call with `reason` (its callback runs once with it) unless it already ended.
  // Thread-safe, idempotent.
  void Cancel(Status reason);
  // Continues reading a body paused by the read gate at pause `generation`. Thread-safe; a
  // no-op unless that pause is still the current one.
  void Resume(uint64_t generation);

 private:
  enum class Phase { kNew, kWaiting, kConnecting, kHeader, kBody, kDone };

  void DoStart();
  void DoCancel(Status reason);
  void BuildRequest();
  void Acquire();
  void OnLease(ConnectionPool::Lease lease);
  void Connect();
  void OnResolved(const boost::system::error_code& error,
                  const boost::asio::ip::tcp::resolver::results_type& results);
  void OnConnected(const boost::system::error_code& error);
  void SendRequest();
  void OnWritten(const boost::system::error_code& error);
  void ReadHeader();
  void OnHeader(const boost::system::error_code& error);
  void ReadBody();
  void OnBody(const boost::system::error_code& error);
  // Whether the read gate lets the next body read start; false pauses the call.
  bool GateOpen();
  void DoResume(uint64_t generation);
  void FlushStreamBody();
  size_t EmitChunk(std::string_view piece, boost::system::error_code& error);
  void FailRead(const boost::system::error_code& error, std::string_view what);
  void Retry();
  void Complete();
  // The call was cancelled or a deadline passed while an operation was pending: finishes it
  // and returns true.
  bool Interrupted();
  void Finish(Status status);
  void ReleaseConnection(bool reusable);
  void CloseSocket();

  // `handler` to run on this call's strand, keeping the call alive.
  template <typename Handler>
  auto OnStrand(Handler handler) {
    return boost::asio::bind_executor(strand_, std::move(handler));
  }

  void ArmTimer(std::chrono::milliseconds timeout);
  void CancelTimer();
  void OnTimeout();
  std::string TimeoutMessage() const;

  const std::shared_ptr<ClientCore> core_;
  const uint64_t id_;
  const bool streaming_;
  Spec spec_;
  const std::string key_;  // "host:port", the pool key.
  Callbacks callbacks_;
  const Status initial_;
  boost::asio::strand<boost::asio::io_context::executor_type> strand_;
  // Bound to the io_context, not the strand: a pooled socket moves from call to call, so every
  // operation's handler is bound to this call's strand (OnStrand) instead.
  boost::asio::ip::tcp::socket socket_;
  boost::asio::steady_timer timer_;  // On strand_; the current phase's deadline.
  std::optional<boost::asio::ip::tcp::resolver> resolver_;

  // Strand-only state below.
  Phase phase_ = Phase::kNew;
  uint64_t timer_generation_ = 0;
  bool registered_ = false;
  bool leased_ = false;  // Holds a pool slot (with or without an open socket).
  bool reused_ = false;  // The socket came from the pool.
  int family_ = 0;       // The open socket's address family (AF_INET or AF_INET6).
  bool timed_out_ = false;
  bool cancelled_ = false;
  bool headers_delivered_ = false;
  bool paused_ = false;  // The read gate closed; no operation is pending on the socket.
  uint64_t pause_generation_ = 0;
  // Keeps the call alive while paused (no pending operation owns it then); reset on resume
  // and by Finish.
  std::shared_ptr<ClientCall> paused_self_;
  bool finished_ = false;
  Status cancel_status_;
  int attempts_ = 0;
  boost::system::error_code write_error_;
  Request request_;
  boost::beast::flat_buffer buffer_;
  std::optional<http::response_parser<http::string_body>> parser_;
  // Beast keeps a reference to the chunk callback, so it lives here.
  std::function<size_t(uint64_t, boost::beast::string_view, boost::system::error_code&)>
      chunk_body_callback_;
  ClientResponse response_;
};

}  // namespace agentkv::net::internal

#endif  // AGENTKV_NET_CLIENT_CALL_H_
