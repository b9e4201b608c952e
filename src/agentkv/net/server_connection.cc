// Invariants of a ServerConnection (all state is touched only on the connection's strand):
//  - At most one read and one write are pending on the socket (`reading_`, `writing_`).
//  - `buffer_` is only touched when no read into it is pending (!BufferBusy()); while a request
//    is being answered, reads go to `watch_buffer_` and are appended to `buffer_` afterwards.
//  - `phase_` is kAnswering exactly while a request (or a rejection) is answered and its answer
//    is not completely written; `gone_signal_` is set exactly while a dispatched request's answer
//    is incomplete.
//  - The read deadline is armed in kIdle, kHeader, kBody and kLingering, never in kAnswering;
//    the write deadline is armed exactly while a write is pending.
//  - The next request is parsed only after the previous answer was written (no pipelining, but
//    pipelined bytes wait in `buffer_`, bounded by kMaxPipelinedBytes).
//  - `peer_closed_` (EOF or reset while a write was in flight) lets that write's completion
//    decide whether the answer completed before the connection is closed.
//  - After Close(): `closed_`, the socket is closed, the core no longer lists the connection,
//    no operation starts and every writer call is ignored.
//  - With an access log hook, `access_` is set exactly from the dispatch (or rejection) of a
//    request until its answer completed or the connection closed, and each request is
//    reported once; without one, `access_` stays empty and no clock is read.
//  - In-flight budget: the core counts exactly `body_held_` plus `out_held_` (the sum of the
//    queued items' `held`) for this connection; both return to 0 when the connection closes,
//    and `body_held_` also when its answer completes or its request is rejected.
//  - `drain_waiters_` is empty whenever no dispatched answer is open: a waiter runs once, when
//    the stream queue drains to its low water, the answer completes, or the connection closes.
#include "agentkv/net/server_connection.h"

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/write.hpp>
#include <cerrno>
#include <cstdio>
#include <exception>

#include "agentkv/base/check.h"
#include "agentkv/net/error_body.h"

namespace agentkv::net::internal {
namespace {

namespace asio = boost::asio;
using boost::system::error_code;
using tcp = asio::ip::tcp;

// Read sizes: request headers are usually small; bodies are read in larger pieces.
constexpr size_t kHeaderReadBytes = 4096;
constexpr size_t kBodyReadBytes = 64 * 1024;
// Bytes of a next (pipelined) request buffered while the current one is answered.
constexpr size_t kMaxPipelinedBytes = 64 * 1024;
// Queued stream pieces sent with one gathered write.
constexpr size_t kMaxGatherItems = 64;
// How long a closing connection keeps reading (and discarding) after its last answer, so that a
// client still sending a rejected body gets the answer instead of a reset.
constexpr std::chrono::milliseconds kLingerTimeout{1'000};

Response ErrorResponse(unsigned version, http::status status, std::string_view message) {
  Response response{status, version};
  response.set(http::field::content_type, "application/json");
  response.body() = SglangErrorBody(message, static_cast<int>(status));
  response.prepare_payload();
  return response;
}

bool IsFramingHeader(std::string_view name) {
  return boost::beast::iequals(name, "content-length") ||
         boost::beast::iequals(name, "transfer-encoding") ||
         boost::beast::iequals(name, "connection");
}

bool HasLineBreak(std::string_view text) { return text.find_first_of("\r\n") != text.npos; }

}  // namespace

// ---------------------------------------------------------------------------------------------
// ServerConnection: cross-thread entry points

ServerConnection::ServerConnection(std::shared_ptr<ServerCore> core, tcp::socket socket,
                                   uint64_t id)
    : core_(std::move(core)),
      id_(id),
      strand_(socket.get_executor()),
      socket_(std::move(socket)),
      read_timer_(strand_),
      write_timer_(strand_),
      reader_(RequestLimits{core_->options().max_header_bytes, core_->options().max_body_bytes}),
      access_log_(static_cast<bool>(core_->options().access_log)) {}

template <typename Work>
void ServerConnection::PostToStrand(Work&& work) {
  core_->PostIfRunning(strand_, [self = shared_from_this(),
                                 work = std::forward<Work>(work)]() mutable { work(*self); });
}

void ServerConnection::Start() {
  PostToStrand([](ServerConnection& connection) { connection.DoStart(); });
}

void ServerConnection::BeginDrain() {
  PostToStrand([](ServerConnection& connection) { connection.DoDrain(); });
}

void ServerConnection::ForceClose() {
  PostToStrand([](ServerConnection& connection) { connection.Close(); });
}

void ServerConnection::CloseAfterStop() { Close(); }

void ServerConnection::PostReply(uint64_t request_id, Response response) {
  PostToStrand([request_id, response = std::move(response)](ServerConnection& connection) mutable {
    connection.DoReply(request_id, std::move(response));
  });
}

void ServerConnection::PostStartStream(uint64_t request_id, http::status status,
                                       HeaderList headers) {
  PostToStrand([request_id, status, headers = std::move(headers)](ServerConnection& connection) {
    connection.DoStartStream(request_id, status, headers);
  });
}

void ServerConnection::PostChunk(uint64_t request_id, std::string data) {
  const size_t size = data.size();
  const size_t buffered = stream_buffered_bytes_.fetch_add(size, std::memory_order_acq_rel) + size;
  if (buffered > core_->options().max_stream_buffer_bytes) {
    // The client does not read fast enough: drop the stream rather than buffer without bound.
    stream_buffered_bytes_.fetch_sub(size, std::memory_order_acq_rel);
    PostToStrand([request_id](ServerConnection& connection) {
      if (connection.AnswerOpen(request_id)) connection.Close();
    });
    return;
  }
  PostToStrand([request_id, data = std::move(data)](ServerConnection& connection) mutable {
    connection.DoChunk(request_id, std::move(data));
  });
}

void ServerConnection::PostEndStream(uint64_t request_id) {
  PostToStrand([request_id](ServerConnection& connection) { connection.DoEndStream(request_id); });
}

void ServerConnection::PostAbandon(uint64_t request_id, bool mid_stream) {
  PostToStrand([request_id, mid_stream](ServerConnection& connection) {
    connection.DoAbandon(request_id, mid_stream);
  });
}

void ServerConnection::PostWhenDrained(uint64_t request_id, size_t low_water,
                                       std::function<void()> callback) {
  PostToStrand([request_id, low_water,
                callback = std::move(callback)](ServerConnection& connection) mutable {
    connection.DoWhenDrained(request_id, low_water, std::move(callback));
  });
}

// ---------------------------------------------------------------------------------------------
// ServerConnection: reading requests

void ServerConnection::DoStart() {
  if (closed_) return;
  if (access_log_) {
    error_code error;
    const tcp::endpoint remote = socket_.remote_endpoint(error);
    if (!error) {
      const std::string address = remote.address().to_string();
      remote_ = remote.address().is_v6() ? "[" + address + "]" : address;
      remote_ += ":" + std::to_string(remote.port());
    }
  }
  BeginRequest(Deadline::kHeader, core_->options().header_timeout);
  ReadMore();
}

void ServerConnection::BeginRequest(Deadline deadline, std::chrono::milliseconds timeout) {
  phase_ = Phase::kHeader;
  reader_.Begin();
  if (access_log_) request_start_ = std::chrono::steady_clock::now();
  ArmReadDeadline(deadline, timeout);
}

void ServerConnection::ReadMore() {
  if (reading_ || closed_) return;
  auto on_read = [self = shared_from_this()](const error_code& error, size_t bytes) {
    self->OnRead(error, bytes);
  };
  if (phase_ == Phase::kAnswering || phase_ == Phase::kLingering) {
    // Watch for the client going away (or drain input while closing); bytes of a pipelined
    // request are kept, up to a bound.
    if (phase_ == Phase::kAnswering && !rejecting_ && buffer_.size() >= kMaxPipelinedBytes) return;
    reading_ = true;
    read_into_watch_ = true;
    socket_.async_read_some(asio::buffer(watch_buffer_), std::move(on_read));
    return;
  }
  size_t want = kHeaderReadBytes;
  if (phase_ == Phase::kBody && reader_.active()) {
    const std::optional<uint64_t> remaining = reader_.content_length_remaining();
    want = remaining ? static_cast<size_t>(
                           std::clamp<uint64_t>(*remaining, kHeaderReadBytes, kBodyReadBytes))
                     : kBodyReadBytes;
  }
  reading_ = true;
  read_into_watch_ = false;
  socket_.async_read_some(buffer_.prepare(want), std::move(on_read));
}

void ServerConnection::OnRead(const error_code& error, size_t bytes) {
  reading_ = false;
  if (closed_) return;
  if (error) {
    // EOF or a reset: the client went away (or, while lingering, finished). While a write is
    // in flight, its completion decides: a client that closes right after reading the whole
    // answer did not leave before the answer completed.
    if (phase_ == Phase::kAnswering && writing_) {
      peer_closed_ = true;
      return;
    }
    Close();
    return;
  }
  const bool discard = phase_ == Phase::kLingering || rejecting_;
  if (read_into_watch_) {
    read_into_watch_ = false;
    if (!discard) {
      buffer_.commit(asio::buffer_copy(buffer_.prepare(bytes), asio::buffer(watch_buffer_, bytes)));
    }
  } else {
    buffer_.commit(bytes);
  }
  if (discard) buffer_.consume(buffer_.size());
  switch (phase_) {
    case Phase::kLingering:
    case Phase::kAnswering:
      break;
    case Phase::kIdle:
      BeginRequest(Deadline::kHeader, core_->options().header_timeout);
      ParseBuffered();
      break;
    case Phase::kHeader:
    case Phase::kBody:
      ParseBuffered();
      break;
    case Phase::kClosed:
      return;
  }
  ReadMore();
}

void ServerConnection::ParseBuffered() {
  // The parsing itself is RequestReader's (shared with fuzz/http_request_fuzz.cc); this loop
  // applies what it reports to the connection.
  while (!closed_ && (phase_ == Phase::kHeader || phase_ == Phase::kBody)) {
    RequestReader::Event event = reader_.Parse(buffer_);
    switch (event.kind) {
      case RequestReader::Event::Kind::kNeedMore:
        if (phase_ == Phase::kBody) HoldBody(reader_.body_bytes());  // A chunked body grows.
        return;
      case RequestReader::Event::Kind::kHeaderDone:
        OnHeaderDone();
        break;
      case RequestReader::Event::Kind::kRequest:
        Dispatch();
        return;
      case RequestReader::Event::Kind::kReject:
        Reject(event.status, event.message);
        return;
    }
  }
}

void ServerConnection::OnHeaderDone() {
  phase_ = Phase::kBody;
  ArmReadDeadline(Deadline::kBody, core_->options().body_timeout);
  const Request& request = reader_.header();
  if (access_log_) {
    header_method_ = std::string(request.method_string());
    header_target_ = std::string(request.target());
  }
  // A Content-Length body is counted whole before it is read; a chunked one as it arrives.
  const size_t announced = reader_.content_length_remaining().value_or(0);
  if (RefusedForBudget(announced)) return;
  HoldBody(announced);
  if (request.version() >= 11 &&
      boost::beast::iequals(request[http::field::expect], "100-continue")) {
    OutItem item;
    item.bytes = "HTTP/1.1 100 Continue\r\n\r\n";
    Enqueue(std::move(item));
  }
}

void ServerConnection::Dispatch() {
  // A body that arrived with its header (no kHeaderDone) is checked against the budget here.
  const size_t body = reader_.body_bytes();
  if (body_held_ == 0 && body > 0 && RefusedForBudget(body)) return;
  HoldBody(body);
  CancelReadDeadline();
  phase_ = Phase::kAnswering;
  rejecting_ = false;
  ++request_id_;
  Request request = reader_.TakeRequest();
  if (access_log_) {
    OpenAccessRecord(std::string(request.method_string()), std::string(request.target()));
  }
  request_keep_alive_ = request.keep_alive();
  request_version_ = request.version();
  request_is_head_ = request.method() == http::verb::head;
  if (buffer_.size() == 0 && !BufferBusy()) buffer_.shrink_to_fit();
  gone_signal_ = std::make_shared<ClientGoneSignal>();
  auto writer =
      std::make_shared<ConnectionResponseWriter>(shared_from_this(), request_id_, gone_signal_);
  ReadMore();  // Notices a client that goes away while the handler works.
  try {
    core_->Handle(id_, std::move(request), writer);
  } catch (const std::exception& e) {
    writer->Reply(ErrorResponse(request_version_, http::status::internal_server_error,
                                std::string("handler failed: ") + e.what()));
  } catch (...) {
    writer->Reply(
        ErrorResponse(request_version_, http::status::internal_server_error, "handler failed"));
  }
}

void ServerConnection::Reject(http::status status, std::string_view message) {
  if (access_log_) {
    // The method and target are known only once the header was complete (in kBody); the
    // reader has already dropped the request, so they come from OnHeaderDone's copy.
    const bool header_done = phase_ == Phase::kBody;
    OpenAccessRecord(header_done ? std::move(header_method_) : std::string(),
                     header_done ? std::move(header_target_) : std::string());
    access_->status = static_cast<int>(status);
  }
  CancelReadDeadline();
  phase_ = Phase::kAnswering;
  rejecting_ = true;
  ++request_id_;
  reader_.Reset();
  ReleaseBody();
  request_keep_alive_ = false;
  request_version_ = 11;
  request_is_head_ = false;
  if (!BufferBusy()) buffer_.consume(buffer_.size());
  Response response = ErrorResponse(11, status, message);
  response.keep_alive(false);
  if (status == http::status::service_unavailable) response.set(http::field::retry_after, "1");
  OutItem item;
  item.response = std::make_unique<Response>(std::move(response));
  item.completes_answer = true;
  item.close_after = true;
  Enqueue(std::move(item));
}

// ---------------------------------------------------------------------------------------------
// ServerConnection: answering

bool ServerConnection::AnswerOpen(uint64_t request_id) const {
  return !closed_ && phase_ == Phase::kAnswering && !rejecting_ && request_id == request_id_ &&
         gone_signal_ != nullptr;
}

void ServerConnection::DoReply(uint64_t request_id, Response response) {
  if (!AnswerOpen(request_id)) return;
  const bool keep_alive = request_keep_alive_ && response.keep_alive() && !draining_;
  response.version(request_version_);
  response.keep_alive(keep_alive);
  const unsigned code = response.result_int();
  if (access_) access_->status = static_cast<int>(code);
  if (code / 100 == 1 || code == 204 || code == 304) response.body().clear();
  response.prepare_payload();
  if (request_is_head_) response.body().clear();  // Content-Length stays that of the body.
  OutItem item;
  item.response = std::make_unique<Response>(std::move(response));
  item.completes_answer = true;
  item.close_after = !keep_alive;
  Enqueue(std::move(item));
}

void ServerConnection::DoStartStream(uint64_t request_id, http::status status,
                                     const HeaderList& headers) {
  if (!AnswerOpen(request_id)) return;
  if (access_) {
    access_->status = static_cast<int>(status);
    access_->stream = true;
  }
  stream_chunked_ = request_version_ >= 11;
  const bool keep_alive = request_keep_alive_ && stream_chunked_ && !draining_;
  stream_close_after_ = !keep_alive;
  std::string head = stream_chunked_ ? "HTTP/1.1 " : "HTTP/1.0 ";
  head += std::to_string(static_cast<unsigned>(status));
  head += ' ';
  const auto reason = http::obsolete_reason(status);
  head.append(reason.data(), reason.size());
  head += "\r\n";
  for (const auto& [name, value] : headers) {
    if (name.empty() || IsFramingHeader(name) || HasLineBreak(name) || HasLineBreak(value)) {
      continue;
    }
    head += name;
    head += ": ";
    head += value;
    head += "\r\n";
  }
  if (stream_chunked_) head += "Transfer-Encoding: chunked\r\n";
  if (!keep_alive) head += "Connection: close\r\n";
  head += "\r\n";
  OutItem item;
  item.bytes = std::move(head);
  if (request_is_head_) {
    // A HEAD answer has no body: the head completes it.
    item.completes_answer = true;
    item.close_after = stream_close_after_;
  }
  Enqueue(std::move(item));
}

void ServerConnection::DoChunk(uint64_t request_id, std::string data) {
  const size_t size = data.size();
  if (!AnswerOpen(request_id) || request_is_head_) {
    stream_buffered_bytes_.fetch_sub(size, std::memory_order_acq_rel);
    return;
  }
  OutItem item;
  item.stream_bytes = size;
  if (stream_chunked_) {
    char size_line[24];
    const int length = std::snprintf(size_line, sizeof(size_line), "%zx\r\n", size);
    item.bytes.reserve(static_cast<size_t>(length) + size + 2);
    item.bytes.append(size_line, static_cast<size_t>(length));
    item.bytes += data;
    item.bytes += "\r\n";
  } else {
    item.bytes = std::move(data);
  }
  Enqueue(std::move(item));
}

void ServerConnection::DoEndStream(uint64_t request_id) {
  if (!AnswerOpen(request_id) || request_is_head_) return;
  OutItem item;
  if (stream_chunked_) item.bytes = "0\r\n\r\n";
  item.completes_answer = true;
  item.close_after = stream_close_after_;
  Enqueue(std::move(item));
}

void ServerConnection::DoAbandon(uint64_t request_id, bool mid_stream) {
  if (!AnswerOpen(request_id)) return;
  if (mid_stream) {
    // The client must see a truncated stream, not a complete one: send what was queued, then
    // close without the terminating chunk.
    OutItem item;
    item.close_now = true;
    Enqueue(std::move(item));
    return;
  }
  DoReply(request_id, ErrorResponse(request_version_, http::status::internal_server_error,
                                    "the handler dropped the request without answering"));
}

void ServerConnection::DoDrain() {
  draining_ = true;
  if (closed_) return;
  const bool nothing_read = phase_ == Phase::kHeader && buffer_.size() == 0 && !reader_.got_some();
  if (phase_ == Phase::kIdle || nothing_read) Close();
  // Otherwise the request under way is answered with "Connection: close".
}

bool ServerConnection::RefusedForBudget(size_t body_bytes) {
  if (!core_->RefuseInflight(body_bytes)) return false;
  Reject(http::status::service_unavailable,
         "the server holds its max_inflight_bytes (" +
             std::to_string(core_->options().max_inflight_bytes) +
             " bytes) of requests and answers in flight; retry later");
  return true;
}

void ServerConnection::HoldBody(size_t bytes) {
  if (closed_ || bytes <= body_held_) return;
  core_->HoldInflight(bytes - body_held_);
  body_held_ = bytes;
}

void ServerConnection::ReleaseBody() {
  core_->ReleaseInflight(body_held_);
  body_held_ = 0;
}

void ServerConnection::DoWhenDrained(uint64_t request_id, size_t low_water,
                                     std::function<void()> callback) {
  if (!AnswerOpen(request_id) || stream_buffered_bytes() <= low_water) {
    callback();
    return;
  }
  drain_waiters_.push_back(DrainWaiter{low_water, std::move(callback)});
}

void ServerConnection::RunDrainWaiters(bool all) {
  if (drain_waiters_.empty()) return;
  const size_t queued = stream_buffered_bytes();
  std::vector<std::function<void()>> ready;
  auto kept = drain_waiters_.begin();
  for (DrainWaiter& waiter : drain_waiters_) {
    if (all || queued <= waiter.low_water) {
      ready.push_back(std::move(waiter.callback));
    } else {
      *kept++ = std::move(waiter);
    }
  }
  drain_waiters_.erase(kept, drain_waiters_.end());
  for (auto& callback : ready) callback();
}

void ServerConnection::Enqueue(OutItem item) {
  if (closed_) return;
  item.held = item.response ? item.response->body().size() : item.bytes.size();
  out_held_ += item.held;
  core_->HoldInflight(item.held);
  out_.push_back(std::move(item));
  PumpWrites();
}

void ServerConnection::PumpWrites() {
  if (writing_ || closed_ || out_.empty()) return;
  writing_ = true;
  ArmWriteDeadline();
  auto on_written = [self = shared_from_this()](const error_code& error, size_t bytes) {
    self->OnWritten(error, bytes);
  };
  if (out_.front().response) {
    writes_in_flight_ = 1;
    http::async_write(socket_, *out_.front().response, std::move(on_written));
    return;
  }
  write_buffers_.clear();
  writes_in_flight_ = 0;
  for (const OutItem& item : out_) {
    if (item.response || writes_in_flight_ == kMaxGatherItems) break;
    write_buffers_.push_back(asio::buffer(item.bytes));
    ++writes_in_flight_;
  }
  asio::async_write(socket_, write_buffers_, std::move(on_written));
}

void ServerConnection::OnWritten(const error_code& error, size_t bytes) {
  writing_ = false;
  CancelWriteDeadline();
  if (closed_) return;
  if (access_) access_->response_bytes += bytes;
  if (error) {
    Close();
    return;
  }
  bool completes_answer = false;
  bool close_after = false;
  bool close_now = false;
  for (size_t i = 0; i < writes_in_flight_; ++i) {
    const OutItem& item = out_.front();
    close_now = close_now || item.close_now;
    if (item.stream_bytes > 0) {
      stream_buffered_bytes_.fetch_sub(item.stream_bytes, std::memory_order_acq_rel);
      if (access_) access_->stream_bytes += item.stream_bytes;
    }
    completes_answer = completes_answer || item.completes_answer;
    close_after = close_after || item.close_after;
    out_held_ -= item.held;
    core_->ReleaseInflight(item.held);
    out_.pop_front();
  }
  writes_in_flight_ = 0;
  RunDrainWaiters(/*all=*/false);
  if (close_now) {
    Close();
    return;
  }
  if (peer_closed_) {
    if (completes_answer && gone_signal_) {
      gone_signal_->Disarm();
      gone_signal_.reset();
      core_->CountServed();
    }
    if (completes_answer && access_) ReportAccess(/*completed=*/true);
    Close();
    return;
  }
  if (completes_answer) {
    if (access_) ReportAccess(/*completed=*/true);
    FinishAnswer(close_after);
    if (closed_) return;
  }
  PumpWrites();
}

void ServerConnection::FinishAnswer(bool close_after) {
  ReleaseBody();
  RunDrainWaiters(/*all=*/true);
  if (gone_signal_) {
    gone_signal_->Disarm();
    gone_signal_.reset();
    core_->CountServed();
  }
  if (close_after || draining_ || rejecting_) {
    StartLinger();
    return;
  }
  phase_ = Phase::kIdle;
  if (!BufferBusy() && buffer_.size() > 0) {
    // A pipelined request arrived while this one was answered.
    BeginRequest(Deadline::kHeader, core_->options().header_timeout);
    ParseBuffered();
  } else {
    ArmReadDeadline(Deadline::kIdle, core_->options().idle_timeout);
  }
  ReadMore();
}

void ServerConnection::StartLinger() {
  phase_ = Phase::kLingering;
  error_code error;
  socket_.shutdown(tcp::socket::shutdown_send, error);
  if (error) {
    Close();
    return;
  }
  ArmReadDeadline(Deadline::kLinger, std::min(kLingerTimeout, core_->options().idle_timeout));
  ReadMore();
}

// ---------------------------------------------------------------------------------------------
// ServerConnection: deadlines and closing

void ServerConnection::ArmReadDeadline(Deadline kind, std::chrono::milliseconds timeout) {
  read_deadline_ = kind;
  const uint64_t generation = ++read_timer_generation_;
  read_timer_.expires_after(timeout);
  read_timer_.async_wait([self = shared_from_this(), generation](const error_code& error) {
    if (error || generation != self->read_timer_generation_) return;
    self->OnReadDeadline();
  });
}

void ServerConnection::CancelReadDeadline() {
  read_deadline_ = Deadline::kNone;
  ++read_timer_generation_;
  read_timer_.cancel();
}

void ServerConnection::OnReadDeadline() {
  if (closed_) return;
  const Deadline kind = read_deadline_;
  read_deadline_ = Deadline::kNone;
  switch (kind) {
    case Deadline::kNone:
      return;
    case Deadline::kIdle:
    case Deadline::kLinger:
      Close();
      return;
    case Deadline::kHeader:
      if (buffer_.size() == 0 && !reader_.got_some()) {
        Close();  // Nothing was sent: nobody to answer.
        return;
      }
      Reject(http::status::request_timeout,
             "request headers not received within " +
                 std::to_string(core_->options().header_timeout.count()) + " ms");
      return;
    case Deadline::kBody:
      Reject(http::status::request_timeout,
             "request body not received within " +
                 std::to_string(core_->options().body_timeout.count()) + " ms");
      return;
  }
}

void ServerConnection::ArmWriteDeadline() {
  const uint64_t generation = ++write_timer_generation_;
  write_timer_.expires_after(core_->options().write_timeout);
  write_timer_.async_wait([self = shared_from_this(), generation](const error_code& error) {
    if (error || generation != self->write_timer_generation_ || self->closed_) return;
    self->Close();  // The client does not read: it counts as gone.
  });
}

void ServerConnection::CancelWriteDeadline() {
  ++write_timer_generation_;
  write_timer_.cancel();
}

void ServerConnection::Close() {
  if (closed_) return;
  closed_ = true;
  phase_ = Phase::kClosed;
  CancelReadDeadline();
  CancelWriteDeadline();
  error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  core_->Unregister(id_);
  ReleaseBody();
  core_->ReleaseInflight(out_held_);
  out_held_ = 0;
  RunDrainWaiters(/*all=*/true);
  if (access_) ReportAccess(/*completed=*/false);
  if (gone_signal_) {
    auto signal = std::move(gone_signal_);
    signal->Fire();
  }
}

// ---------------------------------------------------------------------------------------------
// ServerConnection: access log

void ServerConnection::OpenAccessRecord(std::string method, std::string target) {
  access_.emplace();
  access_->method = std::move(method);
  access_->target = std::move(target);
  access_->start = request_start_;
}

void ServerConnection::ReportAccess(bool completed) {
  AccessRecord record = std::move(*access_);
  access_.reset();
  AccessLogEntry entry;
  entry.method = record.method;
  entry.target = record.target;
  entry.status = record.status != 0 ? record.status : 499;
  entry.response_bytes = record.response_bytes;
  if (record.stream) entry.stream_bytes = record.stream_bytes;
  entry.duration_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - record.start)
          .count();
  entry.remote = remote_;
  entry.completed = completed;
  try {
    core_->options().access_log(entry);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "agentkv::net: the access log hook threw: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "agentkv::net: the access log hook threw\n");
  }
}

}  // namespace agentkv::net::internal
