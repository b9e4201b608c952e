// PauseDistribution implementation.
//
// Invariants: every count is >= 0 and the prior adds exactly prior_weight pseudo-samples to a
// class; a class's real samples sum to less than options.decay_at after every Add (reaching it
// halves them all). A pause in bucket i counts as ended by edge(j) exactly when i <= j.
#include "agentkv/engine/pause_distribution.h"

#include <cmath>
#include <string>

#include "agentkv/base/check.h"

namespace agentkv::engine {
namespace {

constexpr TimeNs kFirstEdge = TimeNs::Millis(250);

Status OutOfRange(const char* owner, const char* field, const std::string& value,
                  const char* range) {
  return InvalidArgumentError(std::string(owner) + field + " must be in " + range + ", got " +
                              value);
}

void CheckClass(int32_t pause_class) {
  AGENTKV_CHECK(pause_class >= 0 && pause_class < kMaxPauseClasses)
      << "pause class " << pause_class;
}

}  // namespace

Status PauseDistributionOptions::Validate(const char* owner) const {
  if (prior_weight < 0 || prior_weight > (int64_t{1} << 20)) {
    return OutOfRange(owner, "prior_weight", std::to_string(prior_weight), "[0, 1 << 20]");
  }
  if (prior_pause < TimeNs::Millis(1) || prior_pause > TimeNs::Seconds(86400)) {
    return OutOfRange(owner, "prior_pause", std::to_string(prior_pause.seconds()) + " s",
                      "[1 ms, 1 day]");
  }
  if (decay_at < 2 || decay_at > (int64_t{1} << 30)) {
    return OutOfRange(owner, "decay_at", std::to_string(decay_at), "[2, 1 << 30]");
  }
  return Status::Ok();
}

StatusOr<PauseDistribution> PauseDistribution::Create(const PauseDistributionOptions& options) {
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  return PauseDistribution(options);
}

TimeNs PauseDistribution::BucketEdge(int32_t bucket) {
  AGENTKV_CHECK(bucket >= 0 && bucket < kPauseBuckets - 1) << "bucket " << bucket;
  return TimeNs(kFirstEdge.ns() << bucket);
}

int32_t PauseDistribution::BucketOf(TimeNs pause) {
  for (int32_t b = 0; b < kPauseBuckets - 1; ++b) {
    if (pause <= BucketEdge(b)) return b;
  }
  return kPauseBuckets - 1;
}

void PauseDistribution::Add(int32_t pause_class, int32_t bucket) {
  CheckClass(pause_class);
  Histogram& counts = counts_[static_cast<size_t>(pause_class)];
  ++counts[static_cast<size_t>(bucket)];
  if (samples(pause_class) >= options_.decay_at) {
    for (int64_t& c : counts) c /= 2;
  }
}

void PauseDistribution::ObservePause(int32_t pause_class, TimeNs pause) {
  AGENTKV_CHECK(pause >= TimeNs(0)) << "negative pause";
  Add(pause_class, BucketOf(pause));
}

void PauseDistribution::ObserveNoReturn(int32_t pause_class) {
  Add(pause_class, kPauseBuckets - 1);
}

int64_t PauseDistribution::samples(int32_t pause_class) const {
  CheckClass(pause_class);
  int64_t total = 0;
  for (int64_t c : counts_[static_cast<size_t>(pause_class)]) total += c;
  return total;
}

PauseDistribution::Weights PauseDistribution::WeightsOf(int32_t pause_class) const {
  CheckClass(pause_class);
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

double PauseDistribution::ReturnProbability(int32_t pause_class, TimeNs ttl) const {
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

std::optional<TimeNs> PauseDistribution::ConditionalQuantile(const Weights& weights, double q,
                                                             TimeNs elapsed) {
  AGENTKV_CHECK(q > 0.0 && q <= 1.0) << "quantile " << q;
  AGENTKV_CHECK(elapsed >= TimeNs(0)) << "negative elapsed pause";
  // The mass still possible: buckets whose upper edge is past `elapsed` (the bucket holding
  // `elapsed` counts whole: a histogram cannot split it).
  double remaining = 0.0;
  for (int32_t b = 0; b < kPauseBuckets; ++b) {
    if (b == kPauseBuckets - 1 || BucketEdge(b) > elapsed) {
      remaining += weights[static_cast<size_t>(b)];
    }
  }
  if (remaining <= 0.0) return std::nullopt;
  double within = 0.0;
  for (int32_t b = 0; b < kPauseBuckets - 1; ++b) {
    if (BucketEdge(b) <= elapsed) continue;
    within += weights[static_cast<size_t>(b)];
    // A relative tolerance, so that a quantile at an exact bucket boundary is not lost to
    // rounding.
    if (within >= q * remaining * (1.0 - 1e-12)) return BucketEdge(b);
  }
  return std::nullopt;
}

}  // namespace agentkv::engine
