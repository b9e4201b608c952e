// The verdict of a capacity run: each arm's standing against the baseline on sessions per hour
// per engine at the SLO, and the sentences that say it.
//
// Invariants: the baseline and the bound arms are never candidates; `ranked` holds exactly the
// arms whose standing is kBetter, and `leaders` is a subset of `ranked` that starts with
// ranked[0] whenever `ranked` is non-empty (and is empty otherwise). A standing is decided on
// the brackets, never on the point capacities alone, so an arm whose bracket overlaps the
// baseline's widened by the noise floor is within noise. Numbers are formatted with snprintf in
// the "C" locale conventions, so the text depends on nothing but the input.
#include "agentkv/report/capacity_verdict.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "agentkv/report/capacity_report.h"
#include "agentkv/report/internal/verdict_text.h"

namespace agentkv::report {

using sim::CapacityOutcome;
using sim::CapacityResult;
using sim::CapacitySearchResult;
namespace {

constexpr std::array<std::string_view, 2> kBoundNames = {"infinite-cache", "oracle"};
constexpr double kInf = std::numeric_limits<double>::infinity();

bool IsBound(const std::string& arm) {
  return std::find(kBoundNames.begin(), kBoundNames.end(), arm) != kBoundNames.end();
}

// Where one search's capacity lies, if the metric grows with load: [lo, hi).
struct Bracket {
  double lo = 0;
  double hi = 0;
};

Bracket BracketOf(const CapacitySearchResult& s, const sim::CapacitySearchOptions& options) {
  switch (s.outcome) {
    case CapacityOutcome::kFound:
      return {s.capacity, s.lowest_missed.value_or(s.capacity)};
    case CapacityOutcome::kAtLeastMax:
      return {s.capacity, kInf};
    case CapacityOutcome::kNoneMet:
      break;
  }
  return {0, s.lowest_missed.value_or(options.min_rate)};
}

bool AtLeastMax(const CapacityResult& r, size_t arm) {
  return std::any_of(
      r.searches[arm].begin(), r.searches[arm].end(),
      [](const CapacitySearchResult& s) { return s.outcome == CapacityOutcome::kAtLeastMax; });
}

CapacityArmVerdict Judge(const CapacityResult& r, size_t arm, size_t baseline, double noise) {
  CapacityArmVerdict v;
  v.arm = arm;
  v.delta = r.Capacity(arm).median - r.Capacity(baseline).median;
  if (const std::optional<sim::SeedSpread> vs = r.VsBaseline(arm)) v.change = vs->median - 1;
  v.at_least = AtLeastMax(r, arm);
  v.vs_baseline = CompareCapacity(r, arm, baseline, noise);
  return v;
}

std::string Printf(const char* format, double value) {
  std::array<char, 64> buffer{};
  std::snprintf(buffer.data(), buffer.size(), format, value);
  return buffer.data();
}

std::string PercentChange(double change) { return internal::PercentChangeText(change); }

// "+2.20 sessions/h/engine, +35%" (">= " before each when the arm's capacity is a lower bound).
std::string Figures(const CapacityArmVerdict& v) {
  const std::string at_least = v.at_least ? ">= " : "";
  const std::string delta =
      std::string(v.delta < 0 ? "-" : "+") + CapacityRateText(std::fabs(v.delta));
  return at_least + delta + " sessions/h/engine, " +
         (v.change ? at_least + PercentChange(*v.change) : "baseline at 0");
}

// Figures and, for an arm beyond the noise, the least change the brackets allow.
std::string NamedWithFigures(const CapacityResult& r, const CapacityArmVerdict& v) {
  std::string text = r.arms[v.arm] + " (" + Figures(v);
  if (v.vs_baseline.standing == ArmStanding::kBetter) {
    text += "; at least " + PercentChange(v.vs_baseline.least_change);
  }
  return text + ")";
}

std::string Listed(const std::vector<std::string>& items) { return internal::ListedText(items); }

// What each bound is an upper end of.
std::string BoundMeaning(std::string_view name) {
  if (name == "infinite-cache") {
    return "unbounded device KV: nothing is evicted or recomputed, about the most sessions any "
           "policy serves at this SLO here";
  }
  return "clairvoyant eviction at this KV size, no host tier: what eviction order alone buys; "
         "admission, scheduling or a host tier can pass it";
}

// The best arm's share of each bound's gain in capacity over the baseline; "" without a best.
std::string BestAgainstBounds(const CapacityResult& r, const CapacityVerdict& verdict) {
  if (verdict.leaders.empty()) return "";
  const CapacityArmVerdict& best = verdict.arms[verdict.leaders.front()];
  std::vector<std::string> shares, both_at_max;
  for (const CapacityArmVerdict& bound : verdict.bounds) {
    if (bound.delta <= 0) continue;
    if (best.at_least && bound.at_least) {
      both_at_max.push_back(r.arms[bound.arm]);
    } else {
      // A bound at max_rate gains at least its delta, so the share is at most the one written.
      shares.push_back((bound.at_least ? "at most " : "") +
                       ShareOfBoundText(best.delta / bound.delta) + " of " + r.arms[bound.arm] +
                       "'s gain");
    }
  }
  const std::string& name = r.arms[best.arm];
  std::string text = shares.empty() ? "" : name + " reaches " + Listed(shares);
  if (!both_at_max.empty()) {
    text += (text.empty() ? "" : "; ") + name + " and " + Listed(both_at_max) +
            " both meet the SLO at --max-rate: raise it to compare them";
  }
  return text;
}

std::string NoiseText(const CapacityResult& r, const CapacityVerdict& verdict) {
  std::string seeds;
  for (const uint64_t seed : r.seeds) seeds += (seeds.empty() ? "" : ", ") + std::to_string(seed);
  std::string text =
      "a capacity counts as better or worse only where, on every seed (" + seeds +
      "), the change stays beyond +-" + Printf("%.0f%%", verdict.noise * 100) +
      " (the seed-to-seed spread of single-seed replays, docs/REPLAY.md) across the whole of "
      "both arms' bisection brackets (highest rate met to lowest missed, each within --tolerance " +
      Printf("%g", r.options.tolerance * 100) +
      " %); \"at least\" is the least change those brackets allow on any seed";
  if (r.seeds.size() == 1) text += "; rerun with --seeds 1,2,3 to confirm";
  return text;
}

}  // namespace

CapacityComparison CompareCapacity(const CapacityResult& r, size_t arm, size_t other,
                                   double noise) {
  CapacityComparison c{kInf, -kInf, ArmStanding::kWithinNoise};
  const size_t seeds = std::min(r.searches[arm].size(), r.searches[other].size());
  if (seeds == 0) return CapacityComparison{};
  for (size_t s = 0; s < seeds; ++s) {
    const Bracket a = BracketOf(r.searches[arm][s], r.options);
    const Bracket b = BracketOf(r.searches[other][s], r.options);
    c.least_change = std::min(c.least_change, std::isinf(b.hi) ? -1.0 : a.lo / b.hi - 1);
    c.most_change = std::max(c.most_change, b.lo > 0 ? a.hi / b.lo - 1 : kInf);
  }
  if (c.least_change > noise) {
    c.standing = ArmStanding::kBetter;
  } else if (c.most_change < -noise) {
    c.standing = ArmStanding::kWorse;
  }
  return c;
}

CapacityVerdict DecideCapacityVerdict(const CapacityResult& r, double noise) {
  CapacityVerdict verdict;
  verdict.noise = std::max(0.0, std::isfinite(noise) ? noise : 0.0);
  verdict.baseline = r.BaselineArm();
  if (!verdict.baseline) return verdict;
  const size_t baseline = *verdict.baseline;
  for (const std::string_view name : kBoundNames) {
    for (size_t i = 0; i < r.arms.size(); ++i) {
      if (i != baseline && r.arms[i] == name) {
        verdict.bounds.push_back(Judge(r, i, baseline, verdict.noise));
        break;
      }
    }
  }
  for (size_t i = 0; i < r.arms.size(); ++i) {
    if (i == baseline || IsBound(r.arms[i])) continue;
    verdict.arms.push_back(Judge(r, i, baseline, verdict.noise));
    if (verdict.arms.back().vs_baseline.standing == ArmStanding::kBetter) {
      verdict.ranked.push_back(verdict.arms.size() - 1);
    }
  }
  // Highest change first; an arm without one (the baseline at 0) ranks by its delta alone.
  const auto key = [&](size_t k) {
    const CapacityArmVerdict& v = verdict.arms[k];
    return std::tuple(v.change.value_or(kInf), v.delta);
  };
  std::stable_sort(verdict.ranked.begin(), verdict.ranked.end(),
                   [&](size_t a, size_t b) { return key(a) > key(b); });
  if (verdict.ranked.empty()) return verdict;
  const size_t best = verdict.arms[verdict.ranked.front()].arm;
  for (const size_t k : verdict.ranked) {
    if (k == verdict.ranked.front() ||
        CompareCapacity(r, best, verdict.arms[k].arm, verdict.noise).standing !=
            ArmStanding::kBetter) {
      verdict.leaders.push_back(k);
    }
  }
  return verdict;
}

std::vector<VerdictLine> CapacityVerdictLines(const CapacityResult& r,
                                              const CapacityVerdict& verdict) {
  std::vector<VerdictLine> lines;
  if (!verdict.baseline) return lines;
  const std::string& baseline = r.arms[*verdict.baseline];
  const std::string base_rate = CapacityRateText(r.Capacity(*verdict.baseline).median);
  if (verdict.leaders.empty()) {
    lines.push_back({"keep", baseline + " (" + base_rate +
                                 " sessions/h/engine): no arm serves more sessions at the SLO "
                                 "beyond the noise"});
  } else {
    const CapacityArmVerdict& best = verdict.arms[verdict.leaders.front()];
    lines.push_back({"turn on", NamedWithFigures(r, best) + " against " + baseline + "'s " +
                                    base_rate + " sessions/h/engine"});
  }
  std::vector<std::string> as_good, also, within, worse;
  for (size_t k = 0; k < verdict.arms.size(); ++k) {
    const CapacityArmVerdict& v = verdict.arms[k];
    const bool leader =
        std::find(verdict.leaders.begin(), verdict.leaders.end(), k) != verdict.leaders.end();
    const ArmStanding standing = v.vs_baseline.standing;
    if (leader && k != verdict.leaders.front()) as_good.push_back(NamedWithFigures(r, v));
    if (standing == ArmStanding::kBetter && !leader) also.push_back(NamedWithFigures(r, v));
    if (standing == ArmStanding::kWithinNoise) within.push_back(r.arms[v.arm]);
    if (standing == ArmStanding::kWorse) worse.push_back(NamedWithFigures(r, v));
  }
  if (!as_good.empty()) {
    lines.push_back({"as good", Listed(as_good) + ": capacity within the noise of " +
                                    r.arms[verdict.arms[verdict.leaders[0]].arm] + "'s"});
  }
  if (!also.empty()) lines.push_back({"also better", Listed(also)});
  if (!within.empty()) lines.push_back({"within noise", Listed(within)});
  if (!worse.empty()) lines.push_back({"worse", Listed(worse)});
  for (const CapacityArmVerdict& bound : verdict.bounds) {
    const std::string& name = r.arms[bound.arm];
    lines.push_back({"bound", name + " (" + BoundMeaning(name) + "): " + Figures(bound)});
  }
  if (const std::string shares = BestAgainstBounds(r, verdict); !shares.empty()) {
    lines.push_back({"best vs bounds", shares});
  }
  lines.push_back({"noise", NoiseText(r, verdict)});
  return lines;
}

}  // namespace agentkv::report
