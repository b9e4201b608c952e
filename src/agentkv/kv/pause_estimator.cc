// PauseEstimator (pause_estimator.h).
//
// Invariants: each distribution has grid.finite_buckets() + 1 counts, all >= 0, and `total` is
// their sum; a distribution's total stays below max_samples (it is halved on reaching it); at
// most max_tools tools per class; only classes of a returning kind hold observations. A pause
// in bucket i counts as ended by edge(j) exactly when i <= j; the prior adds exactly
// prior_weight pseudo-samples to a class's weights.
#include "agentkv/kv/pause_estimator.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "agentkv/base/check.h"

namespace agentkv::kv {
namespace {

Status OutOfRange(std::string_view owner, const char* field, const std::string& value,
                  const char* range) {
  return InvalidArgumentError(std::string(owner) + field + " must be in " + range + ", got " +
                              value);
}

}  // namespace

PauseGrid PauseGrid::QuarterOctaves() {
  std::vector<int64_t> edges = {0, 1, 2, 3};
  // Octave k >= 2 covers [2^k, 2^(k+1)) in four parts of 2^(k-2): [(4 + q) << (k - 2),
  // (5 + q) << (k - 2)), whose inclusive upper bound is ((5 + q) << (k - 2)) - 1. The last
  // octave's last bound is INT64_MAX: every duration has a finite bucket.
  for (int octave = 2; octave < 63; ++octave) {
    for (int quarter = 0; quarter < 4; ++quarter) {
      const auto upper = static_cast<uint64_t>(5 + quarter) << (octave - 2);
      edges.push_back(static_cast<int64_t>(upper - 1));
    }
  }
  return PauseGrid(std::move(edges));
}

PauseGrid PauseGrid::Octaves(TimeNs first_edge, int32_t finite_buckets) {
  AGENTKV_CHECK(first_edge > TimeNs(0) && finite_buckets >= 1 && finite_buckets <= 40)
      << "octave grid from " << first_edge.ns() << " ns, " << finite_buckets << " buckets";
  AGENTKV_CHECK(std::bit_width(static_cast<uint64_t>(first_edge.ns())) + finite_buckets <= 63)
      << "octave grid overflows";
  std::vector<int64_t> edges;
  for (int32_t b = 0; b < finite_buckets; ++b) edges.push_back(first_edge.ns() << b);
  return PauseGrid(std::move(edges));
}

TimeNs PauseGrid::edge(int32_t bucket) const {
  AGENTKV_CHECK(bucket >= 0 && bucket < finite_buckets()) << "bucket " << bucket;
  return TimeNs(edges_[static_cast<size_t>(bucket)]);
}

int32_t PauseGrid::BucketOf(TimeNs pause) const {
  return static_cast<int32_t>(std::lower_bound(edges_.begin(), edges_.end(), pause.ns()) -
                              edges_.begin());
}

TimeNs PauseGrid::Middle(int32_t bucket) const {
  const int64_t high = edge(bucket).ns();
  const int64_t low = bucket == 0 ? 0 : edges_[static_cast<size_t>(bucket) - 1] + 1;
  return TimeNs(low + (high - low + 1) / 2);
}

Status PauseEstimator::Options::Validate(std::string_view owner) const {
  if (!(quantile > 0 && quantile < 1)) {
    return OutOfRange(owner, "quantile", std::to_string(quantile), "(0, 1)");
  }
  if (min_samples < 1 || min_samples > (1 << 20)) {
    return OutOfRange(owner, "min_samples", std::to_string(min_samples), "[1, 1 << 20]");
  }
  if (max_samples < std::max<int64_t>(2, 2 * min_samples) || max_samples > (int64_t{1} << 30)) {
    return OutOfRange(owner, "max_samples", std::to_string(max_samples),
                      "[max(2, 2 * min_samples), 1 << 30]");
  }
  if (max_tools < 0 || max_tools > (1 << 16)) {
    return OutOfRange(owner, "max_tools", std::to_string(max_tools), "[0, 1 << 16]");
  }
  if (prior_weight < 0 || prior_weight > (int64_t{1} << 20)) {
    return OutOfRange(owner, "prior_weight", std::to_string(prior_weight), "[0, 1 << 20]");
  }
  if (prior_pause < TimeNs::Millis(1) || prior_pause > TimeNs::Seconds(86400)) {
    return OutOfRange(owner, "prior_pause", std::to_string(prior_pause.seconds()) + " s",
                      "[1 ms, 1 day]");
  }
  return Status::Ok();
}

PauseEstimator::Options PauseEstimator::DistributionOptions() {
  Options options;
  options.grid = PauseGrid::Octaves();
  options.min_samples = 1;
  options.prior_weight = 4;
  options.prior_pause = TimeNs::Seconds(2);
  return options;
}

PauseEstimator::PauseEstimator(const Options& options) : options_(options) {
  const Status valid = options.Validate();
  AGENTKV_CHECK(valid.ok()) << valid.message();
  const auto buckets = static_cast<size_t>(options_.grid.finite_buckets()) + 1;
  for (Distribution& d : classes_) d.counts.assign(buckets, 0);
}

StatusOr<PauseEstimator> PauseEstimator::Create(const Options& options) {
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  return PauseEstimator(options);
}

size_t PauseEstimator::IndexOf(PauseClass pause_class) {
  return static_cast<size_t>(pause_class.kind) * 2 + (pause_class.subagent ? 1 : 0);
}

void PauseEstimator::Add(Distribution& d, int32_t bucket) const {
  ++d.counts[static_cast<size_t>(bucket)];
  if (++d.total < options_.max_samples) return;
  d.total = 0;
  for (int64_t& c : d.counts) {
    c /= 2;
    d.total += c;
  }
}

void PauseEstimator::Observe(PauseClass pause_class, std::string_view tool, TimeNs gap) {
  if (!IsReturningPause(pause_class.kind) || gap < TimeNs(0)) return;
  const size_t k = IndexOf(pause_class);
  const int32_t bucket = grid().BucketOf(gap);
  Add(classes_[k], bucket);
  if (tool.empty()) return;
  auto it = tools_.find({k, std::string(tool)});
  if (it == tools_.end()) {
    if (tools_per_class_[k] >= options_.max_tools) return;
    ++tools_per_class_[k];
    Distribution fresh;
    fresh.counts.assign(classes_[k].counts.size(), 0);
    it = tools_.emplace(std::pair{k, std::string(tool)}, std::move(fresh)).first;
  }
  Add(it->second, bucket);
}

void PauseEstimator::ObserveNoReturn(PauseClass pause_class) {
  if (!IsReturningPause(pause_class.kind)) return;
  Add(classes_[IndexOf(pause_class)], grid().finite_buckets());
}

std::optional<TimeNs> PauseEstimator::Quantile(const Distribution& d) const {
  if (d.total < options_.min_samples) return std::nullopt;
  // The smallest bucket whose cumulative count exceeds quantile * total (integer-exact rank).
  const auto rank = static_cast<int64_t>(options_.quantile * static_cast<double>(d.total));
  int64_t seen = 0;
  for (int32_t b = 0; b < grid().finite_buckets(); ++b) {
    seen += d.counts[static_cast<size_t>(b)];
    if (seen > rank) return grid().Middle(b);
  }
  return std::nullopt;  // Past the last edge.
}

std::optional<TimeNs> PauseEstimator::Estimate(PauseClass pause_class,
                                               std::string_view tool) const {
  if (!IsReturningPause(pause_class.kind)) return std::nullopt;
  const size_t k = IndexOf(pause_class);
  if (!tool.empty()) {
    auto it = tools_.find({k, std::string(tool)});
    if (it != tools_.end()) {
      if (std::optional<TimeNs> t = Quantile(it->second); t.has_value()) return t;
    }
  }
  return Quantile(classes_[k]);
}

int64_t PauseEstimator::samples(PauseClass pause_class) const {
  return classes_[IndexOf(pause_class)].total;
}

PauseEstimator::Weights PauseEstimator::WeightsOf(PauseClass pause_class) const {
  const std::vector<int64_t>& counts = classes_[IndexOf(pause_class)].counts;
  const int32_t finite = grid().finite_buckets();
  Weights weights(counts.size(), 0.0);
  // The prior: prior_weight pseudo-samples spread as an exponential distribution of mean
  // prior_pause, bucket b receiving its probability mass.
  const double mean_s = options_.prior_pause.seconds();
  const double prior = static_cast<double>(options_.prior_weight);
  double below = 0.0;  // P(pause <= the previous edge).
  for (int32_t b = 0; b <= finite; ++b) {
    const double upto = b < finite ? 1.0 - std::exp(-grid().edge(b).seconds() / mean_s) : 1.0;
    weights[static_cast<size_t>(b)] =
        static_cast<double>(counts[static_cast<size_t>(b)]) + prior * (upto - below);
    below = upto;
  }
  return weights;
}

double PauseEstimator::ReturnProbability(PauseClass pause_class, TimeNs ttl) const {
  const Weights weights = WeightsOf(pause_class);
  const int32_t finite = grid().finite_buckets();
  double total = 0.0;
  double within = 0.0;
  for (int32_t b = 0; b <= finite; ++b) {
    const double w = weights[static_cast<size_t>(b)];
    total += w;
    if (b < finite && grid().edge(b) <= ttl) within += w;
  }
  return total <= 0.0 ? 0.0 : within / total;
}

std::optional<TimeNs> PauseEstimator::ConditionalQuantile(const Weights& weights, double q,
                                                          TimeNs elapsed) const {
  AGENTKV_CHECK(q > 0.0 && q <= 1.0) << "quantile " << q;
  AGENTKV_CHECK(elapsed >= TimeNs(0)) << "negative elapsed pause";
  const int32_t finite = grid().finite_buckets();
  AGENTKV_CHECK(weights.size() == static_cast<size_t>(finite) + 1) << "weights of another grid";
  // The mass still possible: buckets whose edge is past `elapsed` (the bucket holding
  // `elapsed` counts whole: a histogram cannot split it), and the bucket past the last edge.
  double remaining = 0.0;
  for (int32_t b = 0; b <= finite; ++b) {
    if (b == finite || grid().edge(b) > elapsed) remaining += weights[static_cast<size_t>(b)];
  }
  if (remaining <= 0.0) return std::nullopt;
  double within = 0.0;
  for (int32_t b = 0; b < finite; ++b) {
    if (grid().edge(b) <= elapsed) continue;
    within += weights[static_cast<size_t>(b)];
    // A relative tolerance, so that a quantile at an exact bucket boundary is not lost to
    // rounding.
    if (within >= q * remaining * (1.0 - 1e-12)) return grid().edge(b);
  }
  return std::nullopt;
}

}  // namespace agentkv::kv
