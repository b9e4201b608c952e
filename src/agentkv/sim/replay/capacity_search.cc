// The capacity search: bracket, then bisect.
//
// Invariants while the search runs: every probe that met the SLO has a rate <= lo, every probe
// that missed it a rate >= hi (lo and hi as set), and lo < hi once both are set. Bracketing
// keeps hi <= 2 lo (a doubling or halving step, clamped to the rate range), so bisection needs
// at most ceil(log2(1 / tolerance)) probes; MaxProbes() adds the bracketing steps.
#include "agentkv/sim/replay/capacity_search.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <string>
#include <utility>

#include "agentkv/base/check.h"

namespace agentkv::sim {
namespace {

constexpr std::array<std::pair<SloMetric, std::string_view>, 3> kMetricNames = {{
    {SloMetric::kTtftP95, "ttft-p95"},
    {SloMetric::kTtftP99, "ttft-p99"},
    {SloMetric::kServerTimeMean, "server-time-mean"},
}};

// Whether `value` is finite and in [lo, hi] (NaN fails).
bool InRange(double value, double lo, double hi) {
  return std::isfinite(value) && value >= lo && value <= hi;
}

// `value` as its shortest round-trip decimal ("120", "0.05").
std::string Number(double value) {
  std::array<char, 64> buffer{};
  const std::to_chars_result r = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  return std::string(buffer.data(), r.ptr);
}

Status FieldError(std::string_view field, std::string_view range, double value) {
  return InvalidArgumentError("CapacitySearchOptions." + std::string(field) + ": must be in " +
                              std::string(range) + ", got " + Number(value));
}

int64_t CeilLog2(double ratio) {
  return ratio <= 1.0 ? 0 : static_cast<int64_t>(std::ceil(std::log2(ratio)));
}

}  // namespace

std::string_view SloMetricName(SloMetric metric) {
  for (const auto& [value, name] : kMetricNames) {
    if (value == metric) return name;
  }
  return "unknown";
}

StatusOr<SloMetric> ParseSloMetric(std::string_view name, std::string_view flag) {
  for (const auto& [value, known] : kMetricNames) {
    if (known == name) return value;
  }
  return InvalidArgumentError(std::string(flag) + " must be ttft-p95, ttft-p99 or " +
                              "server-time-mean, got \"" + std::string(name) + "\"");
}

double MetricValue(const CapacityMetrics& metrics, SloMetric metric) {
  switch (metric) {
    case SloMetric::kTtftP95:
      return metrics.ttft_p95_s;
    case SloMetric::kTtftP99:
      return metrics.ttft_p99_s;
    case SloMetric::kServerTimeMean:
      return metrics.server_time_mean_s;
  }
  return metrics.ttft_p95_s;
}

std::string_view CapacityOutcomeName(CapacityOutcome outcome) {
  switch (outcome) {
    case CapacityOutcome::kFound:
      return "found";
    case CapacityOutcome::kAtLeastMax:
      return "at-least-max";
    case CapacityOutcome::kNoneMet:
      return "none-met";
  }
  return "unknown";
}

Status CapacitySearchOptions::Validate() const {
  if (!InRange(slo_s, 0.0, 1e6) || slo_s == 0.0) return FieldError("slo_s", "(0, 1e6]", slo_s);
  if (!InRange(min_rate, 0.0, 1e9) || min_rate == 0.0) {
    return FieldError("min_rate", "(0, 1e9]", min_rate);
  }
  if (!InRange(max_rate, min_rate, 1e9)) {
    return FieldError("max_rate", "[min_rate, 1e9]", max_rate);
  }
  if (!std::isfinite(start_rate) || start_rate <= 0.0) {
    return FieldError("start_rate", "(0, inf)", start_rate);
  }
  if (!InRange(tolerance, 0.001, 1.0)) return FieldError("tolerance", "[0.001, 1]", tolerance);
  return Status::Ok();
}

int64_t CapacitySearchOptions::MaxProbes() const {
  // The first probe, one direction of bracketing, bisection, and one probe of slack for
  // rounding at exact powers of two.
  return 1 + CeilLog2(max_rate / min_rate) + CeilLog2(1.0 / tolerance) + 1;
}

std::vector<CapacityProbe> CapacitySearchResult::ProbesByRate() const {
  std::vector<CapacityProbe> sorted = probes;
  std::sort(sorted.begin(), sorted.end(),
            [](const CapacityProbe& a, const CapacityProbe& b) { return a.rate < b.rate; });
  return sorted;
}

const CapacityProbe* CapacitySearchResult::AtCapacity() const {
  if (outcome == CapacityOutcome::kNoneMet) return nullptr;
  for (const CapacityProbe& p : probes) {
    if (p.rate == capacity) return &p;
  }
  return nullptr;
}

StatusOr<CapacitySearchResult> SearchCapacity(const CapacitySearchOptions& options,
                                              const CapacityProbeFn& probe,
                                              const CapacityProbeDone& done) {
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  CapacitySearchResult result;
  const auto run = [&](double rate) -> StatusOr<bool> {
    StatusOr<CapacityMetrics> metrics = probe(rate);
    if (!metrics.ok()) {
      return Status(metrics.status().code(), "probe at " + Number(rate) + " sessions/h/engine: " +
                                                 metrics.status().message());
    }
    CapacityProbe p;
    p.rate = rate;
    p.metrics = *metrics;
    p.value = MetricValue(p.metrics, options.metric);
    p.met = std::isfinite(p.value) && p.value <= options.slo_s;
    result.probes.push_back(p);
    if (done) done(static_cast<int64_t>(result.probes.size()), p);
    return p.met;
  };

  double lo = 0;  // The highest rate met; 0 while none is.
  double hi = 0;  // The lowest rate missed; 0 while none is.
  const double start = std::clamp(options.start_rate, options.min_rate, options.max_rate);
  AGENTKV_ASSIGN_OR_RETURN(const bool start_met, run(start));
  if (start_met) {
    lo = start;
    while (hi == 0 && lo < options.max_rate) {
      const double rate = std::min(2 * lo, options.max_rate);
      AGENTKV_ASSIGN_OR_RETURN(const bool met, run(rate));
      (met ? lo : hi) = rate;
    }
    if (hi == 0) {
      result.outcome = CapacityOutcome::kAtLeastMax;
      result.capacity = lo;
      return result;
    }
  } else {
    hi = start;
    while (lo == 0 && hi > options.min_rate) {
      const double rate = std::max(hi / 2, options.min_rate);
      AGENTKV_ASSIGN_OR_RETURN(const bool met, run(rate));
      (met ? lo : hi) = rate;
    }
    if (lo == 0) {
      result.outcome = CapacityOutcome::kNoneMet;
      result.capacity = 0;
      result.lowest_missed = hi;
      return result;
    }
  }
  while (hi - lo > options.tolerance * lo) {
    const double rate = lo + (hi - lo) / 2;
    AGENTKV_ASSIGN_OR_RETURN(const bool met, run(rate));
    (met ? lo : hi) = rate;
  }
  AGENTKV_CHECK(static_cast<int64_t>(result.probes.size()) <= options.MaxProbes());
  result.outcome = CapacityOutcome::kFound;
  result.capacity = lo;
  result.lowest_missed = hi;
  return result;
}

std::optional<SeedSpread> SpreadOf(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  const double median = n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  return SeedSpread{median, values.front(), values.back()};
}

std::optional<size_t> CapacityResult::BaselineArm() const {
  for (size_t i = 0; i < arms.size(); ++i) {
    if (arms[i] == "baseline") return i;
  }
  return std::nullopt;
}

SeedSpread CapacityResult::Capacity(size_t arm) const {
  std::vector<double> values;
  for (const CapacitySearchResult& search : searches.at(arm)) values.push_back(search.capacity);
  return SpreadOf(std::move(values)).value_or(SeedSpread{});
}

std::optional<SeedSpread> CapacityResult::VsBaseline(size_t arm) const {
  const std::optional<size_t> baseline = BaselineArm();
  if (!baseline) return std::nullopt;
  std::vector<double> ratios;
  for (size_t s = 0; s < searches.at(arm).size(); ++s) {
    const double base = searches.at(*baseline).at(s).capacity;
    if (base > 0) ratios.push_back(searches[arm][s].capacity / base);
  }
  return SpreadOf(std::move(ratios));
}

}  // namespace agentkv::sim
