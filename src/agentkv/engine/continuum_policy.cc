// ContinuumPolicy implementation.
//
// Invariants: the pause lengths are the kv::PauseEstimator's (its own invariants). The candidate
// TTLs are the finite bucket edges; a pause in bucket i counts as returned within edge(j) exactly
// when i <= j, and it holds the pin for its bucket's midpoint (the first bucket: half its edge)
// when it returns in time, for the whole TTL otherwise.
#include "agentkv/engine/continuum_policy.h"

#include <algorithm>
#include <string>
#include <utility>

#include "agentkv/base/check.h"

namespace agentkv::engine {
namespace {

Status OutOfRange(const char* field, const std::string& value, const char* range) {
  return InvalidArgumentError(std::string("ContinuumPolicyOptions.") + field + " must be in " +
                              range + ", got " + value);
}

}  // namespace

Status ContinuumPolicyOptions::Validate() const {
  if (!(memory_price >= 0.0 && memory_price <= 1.0)) {
    return OutOfRange("memory_price", std::to_string(memory_price), "[0, 1]");
  }
  if (!(max_pressure > 0.0 && max_pressure < 1.0)) {
    return OutOfRange("max_pressure", std::to_string(max_pressure), "(0, 1)");
  }
  if (decay_at < 2 || decay_at > (int64_t{1} << 30)) {
    return OutOfRange("decay_at", std::to_string(decay_at), "[2, 1 << 30]");
  }
  return distribution().Validate("ContinuumPolicyOptions.");
}

kv::PauseEstimator::Options ContinuumPolicyOptions::distribution() const {
  kv::PauseEstimator::Options options = kv::PauseEstimator::DistributionOptions();
  options.prior_weight = prior_weight;
  options.prior_pause = prior_pause;
  options.max_samples = decay_at;
  return options;
}

StatusOr<ContinuumPolicy> ContinuumPolicy::Create(const ContinuumPolicyOptions& options) {
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  AGENTKV_ASSIGN_OR_RETURN(kv::PauseEstimator pauses,
                           kv::PauseEstimator::Create(options.distribution()));
  return ContinuumPolicy(options, std::move(pauses));
}

ContinuumPolicy::ContinuumPolicy(const ContinuumPolicyOptions& options, kv::PauseEstimator pauses)
    : options_(options), pauses_(std::move(pauses)) {}

PinDecision ContinuumPolicy::Decide(const PinRequest& request, const CostModel& cost_model) const {
  TimeNs prefill;
  if (request.tokens > 0) {
    StepShape shape;
    shape.prefill_tokens = request.tokens;
    shape.num_requests = 1;
    prefill = cost_model.Estimate(shape);
  }
  return DecideWithPrefill(request, prefill);
}

PinDecision ContinuumPolicy::DecideWithPrefill(const PinRequest& request,
                                               TimeNs prefill_saved) const {
  AGENTKV_CHECK(request.tokens >= 0 && request.queueing_saved >= TimeNs(0) &&
                prefill_saved >= TimeNs(0))
      << "negative pin request";
  AGENTKV_CHECK(request.kv_pressure >= 0.0 && request.kv_pressure <= 1.0)
      << "kv pressure " << request.kv_pressure;
  PinDecision decision;
  if (request.tokens == 0) return decision;
  const kv::PauseEstimator::Weights weights = pauses_.WeightsOf(request.pause_class);
  double total = 0.0;
  for (double w : weights) total += w;
  if (total <= 0.0) return decision;
  const double p = std::min(request.kv_pressure, options_.max_pressure);
  const double price = options_.memory_price * p / (1.0 - p);
  const double saved_s = prefill_saved.seconds() + request.queueing_saved.seconds();
  const double n = total;

  std::optional<double> best_net;
  const int32_t finite = pauses_.grid().finite_buckets();
  for (int32_t c = 0; c < finite; ++c) {
    const TimeNs ttl = BucketEdge(c);
    double returned = 0.0;
    double held_s = 0.0;
    for (int32_t b = 0; b <= finite; ++b) {
      const double w = weights[static_cast<size_t>(b)];
      if (b <= c) {
        returned += w;
        const double lo = b == 0 ? 0.0 : BucketEdge(b - 1).seconds();
        held_s += w * (lo + BucketEdge(b).seconds()) / 2.0;
      } else {
        held_s += w * ttl.seconds();
      }
    }
    const double probability = returned / n;
    const double benefit = probability * saved_s;
    const double cost = static_cast<double>(request.tokens) * (held_s / n) * price;
    const double net = benefit - cost;
    // Ties keep the shorter TTL: the same value for less memory at risk.
    if (!best_net.has_value() || net > *best_net) {
      best_net = net;
      decision.benefit_s = benefit;
      decision.cost_s = cost;
      decision.return_probability = probability;
      decision.ttl = ttl;
    }
    if (benefit > 0.0 && net <= 0.0) decision.declined_by_cost = true;
  }
  if (!best_net.has_value() || *best_net <= 0.0) {
    decision.ttl.reset();
    return decision;
  }
  decision.declined_by_cost = false;
  return decision;
}

}  // namespace agentkv::engine
