// The verdict of a replay: each arm's standing against the baseline on mean server time and
// uncached tokens, and the sentences that say it.
//
// Invariants: the baseline and the bound arms are never candidates; `ranked` holds exactly the
// arms whose standing is kBetter, and `leaders` is a subset of `ranked` that starts with
// ranked[0] whenever `ranked` is non-empty (and is empty otherwise). Numbers are formatted with
// snprintf in the "C" locale conventions, so the text depends on nothing but the input.
#include "agentkv/report/replay_verdict.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "agentkv/report/internal/verdict_text.h"
#include "agentkv/report/replay_report.h"

namespace agentkv::report {

using sim::ArmResult;
using sim::ReplayResult;
namespace {

constexpr std::array<std::string_view, 2> kBoundNames = {"infinite-cache", "oracle"};

bool IsBound(const ArmResult& arm) {
  return std::find(kBoundNames.begin(), kBoundNames.end(), arm.arm) != kBoundNames.end();
}

std::optional<double> Change(double value, double base) {
  if (base == 0 || !std::isfinite(base) || !std::isfinite(value)) return std::nullopt;
  return (value - base) / base;
}

ArmVerdict Judge(const ReplayResult& result, size_t arm, size_t baseline, double noise) {
  const ArmResult& a = result.arms[arm];
  const ArmResult& b = result.arms[baseline];
  ArmVerdict v{
      arm, Change(a.server_time.mean_s, b.server_time.mean_s),
      Change(static_cast<double>(a.uncached_tokens), static_cast<double>(b.uncached_tokens)),
      ArmStanding::kWithinNoise};
  bool better = false;
  bool worse = false;
  for (const std::optional<double>& change : {v.server_time_change, v.uncached_change}) {
    if (!change) continue;
    better = better || *change < -noise;
    worse = worse || *change > noise;
  }
  if (worse) {
    v.standing = ArmStanding::kWorse;
  } else if (better) {
    v.standing = ArmStanding::kBetter;
  }
  return v;
}

std::string PercentChange(const std::optional<double>& change) {
  return change ? internal::PercentChangeText(*change) : "n/a";
}

std::string Figures(const ArmVerdict& v) {
  return "server time " + PercentChange(v.server_time_change) + ", uncached tokens " +
         PercentChange(v.uncached_change);
}

std::string NamedWithFigures(const ReplayResult& result, const ArmVerdict& v) {
  return result.arms[v.arm].arm + " (" + Figures(v) + ")";
}

std::string Listed(const std::vector<std::string>& items) { return internal::ListedText(items); }

std::string Percent(double fraction) {
  std::array<char, 32> buffer{};
  std::snprintf(buffer.data(), buffer.size(), "%.0f%%", fraction * 100);
  return buffer.data();
}

// What each bound is an upper end of.
std::string BoundMeaning(std::string_view name) {
  if (name == "infinite-cache") {
    return "unbounded device KV, the least recompute and server time any policy reaches here";
  }
  return "clairvoyant eviction at this KV size, no host tier: what eviction order alone buys; "
         "admission, scheduling or a host tier can pass it";
}

// The best arm's share of each bound's gain, or nothing when there is no best arm.
std::string BestAgainstBounds(const ReplayResult& result, const ReplayVerdict& verdict) {
  if (verdict.leaders.empty()) return "";
  const ArmResult& best = result.arms[verdict.arms[verdict.leaders.front()].arm];
  std::vector<std::string> parts;
  for (const ArmVerdict& bound : verdict.bounds) {
    const std::string& name = result.arms[bound.arm].arm;
    const sim::IdealShares& shares = name == "oracle" ? best.oracle_share : best.ideal_share;
    if (!shares.server_time_mean && !shares.uncached_tokens) continue;
    auto text = [](const std::optional<double>& share) {
      return share ? ShareOfBoundText(*share) : std::string("-");
    };
    parts.push_back("of " + name + "'s gain, " + text(shares.server_time_mean) +
                    " on server time and " + text(shares.uncached_tokens) + " on uncached tokens");
  }
  if (parts.empty()) return "";
  std::string joined;
  for (size_t i = 0; i < parts.size(); ++i) joined += (i > 0 ? "; " : "") + parts[i];
  return best.arm + " reaches, " + joined;
}

}  // namespace

ReplayVerdict DecideVerdict(const ReplayResult& result, double noise) {
  ReplayVerdict verdict;
  verdict.noise = std::max(0.0, std::isfinite(noise) ? noise : 0.0);
  verdict.baseline = BaselineArmIndex(result);
  if (!verdict.baseline) return verdict;
  const size_t baseline = *verdict.baseline;
  for (const std::string_view name : kBoundNames) {
    for (size_t i = 0; i < result.arms.size(); ++i) {
      if (i != baseline && result.arms[i].arm == name) {
        verdict.bounds.push_back(Judge(result, i, baseline, verdict.noise));
        break;
      }
    }
  }
  for (size_t i = 0; i < result.arms.size(); ++i) {
    if (i == baseline || IsBound(result.arms[i])) continue;
    verdict.arms.push_back(Judge(result, i, baseline, verdict.noise));
    if (verdict.arms.back().standing == ArmStanding::kBetter) {
      verdict.ranked.push_back(verdict.arms.size() - 1);
    }
  }
  const auto key = [&](size_t k) {
    const ArmVerdict& v = verdict.arms[k];
    return std::array<double, 2>{v.server_time_change.value_or(0), v.uncached_change.value_or(0)};
  };
  std::stable_sort(verdict.ranked.begin(), verdict.ranked.end(),
                   [&](size_t a, size_t b) { return key(a) < key(b); });
  if (verdict.ranked.empty()) return verdict;
  const double best = result.arms[verdict.arms[verdict.ranked.front()].arm].server_time.mean_s;
  for (const size_t k : verdict.ranked) {
    const double mean = result.arms[verdict.arms[k].arm].server_time.mean_s;
    const std::optional<double> from_best = Change(mean, best);
    if (k == verdict.ranked.front() || (from_best && *from_best <= verdict.noise)) {
      verdict.leaders.push_back(k);
    }
  }
  return verdict;
}

std::vector<VerdictLine> VerdictLines(const ReplayResult& result, const ReplayVerdict& verdict) {
  std::vector<VerdictLine> lines;
  if (!verdict.baseline) return lines;
  const std::string& baseline = result.arms[*verdict.baseline].arm;
  const std::string noise = "+-" + Percent(verdict.noise);
  if (verdict.leaders.empty()) {
    lines.push_back({"keep", baseline + ": no arm beats it beyond the noise (" + noise +
                                 ") on mean server time or uncached tokens"});
  } else {
    const ArmVerdict& best = verdict.arms[verdict.leaders.front()];
    lines.push_back({"turn on", NamedWithFigures(result, best) + " against " + baseline});
  }
  std::vector<std::string> as_good, also, within, worse;
  for (size_t k = 0; k < verdict.arms.size(); ++k) {
    const ArmVerdict& v = verdict.arms[k];
    const bool leader =
        std::find(verdict.leaders.begin(), verdict.leaders.end(), k) != verdict.leaders.end();
    if (leader && k != verdict.leaders.front()) as_good.push_back(NamedWithFigures(result, v));
    if (v.standing == ArmStanding::kBetter && !leader) also.push_back(NamedWithFigures(result, v));
    if (v.standing == ArmStanding::kWithinNoise) within.push_back(result.arms[v.arm].arm);
    if (v.standing == ArmStanding::kWorse) worse.push_back(NamedWithFigures(result, v));
  }
  if (!as_good.empty()) {
    lines.push_back({"as good", Listed(as_good) + ": mean server time within " + noise + " of " +
                                    result.arms[verdict.arms[verdict.leaders[0]].arm].arm + "'s"});
  }
  if (!also.empty()) lines.push_back({"also better", Listed(also)});
  if (!within.empty()) lines.push_back({"within noise", Listed(within)});
  if (!worse.empty()) lines.push_back({"worse", Listed(worse)});
  for (const ArmVerdict& bound : verdict.bounds) {
    const std::string& name = result.arms[bound.arm].arm;
    lines.push_back({"bound", name + " (" + BoundMeaning(name) + "): " + Figures(bound)});
  }
  if (const std::string shares = BestAgainstBounds(result, verdict); !shares.empty()) {
    lines.push_back({"best vs bounds", shares});
  }
  lines.push_back({"sessions at SLO",
                   "not measured by a replay; `agentkv capacity` finds each arm's sessions per "
                   "hour within a latency SLO"});
  lines.push_back({"noise", "one seed (" + std::to_string(result.setup.seed) +
                                ") and no noise estimate of this run's own: a change counts only "
                                "beyond " +
                                noise +
                                ", the seed-to-seed spread measured over five seeds "
                                "(docs/REPLAY.md); rerun with other --seed values to confirm"});
  return lines;
}

std::string ShareOfBoundText(double share) {
  if (!std::isfinite(share)) return "-";
  // Past 100 % as printed with one decimal: 100.04 % still reads "100.0%".
  if (std::round(share * 1000) > 1000) return "exceeds the bound";
  std::array<char, 32> buffer{};
  std::snprintf(buffer.data(), buffer.size(), "%.1f", share * 100);
  std::string text(buffer.data());
  if (text == "-0.0") text = "0.0";
  return text + "%";
}

}  // namespace agentkv::report
