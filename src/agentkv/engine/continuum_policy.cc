// ContinuumPolicy implementation.
//
// Invariants: every count is >= 0 and the prior adds exactly prior_weight pseudo-samples to a
// class; a class's real samples sum to less than options.decay_at
// after every Add (reaching it halves them all). The candidate TTLs are the finite bucket
// edges; a pause in bucket i counts as returned within edge(j) exactly when i <= j, and it
// holds the pin for its bucket's midpoint (the first bucket: half its edge) when it returns in
// time, for the whole TTL otherwise.
#include "agentkv/engine/continuum_policy.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "agentkv/base/check.h"

namespace agentkv::engine {
namespace {

constexpr TimeNs kFirstEdge = TimeNs::Millis(250);

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
  if (prior_weight < 0 || prior_weight > (int64_t{1} << 20)) {
    return OutOfRange("prior_weight", std::to_string(prior_weight), "[0, 1 << 20]");
  }
  if (prior_pause < TimeNs::Millis(1) || prior_pause > TimeNs::Seconds(86400)) {
    return OutOfRange("prior_pause", std::to_string(prior_pause.seconds()) + " s", "[1 ms, 1 day]");
  }
  if (decay_at < 2 || decay_at > (int64_t{1} << 30)) {
    return OutOfRange("decay_at", std::to_string(decay_at), "[2, 1 << 30]");
  }
  return Status::Ok();
}

StatusOr<ContinuumPolicy> ContinuumPolicy::Create(const ContinuumPolicyOptions& options) {
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  return ContinuumPolicy(options);
}

ContinuumPolicy::ContinuumPolicy(const ContinuumPolicyOptions& options) : options_(options) {}

TimeNs ContinuumPolicy::BucketEdge(int32_t bucket) {
  AGENTKV_CHECK(bucket >= 0 && bucket < kPauseBuckets - 1) << "bucket " << bucket;
  return TimeNs(kFirstEdge.ns() << bucket);
}

int32_t ContinuumPolicy::BucketOf(TimeNs pause) {
  for (int32_t b = 0; b < kPauseBuckets - 1; ++b) {
    if (pause <= BucketEdge(b)) return b;
  }
  return kPauseBuckets - 1;
}

void ContinuumPolicy::Add(int32_t pause_class, int32_t bucket) {
  AGENTKV_CHECK(pause_class >= 0 && pause_class < kMaxPauseClasses)
      << "pause class " << pause_class;
  Histogram& counts = counts_[static_cast<size_t>(pause_class)];
  ++counts[static_cast<size_t>(bucket)];
  if (samples(pause_class) >= options_.decay_at) {
    for (int64_t& c : counts) c /= 2;
  }
}

void ContinuumPolicy::ObservePause(int32_t pause_class, TimeNs pause) {
  AGENTKV_CHECK(pause >= TimeNs(0)) << "negative pause";
  Add(pause_class, BucketOf(pause));
}

void ContinuumPolicy::ObserveNoReturn(int32_t pause_class) { Add(pause_class, kPauseBuckets - 1); }

int64_t ContinuumPolicy::samples(int32_t pause_class) const {
  AGENTKV_CHECK(pause_class >= 0 && pause_class < kMaxPauseClasses)
      << "pause class " << pause_class;
  int64_t total = 0;
  for (int64_t c : counts_[static_cast<size_t>(pause_class)]) total += c;
  return total;
}

ContinuumPolicy::Weights ContinuumPolicy::WeightsOf(int32_t pause_class) const {
  AGENTKV_CHECK(pause_class >= 0 && pause_class < kMaxPauseClasses)
      << "pause class " << pause_class;
  Weights weights{};
  const Histogram& counts = counts_[static_cast<size_t>(pause_class)];
  // The prior: prior_weight pseudo-samples spread as an exponential distribution of mean
  // prior_pause, bucket b receiving its probability mass.
  const double mean_s = options_.prior_pause.seconds();
  const double prior = static_cast<double>(options_.prior_weight);
  double below = 0.0;  // P(pause <= the previous edge).
  for (int32_t b = 0; b < kPauseBuckets; ++b) {
    const double upto =
        b < kPauseBuckets - 1 ? 1.0 - std::exp(-BucketEdge(b).seconds() / mean_s) : 1.0;
    weights[static_cast<size_t>(b)] =
        static_cast<double>(counts[static_cast<size_t>(b)]) + prior * (upto - below);
    below = upto;
  }
  return weights;
}

double ContinuumPolicy::ReturnProbability(int32_t pause_class, TimeNs ttl) const {
  const Weights weights = WeightsOf(pause_class);
  double total = 0.0;
  double within = 0.0;
  for (int32_t b = 0; b < kPauseBuckets; ++b) {
    const double w = weights[static_cast<size_t>(b)];
    total += w;
    if (b < kPauseBuckets - 1 && BucketEdge(b) <= ttl) within += w;
  }
  return total <= 0.0 ? 0.0 : within / total;
}

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
  const Weights weights = WeightsOf(request.pause_class);
  double total = 0.0;
  for (double w : weights) total += w;
  if (total <= 0.0) return decision;
  const double p = std::min(request.kv_pressure, options_.max_pressure);
  const double price = options_.memory_price * p / (1.0 - p);
  const double saved_s = prefill_saved.seconds() + request.queueing_saved.seconds();
  const double n = total;

  std::optional<double> best_net;
  for (int32_t c = 0; c < kPauseBuckets - 1; ++c) {
    const TimeNs ttl = BucketEdge(c);
    double returned = 0.0;
    double held_s = 0.0;
    for (int32_t b = 0; b < kPauseBuckets; ++b) {
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
