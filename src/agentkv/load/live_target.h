// LiveTarget: the AgentTarget (sim/fleet/agent_target.h) of `agentkv load`: each request the
// agent driver submits goes to a live endpoint (the agentkv gateway, an sgl-router, an engine)
// as a framework would send it, and its measured answer comes back to the driver as the records
// the simulator's gateway model produces, so one driver and one summary serve the prediction
// and the measurement.
//
// What a request carries (each switchable, so one run measures a plain client too): the
// session (`session_id`, one per conversation, named session_prefix + conversation number), the
// routing key (X-SMG-Routing-Key: the session, or under sub-agent routing `parent` the
// parent's), the pause hint that follows it (X-Agentkv-Pause), a sub-agent's parent hint
// (X-Agentkv-Parent-Session, signed with X-Agentkv-Parent-Signature when a key is given), the
// retention mark (X-Agentkv-Session-Retain: 1), and a unique rid per attempt
// ("{session_prefix}r{request}:{attempt}"). When an agent ends its session is closed with the
// gateway's `POST /v1/sessions/{id}/close`. Prompts come from a PromptBook (prompt_book.h).
//
// Outcomes. A 2xx answer whose stream ended is served: its times (in loop time, through the
// LoopClock) and the server's cached-token count make its records. A 400 (as the status, or as
// the code of a stream's error event, SGLang's way for a streamed request) is a refusal (the
// request completes rejected and the agent goes on, as the simulator counts an engine's 400).
// Anything else (another status, a transport error, a timeout, an error event in the stream)
// is retried as a new attempt up to `retries` times, then completes rejected too and is counted
// by kind in counters().errors.
//
// Threads. The driver's thread calls everything but the HTTP callbacks, which run on the
// client's I/O threads and only queue their outcome; DeliverCompletions hands the queue to the
// driver on its thread. Not copyable.
#ifndef AGENTKV_LOAD_LIVE_TARGET_H_
#define AGENTKV_LOAD_LIVE_TARGET_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/time.h"
#include "agentkv/load/live_request.h"
#include "agentkv/load/prompt_book.h"
#include "agentkv/net/http_client.h"
#include "agentkv/sim/fleet/agent_target.h"
#include "agentkv/sim/fleet/engine_model.h"
#include "agentkv/sim/fleet/gateway_model.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::load {

using WallClock = std::chrono::steady_clock;

struct LiveTargetOptions {
  // "http://host:port": the gateway, router or engine.
  std::string url;
  LoadApi api = LoadApi::kGenerate;
  // The OpenAI routes' `model`.
  std::string model = "default";
  // The workload's block size, and the prompt book's id range and salt.
  int32_t tokens_per_block = 16;
  int64_t vocab_size = 32'000;
  uint64_t salt = 1;
  // Names sessions and rids apart from other runs against the same servers.
  std::string session_prefix = "load-";
  // Agent behaviour, each switchable.
  bool session_ids = true;
  bool routing_keys = true;
  bool pause_hints = true;
  bool parent_hints = true;
  // Signs parent hints; "" sends them unsigned.
  std::string parent_hint_key;
  bool close_sessions = true;
  // Every request asks for this many output tokens instead of the workload's (a throughput
  // run's 1). Range: [1, 2^20]; unset: the workload's.
  std::optional<int64_t> output_tokens;
  // New attempts of a request that failed (not of a 400). Range: [0, 100].
  int32_t retries = 0;
  // Connections to the endpoint, and the longest wait for a response's headers (and between two
  // pieces of its body).
  size_t connections = 256;
  std::chrono::milliseconds timeout{600'000};

  Status Validate() const;
};

// One request as measured: the records the summary reads (gateway.received is the send time,
// engine.first_token the first event with output, engine.finished the stream's end), and the
// mean gap between its output events after the first (unset under two events).
struct MeasuredRequest {
  sim::GatewayRecord gateway;
  sim::EngineRequestRecord engine;
  std::optional<double> inter_token_s;
  // Failed after its retries (counted in counters().errors); cancelled by Stop() (not
  // delivered, not counted).
  bool failed = false;
  bool cancelled = false;
};

struct LiveCounters {
  int64_t attempts = 0;
  int64_t retries = 0;
  // Failed attempts by kind: "http 503", "deadline exceeded", "unavailable", "stream error"...
  std::map<std::string, int64_t> errors;
  int64_t sessions_closed = 0;
  std::map<std::string, int64_t> close_errors;
};

class LiveTarget final : public sim::AgentTarget {
 public:
  // Loop time of a wall-clock instant.
  using LoopClock = std::function<TimeNs(WallClock::time_point)>;

  static StatusOr<std::unique_ptr<LiveTarget>> Create(const LiveTargetOptions& options,
                                                      LoopClock clock);
  LiveTarget(const LiveTarget&) = delete;
  LiveTarget& operator=(const LiveTarget&) = delete;
  ~LiveTarget() override;

  // --- AgentTarget (driver thread) ---
  const kv::BlockKeyHasher& hasher() const override { return hasher_; }
  int32_t tokens_per_block() const override { return options_.tokens_per_block; }
  void set_completion_callback(CompletionCallback callback) override {
    on_complete_ = std::move(callback);
  }
  // Sends the request; FailedPrecondition after Stop().
  Status Submit(sim::GatewayRequest request) override;
  // Closes the session (when close_sessions) and forgets its remembered answers.
  std::vector<int64_t> EndSession(SessionId session) override;

  // --- The run (driver thread) ---
  // Waits until an outcome is queued or `deadline` passes (or Wake()). True when one is queued.
  bool WaitForOutcome(WallClock::time_point deadline);
  // Wakes a WaitForOutcome (any thread).
  void Wake();
  // Hands every queued outcome on: retries, or completes the request through the callback.
  // Returns the requests completed.
  int64_t DeliverCompletions();
  // Ctrl-C: refuses new requests, cancels those in flight (they end cancelled, not delivered)
  // and closes every session still open.
  void Stop();

  // Requests sent and not yet completed, and session closes not yet answered.
  int64_t in_flight() const { return in_flight_; }
  int64_t closes_pending() const;
  // Indexed by request id (the driver numbers requests from 0).
  const std::vector<MeasuredRequest>& measured() const { return measured_; }
  LiveCounters counters() const;

 private:
  struct InFlight;
  struct Outcome;

  LiveTarget(const LiveTargetOptions& options, LoopClock clock, PromptBook book);

  std::string SessionName(int64_t number) const;
  // Sends attempt `attempt` of request `slot`.
  void SendAttempt(size_t slot);
  // Completes request `slot` (after its last attempt) with `outcome`: served, or else rejected
  // (refused, or failed after its retries).
  void Complete(size_t slot, const Outcome& outcome, bool served);
  void CloseSession(const std::string& name);

  LiveTargetOptions options_;
  LoopClock clock_;
  kv::BlockKeyHasher hasher_;
  PromptBook book_;
  CompletionCallback on_complete_;
  bool stopped_ = false;
  int64_t in_flight_ = 0;
  std::vector<MeasuredRequest> measured_;
  // Requests in flight by slot (prompt kept for answers the next turn re-sends).
  std::unordered_map<size_t, InFlight> calls_;
  // Sessions that sent a request and are not closed yet.
  std::unordered_map<int64_t, std::string> open_sessions_;

  mutable sync::Mutex mu_;
  sync::CondVar ready_;
  std::vector<Outcome> queue_ AGENTKV_GUARDED_BY(mu_);
  bool woken_ AGENTKV_GUARDED_BY(mu_) = false;
  int64_t closes_pending_ AGENTKV_GUARDED_BY(mu_) = 0;
  LiveCounters counters_ AGENTKV_GUARDED_BY(mu_);
  // Last: destroyed first, its in-flight callbacks (which lock mu_) end before mu_ does.
  net::HttpClient client_;
};

}  // namespace agentkv::load

#endif  // AGENTKV_LOAD_LIVE_TARGET_H_
