// Invariants of one point: requests run one at a time, so after each Release no block is held
// and every cached device block is evictable; no request reserves more blocks than the device
// has (refused up front, or truncated to the capacity; output blocks beyond it are not
// committed), so Reserve always finds room; the step
// counter only moves forward. Any non-OK status from the cache therefore means a bug, reported
// as Internal, and CheckInvariants() runs once at the end of each point. Every point replays
// the same stream, so points differ only in the cache options and the closing of sessions.
#include "agentkv/sim/replay/instant_replay.h"

#include <algorithm>
#include <span>
#include <sstream>
#include <string>
#include <utility>

#include "agentkv/engine/kv_pool.h"
#include "agentkv/kv/kv_cache_manager.h"
#include "agentkv/sim/replay/next_use_index.h"

namespace agentkv::sim {
namespace {

// Keys are chained by the sources (namespaced by extra key where needed), so one seed serves
// every point.
constexpr uint64_t kHashSeed = 0;
constexpr int32_t kMaxBlockTokens = 1 << 20;
constexpr int64_t kMaxCapacityBlocks = int64_t{1} << 30;
constexpr int64_t kMaxSteps = int64_t{1} << 30;
constexpr int32_t kMaxNumTurns = 1 << 20;
constexpr int64_t kMaxMinIdleSteps = int64_t{1} << 40;
constexpr TimeNs kMinStepInterval = TimeNs(1000);
constexpr TimeNs kMaxStepInterval = TimeNs::Seconds(1e6);
constexpr int64_t kProgressInterval = 4096;

std::string Format(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

std::string Seconds(TimeNs t) { return Format(t.seconds()) + " s"; }

std::string Describe(const InstantWorkload& workload, size_t i) {
  return workload.describe ? workload.describe(i) : "request " + std::to_string(i);
}

}  // namespace

int64_t UniqueBlocks(const InstantWorkload& workload) {
  const std::vector<InstantRequest>& requests = workload.requests;
  std::vector<kv::BlockKey> all;
  size_t total = 0;
  for (const InstantRequest& r : requests) total += r.keys.size() + r.output_keys.size();
  all.reserve(total);
  for (const InstantRequest& r : requests) {
    all.insert(all.end(), r.keys.begin(), r.keys.end());
    all.insert(all.end(), r.output_keys.begin(), r.output_keys.end());
  }
  std::sort(all.begin(), all.end());
  return std::unique(all.begin(), all.end()) - all.begin();
}

namespace {

Status CheckInstantArm(const ArmSpec& arm) {
  const char* fleet_only = nullptr;
  if (arm.program_admission) fleet_only = "admission";
  if (arm.admission_v2) fleet_only = "admission-v2";
  if (arm.host_tier) fleet_only = "host-tier";
  if (arm.fixed_ttl) fleet_only = "fixed-ttl";
  if (arm.continuum) fleet_only = "continuum";
  if (fleet_only == nullptr) return Status::Ok();
  return InvalidArgumentError("arm \"" + arm.name + "\": " + fleet_only +
                              " needs the simulated fleet (agentkv replay); the instant single "
                              "cache runs lifecycle, subagent-demotion, per-conversation, "
                              "infinite-cache and oracle");
}

// (fraction, device blocks) of every capacity.
std::vector<std::pair<double, int64_t>> Capacities(const InstantReplayOptions& options,
                                                   int64_t unique_blocks) {
  std::vector<std::pair<double, int64_t>> capacities;
  if (options.capacity_blocks.has_value()) {
    const double fraction = unique_blocks == 0 ? 0.0
                                               : static_cast<double>(*options.capacity_blocks) /
                                                     static_cast<double>(unique_blocks);
    capacities.emplace_back(fraction, *options.capacity_blocks);
  } else {
    for (const double f : options.capacity_fractions) {
      capacities.emplace_back(f, engine::BlocksForFraction(f, unique_blocks));
    }
  }
  return capacities;
}

class PointReplay {
 public:
  PointReplay(const InstantWorkload& workload, const InstantReplayOptions& options,
              const ArmSpec& arm, size_t point_index, int64_t capacity)
      : workload_(workload),
        options_(options),
        arm_(arm),
        point_index_(point_index),
        capacity_(capacity) {}

  StatusOr<InstantPoint> Run() {
    kv::KvCacheOptions base;
    base.tokens_per_block = workload_.tokens_per_block;
    base.device_blocks = capacity_;
    base.host_blocks = options_.host_blocks;
    base.hash_seed = kHashSeed;
    base.session_close_mode = options_.session_close_mode;
    base.max_num_turns = options_.max_num_turns;
    base.finished_subagent_min_idle_iterations = options_.min_idle_steps;
    AGENTKV_ASSIGN_OR_RETURN(kv::KvCacheManager cache,
                             kv::KvCacheManager::Create(
                                 ArmCachePolicy(arm_, base, options_.finished_subagent_priority)));
    // The oracle's future: declared before use, outlives every call that reads it.
    std::optional<NextUseIndex> future;
    if (arm_.oracle) {
      future.emplace(workload_, capacity_);
      if (Status s = cache.SetNextUseRanking(&*future); !s.ok()) {
        return InternalError(Where() + ": SetNextUseRanking failed: " + s.ToString());
      }
    }
    InstantPoint point;
    point.arm = arm_.name;
    point.spec = arm_;
    point.capacity_blocks = capacity_;
    const std::vector<InstantRequest>& requests = workload_.requests;
    for (size_t i = 0; i < requests.size(); ++i) {
      const InstantRequest& r = requests[i];
      if (options_.step_interval.has_value()) {
        const int64_t target_step = r.time.ns() / options_.step_interval->ns();
        if (cache.current_step().value() < target_step) {
          cache.AdvanceSteps(target_step - cache.current_step().value());
        }
      }
      // The request runs at its time: its arrival and finish in the gap-aware order.
      cache.AdvanceClock(r.time);
      const auto n = static_cast<int64_t>(r.keys.size());
      const int64_t c = std::min(n, capacity_);
      const std::span<const kv::BlockKey> keys = std::span(r.keys).first(static_cast<size_t>(c));
      const RequestId id(static_cast<int64_t>(i));
      if (future.has_value()) {
        // A cached copy of an output key this request commits again is free to evict (unless
        // evicting it would take a needed child along); deepest first, as a chain re-ranks.
        const std::span<const kv::BlockKey> recommitted = future->Enter(i);
        for (size_t q = recommitted.size(); q-- > 0;) cache.RefreshNextUse(recommitted[q]);
      }
      StatusOr<kv::PrefixMatch> match = cache.AddRequest(id, keys, r.options);
      if (!match.ok()) return Bug(i, "AddRequest", match.status());
      point.hits += match->device_blocks + match->host_blocks;
      point.total_blocks += n;
      // The output keys chain on from the whole prompt, so a truncated prompt commits none;
      // they are committed as far as the device holds them.
      const int64_t o =
          c == n ? std::min(static_cast<int64_t>(r.output_keys.size()), capacity_ - c) : 0;
      if (Status s = cache.Reserve(id, (c + o) * workload_.tokens_per_block); !s.ok()) {
        return Bug(i, "Reserve", s);
      }
      if (Status s = cache.Commit(id, keys.subspan(static_cast<size_t>(match->total_blocks())));
          !s.ok()) {
        return Bug(i, "Commit", s);
      }
      // What the request computed of its answer, as the engine commits it when it finishes.
      if (Status s = cache.Commit(id, std::span(r.output_keys).first(static_cast<size_t>(o)));
          !s.ok()) {
        return Bug(i, "Commit", s);
      }
      if (future.has_value()) future->Leave(i);
      if (Status s = cache.Release(id); !s.ok()) return Bug(i, "Release", s);
      // The freed tokens are counted in stats().tokens_freed_by_close.
      if (arm_.session_lifecycle && r.ends_session && r.options.session.has_value()) {
        static_cast<void>(cache.CloseSession(*r.options.session));
      }
      const int64_t done = static_cast<int64_t>(i) + 1;
      if (options_.progress && done % kProgressInterval == 0 && i + 1 < requests.size()) {
        options_.progress(point_index_, done);
      }
    }
    if (Status s = cache.CheckInvariants(); !s.ok()) {
      return InternalError(Where() + ": the cache broke an invariant: " + s.ToString());
    }
    point.stats = cache.stats();
    point.hit_ratio = point.total_blocks == 0 ? 0.0
                                              : static_cast<double>(point.hits) /
                                                    static_cast<double>(point.total_blocks);
    if (options_.progress) options_.progress(point_index_, static_cast<int64_t>(requests.size()));
    return point;
  }

 private:
  std::string Where() const {
    // ForEachArm prefixes the arm's name.
    return "instant replay at " + std::to_string(capacity_) + " blocks";
  }

  Status Bug(size_t i, const char* call, const Status& status) const {
    return InternalError(Where() + ", " + Describe(workload_, i) + ": " + call +
                         " failed: " + status.ToString());
  }

  const InstantWorkload& workload_;
  const InstantReplayOptions& options_;
  const ArmSpec& arm_;
  size_t point_index_;
  int64_t capacity_;
};

// InvalidArgument when a request has more blocks than the smallest of `capacities` (the
// replay would have to truncate it).
Status CheckLongestRequestFits(const InstantWorkload& workload,
                               const std::vector<std::pair<double, int64_t>>& capacities) {
  int64_t smallest = kMaxCapacityBlocks;
  for (const auto& capacity : capacities) smallest = std::min(smallest, capacity.second);
  for (size_t i = 0; i < workload.requests.size(); ++i) {
    const auto blocks = static_cast<int64_t>(workload.requests[i].keys.size());
    if (blocks > smallest) {
      return InvalidArgumentError("the device capacity of " + std::to_string(smallest) +
                                  " blocks is below the longest request (" + Describe(workload, i) +
                                  ": " + std::to_string(blocks) + " blocks); raise the capacity");
    }
  }
  return Status::Ok();
}

// The change columns of `points` (arm-major, `per_arm` capacities each, of `arms`): against
// the first plain baseline arm at the same capacity; left unset without one or when its
// uncached tokens are 0.
void FillChangeVsBaseline(const std::vector<ArmSpec>& arms, size_t per_arm,
                          std::vector<InstantPoint>& points) {
  for (size_t c = 0; c < per_arm; ++c) {
    std::optional<int64_t> reference;
    for (size_t a = 0; a < arms.size() && !reference.has_value(); ++a) {
      if (arms[a].IsBaseline()) reference = points[a * per_arm + c].stats.uncached_tokens;
    }
    if (!reference.has_value() || *reference <= 0) continue;
    for (size_t a = 0; a < arms.size(); ++a) {
      InstantPoint& point = points[a * per_arm + c];
      point.uncached_change_vs_baseline_percent =
          100.0 * static_cast<double>(point.stats.uncached_tokens - *reference) /
          static_cast<double>(*reference);
    }
  }
}

}  // namespace

Status InstantReplayOptions::Validate() const {
  AGENTKV_RETURN_IF_ERROR(ValidateArms(arms));
  for (const ArmSpec& arm : arms) {
    AGENTKV_RETURN_IF_ERROR(CheckInstantArm(arm));
    if (arm.oracle && host_blocks > 0) {
      return InvalidArgumentError("arm \"" + arm.name +
                                  "\": oracle evicts from the device tier only; host_blocks "
                                  "must be 0, got " +
                                  std::to_string(host_blocks));
    }
  }
  if (capacity_blocks.has_value()) {
    if (*capacity_blocks < 1 || *capacity_blocks > kMaxCapacityBlocks) {
      return InvalidArgumentError("capacity_blocks must be in [1, " +
                                  std::to_string(kMaxCapacityBlocks) + "], got " +
                                  std::to_string(*capacity_blocks));
    }
  } else {
    if (capacity_fractions.empty()) {
      return InvalidArgumentError("capacity_fractions must not be empty");
    }
    for (size_t i = 0; i < capacity_fractions.size(); ++i) {
      // Written so that NaN fails too.
      if (!(capacity_fractions[i] > 0.0 && capacity_fractions[i] <= 1.0)) {
        return InvalidArgumentError("capacity_fractions[" + std::to_string(i) +
                                    "] must be in (0, 1], got " + Format(capacity_fractions[i]));
      }
    }
  }
  if (host_blocks < 0 || host_blocks > kMaxCapacityBlocks) {
    return InvalidArgumentError("host_blocks must be in [0, " + std::to_string(kMaxCapacityBlocks) +
                                "], got " + std::to_string(host_blocks));
  }
  if (step_interval.has_value() &&
      (*step_interval < kMinStepInterval || *step_interval > kMaxStepInterval)) {
    return InvalidArgumentError("step_interval must be in [1e-06, 1e6] s, got " +
                                Seconds(*step_interval));
  }
  if (max_num_turns < 1 || max_num_turns > kMaxNumTurns) {
    return InvalidArgumentError("max_num_turns must be in [1, " + std::to_string(kMaxNumTurns) +
                                "], got " + std::to_string(max_num_turns));
  }
  if (min_idle_steps < 0 || min_idle_steps > kMaxMinIdleSteps) {
    return InvalidArgumentError("min_idle_steps must be in [0, 2^40], got " +
                                std::to_string(min_idle_steps));
  }
  if (finished_subagent_priority < kv::kMinPriority ||
      finished_subagent_priority > kv::kMaxPriority) {
    return InvalidArgumentError("finished_subagent_priority must be in [0, 100], got " +
                                std::to_string(finished_subagent_priority));
  }
  return Status::Ok();
}

StatusOr<InstantReplayResult> RunInstantReplay(const InstantWorkload& workload,
                                               const InstantReplayOptions& options) {
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  if (workload.tokens_per_block < 1 || workload.tokens_per_block > kMaxBlockTokens) {
    return InvalidArgumentError("tokens_per_block must be in [1, " +
                                std::to_string(kMaxBlockTokens) + "], got " +
                                std::to_string(workload.tokens_per_block));
  }
  InstantReplayResult result;
  result.requests = static_cast<int64_t>(workload.requests.size());
  result.unique_blocks = UniqueBlocks(workload);
  result.tokens_per_block = workload.tokens_per_block;
  result.host_blocks = options.host_blocks;
  if (!workload.requests.empty()) {
    result.span = workload.requests.back().time;
    if (options.step_interval.has_value()) {
      result.steps = result.span.ns() / options.step_interval->ns();
    }
  }
  if (result.steps > kMaxSteps) {
    return InvalidArgumentError("the replay spans " + Seconds(result.span) + ", " +
                                std::to_string(result.steps) + " steps of " +
                                Seconds(*options.step_interval) + "; at most " +
                                std::to_string(kMaxSteps) + " steps are supported");
  }
  const std::vector<std::pair<double, int64_t>> capacities =
      Capacities(options, result.unique_blocks);
  if (!options.truncate_long_requests) {
    AGENTKV_RETURN_IF_ERROR(CheckLongestRequestFits(workload, capacities));
  }

  // One arm's points, one per capacity; point indices run arm-major.
  const auto run_arm = [&](size_t arm_index,
                           const ArmSpec& arm) -> StatusOr<std::vector<InstantPoint>> {
    std::vector<InstantPoint> points;
    for (size_t c = 0; c < capacities.size(); ++c) {
      int64_t capacity = capacities[c].second;
      double fraction = capacities[c].first;
      if (arm.infinite_cache) {
        capacity = std::max<int64_t>(1, result.unique_blocks);
        fraction = 1.0;
      }
      const size_t index = arm_index * capacities.size() + c;
      AGENTKV_ASSIGN_OR_RETURN(InstantPoint point,
                               PointReplay(workload, options, arm, index, capacity).Run());
      point.fraction = fraction;
      if (options.on_point_done) options.on_point_done(index, point);
      points.push_back(std::move(point));
    }
    return points;
  };
  AGENTKV_ASSIGN_OR_RETURN(std::vector<std::vector<InstantPoint>> arm_points,
                           ForEachArm<std::vector<InstantPoint>>(options.arms, run_arm));
  std::vector<ArmSpec> arms;
  for (std::vector<InstantPoint>& points : arm_points) {
    arms.push_back(points.front().spec);
    for (InstantPoint& point : points) result.points.push_back(std::move(point));
  }
  FillChangeVsBaseline(arms, capacities.size(), result.points);
  return result;
}

}  // namespace agentkv::sim
