// The requests go through the OpenLoopDriver (sim/fleet/open_loop_driver.h): request i has id
// i, session and conversation i + 1, and is agent i of the oracle's ranking; all its blocks live
// in namespace 0.
#include "agentkv/sim/replay/open_loop_feed.h"

#include <algorithm>
#include <string>
#include <utility>

#include "agentkv/base/bounds.h"

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

Status OpenLoopFeed::Attach(ArmFleet& arm_fleet, RequestTally& tally) {
  driver_ = std::make_unique<OpenLoopDriver>(&arm_fleet.loop, arm_fleet.gateway.get(), &requests_,
                                             tokens_per_block_);
  driver_->set_record_hook([&tally](int32_t i, const GatewayRecord& gateway,
                                    const EngineRequestRecord& engine) {
    tally.Add(
        RequestView{
            .gateway = &gateway, .engine = &engine, .agentic = false, .pause_before = std::nullopt},
        static_cast<size_t>(i));
  });
  if (arm_fleet.oracle != nullptr) {
    FleetNextUse* oracle = arm_fleet.oracle.get();
    driver_->set_hooks([oracle](int32_t i, TimeNs now) { oracle->Submitted(i, 0, now); },
                       [oracle](int32_t i, TimeNs now) { oracle->Completed(i, 0, now); });
  }
  driver_->Start();
  return Status::Ok();
}

double OpenLoopFeed::CompletedFraction() const {
  const auto total = static_cast<int64_t>(requests_.size());
  const int64_t completed = driver_ != nullptr ? driver_->completed() : 0;
  return total > 0 ? static_cast<double>(completed) / static_cast<double>(total) : 1.0;
}

StatusOr<FedCounts> OpenLoopFeed::Ended() const {
  AGENTKV_RETURN_IF_ERROR(driver_->failure());
  return FedCounts{.issued = driver_->issued(), .completed = driver_->completed()};
}

FedSessions OpenLoopFeed::Sessions() const {
  const TimeNs origin = driver_->origin();
  const std::vector<TimeNs>& session_end = driver_->session_end();
  FedSessions sessions;
  TimeNs last = origin;
  TimeNs first = requests_.empty() ? origin : origin + requests_.front().arrival;
  for (size_t i = 0; i < requests_.size(); ++i) {
    first = std::min(first, origin + requests_[i].arrival);
    last = std::max(last, session_end[i]);
    sessions.session_times.push_back((session_end[i] - (origin + requests_[i].arrival)).seconds());
  }
  sessions.sessions = static_cast<int64_t>(requests_.size());
  sessions.conversations = sessions.sessions;
  sessions.makespan = last - first;
  return sessions;
}

}  // namespace agentkv::sim
