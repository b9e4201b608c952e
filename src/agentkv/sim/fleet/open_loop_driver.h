// OpenLoopDriver: replays an open-loop trace (open_loop_trace.h, e.g. Mooncake) into an
// AgentTarget (agent_target.h): request i arrives at its recorded time, whatever the target did
// with the earlier ones, as its own session and conversation (ids i + 1, routed by its
// session), with id first_request_id + i; all its blocks chain in namespace 0; its session ends
// with its completion. The replay's open-loop feed drives the simulated gateway with it, and
// `agentkv load` a live endpoint, so both send the same requests at the same times.
//
// Prompt tokens are SubmittedPromptTokens (the recorded length, or the blocks' when they hold
// more); max_new_tokens is max(1, output_tokens). A Submit() error is recorded (failure()) and
// the request never completes; a completion without an engine record (a dispatch error) is
// recorded too. Deterministic; single-threaded; the loop, target and requests must outlive the
// driver, which must outlive every run of the loop after Start().
#ifndef AGENTKV_SIM_FLEET_OPEN_LOOP_DRIVER_H_
#define AGENTKV_SIM_FLEET_OPEN_LOOP_DRIVER_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/time.h"
#include "agentkv/sim/fleet/agent_target.h"
#include "agentkv/sim/fleet/event_loop.h"
#include "agentkv/sim/workload/open_loop_trace.h"

namespace agentkv::sim {

class OpenLoopDriver {
 public:
  // Told when request i is submitted and when it completed (the oracle's next-use ranking).
  using RequestHook = std::function<void(int32_t request, TimeNs now)>;
  // Told when request i completed with an engine record (served, rejected or refused), from
  // inside the target's completion callback: the records live for the call only.
  using RecordHook = std::function<void(int32_t request, const GatewayRecord& gateway,
                                        const EngineRequestRecord& engine)>;

  // `tokens_per_block` is the trace's block size. Precondition: first_request_id >= 0.
  OpenLoopDriver(EventLoop* loop, AgentTarget* target, const std::vector<OpenLoopRequest>* requests,
                 int32_t tokens_per_block, int64_t first_request_id = 0);
  OpenLoopDriver(const OpenLoopDriver&) = delete;
  OpenLoopDriver& operator=(const OpenLoopDriver&) = delete;

  void set_hooks(RequestHook submitted, RequestHook completed) {
    on_submitted_ = std::move(submitted);
    on_completed_ = std::move(completed);
  }
  void set_record_hook(RecordHook hook) { on_record_ = std::move(hook); }

  // Installs the target's completion callback and schedules every arrival relative to
  // loop->now(). Once only.
  void Start();

  // Every request arrived and every accepted one completed.
  bool done() const {
    return arrived_ == static_cast<int64_t>(requests_->size()) && completed_ == issued_;
  }
  int64_t issued() const { return issued_; }
  int64_t completed() const { return completed_; }
  // The first Submit error, or a dispatch error of a completed request; OK otherwise.
  const Status& failure() const { return failure_; }
  // The loop time at Start(), and per request when it completed (origin() until then).
  TimeNs origin() const { return origin_; }
  const std::vector<TimeNs>& session_end() const { return session_end_; }

 private:
  void Arrive(size_t i);
  void Complete(const GatewayRecord& record, const EngineRequestRecord* engine_record);

  EventLoop* loop_;
  AgentTarget* target_;
  const std::vector<OpenLoopRequest>* requests_;
  int32_t tokens_per_block_;
  int64_t first_request_id_;
  RequestHook on_submitted_;
  RequestHook on_completed_;
  RecordHook on_record_;
  TimeNs origin_;
  int64_t arrived_ = 0;
  int64_t issued_ = 0;
  int64_t completed_ = 0;
  Status failure_;
  std::vector<TimeNs> session_end_;
};

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_FLEET_OPEN_LOOP_DRIVER_H_
