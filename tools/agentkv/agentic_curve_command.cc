#include "tools/agentkv/agentic_curve_command.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "agentkv/sim/replay/agentic_replay.h"
#include "agentkv/sim/replay/instant_sources.h"
#include "agentkv/sim/replay/replay_arms.h"
#include "agentkv/sim/workload/weka_trace.h"
#include "tools/agentkv/arm_help.h"
#include "tools/agentkv/cli_support.h"

namespace agentkv::tools {
namespace {

constexpr int64_t kMaxBlocks = int64_t{1} << 30;
constexpr int64_t kMaxNumTurns = int64_t{1} << 20;
constexpr int64_t kMaxMinIdleSteps = int64_t{1} << 40;
constexpr double kMaxStaggerS = 1e6;
constexpr double kMinStepMs = 1e-3;
constexpr double kMaxStepMs = 1e9;

constexpr const char* kDescription =
    "What the agentic KV policies (per-conversation retention, finished-sub-agent demotion, "
    "session release) buy on WEKA Claude Code traces";

// The footer before the arms.
constexpr const char* kFooterIntro = R"(What it does:
  Replays several WEKA conversations (one JSON file each, plain or gzip; a directory stands
  for its *.json and *.json.gz files sorted by name) through ONE KV cache, as one engine would serve them. Conversation k
  (in the order given) starts at k * --stagger-s; its main agent's requests run at start + t,
  a sub-agent's at start + spawn + t (spawn: the entry's t, its completion, minus
  duration_ms; without duration_ms, the entry's t), all merged in time order (ties: conversation, main
  agent before sub-agents, request). Each request runs instantly: look up its hash_ids
  (64-token blocks, chained keys, namespaced per file), compute and cache what it missed,
  finish. It carries its session and conversation id; a sub-agent's carries its parent's id
  as an authenticated hint. Trace time drives the scheduler step counter (one step per
  --step-ms), which the sub-agent idle bound (--min-idle-steps) counts. The device holds
  floor(--capacity-fraction * unique blocks) blocks, or --capacity-blocks.
  --subagent-models exclude leaves out the sub-agents that run on another model than their
  main agent (default share: every sub-agent is replayed).


)";

// What each arm does (FormatArmsHelp): the defaults, then arms that run only when named.
constexpr ArmHelp kArmHelp[] = {
    {"lru", "block_reuse_policy default, sessions never closed: plain LRU"},
    {"per_conversation",
     "policy per_conversation: when a turn's retention record falls out\n"
     "(--max-num-turns), its blocks no one else uses are dropped"},
    {"demote_p1",
     "per_conversation + finished_subagent_priority 1: when a main agent sends a\n"
     "request, its sub-agents idle for the bound get priority 1 on the blocks they\n"
     "computed themselves (evicted first)"},
    {"demote_p20", "the same at priority 20"},
    {"session_release",
     "policy default, session_close_mode release: each main agent's and sub-agent's\n"
     "session is closed after its last request, freeing the blocks only it used"},
    {"demote_p1+release", "demote_p1 and session_release together"},
    {"oracle",
     "offline-optimal eviction (Belady's MIN): knowing every future request, evict\n"
     "the block whose next use is farthest away (the deeper one on ties). No policy\n"
     "at this capacity computes fewer tokens: the bound every arm is judged against"},
    {"+gap-retention",
     "gap-aware retention: evict by finish time less the pause each session is\n"
     "expected to take (learned from the trace's pause kinds as it runs); an ended\n"
     "session's blocks first"},
};

// The footer after the arms.
constexpr const char* kFooterTail = R"(
These names are aliases in the arm grammar of `agentkv replay --arms`: lru is baseline,
per_conversation is +per-conversation, demote_pN is +subagent-demotion=N, session_release
is +lifecycle. Any arm of that grammar that needs no fleet runs here too, for example
infinite-cache or +subagent-demotion=20+lifecycle.

Output: two header lines (traces, requests, unique blocks, capacity, timeline), then one row
per arm:
  hit_ratio          prompt blocks found cached (device, or host and onboarded) / looked up
  uncached_tokens    prompt tokens no tier supplied (to be computed)
  vs_lru%            change of uncached_tokens against the lru (or baseline) arm; - without one
  evictions          blocks evicted from the device to make room
  demoted_blocks     blocks that got the finished-sub-agent priority
  demoted            sub-agents demoted; restored: demoted sub-agents that came back
  retention_drops    blocks dropped when their turn's retention record fell out
  close_freed_tokens tokens whose blocks a session close freed
Progress goes to stderr, one line per arm (--quiet turns it off).

Exit codes: 0 success; 2 bad flags or trace (one `agentkv agentic-curve: error:` line on
stderr); 1 internal error.)";

std::string ArmNames() {
  std::string names;
  for (const std::string& arm : sim::AgenticCurveArmNames()) {
    if (!names.empty()) names += ", ";
    names += arm;
  }
  return names;
}

// Any arm of the replay grammar (replay_arms.h) is accepted; agentic-curve's own names are
// its aliases.
StatusOr<std::vector<sim::ArmSpec>> ParseArms(const std::vector<std::string>& names) {
  if (names.empty()) return sim::AgenticCurveArms();
  std::vector<sim::ArmSpec> arms;
  for (const std::string& name : names) {
    StatusOr<sim::ArmSpec> arm = sim::ParseArm(name);
    if (!arm.ok()) {
      return InvalidArgumentError(
          fmt::format("--arms: unknown arm \"{}\" (arms: {}, or an arm of agentkv replay such as "
                      "+subagent-demotion=20+lifecycle)",
                      name, ArmNames()));
    }
    if (std::any_of(arms.begin(), arms.end(),
                    [&name](const sim::ArmSpec& seen) { return seen.name == name; })) {
      return InvalidArgumentError(fmt::format("--arms: arm \"{}\" is listed twice", name));
    }
    arms.push_back(*std::move(arm));
  }
  return arms;
}

std::string Percent(const std::optional<double>& change) {
  return change.has_value() ? fmt::format("{:+.2f}", *change) : "-";
}

// `notes`: what the trace reader filled in (WekaFallbacks::Describe), one line each.
void PrintTable(const sim::AgenticReplayResult& r, const std::vector<std::string>& notes,
                TimeNs stagger, TimeNs step) {
  const double fraction = r.unique_blocks == 0 ? 0.0
                                               : static_cast<double>(r.device_blocks) /
                                                     static_cast<double>(r.unique_blocks);
  fmt::print(
      "agentic-curve: {} conversations, {} sub-agents, {} requests; {} unique blocks of "
      "{} tokens\n",
      r.conversations, r.subagents, r.requests, r.unique_blocks, r.tokens_per_block);
  for (const std::string& note : notes) fmt::print("  trace: {}\n", note);
  fmt::print(
      "device {} blocks ({:.2f}% of unique), host {} blocks; stagger {:g} s, step {:g} "
      "ms: {} steps over {:.1f} s\n",
      r.device_blocks, fraction * 100.0, r.host_blocks, stagger.seconds(), step.seconds() * 1e3,
      r.steps, r.span.seconds());
  // The arm column fits the longest name, and is never narrower than agentic-curve's own names.
  size_t width = 17;
  for (const sim::AgenticArmResult& a : r.arms) width = std::max(width, a.arm.size());
  fmt::print("{:<{}}  {:>9}  {:>15}  {:>8}  {:>10}  {:>14}  {:>7}  {:>8}  {:>15}  {:>18}\n", "arm",
             width, "hit_ratio", "uncached_tokens", "vs_lru%", "evictions", "demoted_blocks",
             "demoted", "restored", "retention_drops", "close_freed_tokens");
  for (const sim::AgenticArmResult& a : r.arms) {
    const kv::KvCacheStats& s = a.stats;
    fmt::print("{:<{}}  {:>9.4f}  {:>15}  {:>8}  {:>10}  {:>14}  {:>7}  {:>8}  {:>15}  {:>18}\n",
               a.arm, width, a.hit_ratio, s.uncached_tokens,
               Percent(a.uncached_change_vs_baseline_percent), s.device_evictions, s.demoted_blocks,
               s.demoted_children, s.restored_children, s.retention_dropped_blocks,
               s.tokens_freed_by_close);
  }
  std::fflush(stdout);
}

}  // namespace

AgenticCurveCommand::AgenticCurveCommand(CLI::App& app) {
  command_ = app.add_subcommand(kName, kDescription);
  command_->footer(std::string(kFooterIntro) +
                   FormatArmsHelp(fmt::format("Arms (each a fresh cache of the same capacity; "
                                              "default: these {}; --arms picks any, in the "
                                              "order given)",
                                              sim::AgenticCurveArmNames().size()),
                                  sim::AgenticCurveArmNames(), kArmHelp, "Run only when named") +
                   kFooterTail);
  command_
      ->add_option(
          "--traces", trace_paths_,
          "WEKA trace files or directories (a directory = its *.json and *.json.gz files by "
          "name)")
      ->required()
      ->type_name("PATH");
  CLI::Option* fraction_option =
      command_
          ->add_option("--capacity-fraction", capacity_fraction_,
                       "Device capacity as a fraction of the unique blocks, in (0, 1]")
          ->capture_default_str()
          ->type_name("F");
  capacity_option_ =
      command_
          ->add_option("--capacity-blocks", capacity_blocks_,
                       "Absolute device capacity in blocks (replaces --capacity-fraction)")
          ->type_name("N")
          ->excludes(fraction_option);
  command_->add_option("--host-blocks", host_blocks_, "Host (cold) tier blocks; 0 = none")
      ->capture_default_str()
      ->type_name("N");
  command_->add_option("--stagger-s", stagger_s_, "Seconds between conversation starts")
      ->capture_default_str()
      ->type_name("S");
  command_->add_option("--step-ms", step_ms_, "Trace milliseconds per scheduler step")
      ->capture_default_str()
      ->type_name("MS");
  command_
      ->add_option("--max-num-turns", max_num_turns_,
                   "block_reuse_config.max_num_turns of the per_conversation and demote arms")
      ->capture_default_str()
      ->type_name("N");
  command_
      ->add_option("--min-idle-steps", min_idle_steps_,
                   "finished_subagent_min_idle_iterations of the demote arms")
      ->capture_default_str()
      ->type_name("N");
  command_->add_option("--arms", arms_, "Comma-separated arms to run (default: all)")
      ->delimiter(',')
      ->type_name("LIST");
  command_
      ->add_option("--subagent-models", subagent_models_,
                   "Sub-agents on another model than their main agent: share (replayed on the same "
                   "fleet) or exclude (left out)")
      ->check(CLI::IsMember({"share", "exclude"}))
      ->capture_default_str()
      ->type_name("MODE");
  command_->add_flag("--quiet", quiet_, "Do not print progress on stderr");
}

int AgenticCurveCommand::Run() const {
  const bool has_capacity = capacity_option_->count() > 0;
  sim::AgenticReplayOptions options;
  {
    Status s = has_capacity ? CheckFlagRange("--capacity-blocks", capacity_blocks_, 1, kMaxBlocks)
                            : CheckFlagRange("--capacity-fraction", capacity_fraction_, 0.0, 1.0,
                                             LowerBound::kOpen);
    if (s.ok()) s = CheckFlagRange("--host-blocks", host_blocks_, 0, kMaxBlocks);
    if (s.ok()) s = CheckFlagRange("--stagger-s", stagger_s_, 0.0, kMaxStaggerS);
    if (s.ok()) s = CheckFlagRange("--step-ms", step_ms_, kMinStepMs, kMaxStepMs);
    if (s.ok()) s = CheckFlagRange("--max-num-turns", max_num_turns_, 1, kMaxNumTurns);
    if (s.ok()) s = CheckFlagRange("--min-idle-steps", min_idle_steps_, 0, kMaxMinIdleSteps);
    if (s.ok()) {
      // Each arm's cache allocates its device and host blocks up front.
      s = CheckKvBlocks(has_capacity ? fmt::format("--capacity-blocks {} + --host-blocks {}",
                                                   capacity_blocks_, host_blocks_)
                                     : fmt::format("--host-blocks {}", host_blocks_),
                        (has_capacity ? capacity_blocks_ : 0) + host_blocks_);
    }
    if (!s.ok()) return ReportError(kName, s);
  }
  StatusOr<std::vector<sim::ArmSpec>> arms = ParseArms(arms_);
  if (!arms.ok()) return ReportError(kName, arms.status());

  if (has_capacity) {
    options.capacity_blocks = capacity_blocks_;
  } else {
    options.capacity_fraction = capacity_fraction_;
  }
  options.host_blocks = host_blocks_;
  options.stagger = TimeNs(std::llround(stagger_s_ * 1e9));
  options.step_interval = TimeNs(std::llround(step_ms_ * 1e6));
  options.max_num_turns = static_cast<int32_t>(max_num_turns_);
  options.min_idle_steps = min_idle_steps_;
  options.arms = *std::move(arms);

  auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&start] {
    const auto now = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(now - start).count();
    start = now;
    return seconds;
  };
  // One conversation per file: more files than the replay takes are refused before any is read.
  StatusOr<std::vector<std::string>> paths = sim::ExpandWekaTracePaths(trace_paths_);
  if (!paths.ok()) return ReportError(kName, paths.status());
  if (static_cast<int64_t>(paths->size()) > sim::kMaxAgenticConversations) {
    return ReportError(kName, InvalidArgumentError(fmt::format(
                                  "--traces names {} WEKA files, more than the {} conversations "
                                  "the replay takes (one per file)",
                                  paths->size(), sim::kMaxAgenticConversations)));
  }
  StatusOr<std::vector<sim::WekaConversation>> conversations = sim::ReadWekaTraces(*paths);
  if (!conversations.ok()) return ReportError(kName, conversations.status());
  const std::vector<std::string> notes = sim::TotalFallbacks(*conversations).Describe();
  *conversations = sim::ApplySubagentModels(*std::move(conversations),
                                            sim::ParseSubagentModels(subagent_models_).value());
  int64_t requests = 0;
  for (const sim::WekaConversation& c : *conversations) requests += c.TotalRequests();
  const double read_s = elapsed();
  if (!quiet_) {
    // Printed with the first arm, so that a replay refused up front leaves one error line.
    // The first arm's time includes building the timeline and its block keys.
    options.on_arm_done = [&](size_t index, const sim::AgenticArmResult& result) {
      if (index == 0) {
        fmt::print(stderr, "agentkv {}: read {} trace files ({} requests) in {:.2f} s\n", kName,
                   conversations->size(), requests, read_s);
      }
      fmt::print(stderr, "agentkv {}: arm {}/{} {} replayed ({} requests) in {:.2f} s\n", kName,
                 index + 1, options.arms.size(), result.arm, requests, elapsed());
    };
  }
  StatusOr<sim::AgenticReplayResult> result = sim::RunAgenticReplay(*conversations, options);
  if (!result.ok()) return ReportError(kName, result.status());
  PrintTable(*result, notes, options.stagger, options.step_interval);
  return kExitOk;
}

}  // namespace agentkv::tools
