// Invariant: FoldConversationStarts changes only `t` of main-agent requests and the completion
// of sub-agents (and a duration longer than the completion, which it shortens to it so that the
// spawn moves with the start too); sizes and order are kept.
#include "agentkv/sim/workload/agentic_workload.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "agentkv/base/bounds.h"
#include "agentkv/base/check.h"
#include "agentkv/base/rng.h"

namespace agentkv::sim {

bool AgenticWorkload::gated() const {
  for (int32_t gate : start_after_group) {
    if (gate >= 0) return true;
  }
  return false;
}

std::vector<WekaConversation> FoldConversationStarts(const AgenticWorkload& workload) {
  AGENTKV_CHECK_EQ(workload.starts.size(), workload.conversations.size());
  AGENTKV_CHECK(!workload.gated()) << "a gated workload has no fixed start times to fold";
  std::vector<WekaConversation> folded = workload.conversations;
  for (size_t i = 0; i < folded.size(); ++i) {
    const TimeNs start = workload.starts[i];
    for (WekaRequest& request : folded[i].requests) request.t = SaturatingAdd(request.t, start);
    for (WekaSubagent& subagent : folded[i].subagents) {
      subagent.duration = std::min(subagent.duration, subagent.completion);
      subagent.completion = SaturatingAdd(subagent.completion, start);
    }
  }
  return folded;
}

namespace {

// Below int64 nanoseconds' limit (about 9.22e9 s), so that TimeNs::Seconds cannot overflow.
constexpr double kMaxGapS = 9.2e9;

}  // namespace

std::vector<TimeNs> PoissonStarts(int64_t n, TimeNs mean_interarrival, uint64_t seed) {
  AGENTKV_CHECK(n >= 0 && mean_interarrival >= TimeNs(0));
  Rng rng(seed);
  std::vector<TimeNs> starts;
  starts.reserve(static_cast<size_t>(n));
  TimeNs start;
  const double mean_s = mean_interarrival.seconds();
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0) {
      // One draw is at most 37 means (1 - u >= 2^-53). A draw past int64 nanoseconds (a mean
      // of years) and the sum saturate rather than wrap.
      const double gap_s = -mean_s * std::log(1.0 - rng.UniformDouble());
      start = SaturatingAdd(start, gap_s < kMaxGapS ? TimeNs::Seconds(gap_s)
                                                    : TimeNs(std::numeric_limits<int64_t>::max()));
    }
    starts.push_back(start);
  }
  return starts;
}

int64_t ApproximateBytes(const AgenticWorkload& workload) {
  const auto requests_bytes = [](const std::vector<WekaRequest>& requests) {
    int64_t bytes = 0;
    for (const WekaRequest& r : requests) {
      bytes += static_cast<int64_t>(sizeof(WekaRequest) + r.hash_ids.size() * sizeof(uint64_t));
    }
    return bytes;
  };
  int64_t bytes = 0;
  for (const WekaConversation& c : workload.conversations) {
    bytes += static_cast<int64_t>(sizeof(WekaConversation)) + requests_bytes(c.requests);
    for (const WekaSubagent& s : c.subagents) {
      bytes += static_cast<int64_t>(sizeof(WekaSubagent)) + requests_bytes(s.requests);
    }
  }
  return bytes;
}

AgenticWorkload WekaWorkload(std::vector<WekaConversation> conversations, TimeNs mean_interarrival,
                             uint64_t seed) {
  AgenticWorkload workload;
  workload.starts =
      PoissonStarts(static_cast<int64_t>(conversations.size()), mean_interarrival, seed);
  workload.conversations = std::move(conversations);
  return workload;
}

}  // namespace agentkv::sim
