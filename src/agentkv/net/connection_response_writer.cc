// Invariants: the writer posts at most one answer-starting call (Reply or StartStream), chunks
// only between StartStream and EndStream, and all of them while holding its mutex, so the
// connection's strand sees them in call order. A ClientGoneSignal fires at most once, never
// after Disarm, and runs each callback exactly once (or drops it after Disarm).
#include "agentkv/net/connection_response_writer.h"

#include <cstdio>
#include <exception>

#include "agentkv/net/server_connection.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::net::internal {

void ClientGoneSignal::Register(std::function<void()> callback) {
  {
    sync::MutexLock lock(&mu_);
    if (disarmed_) return;
    if (!fired_.load(std::memory_order_acquire)) {
      callbacks_.push_back(std::move(callback));
      return;
    }
  }
  callback();
}

void ClientGoneSignal::Fire() {
  std::vector<std::function<void()>> callbacks;
  {
    sync::MutexLock lock(&mu_);
    if (disarmed_ || fired_.load(std::memory_order_acquire)) return;
    fired_.store(true, std::memory_order_release);
    callbacks.swap(callbacks_);
  }
  for (auto& callback : callbacks) {
    try {
      callback();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "agentkv::net: an OnClientGone callback threw: %s\n", e.what());
    } catch (...) {
      std::fprintf(stderr, "agentkv::net: an OnClientGone callback threw\n");
    }
  }
}

void ClientGoneSignal::Disarm() {
  sync::MutexLock lock(&mu_);
  disarmed_ = true;
  callbacks_.clear();
}

// ---------------------------------------------------------------------------------------------
// ConnectionResponseWriter

ConnectionResponseWriter::ConnectionResponseWriter(std::shared_ptr<ServerConnection> connection,
                                                   uint64_t request_id,
                                                   std::shared_ptr<ClientGoneSignal> signal)
    : connection_(std::move(connection)), request_id_(request_id), signal_(std::move(signal)) {}

ConnectionResponseWriter::~ConnectionResponseWriter() {
  if (state_ == State::kFresh) connection_->PostAbandon(request_id_, /*mid_stream=*/false);
  if (state_ == State::kStreaming) connection_->PostAbandon(request_id_, /*mid_stream=*/true);
}

void ConnectionResponseWriter::Reply(Response response) {
  sync::MutexLock lock(&mu_);
  if (state_ != State::kFresh) return;
  state_ = State::kReplied;
  connection_->PostReply(request_id_, std::move(response));
}

void ConnectionResponseWriter::StartStream(http::status status, HeaderList headers) {
  sync::MutexLock lock(&mu_);
  if (state_ != State::kFresh) return;
  state_ = State::kStreaming;
  connection_->PostStartStream(request_id_, status, std::move(headers));
}

void ConnectionResponseWriter::WriteChunk(std::string data) {
  if (data.empty() || signal_->fired()) return;
  sync::MutexLock lock(&mu_);
  if (state_ != State::kStreaming) return;
  connection_->PostChunk(request_id_, std::move(data));
}

void ConnectionResponseWriter::EndStream() {
  sync::MutexLock lock(&mu_);
  if (state_ != State::kStreaming) return;
  state_ = State::kStreamEnded;
  connection_->PostEndStream(request_id_);
}

void ConnectionResponseWriter::AbortStream() {
  sync::MutexLock lock(&mu_);
  if (state_ != State::kStreaming) return;
  state_ = State::kStreamEnded;
  connection_->PostAbandon(request_id_, /*mid_stream=*/true);
}

size_t ConnectionResponseWriter::stream_buffered_bytes() const {
  return connection_->stream_buffered_bytes();
}

void ConnectionResponseWriter::OnStreamDrained(size_t low_water, std::function<void()> callback) {
  if (!callback) return;
  if (signal_->fired() || connection_->stream_buffered_bytes() <= low_water) {
    callback();
    return;
  }
  connection_->PostWhenDrained(request_id_, low_water, std::move(callback));
}

bool ConnectionResponseWriter::client_gone() const { return signal_->fired(); }

void ConnectionResponseWriter::OnClientGone(std::function<void()> callback) {
  if (callback) signal_->Register(std::move(callback));
}

}  // namespace agentkv::net::internal
