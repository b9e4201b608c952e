// A seeded generator of agentic sessions shaped like the WEKA Claude Code traces.
//
// Each session is a main agent issuing turns: the first prompt is a shared tools+system prefix
// plus a first user message; every later prompt is the previous prompt plus the previous
// output plus new input (a tool result or a user message), so each turn's hash ids extend the
// previous turn's (the prefix property). A turn stops with `tool_use` (the next request follows
// a tool gap) or `end_turn` (the next request follows a human gap). A tool_use turn may spawn
// sub-agents that run under their own prefix, disjoint from the parent's and shared by
// siblings; the parent's next request waits for the longest of them. Sessions start staggered
// by exponential inter-arrival times. Output is the common workload shape (agentic_workload.h):
// WekaConversation values with 64-token blocks whose ids are local to the session (ids
// [0, shared prefix blocks) are the tools+system prefix, equal in every session).
//
// Every distribution and the way its parameters were fitted to the statistics of the WEKA
// Claude Code traces is documented on the option fields below and in docs/WORKLOADS.md. Generated
// `t` excludes server time (a closed-loop replay adds its own). Pure functions of their options;
// thread-safe. Same options (seed included), same output.
#ifndef AGENTKV_SIM_WORKLOAD_SYNTHETIC_AGENTIC_H_
#define AGENTKV_SIM_WORKLOAD_SYNTHETIC_AGENTIC_H_

#include <cstdint>
#include <memory>

#include "agentkv/base/rng.h"
#include "agentkv/base/status.h"
#include "agentkv/base/time.h"
#include "agentkv/sim/workload/agentic_workload.h"
#include "agentkv/sim/workload/conversation_source.h"

namespace agentkv::sim {

// Tokens per block of a generated session (the WEKA block size).
inline constexpr int32_t kSyntheticBlockSize = 64;

// A log-normal distribution given by its median and the standard deviation `sigma` of its
// logarithm: X = median * exp(sigma * Z), Z standard normal. Fitted from a median and a p90
// by sigma = ln(p90 / median) / 1.2816 (1.2816 is the standard normal's 90th percentile).
struct LogNormal {
  // Valid range: finite, > 0.
  double median = 1.0;
  // Valid range: finite, in [0, 10].
  double sigma = 0.0;

  // The distribution with the given median and 90th percentile. Precondition:
  // 0 < median <= p90.
  static LogNormal FromMedianP90(double median, double p90);

  // One draw; consumes exactly two Rng draws (Box-Muller, cosine branch).
  double Sample(Rng& rng) const;

  friend bool operator==(const LogNormal&, const LogNormal&) = default;
};

struct SyntheticAgenticOptions {
  // Seed of the one Rng every draw comes from. Default: 1. Any value.
  uint64_t seed = 1;
  // Sessions (conversations) to generate. Default: 16. Range [1, kMaxReplayConversations]: the
  // replay drives no more, so more are refused before any is generated.
  int64_t sessions = 16;
  // Mean time between consecutive session starts; starts are a Poisson process beginning at 0
  // (exponential inter-arrivals). Default: 60 s (the agentic replay's default stagger).
  // Range [0, 1e6 s].
  TimeNs mean_session_interarrival = TimeNs::Seconds(60);

  // Main-agent requests per session, rounded to an integer >= 1 and capped at max_turns.
  // Fitted to "requests per trace p50 48, mean 80": median 48 and
  // sigma = sqrt(2 ln(80 / 48)) = 1.011 (the log-normal mean is median * exp(sigma^2 / 2)).
  LogNormal turns{48.0, 1.011};
  // Default: 1178 (the largest WEKA trace). Range [1, 100000].
  int64_t max_turns = 1178;
  // Probability that a turn other than the last stops with end_turn (the last always does).
  // Default: 0.08, measured on the 39 WEKA traces in data/weka (97 of 1,210 main
  // requests; the reference gives no share). Range [0, 1].
  double end_turn_probability = 0.08;
  // Gap before the request after a tool_use turn (includes the tool's execution), seconds.
  // Fitted to p50 9 s / p90 71 s: median 9, sigma ln(71 / 9) / 1.2816 = 1.612.
  LogNormal tool_gap_s = LogNormal::FromMedianP90(9.0, 71.0);
  // Gap before the request after an end_turn turn (a human reply), seconds. Fitted to
  // p50 127 s / p90 1,893 s: median 127, sigma ln(1893 / 127) / 1.2816 = 2.108.
  LogNormal human_gap_s = LogNormal::FromMedianP90(127.0, 1893.0);

  // Tools+system prompt at the start of every session, tokens (scaled by context_scale). The
  // same block ids in every session. Default: 15,000 ("about 15K tokens" in the reference).
  // Range [0, 10^7].
  int64_t shared_prefix_tokens = 15'000;
  // New input tokens appended per turn (the first user message, then tool results or user
  // replies). Fitted so that the median session (48 turns) ends near the reference's final
  // context p50 of 2,102 blocks: (2,102 - 234 prefix blocks) * 64 / 47 turns = 2,543 tokens of
  // growth per turn = mean output (416) + mean new input (2,127); sigma 1.0 (not in the
  // reference), hence median 2,127 / exp(0.5) = 1,290. With it consecutive-request overlap is
  // about 0.96-0.99 over most of a session, matching overlap p50 0.993 / mean 0.966.
  LogNormal new_input_tokens{1290.0, 1.0};
  // Output tokens per request (kept in the next prompt). Fitted to p50 218 / p90 937.
  LogNormal output_tokens = LogNormal::FromMedianP90(218.0, 937.0);
  // A session ends early when its next prompt would exceed this many blocks (before scaling).
  // Default: 14,000 (the reference's largest final context, 13,974 blocks). Range [1, 10^7].
  int64_t max_context_blocks = 14'000;
  // Multiplies every token count drawn (prefixes, new input, output) and max_context_blocks,
  // for small workloads: 0.1 gives a median final context near 210 blocks. Default: 1.
  // Range (0, 1].
  double context_scale = 1.0;

  // Probability that a tool_use turn (not the last) spawns sub-agents. Default: 0.02, measured
  // on the 39 traces in data/weka (26 sub-agents over 1,210 main requests; the public set as a
  // whole has 70 over 59,204, 0.0012). Range [0, 1].
  double subagent_spawn_probability = 0.02;
  // Siblings per spawn: 1, plus one more with this probability each time, up to
  // max_siblings. Default 0.25 and 3, for "concurrent siblings median 1, maximum 3".
  // Ranges [0, 1] and [1, 64].
  double extra_sibling_probability = 0.25;
  int64_t max_siblings = 3;
  // Requests per sub-agent, rounded, in [1, max_subagent_requests]. Median 11 (reference);
  // sigma 0.335 puts the 99th percentile at the observed maximum 24: ln(24 / 11) / 2.326.
  LogNormal subagent_requests{11.0, 0.335};
  // Default: 24. Range [1, 10000].
  int64_t max_subagent_requests = 24;
  // Sub-agent duration (spawn to its last request), seconds; its requests are evenly spaced
  // over it. Fitted to median 126 s / p90 299 s.
  LogNormal subagent_duration_s = LogNormal::FromMedianP90(126.0, 299.0);
  // The sub-agent's own tools+system prefix, tokens: 7,401 + 1,465 (the reference's sample
  // sub-agent header). Shared by the siblings of a session, disjoint from the parent's ids
  // ("0 % of sub-agent hash_ids overlap the parent's"). Range [0, 10^7].
  int64_t subagent_prefix_tokens = 8'866;
  // New input per sub-agent request (task prompt, then file reads). Median 4,000, sigma 1.0:
  // mean about 6.6K tokens per request, so an 11-request sub-agent's cumulative input is
  // about 0.4-0.5M tokens (reference: median 474K). Output uses output_tokens.
  LogNormal subagent_new_input_tokens{4000.0, 1.0};

  friend bool operator==(const SyntheticAgenticOptions&, const SyntheticAgenticOptions&) = default;
};

// OK, or InvalidArgument naming the first field out of range and its value, e.g.
// `SyntheticAgenticOptions.sessions: must be in [1, 100000], got 0` or
// `SyntheticAgenticOptions.tool_gap_s.sigma: must be in [0, 10], got -1`.
[[nodiscard]] Status ValidateSyntheticAgenticOptions(const SyntheticAgenticOptions& options);

// Bytes (ApproximateBytes) the workload of `options` would take, whatever options.sessions is
// (even past its range): the bytes of its first min(sessions, 8) sessions, which it generates,
// scaled to options.sessions (the sessions are drawn from one distribution). What a refusal of
// too many sessions reports. Precondition: `options` is valid but for `sessions` >= 1.
int64_t EstimateSyntheticAgenticBytes(const SyntheticAgenticOptions& options);

// Generates options.sessions sessions. Session i has id "synthetic-<i>", source "synthetic",
// block_size 64; starts are non-decreasing from 0. Requests: `t` of the first is 0, each later
// `t` is the previous `t` plus its `think_time`; `hash_ids` has floor(in / 64) ids and extends
// the previous request's. Sub-agents: agent ids "agent_001", ...; spawned at the spawning
// turn's `t`, written as WEKA does (completion = spawn + duration, duration = its last
// request's `t`, status completed), their requests are relative to the spawn, the last stops
// with end_turn, and the parent's next think_time is the longest sibling duration (so the
// parent's next request is the first at or after every sibling's completion). The errors of
// ValidateSyntheticAgenticOptions.
StatusOr<AgenticWorkload> GenerateSyntheticAgentic(const SyntheticAgenticOptions& options);

// The sessions of `options` as a streamed source (conversation_source.h): conversation k and its
// start are those GenerateSyntheticAgentic gives (equal, field for field), but conversation k is
// generated again each time it is loaded, from the random stream recorded for it. Construction
// walks the generator once, keeping per session only its start, its stream and its request count
// (24 bytes), and refuses a session that a replay could not drive: a token count out of
// CheckTokens' range or more than 999 sub-agents (InvalidArgument naming session and field).
// options.sessions is in [1, kMaxStreamedConversations] here; the other fields as
// ValidateSyntheticAgenticOptions checks them.
StatusOr<std::shared_ptr<const ConversationSource>> StreamSyntheticAgentic(
    const SyntheticAgenticOptions& options);

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_WORKLOAD_SYNTHETIC_AGENTIC_H_
