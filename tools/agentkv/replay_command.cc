#include "tools/agentkv/replay_command.h"

#include <fmt/core.h>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string_view>
#include <utility>

#include "agentkv/report/replay_report.h"
#include "agentkv/sim/replay/replay_arms.h"
#include "tools/agentkv/arm_help.h"
#include "tools/agentkv/cli_support.h"
#include "tools/agentkv/progress_line.h"

namespace agentkv::tools {
namespace {

constexpr const char* kDescription =
    "Replay an agentic workload through a simulated SGLang fleet under several policy arms "
    "and report, side by side, what each agentkv feature buys";

// The footer before the arms; {kv} is the synthetic workload's default KV per engine.
constexpr const char* kFooterIntro = R"(What it does:
  Builds a simulated fleet (--num-engines engines behind an sgl-router model; each engine is
  agentkv's step scheduler over its KV cache manager, priced by an analytic cost model) with
  the agentkv gateway in front (program-aware admission fed by engine gauges polled every
  2 s, and the session lifecycle), then replays the workload through it once per arm,
  in simulated time. Agents are closed loop: a session sends its next request only after its
  previous response plus the recorded tool or human gap; sub-agents spawn and are joined as
  the trace says. Same inputs, same output (the JSON is byte-identical).

Workloads (--workload):
  synthetic  the embedded default: seeded sessions fitted to the public Claude Code traces
             (--sessions, --context-scale, --session-interarrival-s, --seed); the tools and
             system prompt is shared by every session. Without --max-total-tokens each engine
             gets {kv} tokens of KV, a KV-constrained point.
  weka       WEKA Claude Code JSON traces (--trace files or directories); conversations start
             as a Poisson process of mean --session-interarrival-s (default 60) seeded by
             --seed; --shared-prefix-blocks N shares block ids below N across files.
             Files may be gzip (*.json.gz). A sub-agent spawns at its entry's t (its
             completion) minus duration_ms (at t when duration_ms is absent or null); the
             parent's next request waits for it unless its status is async_launched.
             Optional fields a file leaves out or sets to null get their documented
             fallback; the report says how many (one `trace:` line per kind).
             --subagent-models exclude leaves out sub-agents on another model than their
             main agent (e.g. Haiku helpers of an Opus session); default share.
  mooncake   Mooncake JSONL (--trace), open loop by timestamp, 512-token blocks.
  bailian    Bailian JSONL (--trace), conversations grouped by chat_id/parent_chat_id.
  rollout    an RL rollout step as Relax-style frameworks run it: --rollout-prompts tasks x
             --rollout-group-size samples (a GRPO group shares its task prompt), each a
             multi-turn tool-using trajectory; --rollout-steps steps, synchronous (a step
             starts when the previous one ended) or --rollout-mode async with at most
             --rollout-staleness steps of lag; each engine keeps its cost-model KV size.
             The table opens with the rollout group (step makespan, GPU busy fraction,
             KV token usage, queueing).

)";

// What each arm of --arms does, for the Arms section of --help (FormatArmsHelp): the default
// arms, in any order (the section lists them in the order they run), then arms and features
// that run only when named.
constexpr ArmHelp kArmHelp[] = {
    {"baseline", "SGLang default: prefix reuse, LRU, no lifecycle, no admission"},
    {"+lifecycle", "close each session on every engine when it ends (--session-close-mode)"},
    {"+admission", "program-aware admission: token ledger and global FIFO"},
    {"+admission-v2",
     "admission v2: uncached reservations, per-engine budget and waiting, continuing\n"
     "sessions first (--agentic-admission-program-window-s); instead of +admission"},
    {"+subagent-demotion",
     "demote a finished sub-agent's KV when its parent returns, on every engine\n"
     "(--agentic-subagent-demotion-delivery; parent-engine: only the engine the\n"
     "parent's request lands on, as the seed)"},
    {"+gap-retention",
     "evict within a priority by finish time less the pause each session is expected\n"
     "to take, learned online per pause kind; an ended session's blocks first"},
    {"+working-set",
     "program-level working-set admission at the gateway: a paused program holds its\n"
     "context (pinned on its engine) for its predicted pause; a new program waits, in\n"
     "program arrival order with an aging bound, until it fits (--agentic-working-set-*)"},
    {"+program-fcfs",
     "every engine orders its waiting queue by the arrival of each request's program\n"
     "(Continuum's program-level FCFS without its pins)"},
    {"+host-tier", "a host KV tier of --hicache-ratio x the device tier"},
    {"+stall-offload+host-tier",
     "a paused session's KV moves to the host tier under memory pressure and is\n"
     "prefetched before its predicted return (--stall-offload-pressure, -quantile,\n"
     "-min-stall-s); +stall-offload needs +host-tier"},
    {"all", "lifecycle, admission, subagent-demotion and host-tier together"},
    {"agentkv",
     "the recommended set without a host tier: lifecycle, admission-v2, working-set\n"
     "(chosen by scripts/choose_arms.py on half of the WEKA traces, docs/RESULTS.md)"},
    {"agentkv+host-tier",
     "the recommended set with a host tier, chosen by the same rule: host-tier,\n"
     "lifecycle, admission-v2"},
    {"continuum",
     "Continuum: cost-aware TTL pins after tool-call turns, learned per pause class\n"
     "(--continuum-memory-price), program-level FCFS (--continuum-program-fcfs)"},
    {"oracle",
     "clairvoyant eviction: evicts the block whose next use (each agent's future\n"
     "requests in recorded order, timed by the recorded gaps) is farthest away; no\n"
     "host tier, no features (docs/REPLAY.md, the oracle arm)"},
    {"infinite-cache", "enough device KV for the whole workload (the upper bound)"},
    {"fixed-ttl",
     "pin a session's KV for --fixed-ttl-s after every tool-call turn (the former\n"
     "continuum-ttl, a name now refused)"},
    {"+per-conversation",
     "per-conversation retention alone: a turn's blocks no one else uses are dropped\n"
     "when its retention record falls out"},
    {"+subagent-demotion=P", "+subagent-demotion to priority P in [0, 100]"},
};

// The footer after the arms.
constexpr const char* kFooterTail = R"(
Features combine: "baseline+host-tier", "+lifecycle+admission", "all+continuum"; the
agentic-curve names (lru, per_conversation, demote_p1, ...) are aliases.

Output:
  stdout   the arm table, with each arm's change against baseline in parentheses
  --json   the full result (default agentkv-replay.json; "" to skip)
  --html   a self-contained report with SVG charts (default agentkv-replay.html; "" to skip)
  stderr   progress once the run has taken 2 s: a line redrawn in place on a terminal;
           otherwise plain lines when an arm starts or finishes and at most every 5 s

Config files: --config FILE reads the same flags from a TOML or INI file, under a [replay]
section, one `flag-name = value` line each (lists as ["a", "b"]), e.g.
  [replay]
  workload = "weka"
  trace = ["data/weka"]
  arms = ["baseline", "+host-tier", "all"]
  num-engines = 4
Flags on the command line win over the file. An unknown section or key is an error naming
the file and line; a value is checked as the flag's would be.

Exit codes: 0 success; 2 bad flags or trace (one `agentkv replay: error:` line on stderr);
1 internal error.)";

}  // namespace

ReplayCommand::ReplayCommand(CLI::App& app) {
  command_ = app.add_subcommand(kName, kDescription);
  command_->footer(
      fmt::format(fmt::runtime(kFooterIntro), fmt::arg("kv", kDefaultSyntheticMaxTotalTokens)) +
      FormatArmsHelp(fmt::format("Arms (--arms, comma-separated; default: these {}, run in "
                                 "this order)",
                                 sim::DefaultArmNames().size()),
                     sim::DefaultArmNames(), kArmHelp, "Run only when named") +
      kFooterTail);
  flags_.set_streamed();
  flags_.Add(*command_);
}

int ReplayCommand::Run() const {
  const auto start = std::chrono::steady_clock::now();
  StatusOr<ReplayPlan> plan = flags_.Plan();
  if (!plan.ok()) return ReportError(kName, plan.status());
  const bool quiet = plan->quiet;
  ProgressLine progress_line(ProgressLine::ModeForStderr(!quiet));
  // Arms may run on several threads; the line keeps track of which are running.
  std::mutex progress_mutex;
  const sim::ReplayProgress progress = [&](size_t arm_index, size_t num_arms, std::string_view arm,
                                           double fraction) {
    const std::lock_guard<std::mutex> lock(progress_mutex);
    progress_line.Update(arm_index, num_arms, arm, fraction);
  };
  StatusOr<sim::ReplayResult> result = RunReplayPlan(*plan, progress);
  progress_line.Clear();
  if (!result.ok()) return ReportError(kName, result.status());
  fmt::print("{}", report::FormatReplayTable(*result));
  std::fflush(stdout);
  for (const auto& [path, render] : {std::pair{plan->json_path, &report::ReplayResultJson},
                                     std::pair{plan->html_path, &report::ReplayResultHtml}}) {
    if (path.empty()) continue;
    if (Status s = WriteFileAtomically(path, render(*result)); !s.ok()) {
      return ReportError(kName, s);
    }
    if (!quiet) fmt::print(stderr, "agentkv {}: wrote {}\n", kName, path);
  }
  if (!quiet) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fmt::print(stderr, "agentkv {}: {} arm{} in {:.1f} s\n", kName, result->arms.size(),
               result->arms.size() == 1 ? "" : "s", seconds);
  }
  return kExitOk;
}

}  // namespace agentkv::tools