#include "tools/agentkv/load_command.h"

#include <fmt/core.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>
#include <utility>

#include "agentkv/base/hash.h"
#include "agentkv/load/load_run.h"
#include "agentkv/net/http_types.h"
#include "agentkv/report/replay_report.h"
#include "tools/agentkv/cli_support.h"

namespace agentkv::tools {
namespace {

constexpr const char* kDescription =
    "Drive a live fleet (the agentkv gateway, a router or an engine) with an agentic workload "
    "or a trace, "
    "measure it, and write the replay's report with the measurement as one arm";

constexpr const char* kFooter = R"(What it does:
  Replays the workload `agentkv replay` would (same --workload flags, seeds and session
  starts; sub-agents spawn and parents wait for them as there) against --url in real time:
  each agent sends its next request when its previous answer has streamed back plus the
  recorded tool or human gap. A Mooncake trace is open loop: each request is sent at its
  timestamp as its own session, whatever happened to the earlier ones. Every request
  streams, so the first token's time is measured.
  --time-scale S runs every recorded gap S times faster and reports every measured time
  multiplied by S: against `agentkv emulate ... --time-scale S` the result is what the cost
  model gives at scale 1, in 1/S of the time; against a real engine keep 1.

Prompts (--api):
  generate     SGLang /generate with input_ids: token exact. A block of the workload is a
               block of token ids derived from its key, so equal prefixes are equal ids; the
               ids an answer generated are re-sent where the agent's next turn re-sends it.
  completions  /v1/completions with the prompt as token ids: exact prompts, but the answer
               comes back as text, so a next turn re-sends synthesized ids where the answer was
               (those blocks miss where a replay counts them cached).
  chat         /v1/chat/completions, one user message spelling each id as a 4-byte word: one
               pseudo token per word on the engine emulator, approximate on a real tokenizer.

Agent behaviour (on by default; --plain-client turns all off):
  session_id per conversation, X-SMG-Routing-Key (the session, or with
  --agentic-subagent-routing parent the parent's), X-Agentkv-Pause (the pause after the
  request), X-Agentkv-Parent-Session (+ X-Agentkv-Parent-Signature with --parent-hint-key),
  X-Agentkv-Session-Retain for retained rollout sessions, a unique rid per attempt, and
  POST /v1/sessions/{id}/close (the agentkv gateway's) when an agent ends.

Ramp (--ramp, kv-cache-tester's method): instead of the workload's session starts,
--ramp-start-users conversations begin at once and --ramp-step-users more every --ramp-period-s
(loop seconds); after each step the TTFT p95 of the requests whose first token came during it
is held against --slo-s, and the run stops at the first step past it. The report's `measured`
block lists every step (users, requests, TTFT p95) and the users held.

Throughput (--output-tokens 1 --time-scale 10000 against an --unpaced engine): how many
requests per second the client sustains; the last line gives the rate over the whole run and
over the first 90 % of requests (the workload's tail, where a few long sessions run alone, left
out), and the client's CPU per request.

Measured: per request TTFT (send to first streamed token), inter-token latency, end to end,
the server's cached tokens (meta_info.cached_tokens, usage.prompt_tokens_details.cached_tokens),
errors by kind; per session server time as the replay defines it. A 400 counts as refused and
the agent goes on; other failures are retried (--retries), then counted and the agent goes on.
Not on the wire, so left at 0: the engine's split of uncached tokens into cold and evicted
recompute (all count as cold), preemptions, queueing delay.

Output: the replay's table on stdout, --json and --html (the replay's schema, one arm named
--label, with a `measured` block: time scale, wall and client CPU seconds, inter-token latency,
attempts, errors, closes). Progress every 5 s on stderr. Ctrl-C stops sending, cancels what is in
flight, closes the sessions opened and reports what completed.

Compare with a prediction:
  agentkv replay --arms baseline --num-engines 2 --json predicted.json ...
  agentkv load --url http://127.0.0.1:30000 --label baseline --json measured.json ...
  agentkv compare predicted.json measured.json

Exit codes: 0 the run ended (failed requests are measurements); 2 bad flags or trace; 1 internal
error.)";

// A run id from the clock and the process: sessions, rids and prompt ids of two runs differ.
std::string FreshRunId() {
  const auto now = std::chrono::system_clock::now().time_since_epoch().count();
  const uint64_t h = HashCombine(static_cast<uint64_t>(now), static_cast<uint64_t>(getpid()));
  return fmt::format("{:08x}", h & 0xffffffffULL);
}

// Receives SIGINT or SIGTERM on its own thread (BlockTerminationSignals first) and sets `stop`;
// Finish() ends it when the run ended by itself.
class StopOnSignal {
 public:
  explicit StopOnSignal(std::atomic<bool>* stop)
      : stop_(stop), thread_([this] {
          const int signal = WaitForTerminationSignal();
          if (!finishing_.load()) {
            fmt::print(stderr, "agentkv load: {} received, stopping\n",
                       signal == SIGINT ? "SIGINT" : "SIGTERM");
            stop_->store(true);
          }
        }) {}
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;
  ~StopOnSignal() {
    finishing_.store(true);
    if (!stop_->load()) pthread_kill(thread_.native_handle(), SIGTERM);
    thread_.join();
  }

 private:
  std::atomic<bool>* stop_;
  std::atomic<bool> finishing_{false};
  std::thread thread_;
};

// The run in one line on stderr: requests, wall time and rate, client CPU, failures.
void PrintRunLine(const sim::ArmResult& arm) {
  const sim::MeasuredRun& m = *arm.measured;
  fmt::print(stderr,
             "agentkv load: {} requests in {:.1f} s wall ({:.0f} req/s; the first 90 % at {:.0f} "
             "req/s), client CPU {:.2f} s ({:.1f} us/request), {} failed{}\n",
             arm.requests_completed, m.wall_s,
             m.wall_s > 0 ? static_cast<double>(arm.requests_completed) / m.wall_s : 0.0,
             m.first_90_percent_requests_per_s, m.client_cpu_s,
             arm.requests_completed > 0
                 ? m.client_cpu_s * 1e6 / static_cast<double>(arm.requests_completed)
                 : 0.0,
             m.requests_failed, m.stopped ? ", stopped early" : "");
  if (m.ramp.has_value()) {
    const sim::RampResult& ramp = *m.ramp;
    fmt::print(stderr,
               "agentkv load: ramp: {} users held within TTFT p95 {} s ({}) over {} steps\n",
               ramp.users_held, ramp.ttft_slo_s,
               ramp.slo_exceeded ? fmt::format("exceeded at {} users", ramp.steps.back().users)
                                 : std::string("never exceeded: the workload ran out of users"),
               ramp.steps.size());
  }
}

}  // namespace

// Long: one flat list of the command's flag registrations, in the order --help shows them.
LoadCommand::LoadCommand(CLI::App& app)
    : workload_("agentkv-load.json", "agentkv-load.html", ReplayFlagSet::kWorkloadAndOutput) {
  command_ = app.add_subcommand(kName, kDescription);
  command_->footer(kFooter);
  const std::string target = "Target";
  command_
      ->add_option("--url", url_, "The endpoint: http://host:port of the gateway, router or engine")
      ->required()
      ->group(target);
  command_->add_option("--api", api_, "generate (input_ids, token exact), completions or chat")
      ->check(CLI::IsMember({"generate", "completions", "chat"}))
      ->capture_default_str()
      ->group(target);
  command_->add_option("--model", model_, "`model` of the OpenAI routes")
      ->capture_default_str()
      ->group(target);
  command_->add_option("--connections", connections_, "Connections to the endpoint, in [1, 65536]")
      ->capture_default_str()
      ->group(target);
  command_
      ->add_option("--timeout-s", timeout_s_,
                   "Longest wait for an answer's headers or between two pieces of it, seconds")
      ->capture_default_str()
      ->group(target);
  command_
      ->add_option("--retries", retries_,
                   "New attempts of a failed request (not of a 400), in [0, 100]")
      ->capture_default_str()
      ->group(target);
  command_
      ->add_option("--output-tokens", output_tokens_,
                   "Every request asks for N output tokens instead of the workload's (1 for a "
                   "throughput run), in [1, 2^20]; 0 = the workload's")
      ->type_name("N")
      ->capture_default_str()
      ->group(target);
  command_
      ->add_option("--vocab-size", vocab_size_,
                   "Token ids are drawn in [1000, N), N in (1000, 2^31]")
      ->capture_default_str()
      ->group(target);

  const std::string run = "Run";
  command_
      ->add_option("--time-scale", time_scale_,
                   "Recorded gaps run this many times faster, measured times are multiplied "
                   "by it; in (0, 10000]")
      ->capture_default_str()
      ->group(run);
  command_
      ->add_option("--label", label_, "The arm's name in the report (e.g. baseline, to compare)")
      ->capture_default_str()
      ->group(run);
  command_
      ->add_option("--run-id", run_id_,
                   "Names sessions and rids (load-<id>-N) and salts prompt ids; default: fresh "
                   "per run, so runs never share KV")
      ->group(run);

  const std::string ramp = "Ramp (kv-cache-tester's method)";
  command_
      ->add_flag("--ramp", ramp_,
                 "Start users (the workload's conversations, in order) step by step instead of "
                 "at the workload's times; stop at the first step whose TTFT p95 exceeds --slo-s "
                 "and report the users held")
      ->group(ramp);
  command_->add_option("--ramp-start-users", ramp_start_users_, "Users at once, in [1, 1000]")
      ->capture_default_str()
      ->group(ramp);
  command_->add_option("--ramp-step-users", ramp_step_users_, "Users added per step, in [1, 1000]")
      ->capture_default_str()
      ->group(ramp);
  command_
      ->add_option("--ramp-period-s", ramp_period_s_,
                   "Seconds per step (loop time: --time-scale compresses it), in [0.001, 86400]")
      ->capture_default_str()
      ->group(ramp);
  command_->add_option("--slo-s", slo_s_, "The TTFT p95 a step must stay within, seconds")
      ->capture_default_str()
      ->group(ramp);

  const std::string agent = "Agent behaviour";
  command_
      ->add_flag("--plain-client", plain_client_,
                 "Send none of the agent's extras: a plain OpenAI/SGLang client")
      ->group(agent);
  command_->add_option("--send-session-ids", session_ids_, "session_id per conversation")
      ->capture_default_str()
      ->group(agent);
  command_->add_option("--send-routing-keys", routing_keys_, "X-SMG-Routing-Key: the session")
      ->capture_default_str()
      ->group(agent);
  command_
      ->add_option("--send-pause-hints", pause_hints_, "X-Agentkv-Pause: the pause that follows")
      ->capture_default_str()
      ->group(agent);
  command_
      ->add_option("--send-parent-hints", parent_hints_, "X-Agentkv-Parent-Session on sub-agents")
      ->capture_default_str()
      ->group(agent);
  command_
      ->add_option("--close-sessions", close_sessions_,
                   "POST /v1/sessions/{id}/close when an agent ends")
      ->capture_default_str()
      ->group(agent);
  command_
      ->add_option("--parent-hint-key", parent_hint_key_,
                   "Sign parent hints (HMAC-SHA256), as the gateway's --parent-hint-key")
      ->group(agent);
  command_
      ->add_option("--agentic-subagent-routing", subagent_routing_,
                   "own (a sub-agent's session) or parent (its parent's) as routing key")
      ->check(CLI::IsMember({"own", "parent"}))
      ->capture_default_str()
      ->group(agent);
  workload_.Add(*command_);
}

load::LoadOptions LoadCommand::Options(const ReplayPlan& plan) const {
  const std::string run_id = run_id_.empty() ? FreshRunId() : run_id_;
  load::LoadOptions options;
  load::LiveTargetOptions& t = options.target;
  t.url = url_;
  t.api = load::ParseLoadApi(api_).value();
  t.model = model_;
  t.tokens_per_block = plan.agentic.has_value() ? plan.agentic->conversations.front().block_size
                                                : plan.open_loop_block;
  t.vocab_size = vocab_size_;
  if (output_tokens_ != 0) t.output_tokens = output_tokens_;
  t.salt = Hash64(std::string_view(run_id), 0x6c6f6164);
  t.session_prefix = "load-" + run_id + "-";
  t.session_ids = session_ids_ && !plain_client_;
  t.routing_keys = routing_keys_ && !plain_client_;
  t.pause_hints = pause_hints_ && !plain_client_;
  t.parent_hints = parent_hints_ && !plain_client_;
  t.close_sessions = close_sessions_ && !plain_client_;
  t.parent_hint_key = parent_hint_key_;
  t.retries = retries_;
  t.connections = static_cast<size_t>(connections_);
  t.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s_ * 1000));
  options.driver.shared_prefix_ids = plan.options.shared_prefix_ids;
  options.driver.subagent_models = plan.options.subagent_models;
  options.driver.subagent_routing = sim::ParseSubagentRouting(subagent_routing_).value();
  options.time_scale = time_scale_;
  if (ramp_) {
    options.ramp = load::RampOptions{.start_users = ramp_start_users_,
                                     .step_users = ramp_step_users_,
                                     .period = TimeNs::Seconds(ramp_period_s_),
                                     .ttft_slo = TimeNs::Seconds(slo_s_)};
  }
  options.label = label_;
  options.description = plan.description;
  options.seed = plan.seed;
  return options;
}

Status LoadCommand::CheckFlags() const {
  if (connections_ < 1 || connections_ > 65'536) {
    return InvalidArgumentError(
        fmt::format("--connections must be in [1, 65536], got {}", connections_));
  }
  if (!(timeout_s_ > 0) || timeout_s_ > 86'400) {
    return InvalidArgumentError(
        fmt::format("--timeout-s must be in (0, 86400], got {}", timeout_s_));
  }
  if (!(time_scale_ > 0) || time_scale_ > 10'000) {
    return InvalidArgumentError(
        fmt::format("--time-scale must be in (0, 10000], got {}", time_scale_));
  }
  if (output_tokens_ < 0 || output_tokens_ > (int64_t{1} << 20)) {
    return InvalidArgumentError(
        fmt::format("--output-tokens must be in [0, 2^20], got {}", output_tokens_));
  }
  if (vocab_size_ <= load::PromptBook::kFirstToken ||
      vocab_size_ > load::PromptBook::kMaxVocabSize) {
    return InvalidArgumentError(fmt::format("--vocab-size must be in ({}, 2^31], got {}",
                                            load::PromptBook::kFirstToken, vocab_size_));
  }
  if (retries_ < 0 || retries_ > 100) {
    return InvalidArgumentError(fmt::format("--retries must be in [0, 100], got {}", retries_));
  }
  if (!(ramp_period_s_ >= 0.001) || ramp_period_s_ > 86'400) {
    return InvalidArgumentError(
        fmt::format("--ramp-period-s must be in [0.001, 86400], got {}", ramp_period_s_));
  }
  if (!(slo_s_ > 0) || slo_s_ > 86'400) {
    return InvalidArgumentError(fmt::format("--slo-s must be in (0, 86400], got {}", slo_s_));
  }
  for (const auto& [flag, users] : {std::pair{"--ramp-start-users", ramp_start_users_},
                                    std::pair{"--ramp-step-users", ramp_step_users_}}) {
    if (users < 1 || users > 1000) {
      return InvalidArgumentError(fmt::format("{} must be in [1, 1000], got {}", flag, users));
    }
  }
  if (StatusOr<net::HttpEndpoint> url = net::ParseBaseUrl(url_); !url.ok()) {
    return InvalidArgumentError("--url: " + std::string(url.status().message()));
  }
  return Status::Ok();
}

int LoadCommand::Run() const {
  if (Status s = CheckFlags(); !s.ok()) return ReportError(kName, s);
  StatusOr<ReplayPlan> plan = workload_.Plan();
  if (!plan.ok()) return ReportError(kName, plan.status());
  if (plan->agentic.has_value() ? plan->agentic->conversations.empty() : plan->open_loop.empty()) {
    return ReportError(kName, "the workload has no request", kExitBadInput);
  }
  load::LoadOptions options = Options(*plan);
  if (Status s = options.Validate(); !s.ok()) return ReportError(kName, s);

  const bool quiet = plan->quiet;
  auto last_line = std::chrono::steady_clock::now();
  options.progress = [&](const load::LoadProgress& p) {
    if (quiet) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_line < std::chrono::seconds(5)) return;
    last_line = now;
    fmt::print(
        stderr,
        "agentkv load: {}/{} requests done, {} in flight, {} errors, {:.0f} s (loop {:.0f} s)\n",
        p.completed, p.total, p.in_flight, p.errors, p.wall_s, p.loop_s);
  };
  std::atomic<bool> stop{false};
  options.stop = &stop;
  BlockTerminationSignals();
  StatusOr<sim::ReplayResult> result = [&] {
    StopOnSignal on_signal(&stop);
    return plan->agentic.has_value() ? load::RunLoad(*plan->agentic, options)
                                     : load::RunOpenLoopLoad(plan->open_loop, options);
  }();
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
  if (!quiet) PrintRunLine(result->arms.front());
  return kExitOk;
}

}  // namespace agentkv::tools
