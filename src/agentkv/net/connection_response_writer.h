// The ResponseWriter the server hands to handlers (ConnectionResponseWriter), and the
// ClientGoneSignal it shares with its connection. Internal to the net module.
//
// The writer turns handler calls from any thread into work posted onto its connection's strand,
// in call order; its state machine (kFresh -> kReplied, or kFresh -> kStreaming ->
// kStreamEnded), under its mutex, decides which calls pass. Destroying it unanswered makes the
// connection answer 500; destroying it mid-stream makes the connection close. Thread-safe.
#ifndef AGENTKV_NET_CONNECTION_RESPONSE_WRITER_H_
#define AGENTKV_NET_CONNECTION_RESPONSE_WRITER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agentkv/net/response_writer.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::net::internal {

class ServerConnection;

// Runs the callbacks registered through ResponseWriter::OnClientGone. Thread-safe.
class ClientGoneSignal {
 public:
  // Runs `callback` now (on this thread) if the signal fired; drops it if the answer completed;
  // otherwise keeps it for Fire().
  void Register(std::function<void()> callback);
  // Marks the client gone and runs the kept callbacks, once; no-op after Disarm().
  void Fire();
  // The answer completed: Fire() becomes a no-op and kept callbacks are dropped.
  void Disarm();
  bool fired() const { return fired_.load(std::memory_order_acquire); }

 private:
  sync::Mutex mu_;
  bool disarmed_ AGENTKV_GUARDED_BY(mu_) = false;
  std::vector<std::function<void()>> callbacks_ AGENTKV_GUARDED_BY(mu_);
  std::atomic<bool> fired_{false};
};

class ConnectionResponseWriter final : public ResponseWriter {
 public:
  ConnectionResponseWriter(std::shared_ptr<ServerConnection> connection, uint64_t request_id,
                           std::shared_ptr<ClientGoneSignal> signal);
  ConnectionResponseWriter(const ConnectionResponseWriter&) = delete;
  ConnectionResponseWriter& operator=(const ConnectionResponseWriter&) = delete;
  ~ConnectionResponseWriter() override;

  void Reply(Response response) override;
  void StartStream(http::status status, HeaderList headers) override;
  void WriteChunk(std::string data) override;
  void EndStream() override;
  void AbortStream() override;
  size_t stream_buffered_bytes() const override;
  void OnStreamDrained(size_t low_water, std::function<void()> callback) override;
  bool client_gone() const override;
  void OnClientGone(std::function<void()> callback) override;

 private:
  enum class State { kFresh, kReplied, kStreaming, kStreamEnded };

  const std::shared_ptr<ServerConnection> connection_;
  const uint64_t request_id_;
  const std::shared_ptr<ClientGoneSignal> signal_;
  sync::Mutex mu_;
  State state_ AGENTKV_GUARDED_BY(mu_) = State::kFresh;
};

}  // namespace agentkv::net::internal

#endif  // AGENTKV_NET_CONNECTION_RESPONSE_WRITER_H_
