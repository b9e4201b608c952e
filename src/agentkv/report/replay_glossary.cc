// The definitions behind RowDefinition, keyed by row label (the share sections and the
// admission series by section). Each says what ArmResult's field counts, as the simulator fills
// it (sim/replay/arm_summary.cc, kv/kv_cache_stats.h, engine/prefix_pins.h).
#include "agentkv/report/replay_glossary.h"

#include <string>
#include <string_view>

namespace agentkv::report {
namespace {

struct Definition {
  std::string_view label;
  std::string_view text;
};

constexpr Definition kDefinitions[] = {
    // Rollout.
    {"steps", "RL rollout steps (groups of trajectories) run."},
    {"step makespan mean (s)",
     "Per rollout step, first trajectory start to last trajectory end; mean over steps."},
    {"step makespan max (s)", "The longest rollout step, first start to last end."},
    {"trajectories/s", "Trajectories (main-agent conversations) per second of the makespan."},
    {"generated tokens/s", "Output tokens per second of the makespan."},
    {"GPU busy fraction",
     "Engine busy time (every step as the cost model priced it) over engines x makespan."},
    {"compute utilization",
     "The cost model's compute time of every step (flops at the modelled MFU) over engines x "
     "makespan."},
    {"KV token usage mean", "KV held by running requests over capacity, mean over gauge samples."},
    {"KV token usage peak", "KV held by running requests over capacity, highest sample."},
    {"KV occupancy mean", "KV held or cached (evictable) over capacity, mean over samples."},
    {"KV occupancy peak", "KV held or cached (evictable) over capacity, highest sample."},
    {"requests waiting mean", "Requests in the admission FIFO plus engine queues, mean."},
    {"requests waiting peak", "Requests in the admission FIFO plus engine queues, highest."},
    // Prefix cache.
    {"token hit ratio device",
     "Prompt tokens found cached on the device at a request's first admission, over all prompt "
     "tokens."},
    {"token hit ratio host",
     "Prompt tokens onboarded from the host tier at first admission, over all prompt tokens."},
    {"token hit ratio dev+host", "Device plus host token hit ratio."},
    {"share of ideal hit ratio",
     "This arm's dev+host token hit ratio over the infinite-cache arm's; above 100 % reads "
     "\"exceeds the bound\"."},
    {"block hit ratio dev+host",
     "Full prompt blocks found cached (device or host) at first admission, over all prompt "
     "blocks looked up."},
    // Recompute.
    {"uncached tokens", "Prompt tokens computed at first admission: cold plus evicted recompute."},
    {"cold tokens",
     "Prompt tokens never computed on that engine before (or in a partial last block)."},
    {"evicted recompute tokens",
     "Full blocks the engine had computed and lost (evicted, dropped, released by a close), "
     "computed again: the eviction regret."},
    {"  after a tool call", "Evicted recompute of requests sent after a tool call."},
    {"  after a sub-agent wait",
     "Evicted recompute of requests sent after waiting for sub-agents."},
    {"  after a human turn", "Evicted recompute of requests sent after a human's turn."},
    {"  on a first request", "Evicted recompute of a conversation's first request."},
    {"preempted recompute tokens",
     "Tokens computed again after a preemption (not part of uncached tokens)."},
    // Throughput.
    {"makespan (s)", "First session start to last request completion."},
    {"requests/s", "Requests completed per second of the makespan."},
    {"output tokens/s", "Output tokens per second of the makespan."},
    // Latency.
    {"session time mean (s)",
     "Main agent: start to its last request's completion, client gaps included; mean."},
    {"session time p50 (s)", "Session time, median (nearest rank)."},
    {"session time p95 (s)", "Session time, 95th percentile."},
    {"session time p99 (s)", "Session time, 99th percentile."},
    {"server time mean (s)",
     "Per session (main agent and its sub-agents): the sum over its requests of gateway arrival "
     "to finish, so client gaps are left out; mean."},
    {"server time p50 (s)", "Server time per session, median."},
    {"server time p95 (s)", "Server time per session, 95th percentile."},
    {"server time p99 (s)", "Server time per session, 99th percentile."},
    {"queueing delay mean (s)",
     "Per request: gateway arrival to first admission into a running batch (admission wait "
     "included); mean."},
    {"queueing delay p95 (s)", "Queueing delay, 95th percentile."},
    {"TTFT p50 (s)", "Per request: gateway arrival to the first output token; median."},
    {"TTFT p95 (s)", "Time to first token, 95th percentile."},
    {"TTFT p99 (s)", "Time to first token, 99th percentile."},
    {"admission wait mean (s)", "Per request: time in the gateway's admission FIFO; mean."},
    {"admission wait p95 (s)", "Admission wait, 95th percentile."},
    // Engines.
    {"preemptions", "Running requests preempted to free KV, summed over engines."},
    {"device evictions",
     "Blocks that left the device tier to make room: offloaded plus dropped from the device."},
    {"offloads", "Blocks moved device -> host tier."},
    {"drops",
     "Blocks removed from the cache with no colder copy kept (no host tier or below its offload "
     "threshold, the host tier's own evictions, or dependents of such a block)."},
    {"onboards", "Blocks moved host -> device because a request needed them."},
    {"stall offloaded blocks",
     "Stall offload: blocks of paused sessions moved to the host tier ahead of demand."},
    {"stall prefetched blocks",
     "Stall offload: blocks moved back to the device before a predicted return."},
    // Lifecycle.
    {"sessions closed", "Session closes on engines, one per session per engine."},
    {"tokens freed by close", "Tokens whose blocks a session close freed."},
    {"demoted children", "Finished sub-agents whose KV was demoted when their parent returned."},
    {"demoted blocks", "Blocks those demotions lowered in priority."},
    {"restored children", "Demoted sub-agents that came back and were restored."},
    {"ttl pins",
     "Prefix pins taken on engines: fixed-ttl and continuum after tool-call turns, working-set "
     "holds of paused programs."},
    {"ttl expired", "Pins that expired before their conversation's next request."},
    {"ttl returned", "Pins whose conversation came back before expiry."},
    {"ttl declined by cost",
     "Continuum: tool-call turns not pinned because no TTL's benefit beat its memory cost."},
    {"ttl unpinned (pressure)",
     "Pins released under memory pressure before they expired or their program returned."},
    {"working-set waits", "Working set: requests that waited until their program's context fit."},
    {"working-set aged", "Working set: waiting programs admitted after the aging bound."},
    {"holds returned", "Working set: holds ended by the agent's return in time."},
    {"holds expired", "Working set: holds ended by the pause outliving its prediction."},
    // Conservation.
    {"requests issued", "Requests the workload sent."},
    {"requests completed", "Requests answered (refused ones included)."},
    {"requests refused",
     "Requests larger than the admission ceiling or an engine's KV or context, answered with an "
     "error and never run."},
    {"refused prompt tokens", "The prompt tokens of the refused requests."},
};

constexpr std::string_view kShareOf =
    "share of the baseline -> reference gap closed: (baseline - arm) / (baseline - reference); "
    "0 % is the baseline, 100 % the reference, above it reads \"exceeds the bound\".";

}  // namespace

std::string RowDefinition(const ReplayTableRow& row) {
  const std::string_view section = row.section;
  if (section.starts_with("share of ideal") || section.starts_with("share of oracle")) {
    const std::string reference =
        section.starts_with("share of ideal") ? "infinite-cache" : "oracle";
    return "Of " + row.label + ", the " + std::string(kShareOf) + " Reference: " + reference + ".";
  }
  if (section == "admission") {
    return "The gateway's agentic_kv/" + row.label +
           " series (admission and lifecycle counters) at the end of the arm.";
  }
  for (const Definition& d : kDefinitions) {
    if (d.label == row.label) return std::string(d.text);
  }
  return "";
}

}  // namespace agentkv::report
