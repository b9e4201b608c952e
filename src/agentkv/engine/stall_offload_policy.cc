// StallOffloadPolicy implementation.
//
// Invariants: every paused conversation had a hinted request that completed on this engine
// and has not returned since; an offloaded one has a prefetch time; turns_ holds exactly the
// hinted requests submitted and not yet finished. Plan reads the state and the cache and
// changes neither; OnOffloaded and OnPrefetched are the only transitions of a pause besides
// its start (OnFinish) and its end (OnSubmit).
#include "agentkv/engine/stall_offload_policy.h"

#include <algorithm>
#include <string>
#include <utility>

#include "agentkv/base/check.h"

namespace agentkv::engine {
namespace {

Status OutOfRange(const char* field, const std::string& value, const char* range) {
  return InvalidArgumentError(std::string("StallOffloadOptions.") + field + " must be in " + range +
                              ", got " + value);
}

// A pause the finite edges cannot place is predicted to last at least twice the last edge.
TimeNs Unbounded(const kv::PauseGrid& grid) {
  return TimeNs(grid.edge(grid.finite_buckets() - 1).ns() * 2);
}

}  // namespace

std::optional<kv::PauseClass> StallPauseClass(PauseKind pause, bool subagent) {
  switch (pause) {
    case PauseKind::kUnknown:
    case PauseKind::kSessionEnd:
      return std::nullopt;
    case PauseKind::kToolCall:
      return subagent ? kStallSubagentToolCallClass : kStallToolCallClass;
    case PauseKind::kSubagentWait:
      return kStallSubagentWaitClass;
    case PauseKind::kHumanTurn:
      return kStallHumanTurnClass;
  }
  return std::nullopt;
}

Status StallOffloadOptions::Validate() const {
  if (!(pressure_threshold > 0.0 && pressure_threshold <= 1.0)) {
    return OutOfRange("pressure_threshold", std::to_string(pressure_threshold), "(0, 1]");
  }
  if (!(return_quantile > 0.0 && return_quantile < 1.0)) {
    return OutOfRange("return_quantile", std::to_string(return_quantile), "(0, 1)");
  }
  if (min_stall < TimeNs(0) || min_stall > TimeNs::Seconds(86400)) {
    return OutOfRange("min_stall", std::to_string(min_stall.seconds()) + " s", "[0, 1 day]");
  }
  return pauses.Validate("StallOffloadOptions.pauses.");
}

StatusOr<StallOffloadPolicy> StallOffloadPolicy::Create(const StallOffloadOptions& options) {
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  AGENTKV_ASSIGN_OR_RETURN(kv::PauseEstimator pauses, kv::PauseEstimator::Create(options.pauses));
  return StallOffloadPolicy(options, std::move(pauses));
}

StallOffloadPolicy::StallOffloadPolicy(const StallOffloadOptions& options,
                                       kv::PauseEstimator pauses)
    : options_(options), pauses_(std::move(pauses)) {}

void StallOffloadPolicy::OnSubmit(RequestId request, const kv::RequestOptions& kv_options,
                                  std::vector<kv::BlockKey> keys, TimeNs now) {
  // The program is the conversation, else the session (an engine that sees sessions only).
  std::optional<ConversationId> program = kv_options.conversation;
  if (!program.has_value() && kv_options.session.has_value()) {
    program = ConversationId(kv_options.session->value());
  }
  if (!program.has_value()) return;
  const ConversationId conversation = *program;
  if (auto it = paused_.find(conversation); it != paused_.end()) {
    const Paused& paused = it->second;
    pauses_.Observe(paused.pause_class, std::max(TimeNs(0), now - paused.since));
    ++counters_.returns;
    if (paused.state == State::kOffloaded) ++counters_.returned_offloaded;
    if (paused.prefetched) ++counters_.returned_prefetched;
    paused_.erase(it);
  }
  const std::optional<kv::PauseClass> pause_class =
      StallPauseClass(kv_options.next_pause, kv_options.parent_conversation.has_value());
  if (!pause_class.has_value()) return;
  turns_.insert_or_assign(request, Turn{conversation, *pause_class, std::move(keys)});
}

void StallOffloadPolicy::OnFinish(RequestId request, bool completed, TimeNs now) {
  auto it = turns_.find(request);
  if (it == turns_.end()) return;
  Turn turn = std::move(it->second);
  turns_.erase(it);
  if (!completed) return;
  Paused& paused = paused_[turn.conversation];
  paused = Paused{};
  paused.pause_class = turn.pause_class;
  paused.since = now;
  paused.keys = std::move(turn.keys);
  ++counters_.pauses;
}

StallPlan StallOffloadPolicy::Plan(TimeNs now, const kv::KvCacheManager& cache,
                                   int64_t waiting_requests, const CostModel& cost) const {
  StallPlan plan;
  if (paused_.empty()) return plan;
  const kv::KvCacheStats stats = cache.stats();
  const int64_t capacity = stats.device.capacity;
  const int64_t target =
      static_cast<int64_t>(options_.pressure_threshold * static_cast<double>(capacity));
  const int64_t tpb = cache.tokens_per_block();

  // Prefetches due: only while no request waits, within the threshold less what running
  // requests hold, and into free device blocks or blocks whose eviction the host tier's free
  // room absorbs (a prefetch never makes the host tier drop anything).
  if (waiting_requests == 0) {
    int64_t room = std::min(target - stats.device.held,
                            stats.device.free + std::min(stats.device.evictable, stats.host.free));
    for (const auto& [conversation, paused] : paused_) {
      if (room <= 0) break;
      if (paused.state != State::kOffloaded || paused.prefetch_at > now) continue;
      const int64_t host_blocks = cache.Match(paused.keys).host_blocks;
      if (host_blocks == 0) continue;
      const int64_t blocks = std::min(room, host_blocks);
      plan.prefetches.push_back(StallMove{conversation, TimeNs(0), blocks});
      room -= blocks;
    }
  }

  // Offloads: only under pressure, farthest predicted return first.
  const int64_t used = capacity - stats.device.free;
  if (used <= target || stats.host.free == 0) return plan;
  std::map<kv::PauseClass, kv::PauseEstimator::Weights> weights;
  for (const auto& [conversation, paused] : paused_) {
    if (paused.state != State::kResident) continue;
    auto w = weights.find(paused.pause_class);
    if (w == weights.end()) {
      w = weights.emplace(paused.pause_class, pauses_.WeightsOf(paused.pause_class)).first;
    }
    const TimeNs elapsed = std::max(TimeNs(0), now - paused.since);
    const std::optional<TimeNs> quantile =
        pauses_.ConditionalQuantile(w->second, options_.return_quantile, elapsed);
    const TimeNs predicted = paused.since + quantile.value_or(Unbounded(pauses_.grid()));
    const TimeNs round_trip =
        TimeNs(cost.HostTransferTime(static_cast<int64_t>(paused.keys.size()) * tpb).ns() * 2);
    if (predicted - now < std::max(options_.min_stall, round_trip)) continue;
    plan.offloads.push_back(StallMove{conversation, predicted, 0});
  }
  // Stable: equal predictions keep conversation order.
  std::stable_sort(plan.offloads.begin(), plan.offloads.end(),
                   [](const StallMove& a, const StallMove& b) {
                     return a.predicted_return > b.predicted_return;
                   });
  if (!plan.offloads.empty()) plan.blocks_to_free = used - target;
  return plan;
}

void StallOffloadPolicy::OnOffloaded(const StallMove& move, int64_t moved, TimeNs transfer) {
  auto it = paused_.find(move.conversation);
  AGENTKV_CHECK(it != paused_.end()) << "offload of a conversation that is not paused";
  Paused& paused = it->second;
  AGENTKV_CHECK(paused.state == State::kResident) << "offload of a session not resident";
  if (moved == 0) {
    paused.state = State::kSkipped;
    return;
  }
  paused.state = State::kOffloaded;
  paused.prefetch_at = move.predicted_return - transfer;
  ++counters_.offloads;
  counters_.offloaded_blocks += moved;
}

void StallOffloadPolicy::OnPrefetched(const StallMove& move, int64_t loaded) {
  auto it = paused_.find(move.conversation);
  AGENTKV_CHECK(it != paused_.end()) << "prefetch of a conversation that is not paused";
  Paused& paused = it->second;
  AGENTKV_CHECK(paused.state == State::kOffloaded) << "prefetch of a session not offloaded";
  if (loaded == 0) return;
  // Resident again: under pressure it may go out again if its pause keeps lasting (the
  // prediction conditioned on the longer pause is later).
  paused.state = State::kResident;
  paused.prefetched = true;
  ++counters_.prefetches;
  counters_.prefetched_blocks += loaded;
}

std::optional<TimeNs> StallOffloadPolicy::NextWake(TimeNs now) const {
  std::optional<TimeNs> wake;
  for (const auto& [conversation, paused] : paused_) {
    if (paused.state != State::kOffloaded || paused.prefetch_at <= now) continue;
    if (!wake.has_value() || paused.prefetch_at < *wake) wake = paused.prefetch_at;
  }
  return wake;
}

const std::vector<kv::BlockKey>& StallOffloadPolicy::KeysOf(ConversationId conversation) const {
  static const std::vector<kv::BlockKey>* const kNone = new std::vector<kv::BlockKey>;
  auto it = paused_.find(conversation);
  return it == paused_.end() ? *kNone : it->second.keys;
}

int64_t StallOffloadPolicy::offloaded_sessions() const {
  int64_t n = 0;
  for (const auto& [conversation, paused] : paused_) {
    if (paused.state == State::kOffloaded) ++n;
  }
  return n;
}

}  // namespace agentkv::engine
