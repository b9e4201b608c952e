// Request i has id i, session and conversation i + 1, and is agent i of the oracle's ranking;
// all its blocks live in namespace 0. issued_ counts accepted submissions, completed_ every
// completion the gateway model reported (dispatch failures included, recorded in failure_).
#include "agentkv/sim/replay/open_loop_feed.h"

#include <algorithm>
#include <string>
#include <utility>

#include "agentkv/base/bounds.h"
#include "agentkv/routing/routing_key.h"

namespace agentkv::sim {

OpenLoopFeed::OpenLoopFeed(const std::vector<OpenLoopRequest>& requests, int32_t tokens_per_block)
    : requests_(requests), tokens_per_block_(tokens_per_block) {}

Status OpenLoopFeed::Validate() const {
  // The trace readers keep token counts within their bound; callers of this API must too, so
  // that the report's sums over requests cannot overflow.
  for (size_t i = 0; i < requests_.size(); ++i) {
    const std::string name = "requests[" + std::to_string(i) + "]";
    AGENTKV_RETURN_IF_ERROR(CheckTokens(name + ".prompt_tokens", requests_[i].prompt_tokens));
    AGENTKV_RETURN_IF_ERROR(CheckTokens(name + ".output_tokens", requests_[i].output_tokens));
  }
  return Status::Ok();
}

int64_t OpenLoopFeed::InfiniteCapacityBlocks(int64_t device_blocks) const {
  std::vector<std::vector<uint64_t>> ids;
  std::vector<int64_t> tails;
  for (const OpenLoopRequest& r : requests_) {
    if (!FitsOneEngine(SubmittedPromptTokens(r.prompt_tokens, r.hash_ids.size(), tokens_per_block_),
                       std::max<int64_t>(1, r.output_tokens), device_blocks, tokens_per_block_)) {
      continue;
    }
    ids.push_back(r.hash_ids);
    tails.push_back(r.output_tokens + r.prompt_tokens % tokens_per_block_);
  }
  return sim::InfiniteCapacityBlocks(ids, std::vector<uint64_t>(ids.size(), 0), tails,
                                     tokens_per_block_);
}

std::unique_ptr<FleetNextUse> OpenLoopFeed::Future(const kv::BlockKeyHasher& hasher,
                                                   int64_t device_blocks, TimeNs origin) {
  // Nothing is looked up for a request no engine can hold: it is rejected.
  auto ranking = std::make_unique<FleetNextUse>();
  for (const OpenLoopRequest& r : requests_) {
    const bool fits =
        FitsOneEngine(SubmittedPromptTokens(r.prompt_tokens, r.hash_ids.size(), tokens_per_block_),
                      std::max<int64_t>(1, r.output_tokens), device_blocks, tokens_per_block_);
    ranking->AddAgent({fits ? hasher.KeysFromBlockIds(r.hash_ids) : std::vector<kv::BlockKey>{}},
                      {TimeNs(0)}, SaturatingAdd(origin, r.arrival));
  }
  return ranking;
}

Status OpenLoopFeed::Attach(ArmFleet& arm_fleet) {
  arm_fleet_ = &arm_fleet;
  hasher_ = &arm_fleet.fleet->engine(EngineId(0)).engine().hasher();
  session_end_.assign(requests_.size(), TimeNs());
  arm_fleet.gateway->set_completion_callback(
      [this](const GatewayRecord& record, const EngineRequestRecord* engine_record) {
        Complete(record, engine_record);
      });
  origin_ = arm_fleet.loop.now();
  for (size_t i = 0; i < requests_.size(); ++i) {
    arm_fleet.loop.Schedule(SaturatingAdd(origin_, requests_[i].arrival), [this, i] { Arrive(i); });
  }
  return Status::Ok();
}

void OpenLoopFeed::Arrive(size_t i) {
  ArmFleet& f = *arm_fleet_;
  const OpenLoopRequest& r = requests_[i];
  GatewayRequest request;
  request.request.id = RequestId(static_cast<int64_t>(i));
  request.request.prompt_keys = hasher_->KeysFromBlockIds(r.hash_ids);
  request.request.prompt_tokens =
      SubmittedPromptTokens(r.prompt_tokens, r.hash_ids.size(), tokens_per_block_);
  request.request.max_new_tokens = std::max<int64_t>(1, r.output_tokens);
  request.request.kv_options.prompt_tokens = request.request.prompt_tokens;
  request.request.kv_options.conversation = ConversationId(static_cast<int64_t>(i) + 1);
  request.session = SessionId(static_cast<int64_t>(i) + 1);
  request.routing_key = routing::SessionRoutingKey(request.session);
  if (f.oracle != nullptr) f.oracle->Submitted(static_cast<int32_t>(i), 0, f.loop.now());
  if (Status s = f.gateway->Submit(std::move(request)); !s.ok()) {
    if (failure_.ok()) failure_ = s;
    return;
  }
  ++issued_;
}

void OpenLoopFeed::Complete(const GatewayRecord& record, const EngineRequestRecord* engine_record) {
  ArmFleet& f = *arm_fleet_;
  ++completed_;
  if (f.oracle != nullptr) {
    f.oracle->Completed(static_cast<int32_t>(record.id.value()), 0, f.loop.now());
  }
  if (engine_record == nullptr && failure_.ok()) failure_ = record.dispatch_error;
  session_end_[static_cast<size_t>(record.id.value())] = f.loop.now();
  f.gateway->EndSession(record.session);
}

double OpenLoopFeed::CompletedFraction() const {
  const auto total = static_cast<int64_t>(requests_.size());
  return total > 0 ? static_cast<double>(completed_) / static_cast<double>(total) : 1.0;
}

StatusOr<FedCounts> OpenLoopFeed::Ended() const {
  AGENTKV_RETURN_IF_ERROR(failure_);
  return FedCounts{.issued = issued_, .completed = completed_};
}

FedTraffic OpenLoopFeed::Traffic(const ArmFleet& arm_fleet) const {
  FedTraffic traffic;
  TimeNs last = origin_;
  TimeNs first = requests_.empty() ? origin_ : origin_ + requests_.front().arrival;
  for (size_t i = 0; i < requests_.size(); ++i) {
    traffic.requests.push_back(ViewOf(arm_fleet, RequestId(static_cast<int64_t>(i))));
    first = std::min(first, origin_ + requests_[i].arrival);
    last = std::max(last, session_end_[i]);
    traffic.session_times.push_back((session_end_[i] - (origin_ + requests_[i].arrival)).seconds());
    traffic.session_of_request.push_back(i);
  }
  traffic.sessions = static_cast<int64_t>(requests_.size());
  traffic.conversations = traffic.sessions;
  traffic.makespan = last - first;
  return traffic;
}

}  // namespace agentkv::sim
