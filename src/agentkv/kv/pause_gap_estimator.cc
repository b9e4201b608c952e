// PauseGapEstimator (pause_gap_estimator.h).
//
// Invariants: each distribution's `total` is the sum of its counts; a distribution's total stays
// below max_samples (it is halved on reaching it); at most max_tools tools per kind.
#include "agentkv/kv/pause_gap_estimator.h"

#include <bit>

#include "agentkv/base/check.h"

namespace agentkv::kv {

std::string_view PauseKindName(PauseKind kind) {
  switch (kind) {
    case PauseKind::kUnknown:
      return "unknown";
    case PauseKind::kToolCall:
      return "tool_call";
    case PauseKind::kSubagentWait:
      return "subagent_wait";
    case PauseKind::kHumanTurn:
      return "human_turn";
    case PauseKind::kSessionEnd:
      return "session_end";
  }
  return "unknown";
}

namespace {

bool IsPause(PauseKind kind) {
  return kind == PauseKind::kToolCall || kind == PauseKind::kSubagentWait ||
         kind == PauseKind::kHumanTurn;
}

}  // namespace

PauseGapEstimator::PauseGapEstimator(const Options& options) : options_(options) {
  AGENTKV_CHECK(options.quantile > 0 && options.quantile < 1) << "quantile " << options.quantile;
  AGENTKV_CHECK(options.min_samples >= 1 && options.min_samples <= (1 << 20));
  AGENTKV_CHECK(options.max_samples >= 2 * options.min_samples &&
                options.max_samples <= (int64_t{1} << 30));
  AGENTKV_CHECK(options.max_tools >= 0 && options.max_tools <= (1 << 16));
}

int PauseGapEstimator::BucketOf(int64_t ns) {
  if (ns < 4) return static_cast<int>(ns);  // Buckets 0-3 hold 0, 1, 2 and 3 ns exactly.
  const auto v = static_cast<uint64_t>(ns);
  const int octave = static_cast<int>(std::bit_width(v)) - 1;  // >= 2
  const int quarter = static_cast<int>((v >> (octave - 2)) & 3);
  return octave * 4 + quarter;
}

int64_t PauseGapEstimator::BucketMiddle(int bucket) {
  if (bucket < 4) return bucket;
  AGENTKV_DCHECK(bucket >= 8);  // Buckets 4-7 are never used.
  const int octave = bucket / 4;
  const int quarter = bucket % 4;
  const int64_t low = int64_t{4 + quarter} << (octave - 2);
  const int64_t width = int64_t{1} << (octave - 2);
  return low + width / 2;
}

void PauseGapEstimator::Add(Distribution& d, int64_t ns) const {
  ++d.counts[static_cast<size_t>(BucketOf(ns))];
  if (++d.total < options_.max_samples) return;
  d.total = 0;
  for (int64_t& c : d.counts) {
    c /= 2;
    d.total += c;
  }
}

void PauseGapEstimator::Observe(PauseKind kind, std::string_view tool, TimeNs gap) {
  if (!IsPause(kind) || gap.ns() < 0) return;
  const auto k = static_cast<size_t>(kind);
  Add(kinds_[k], gap.ns());
  if (tool.empty()) return;
  auto it = tools_.find({kind, std::string(tool)});
  if (it == tools_.end()) {
    if (tools_per_kind_[k] >= options_.max_tools) return;
    ++tools_per_kind_[k];
    it = tools_.emplace(std::pair{kind, std::string(tool)}, Distribution{}).first;
  }
  Add(it->second, gap.ns());
}

std::optional<TimeNs> PauseGapEstimator::Quantile(const Distribution& d) const {
  if (d.total < options_.min_samples) return std::nullopt;
  // The smallest bucket whose cumulative count exceeds quantile * total (integer-exact rank).
  const auto rank = static_cast<int64_t>(options_.quantile * static_cast<double>(d.total));
  int64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += d.counts[static_cast<size_t>(b)];
    if (seen > rank) return TimeNs(BucketMiddle(b));
  }
  return TimeNs(BucketMiddle(kBuckets - 1));
}

std::optional<TimeNs> PauseGapEstimator::Estimate(PauseKind kind, std::string_view tool) const {
  if (!IsPause(kind)) return std::nullopt;
  if (!tool.empty()) {
    auto it = tools_.find({kind, std::string(tool)});
    if (it != tools_.end()) {
      if (std::optional<TimeNs> t = Quantile(it->second); t.has_value()) return t;
    }
  }
  return Quantile(kinds_[static_cast<size_t>(kind)]);
}

int64_t PauseGapEstimator::samples(PauseKind kind) const {
  return kinds_[static_cast<size_t>(kind)].total;
}

}  // namespace agentkv::kv
