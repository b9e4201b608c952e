#include "agentkv/sim/fleet/open_loop_driver.h"

#include <algorithm>
#include <utility>

#include "agentkv/base/bounds.h"
#include "agentkv/base/check.h"
#include "agentkv/routing/routing_key.h"
#include "agentkv/sim/fleet/agent_driver.h"
#include "agentkv/sim/fleet/gateway_model.h"

namespace agentkv::sim {

OpenLoopDriver::OpenLoopDriver(EventLoop* loop, AgentTarget* target,
                               const std::vector<OpenLoopRequest>* requests,
                               int32_t tokens_per_block, int64_t first_request_id)
    : loop_(loop),
      target_(target),
      requests_(requests),
      tokens_per_block_(tokens_per_block),
      first_request_id_(first_request_id) {
  AGENTKV_CHECK_GE(first_request_id, 0);
}

void OpenLoopDriver::Start() {
  origin_ = loop_->now();
  session_end_.assign(requests_->size(), origin_);
  target_->set_completion_callback(
      [this](const GatewayRecord& record, const EngineRequestRecord* engine_record) {
        Complete(record, engine_record);
      });
  for (size_t i = 0; i < requests_->size(); ++i) {
    loop_->Schedule(SaturatingAdd(origin_, (*requests_)[i].arrival), [this, i] { Arrive(i); });
  }
}

void OpenLoopDriver::Arrive(size_t i) {
  ++arrived_;
  const OpenLoopRequest& r = (*requests_)[i];
  const auto index = static_cast<int64_t>(i);
  GatewayRequest request;
  request.request.id = RequestId(first_request_id_ + index);
  request.request.prompt_keys = target_->hasher().KeysFromBlockIds(r.hash_ids);
  request.request.prompt_tokens =
      SubmittedPromptTokens(r.prompt_tokens, r.hash_ids.size(), tokens_per_block_);
  request.request.max_new_tokens = std::max<int64_t>(1, r.output_tokens);
  request.request.kv_options.prompt_tokens = request.request.prompt_tokens;
  request.request.kv_options.conversation = ConversationId(index + 1);
  request.session = SessionId(index + 1);
  request.routing_key = routing::SessionRoutingKey(request.session);
  if (on_submitted_) on_submitted_(static_cast<int32_t>(i), loop_->now());
  if (Status s = target_->Submit(std::move(request)); !s.ok()) {
    if (failure_.ok()) failure_ = s;
    return;
  }
  ++issued_;
}

void OpenLoopDriver::Complete(const GatewayRecord& record,
                              const EngineRequestRecord* engine_record) {
  const int64_t i = record.id.value() - first_request_id_;
  if (i < 0 || i >= static_cast<int64_t>(requests_->size())) return;
  ++completed_;
  if (on_completed_) on_completed_(static_cast<int32_t>(i), loop_->now());
  if (on_record_ && engine_record != nullptr) {
    on_record_(static_cast<int32_t>(i), record, *engine_record);
  }
  if (engine_record == nullptr && failure_.ok()) failure_ = record.dispatch_error;
  session_end_[static_cast<size_t>(i)] = loop_->now();
  target_->EndSession(record.session);
}

}  // namespace agentkv::sim
