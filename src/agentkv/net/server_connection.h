// ServerConnection: one accepted connection of an HttpServer. It reads requests under the
// per-phase deadlines and size limits, hands each complete request to the handler with a
// ConnectionResponseWriter, writes the answer (a response or a chunked stream), keeps the
// connection alive or closes it, and notices a client that goes away. Internal to the net
// module (http_server.h is the API).
//
// Ownership: a connection is owned by its pending asynchronous operations and by the writer of
// its current request; it holds the ServerCore. Thread-safety: its private state is only
// touched on its strand; the public methods may be called from any thread (they post onto the
// strand through ServerCore::PostIfRunning), except CloseAfterStop.
#ifndef AGENTKV_NET_SERVER_CONNECTION_H_
#define AGENTKV_NET_SERVER_CONNECTION_H_

#include <array>
#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agentkv/net/connection_response_writer.h"
#include "agentkv/net/http_types.h"
#include "agentkv/net/request_reader.h"
#include "agentkv/net/server_core.h"

namespace agentkv::net::internal {

// The access record of the request a connection is answering, from its dispatch (or
// rejection) until it is reported. Outside ServerConnection so that std::optional of it is
// default-constructible inside that class's definition (Clang).
struct AccessRecord {
  std::string method;
  std::string target;
  int status = 0;  // 0 until an answer begins.
  bool stream = false;
  uint64_t response_bytes = 0;
  uint64_t stream_bytes = 0;
  std::chrono::steady_clock::time_point start;
};

// One accepted connection; see the invariants at the top of server_connection.cc.
class ServerConnection : public std::enable_shared_from_this<ServerConnection> {
 public:
  ServerConnection(std::shared_ptr<ServerCore> core, boost::asio::ip::tcp::socket socket,
                   uint64_t id);
  ServerConnection(const ServerConnection&) = delete;
  ServerConnection& operator=(const ServerConnection&) = delete;

  // Starts reading the first request. Thread-safe (posts onto the strand).
  void Start();
  // Shutdown began: close now if no request is under way, else after its answer.
  void BeginDrain();
  // Shutdown deadline passed: close now.
  void ForceClose();
  // Closes on the calling thread. Precondition: the server's I/O threads are joined.
  void CloseAfterStop();

  // Called by the writer of request `request_id` (any thread; they post onto the strand).
  void PostReply(uint64_t request_id, Response response);
  void PostStartStream(uint64_t request_id, http::status status, HeaderList headers);
  void PostChunk(uint64_t request_id, std::string data);
  void PostEndStream(uint64_t request_id);
  // The writer was destroyed without answering (`mid_stream` false: answer 500) or in the
  // middle of a stream (`mid_stream` true: close).
  void PostAbandon(uint64_t request_id, bool mid_stream);
  // Runs `callback` once the stream bytes queued fall to `low_water` or below, or the answer
  // of `request_id` ended, or the connection closed (ResponseWriter::OnStreamDrained).
  void PostWhenDrained(uint64_t request_id, size_t low_water, std::function<void()> callback);
  // WriteChunk bytes posted and not yet written. Any thread.
  size_t stream_buffered_bytes() const {
    return stream_buffered_bytes_.load(std::memory_order_acquire);
  }

 private:
  enum class Phase {
    kIdle,       // Kept alive, waiting for the first byte of the next request.
    kHeader,     // Reading request headers.
    kBody,       // Reading the request body.
    kAnswering,  // The request is with the handler or its answer is being written.
    kLingering,  // Answer written, send side shut down; discarding input until EOF.
    kClosed,
  };
  enum class Deadline { kNone, kIdle, kHeader, kBody, kLinger };

  // One queued write: a whole response, or raw bytes (stream head, framed chunk, 100 Continue).
  struct OutItem {
    std::unique_ptr<Response> response;
    std::string bytes;
    size_t stream_bytes = 0;        // WriteChunk payload bytes, for the stream buffer bound.
    bool completes_answer = false;  // Once written, the answer is complete.
    bool close_after = false;       // Close (lingering) once written.
    bool close_now = false;         // Abort once written (an abandoned stream).
    size_t held = 0;                // Bytes counted against the in-flight budget.
  };
  // A producer waiting for the stream queue to drain (PostWhenDrained).
  struct DrainWaiter {
    size_t low_water = 0;
    std::function<void()> callback;
  };

  void DoStart();
  void ReadMore();
  void OnRead(const boost::system::error_code& error, size_t bytes);
  void ParseBuffered();
  void OnHeaderDone();
  void Dispatch();
  void Reject(http::status status, std::string_view message);

  bool AnswerOpen(uint64_t request_id) const;
  void DoReply(uint64_t request_id, Response response);
  void DoStartStream(uint64_t request_id, http::status status, const HeaderList& headers);
  void DoChunk(uint64_t request_id, std::string data);
  void DoEndStream(uint64_t request_id);
  void DoAbandon(uint64_t request_id, bool mid_stream);
  void DoDrain();
  void DoWhenDrained(uint64_t request_id, size_t low_water, std::function<void()> callback);
  // Runs the drain waiters whose low water the queue reached (all of them with `all`).
  void RunDrainWaiters(bool all);
  // The in-flight budget: the request body this connection holds grows to `bytes` (it never
  // shrinks until ReleaseBody), released when its answer completes or the connection closes.
  void HoldBody(size_t bytes);
  void ReleaseBody();
  // The request has a body the in-flight budget cannot take: answers 503 (and closes).
  bool RefusedForBudget(size_t body_bytes);

  void Enqueue(OutItem item);
  void PumpWrites();
  void OnWritten(const boost::system::error_code& error, size_t bytes);
  void FinishAnswer(bool close_after);
  void StartLinger();
  void BeginRequest(Deadline deadline, std::chrono::milliseconds timeout);

  // Access log (only with HttpServerOptions::access_log): opens the record of the request
  // being answered, and reports it once, when its answer completed or the connection closed.
  void OpenAccessRecord(std::string method, std::string target);
  void ReportAccess(bool completed);

  void ArmReadDeadline(Deadline kind, std::chrono::milliseconds timeout);
  void CancelReadDeadline();
  void OnReadDeadline();
  void ArmWriteDeadline();
  void CancelWriteDeadline();
  void Close();
  // A read into buffer_ is pending, so buffer_ must not be touched.
  bool BufferBusy() const { return reading_ && !read_into_watch_; }

  // Posts `work(connection)` onto the strand if the server still runs.
  template <typename Work>
  void PostToStrand(Work&& work);

  const std::shared_ptr<ServerCore> core_;
  const uint64_t id_;
  const boost::asio::any_io_executor strand_;  // This connection's strand.
  boost::asio::ip::tcp::socket socket_;        // Bound to strand_.
  boost::asio::steady_timer read_timer_;
  boost::asio::steady_timer write_timer_;

  // Strand-only state below.
  Phase phase_ = Phase::kHeader;
  Deadline read_deadline_ = Deadline::kNone;
  uint64_t read_timer_generation_ = 0;
  uint64_t write_timer_generation_ = 0;
  bool reading_ = false;
  bool read_into_watch_ = false;  // The pending read targets watch_buffer_, not buffer_.
  bool writing_ = false;
  bool draining_ = false;
  bool peer_closed_ = false;  // EOF or reset seen while a write was in flight.
  bool closed_ = false;
  boost::beast::flat_buffer buffer_;
  std::array<char, 512> watch_buffer_{};
  // The request being read: Beast's parser under the server's limits.
  RequestReader reader_;

  uint64_t request_id_ = 0;
  bool request_keep_alive_ = false;
  unsigned request_version_ = 11;
  bool request_is_head_ = false;
  bool rejecting_ = false;      // Answering an error without a handler; input is discarded.
  bool stream_chunked_ = true;  // Stream frames chunks (HTTP/1.1) or sends raw bytes (1.0).
  bool stream_close_after_ = false;
  std::shared_ptr<ClientGoneSignal> gone_signal_;  // Set while an answer is incomplete.

  std::deque<OutItem> out_;
  size_t writes_in_flight_ = 0;  // Items of out_ the pending write covers.
  std::vector<boost::asio::const_buffer> write_buffers_;

  const bool access_log_;  // The server has an access log hook; fixed for the connection.
  std::string remote_;     // The client's address, read at start when access_log_.
  std::chrono::steady_clock::time_point request_start_;  // Set by BeginRequest when access_log_.
  // The method and target of a request whose header is complete, for an access record opened
  // by a rejection of its body (the reader drops the request when it rejects).
  std::string header_method_;
  std::string header_target_;
  // The record of the request being answered, from OpenAccessRecord to ReportAccess.
  std::optional<AccessRecord> access_;

  // Counted against the in-flight budget: the current request's body, and the queued items'
  // `held` bytes (out_held_ is their sum). Both go back to 0 when the connection closes.
  size_t body_held_ = 0;
  size_t out_held_ = 0;
  std::vector<DrainWaiter> drain_waiters_;

  // WriteChunk bytes posted and not yet written; any thread.
  std::atomic<size_t> stream_buffered_bytes_{0};
};

}  // namespace agentkv::net::internal

#endif  // AGENTKV_NET_SERVER_CONNECTION_H_
