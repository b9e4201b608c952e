// PauseEstimator replaces two estimators: kv's PauseGapEstimator (Estimate: the eviction order
// and the working set) and engine's PauseDistribution (the distribution: Continuum and stall
// offload). A copy of each former logic lives here, in this test only, and a randomized run
// feeds the same observations to it and to PauseEstimator on the matching options: every
// estimate, every weight (what Continuum's TTL choice reads) and every conditional quantile (what
// stall offload reads) must be equal, bit for bit. The seed is printed on failure.
#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>

#include "agentkv/kv/pause_estimator.h"

namespace agentkv::kv {
namespace {

// The former PauseGapEstimator, default options (quantile 0.5, min 4, fade at 4096, 256 tools).
class LegacyGapEstimator {
 public:
  explicit LegacyGapEstimator(double quantile, int64_t min_samples, int64_t max_samples)
      : quantile_(quantile), min_samples_(min_samples), max_samples_(max_samples) {}
  void Observe(PauseKind kind, const std::string& tool, int64_t ns) {
    if (!IsReturningPause(kind) || ns < 0) return;
    Add(kinds_[static_cast<size_t>(kind)], ns);
    if (tool.empty()) return;
    auto it = tools_.find({kind, tool});
    if (it == tools_.end()) {
      if (per_kind_[static_cast<size_t>(kind)] >= 256) return;
      ++per_kind_[static_cast<size_t>(kind)];
      it = tools_.emplace(std::pair{kind, tool}, Dist{}).first;
    }
    Add(it->second, ns);
  }
  std::optional<TimeNs> Estimate(PauseKind kind, const std::string& tool) const {
    if (!IsReturningPause(kind)) return std::nullopt;
    if (!tool.empty()) {
      auto it = tools_.find({kind, tool});
      if (it != tools_.end()) {
        if (auto t = Quantile(it->second); t.has_value()) return t;
      }
    }
    return Quantile(kinds_[static_cast<size_t>(kind)]);
  }

 private:
  struct Dist {
    std::array<int64_t, 256> counts{};
    int64_t total = 0;
  };
  static int BucketOf(int64_t ns) {
    if (ns < 4) return static_cast<int>(ns);
    const auto v = static_cast<uint64_t>(ns);
    const int octave = static_cast<int>(std::bit_width(v)) - 1;
    return octave * 4 + static_cast<int>((v >> (octave - 2)) & 3);
  }
  static int64_t Middle(int b) {
    if (b < 4) return b;
    const int octave = b / 4;
    return (int64_t{4 + b % 4} << (octave - 2)) + (int64_t{1} << (octave - 2)) / 2;
  }
  void Add(Dist& d, int64_t ns) const {
    ++d.counts[static_cast<size_t>(BucketOf(ns))];
    if (++d.total < max_samples_) return;
    d.total = 0;
    for (int64_t& c : d.counts) d.total += (c /= 2);
  }
  std::optional<TimeNs> Quantile(const Dist& d) const {
    if (d.total < min_samples_) return std::nullopt;
    const auto rank = static_cast<int64_t>(quantile_ * static_cast<double>(d.total));
    int64_t seen = 0;
    for (int b = 0; b < 256; ++b) {
      seen += d.counts[static_cast<size_t>(b)];
      if (seen > rank) return TimeNs(Middle(b));
    }
    return TimeNs(Middle(255));
  }
  double quantile_;
  int64_t min_samples_;
  int64_t max_samples_;
  std::array<Dist, 5> kinds_{};
  std::map<std::pair<PauseKind, std::string>, Dist> tools_;
  std::array<int64_t, 5> per_kind_{};
};

// The former PauseDistribution: 15 octave buckets from 250 ms, an exponential prior.
class LegacyDistribution {
 public:
  static constexpr int kBuckets = 15;
  using Weights = std::array<double, kBuckets>;
  LegacyDistribution(int64_t prior_weight, TimeNs prior_pause, int64_t decay_at)
      : prior_weight_(prior_weight), prior_pause_(prior_pause), decay_at_(decay_at) {}
  static TimeNs Edge(int b) { return TimeNs(TimeNs::Millis(250).ns() << b); }
  void ObservePause(int c, TimeNs pause) {
    int b = 0;
    while (b < kBuckets - 1 && pause > Edge(b)) ++b;
    Add(c, b);
  }
  void ObserveNoReturn(int c) { Add(c, kBuckets - 1); }
  Weights WeightsOf(int c) const {
    Weights w{};
    const double mean_s = prior_pause_.seconds();
    double below = 0.0;
    for (int b = 0; b < kBuckets; ++b) {
      const double upto = b < kBuckets - 1 ? 1.0 - std::exp(-Edge(b).seconds() / mean_s) : 1.0;
      w[static_cast<size_t>(b)] =
          static_cast<double>(counts_[static_cast<size_t>(c)][static_cast<size_t>(b)]) +
          static_cast<double>(prior_weight_) * (upto - below);
      below = upto;
    }
    return w;
  }
  static std::optional<TimeNs> ConditionalQuantile(const Weights& w, double q, TimeNs elapsed) {
    double remaining = 0.0;
    for (int b = 0; b < kBuckets; ++b) {
      if (b == kBuckets - 1 || Edge(b) > elapsed) remaining += w[static_cast<size_t>(b)];
    }
    if (remaining <= 0.0) return std::nullopt;
    double within = 0.0;
    for (int b = 0; b < kBuckets - 1; ++b) {
      if (Edge(b) <= elapsed) continue;
      within += w[static_cast<size_t>(b)];
      if (within >= q * remaining * (1.0 - 1e-12)) return Edge(b);
    }
    return std::nullopt;
  }

 private:
  void Add(int c, int b) {
    auto& counts = counts_[static_cast<size_t>(c)];
    ++counts[static_cast<size_t>(b)];
    int64_t total = 0;
    for (int64_t x : counts) total += x;
    if (total >= decay_at_) {
      for (int64_t& x : counts) x /= 2;
    }
  }
  int64_t prior_weight_;
  TimeNs prior_pause_;
  int64_t decay_at_;
  std::array<std::array<int64_t, kBuckets>, 4> counts_{};
};

// A pause length spread over many octaves (ns to days), with exact bucket edges now and then.
TimeNs RandomPause(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> pick(0, 9);
  if (pick(rng) == 0)
    return TimeNs(TimeNs::Millis(250).ns() << std::uniform_int_distribution<int>(0, 13)(rng));
  const double log2_ns = std::uniform_real_distribution<double>(0.0, 47.0)(rng);
  return TimeNs(static_cast<int64_t>(std::exp2(log2_ns)));
}

TEST(PauseEstimatorEquivalenceTest, EstimateMatchesTheFormerGapEstimator) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    const double quantile = seed % 2 == 0 ? 0.5 : 0.9;
    const int64_t min_samples = 1 + static_cast<int64_t>(seed % 5);
    const int64_t max_samples = seed % 3 == 0 ? 64 : 4096;
    LegacyGapEstimator legacy(quantile, min_samples, max_samples);
    PauseEstimator estimator(PauseEstimator::Options{
        .quantile = quantile, .min_samples = min_samples, .max_samples = max_samples});
    const std::string tools[] = {"", "Read", "Bash", "Task"};
    for (int step = 0; step < 3000; ++step) {
      const auto kind = static_cast<PauseKind>(rng() % 5);
      const std::string& tool = tools[rng() % 4];
      TimeNs gap = RandomPause(rng);
      if (rng() % 50 == 0) gap = TimeNs(-1);
      legacy.Observe(kind, tool, gap.ns());
      estimator.Observe(kind, tool, gap);
      for (int k = 0; k < 5; ++k) {
        for (const std::string& t : tools) {
          ASSERT_EQ(estimator.Estimate(static_cast<PauseKind>(k), t),
                    legacy.Estimate(static_cast<PauseKind>(k), t))
              << "seed " << seed << " step " << step << " kind " << k << " tool " << t;
        }
      }
    }
  }
}

TEST(PauseEstimatorEquivalenceTest, DistributionMatchesTheFormerPauseDistribution) {
  // The former integer classes and the PauseClass each now is (stall offload's four).
  const PauseClass classes[] = {
      PauseClass{PauseKind::kToolCall}, PauseClass{PauseKind::kToolCall, true},
      PauseClass{PauseKind::kSubagentWait}, PauseClass{PauseKind::kHumanTurn}};
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    const int64_t prior_weight = static_cast<int64_t>(seed % 3) * 4;
    const TimeNs prior_pause = TimeNs::Seconds(seed % 2 == 0 ? 2.0 : 30.0);
    const int64_t decay_at = seed % 4 == 0 ? 16 : 4096;
    LegacyDistribution legacy(prior_weight, prior_pause, decay_at);
    PauseEstimator::Options options = PauseEstimator::DistributionOptions();
    options.prior_weight = prior_weight;
    options.prior_pause = prior_pause;
    options.max_samples = decay_at;
    PauseEstimator estimator(options);
    for (int step = 0; step < 2000; ++step) {
      const int c = static_cast<int>(rng() % 4);
      if (rng() % 10 == 0) {
        legacy.ObserveNoReturn(c);
        estimator.ObserveNoReturn(classes[c]);
      } else {
        const TimeNs pause = RandomPause(rng);
        legacy.ObservePause(c, pause);
        estimator.Observe(classes[c], pause);
      }
      for (int k = 0; k < 4; ++k) {
        const LegacyDistribution::Weights old_w = legacy.WeightsOf(k);
        const PauseEstimator::Weights new_w = estimator.WeightsOf(classes[k]);
        ASSERT_EQ(new_w.size(), old_w.size());
        for (size_t b = 0; b < old_w.size(); ++b) {
          // Bitwise: Continuum's TTL choice reads these weights and nothing else.
          ASSERT_EQ(new_w[b], old_w[b]) << "seed " << seed << " step " << step << " bucket " << b;
        }
        const TimeNs elapsed = TimeNs::Seconds(static_cast<double>(rng() % 300));
        for (const double q : {0.25, 0.5, 0.9}) {
          ASSERT_EQ(estimator.ConditionalQuantile(new_w, q, elapsed),
                    LegacyDistribution::ConditionalQuantile(old_w, q, elapsed))
              << "seed " << seed << " step " << step << " q " << q;
        }
      }
    }
  }
}

}  // namespace
}  // namespace agentkv::kv
