#include "tools/agentkv/emulate_command.h"

#include <fmt/core.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>

#include "agentkv/base/bounds.h"
#include "agentkv/engine/cost_model.h"
#include "agentkv/engine/engine_config.h"
#include "agentkv/engine/stall_offload_policy.h"
#include "agentkv/kv/kv_cache_options.h"
#include "tools/agentkv/cli_support.h"

namespace agentkv::tools {
namespace {

constexpr const char* kDescription =
    "SGLang-compatible engine and sgl-router emulators, backed by agentkv's KV cache and step "
    "scheduler (no GPU needed)";

constexpr const char* kFooter = R"(Modes:
  engine  one emulated SGLang engine: /generate (streaming or not), /abort_request,
          /open_session, /close_session, /flush_cache, /server_info, /model_info, /health,
          /health_generate, /metrics (SGLang's metric names, one line per TP rank)
  router  an sgl-router in front of --worker-urls: /generate and the OpenAI routes forwarded by
          --policy; /workers, /list_workers, /add_worker, /remove_worker, /flush_cache,
          /get_loads; never forwards /abort_request or /close_session (as sgl-router)
  fleet   --engines N engines on consecutive ports from --engine-base-port (default: --port+1)
          and a router on --port in front of them, in one process

Each step of an engine lasts what the analytic cost model says for the batch (--model, --gpu,
--tp) divided by --speed (alias --time-scale: start the fleet with the --time-scale of the
`agentkv load` run that drives it, and its compressed run stays on the cost model's times);
--unpaced removes the wait (benchmarks). Prompts are token ids, or
text cut into 4-byte pseudo tokens; outputs are deterministic pseudo tokens.

Examples:
  agentkv emulate fleet --engines 4 --port 30000 --enable-session-radix-cache
  agentkv emulate engine --port 30001 --max-total-tokens 200000 --enable-session-radix-cache
  agentkv emulate router --port 30000 --worker-urls http://127.0.0.1:30001 http://127.0.0.1:30002 \
      --policy consistent_hashing

Runs until SIGINT or SIGTERM; in-flight requests get --shutdown-grace-s to finish.)";

// The names of the engine flags that become typed options (presets and policies).
struct EngineFlagNames {
  std::string& model;
  std::string& gpu;
  std::string& radix_eviction_policy;
  std::string& schedule_policy;
  std::string& session_close_mode;
  int64_t& finished_subagent_priority;
  double& finished_subagent_min_idle_s;
  std::string& eviction_order;
  int64_t& dp_size;
  bool& hierarchical_cache;
  double& hicache_ratio;
  double& hicache_size_gb;
};

// The engine's cache and scheduling policies (session close, scheduling order, eviction,
// finished-sub-agent demotion).
void AddEnginePolicyFlags(CLI::App& app, engine::EngineConfig& e, EngineFlagNames names) {
  app.add_option("--session-close-mode", names.session_close_mode,
                 "What /close_session does: release (free the session's unique KV at once, "
                 "SGLang PR #27058) or dereference (return it to LRU order, PR #29173)")
      ->check(CLI::IsMember({"release", "dereference"}))
      ->capture_default_str();
  app.add_option("--schedule-policy", names.schedule_policy,
                 "fcfs (SGLang's default), or program-fcfs: program-level FCFS, the waiting "
                 "queue ordered by when each request's program (its agentkv_parent_session, "
                 "else its session_id) first arrived; SGLang's other policies are not modelled")
      ->capture_default_str();
  app.add_option("--radix-eviction-policy", names.radix_eviction_policy,
                 "lru, or priority (the request's priority orders eviction)")
      ->check(CLI::IsMember({"lru", "priority"}))
      ->capture_default_str();
  app.add_option("--finished-subagent-priority", names.finished_subagent_priority,
                 "Demote a finished sub-agent's own KV to this priority in [0, 100] when its "
                 "parent session returns (per-conversation retention; the gateway's "
                 "agentkv_parent_session links them); -1 = off")
      ->capture_default_str();
  app.add_option("--finished-subagent-min-idle-steps",
                 e.cache.finished_subagent_min_idle_iterations,
                 "Scheduler steps a sub-agent must be idle before demotion, in [0, 2^40]")
      ->capture_default_str();
  app.add_option("--finished-subagent-min-idle-s", names.finished_subagent_min_idle_s,
                 "Seconds a sub-agent must be idle before demotion, in [0, 1e6]; replaces the "
                 "steps when given; -1 = steps")
      ->capture_default_str();
  app.add_flag("--finished-subagent-offloadable", e.cache.finished_subagent_offloadable,
               "With a host tier, demoted KV gets max(priority, 30): offloaded, not dropped");
  app.add_option("--eviction-order", names.eviction_order,
                 "agentkv's order within a priority: lru (SGLang), or gap_aware (by finish time "
                 "less the pause the body's agentkv_pause announces, learned online)")
      ->check(CLI::IsMember({"lru", "gap_aware"}))
      ->capture_default_str();
}

void AddEngineFlags(CLI::App& app, service::EngineEmulatorOptions& o, EngineFlagNames names,
                    bool& unpaced, int64_t& hicache_tokens) {
  service::EngineRuntimeOptions& r = o.runtime;
  engine::EngineConfig& e = r.engine;
  app.add_option("--model,--model-path", names.model,
                 "The cost model's preset (llama-3.1-8b, qwen2.5-32b, llama-3.1-70b), or SGLang's "
                 "model path (with a '/': org/model or a folder): it is then the served model "
                 "name, and the cost model is the preset nearest the size its name gives "
                 "(\"8B\", \"70B\")")
      ->capture_default_str();
  app.add_option("--gpu", names.gpu, "GPU preset: h100, h200")->capture_default_str();
  app.add_option("--tp,--tp-size,--tensor-parallel-size", e.tp,
                 "Tensor parallelism (also the TP ranks /metrics replicates)")
      ->capture_default_str();
  app.add_option("--dp-size,--data-parallel-size,--dp", names.dp_size,
                 "SGLang's data parallelism: 1 for `emulate engine`; `emulate fleet` starts this "
                 "many engines behind its router (as sglang_router.launch_server)")
      ->capture_default_str();
  app.add_option("--mem-fraction-static", e.cost.memory_fraction,
                 "Share of each GPU's memory for weights, activations and KV, in (0, 1]: sizes "
                 "the KV pool when --max-total-tokens is 0")
      ->capture_default_str();
  app.add_option("--max-total-tokens", e.kv_pool.max_total_tokens,
                 "KV pool in tokens; 0 = what the cost model leaves after the weights")
      ->capture_default_str();
  app.add_option("--context-length", r.context_length,
                 "The model's context length in tokens (SGLang's length checks); 0 = the KV pool")
      ->capture_default_str();
  app.add_option("--page-size", e.kv_pool.tokens_per_block, "Tokens per KV page")
      ->capture_default_str();
  app.add_option("--hicache-tokens", hicache_tokens,
                 "Host KV tier in tokens; 0 = none, or SGLang's --enable-hierarchical-cache")
      ->capture_default_str();
  app.add_flag("--enable-hierarchical-cache", names.hierarchical_cache,
               "SGLang's host KV tier: --hicache-size GB per TP rank, else --hicache-ratio times "
               "the device pool (--hicache-tokens wins)");
  app.add_option("--hicache-ratio", names.hicache_ratio,
                 "Host tier over device pool, in [0, 100] (--enable-hierarchical-cache)")
      ->capture_default_str();
  app.add_option("--hicache-size", names.hicache_size_gb,
                 "Host tier in GB per TP rank; 0 = --hicache-ratio (--enable-hierarchical-cache)")
      ->capture_default_str();
  app.add_option("--max-running-requests", e.scheduler.max_running_requests,
                 "Requests in the running batch")
      ->capture_default_str();
  app.add_option("--max-prefill-tokens", e.scheduler.max_prefill_tokens, "Prefill tokens per step")
      ->capture_default_str();
  app.add_option("--chunked-prefill-size", e.scheduler.chunked_prefill_size,
                 "Most prefill tokens of one request per step; 0 = no chunking")
      ->capture_default_str();
  app.add_flag("--enable-session-radix-cache", r.enable_session_radix_cache,
               "Tag KV with the request's session_id; /close_session releases it");
  AddEnginePolicyFlags(app, e, names);
  app.add_option("--max-sessions", r.max_sessions,
                 "Session ids remembered; past it the least recently used idle session is closed")
      ->capture_default_str();
  app.add_option("--max-recorded-requests", o.max_recorded_requests,
                 "Control requests kept for GET /agentkv/requests (the newest)")
      ->capture_default_str();
  app.add_option("--speed,--time-scale", r.speed,
                 "Simulated seconds per wall second (alias: `agentkv load`'s --time-scale)")
      ->capture_default_str();
  app.add_flag("--unpaced", unpaced, "Do not wait for the modelled step time (benchmarks)");
  app.add_flag_callback(
      "--disable-metrics", [&o] { o.enable_metrics = false; }, "Do not serve /metrics");
  app.add_option("--metrics-tp-ranks", o.metrics_tp_ranks, "Lines per gauge in /metrics; 0 = --tp")
      ->capture_default_str();
  app.add_option("--served-model-name", o.served_model_name,
                 "model_name label and model_path; default: --model");
  app.add_option("--api-key", o.api_key,
                 "SGLang's: requests but /health and /metrics need `Authorization: Bearer KEY` "
                 "(else 401)");
}

}  // namespace

EmulateCommand::EmulateCommand(CLI::App& app) {
  command_ = app.add_subcommand(kName, kDescription);
  command_->footer(kFooter);
  command_->require_subcommand(1);
  engine_ = command_->add_subcommand("engine", "Serve one emulated SGLang engine");
  router_ = command_->add_subcommand("router", "Serve an emulated sgl-router");
  fleet_ = command_->add_subcommand("fleet", "Serve N emulated engines behind an emulated router");
  for (CLI::App* mode : {engine_, router_, fleet_}) {
    server_.Add(*mode, FlagSource::kCommandLine);
  }
  for (CLI::App* mode : {engine_, fleet_}) {
    AddEngineFlags(*mode, engine_options_,
                   EngineFlagNames{.model = model_,
                                   .gpu = gpu_,
                                   .radix_eviction_policy = radix_eviction_policy_,
                                   .schedule_policy = schedule_policy_,
                                   .session_close_mode = session_close_mode_,
                                   .finished_subagent_priority = finished_subagent_priority_,
                                   .finished_subagent_min_idle_s = finished_subagent_min_idle_s_,
                                   .eviction_order = eviction_order_,
                                   .dp_size = dp_size_,
                                   .hierarchical_cache = hierarchical_cache_,
                                   .hicache_ratio = hicache_ratio_,
                                   .hicache_size_gb = hicache_size_gb_},
                   unpaced_, hicache_tokens_);
    const engine::StallOffloadOptions stall;
    mode->add_flag(
        "--stall-offload", stall_offload_,
        fmt::format("Move a paused session's KV to the host tier under memory pressure and back "
                    "before its predicted return (needs --hicache-tokens and "
                    "--enable-session-radix-cache; requests name their pause with "
                    "agentkv_pause: tool_call, subagent_wait, human_turn or session_end); default "
                    "off, with pressure {:g}, quantile {:g} and a least stall of {:g} s",
                    stall.pressure_threshold, stall.return_quantile, stall.min_stall.seconds()));
  }
  for (CLI::App* mode : {router_, fleet_}) AddRouterFlags(*mode, mode == fleet_);
  router_->add_option("--worker-urls", worker_urls_, "Worker URLs (http://host:port[@rank])")
      ->required();
  fleet_->add_option("--engines", engines_, "Engines to start (or --dp-size)")
      ->capture_default_str();
  fleet_->add_option("--engine-base-port", engine_base_port_,
                     "Port of engine 0 (engines take consecutive ports); 0 = --port + 1");
  // SGLang's and sgl-router's other flags, after the emulator's own (whose names win).
  for (CLI::App* mode : {engine_, fleet_}) foreign_.Add(*mode, LaunchServerFlags());
  foreign_.Add(*router_, LaunchRouterFlags());
  foreign_.Add(*fleet_, LaunchRouterFlags(), "--router-");
}

void EmulateCommand::AddRouterFlags(CLI::App& mode, bool fleet) {
  // sglang_router.launch_server (the fleet's shape) takes the router's flags prefixed.
  const auto names = [fleet](const std::string& flag) {
    return fleet ? flag + ",--router-" + flag.substr(2) : flag;
  };
  AddRouterPolicyOption(mode, names("--policy"), policy_,
                        "round_robin, cache_aware or consistent_hashing");
  mode.add_option("--workers-shape", workers_shape_,
                  "GET /workers shape: list (WorkerListResponse) or inline (older)")
      ->check(CLI::IsMember({"list", "inline"}))
      ->capture_default_str();
  mode.add_option(names("--health-check-interval-secs"), health_check_interval_s_,
                  "Seconds between worker health checks; 0 = none")
      ->capture_default_str();
  mode.add_flag(names("--disable-health-check"), disable_health_check_,
                "sgl-router's: no worker health checks (--health-check-interval-secs 0)");
  mode.add_option(names("--request-timeout-secs"), request_timeout_secs_,
                  "Seconds a forwarded request may wait for its worker (its response, a free "
                  "connection, the next piece of a stream) before a 504, in [1, 31536000]; "
                  "sgl-router's flag and default")
      ->type_name("S")
      ->capture_default_str();
  mode.add_option(names("--max-tree-size"), max_tree_size_,
                  "cache_aware: prefix keys remembered per worker (LRU)")
      ->capture_default_str();
  mode.add_option(names("--cache-threshold"), cache_threshold_,
                  "cache_aware: least prefix match share that routes by cache, in [0, 1]")
      ->capture_default_str();
  mode.add_option(names("--balance-abs-threshold"), balance_abs_threshold_,
                  "cache_aware: load gap (requests) past which the least loaded worker wins")
      ->capture_default_str();
  mode.add_option(names("--balance-rel-threshold"), balance_rel_threshold_,
                  "cache_aware: load ratio past which the least loaded worker wins")
      ->capture_default_str();
  mode.add_option(names("--prometheus-port"), prometheus_port_,
                  "Also serve GET /metrics on this port (sgl-router's Prometheus listener); "
                  "-1 = /metrics on --port only")
      ->capture_default_str();
  mode.add_option(names("--prometheus-host"), prometheus_host_,
                  "Address of the --prometheus-port listener; default: --host");
  mode.add_option("--max-received-requests", max_received_requests_,
                  "Routed requests kept for GET /agentkv/requests (the newest)")
      ->capture_default_str();
}

int EmulateCommand::Run() {
  const char* name = engine_->parsed()   ? "emulate engine"
                     : router_->parsed() ? "emulate router"
                                         : "emulate fleet";
  // The flags every mode shares, checked before they become options and milliseconds.
  Status s = server_.Check();
  if (s.ok()) {
    s = CheckFlagRange("--health-check-interval-secs", health_check_interval_s_, 0.0, 86400.0);
  }
  if (s.ok() && !engine_->parsed()) {
    s = CheckFlagRange("--request-timeout-secs", request_timeout_secs_, 1, 31'536'000);
    if (s.ok()) s = CheckFlagRange("--cache-threshold", cache_threshold_, 0.0, 1.0);
    if (s.ok()) {
      s = CheckFlagRange("--balance-abs-threshold", balance_abs_threshold_, 0, int64_t{1} << 40);
    }
    if (s.ok()) s = CheckFlagRange("--balance-rel-threshold", balance_rel_threshold_, 1.0, 1e6);
    if (s.ok()) s = CheckFlagRange("--prometheus-port", prometheus_port_, -1, 65535);
  }
  if (s.ok()) s = CheckForeignFlags(name);
  if (!s.ok()) return ReportError(name, s);
  if (engine_->parsed()) return RunEngine();
  if (router_->parsed()) return RunRouter();
  return RunFleet();
}

Status EmulateCommand::CheckForeignFlags(const std::string& name) const {
  AGENTKV_RETURN_IF_ERROR(foreign_.Check());
  if (foreign_.ignored().empty()) return Status::Ok();
  std::string line;
  for (const std::string& flag : foreign_.ignored()) line += (line.empty() ? "" : ", ") + flag;
  fmt::print(stderr,
             "agentkv {}: ignoring SGLang flags that cannot change what an emulator does: {}\n",
             name, line);
  return Status::Ok();
}

namespace {

// The preset nearest a model path's size: the last "<number>b" of its last part, in billions
// of parameters ("Meta-Llama-3.1-70B-Instruct": 70); nullopt when it names none.
std::optional<engine::ModelPresetId> PresetNearestPath(std::string_view path) {
  std::string name(
      path.substr(path.rfind('/') == std::string_view::npos ? 0 : path.rfind('/') + 1));
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::optional<double> billions;
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] != 'b' || i == 0 || !std::isdigit(static_cast<unsigned char>(name[i - 1])))
      continue;
    if (i + 1 < name.size() && std::isalnum(static_cast<unsigned char>(name[i + 1]))) continue;
    size_t start = i;
    while (start > 0 &&
           (std::isdigit(static_cast<unsigned char>(name[start - 1])) || name[start - 1] == '.')) {
      --start;
    }
    billions = std::strtod(name.substr(start, i - start).c_str(), nullptr);
  }
  if (!billions.has_value() || *billions <= 0) return std::nullopt;
  std::optional<engine::ModelPresetId> nearest;
  double best = 0;
  for (size_t id = 0; id < engine::ModelPresets().size(); ++id) {
    const double distance =
        std::abs(std::log(engine::ModelPresets()[id].num_params / 1e9) - std::log(*billions));
    if (!nearest.has_value() || distance < best) {
      nearest = static_cast<engine::ModelPresetId>(id);
      best = distance;
    }
  }
  return nearest;
}

// What SGLang's launch_server logs once it serves (http_server.py's _wait_and_warmup).
constexpr const char* kSglangReadyLine = "The server is fired up and ready to roll!";

// ", /metrics also on URL" when the router has a Prometheus listener.
std::string PrometheusNote(const service::RouterEmulator& router) {
  if (router.prometheus_port() == 0) return "";
  return fmt::format(", /metrics also on port {}", router.prometheus_port());
}

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

}  // namespace

Status EmulateCommand::ApplyModelFlag(engine::EngineConfig& config,
                                      service::EngineEmulatorOptions& options) const {
  if (model_.find('/') != std::string::npos) {
    // SGLang's model path (a Hugging Face id "org/name" or a folder): the served name, and the
    // cost model nearest its size.
    config.model = PresetNearestPath(model_).value_or(engine::ModelPresetId::kLlama31_8b);
    if (options.served_model_name.empty()) options.served_model_name = model_;
  } else {
    StatusOr<engine::ModelPresetId> preset = engine::ParseModelPreset(model_);
    if (!preset.ok()) {
      return InvalidArgumentError(
          fmt::format("--model: {} (or a model path with a '/', such as org/model)",
                      preset.status().message()));
    }
    config.model = *preset;
  }
  return Status::Ok();
}

Status EmulateCommand::ApplyHierarchicalCache(engine::EngineConfig& config) const {
  AGENTKV_RETURN_IF_ERROR(CheckFlagRange("--hicache-ratio", hicache_ratio_, 0.0, 100.0));
  AGENTKV_RETURN_IF_ERROR(CheckFlagRange("--hicache-size", hicache_size_gb_, 0.0, 1e6));
  if (hierarchical_cache_ && hicache_tokens_ == 0) {
    if (hicache_size_gb_ > 0) {
      // SGLang's host pool: --hicache-size GB on each TP rank, of its share of each token's KV.
      const engine::ModelPreset& model = engine::PresetOf(config.model);
      const double bytes_per_token =
          2.0 * model.num_layers * model.num_kv_heads * model.head_dim * model.dtype_bytes;
      config.kv_pool.hicache_tokens =
          static_cast<int64_t>(hicache_size_gb_ * 1e9 * config.tp / bytes_per_token);
    } else {
      // SGLang's host pool: --hicache-ratio times the device pool.
      AGENTKV_ASSIGN_OR_RETURN(const engine::KvPool device, engine::SizeKvPool(config));
      config.kv_pool.hicache_tokens =
          static_cast<int64_t>(static_cast<double>(device.device_tokens()) * hicache_ratio_);
    }
  }
  return Status::Ok();
}

StatusOr<service::EngineEmulatorOptions> EmulateCommand::EngineOptions() const {
  service::EngineEmulatorOptions options = engine_options_;
  engine::EngineConfig& config = options.runtime.engine;
  AGENTKV_RETURN_IF_ERROR(ApplyModelFlag(config, options));
  if (dp_size_ != 1 && engine_->parsed()) {
    return InvalidArgumentError(fmt::format(
        "--dp-size {}: an emulated engine has one data-parallel rank; `agentkv emulate fleet "
        "--dp-size {}` starts that many engines behind a router (as sglang_router.launch_server)",
        dp_size_, dp_size_));
  }
  if (!(config.cost.memory_fraction > 0 && config.cost.memory_fraction <= 1)) {
    return InvalidArgumentError(fmt::format("--mem-fraction-static must be in (0, 1], got {:g}",
                                            config.cost.memory_fraction));
  }
  AGENTKV_ASSIGN_OR_RETURN(config.gpu, NameFlag("--gpu", engine::ParseGpuPreset(gpu_)));
  if (config.tp != 1 && config.tp != 2 && config.tp != 4 && config.tp != 8) {
    return InvalidArgumentError(fmt::format("--tp must be one of 1, 2, 4, 8, got {}", config.tp));
  }
  AGENTKV_RETURN_IF_ERROR(CheckFlagRange(
      "--max-running-requests", config.scheduler.max_running_requests, 1, int64_t{1} << 20));
  AGENTKV_RETURN_IF_ERROR(CheckFlagRange("--max-prefill-tokens",
                                         config.scheduler.max_prefill_tokens, 1, int64_t{1} << 30));
  AGENTKV_RETURN_IF_ERROR(CheckFlagRange(
      "--chunked-prefill-size", config.scheduler.chunked_prefill_size, 0, int64_t{1} << 30));
  AGENTKV_RETURN_IF_ERROR(CheckFlagRange("--hicache-tokens", hicache_tokens_, 0, kMaxTokens));
  AGENTKV_ASSIGN_OR_RETURN(options.runtime.radix_eviction_policy,
                           service::ParseRadixEvictionPolicy(radix_eviction_policy_));
  AGENTKV_ASSIGN_OR_RETURN(config.scheduler.program_fcfs,
                           service::ParseSchedulePolicy(schedule_policy_));
  config.kv_pool.hicache_tokens = hicache_tokens_;
  AGENTKV_RETURN_IF_ERROR(ApplyHierarchicalCache(config));
  if (stall_offload_) {
    if (config.kv_pool.hicache_tokens <= 0) {
      return InvalidArgumentError(
          "--stall-offload needs a host tier: set --hicache-tokens > 0 or "
          "--enable-hierarchical-cache (stall offload moves paused sessions' KV to host memory)");
    }
    config.stall_offload = engine::StallOffloadOptions{};
  }
  config.cache.session_close_mode = session_close_mode_ == "release"
                                        ? kv::SessionCloseMode::kRelease
                                        : kv::SessionCloseMode::kDereference;
  if (finished_subagent_priority_ != -1) {
    AGENTKV_RETURN_IF_ERROR(
        CheckFlagRange("--finished-subagent-priority", finished_subagent_priority_, 0, 100));
    config.cache.block_reuse_policy = kv::BlockReusePolicy::kPerConversation;
    config.cache.finished_subagent_priority =
        static_cast<kv::Priority>(finished_subagent_priority_);
  }
  AGENTKV_RETURN_IF_ERROR(CheckFlagRange("--finished-subagent-min-idle-steps",
                                         config.cache.finished_subagent_min_idle_iterations, 0,
                                         int64_t{1} << 40));
  if (finished_subagent_min_idle_s_ != -1) {
    AGENTKV_RETURN_IF_ERROR(CheckFlagRange("--finished-subagent-min-idle-s",
                                           finished_subagent_min_idle_s_, 0.0,
                                           kv::kMaxFinishedSubagentMinIdleS));
    config.cache.finished_subagent_min_idle_s = finished_subagent_min_idle_s_;
  }
  config.cache.eviction_order =
      eviction_order_ == "gap_aware" ? kv::EvictionOrder::kGapAware : kv::EvictionOrder::kLru;
  options.runtime.paced = !unpaced_;
  server_.ApplyTo(options.http);
  // An engine allocates its device and host blocks when it starts.
  AGENTKV_ASSIGN_OR_RETURN(const engine::KvPool pool, engine::SizeKvPool(config));
  AGENTKV_RETURN_IF_ERROR(CheckKvBlocks(
      fmt::format("{} device + {} host blocks of {} tokens (--max-total-tokens, --hicache-tokens)",
                  pool.device_blocks, pool.host_blocks, pool.tokens_per_block),
      pool.device_blocks + pool.host_blocks));
  return options;
}

int EmulateCommand::RunEngine() {
  const std::string name = "emulate engine";
  StatusOr<service::EngineEmulatorOptions> parsed = EngineOptions();
  if (!parsed.ok()) return ReportError(name, parsed.status());
  service::EngineEmulatorOptions options = *std::move(parsed);
  BlockTerminationSignals();
  StatusOr<std::unique_ptr<service::EngineEmulator>> engine =
      service::EngineEmulator::Start(options);
  if (!engine.ok()) return ReportError(name, engine.status());
  fmt::print("agentkv {}: serving {} ({} on {} as {}, KV pool {} tokens)\n", name,
             (*engine)->base_url(), engine::PresetName(options.runtime.engine.model), gpu_,
             options.served_model_name.empty() ? model_ : options.served_model_name,
             (*engine)->runtime().max_total_num_tokens());
  // SGLang's own readiness line, which CI scripts wait for in the server's log.
  fmt::print("{}\n", kSglangReadyLine);
  std::fflush(stdout);
  WaitForTerminationSignal();
  (*engine)->Shutdown(server_.shutdown_grace());
  return kExitOk;
}

service::RouterEmulatorOptions EmulateCommand::RouterOptions(
    std::vector<std::string> worker_urls) const {
  service::RouterEmulatorOptions options;
  server_.ApplyTo(options.http);
  options.policy = policy_;
  options.worker_urls = std::move(worker_urls);
  options.workers_shape = workers_shape_ == "list" ? protocol::WorkersShape::kWorkerList
                                                   : protocol::WorkersShape::kInline;
  options.health_check_interval =
      disable_health_check_ ? std::chrono::milliseconds(0) : Millis(health_check_interval_s_);
  options.cache_threshold = cache_threshold_;
  options.balance_abs_threshold = balance_abs_threshold_;
  options.balance_rel_threshold = balance_rel_threshold_;
  if (prometheus_port_ >= 0) {
    net::HttpServerOptions prometheus = options.http;
    prometheus.port = static_cast<uint16_t>(prometheus_port_);
    if (!prometheus_host_.empty()) prometheus.address = prometheus_host_;
    prometheus.access_log = nullptr;
    options.prometheus = prometheus;
  }
  options.max_tree_size = max_tree_size_;
  options.request_timeout = std::chrono::seconds(request_timeout_secs_);
  options.max_received_requests = max_received_requests_;
  return options;
}

int EmulateCommand::RunRouter() {
  const std::string name = "emulate router";
  const service::RouterEmulatorOptions options = RouterOptions(worker_urls_);
  BlockTerminationSignals();
  StatusOr<std::unique_ptr<service::RouterEmulator>> router =
      service::RouterEmulator::Start(options);
  if (!router.ok()) return ReportError(name, router.status());
  fmt::print("agentkv {}: serving {} ({} over {} workers{})\n", name, (*router)->base_url(),
             routing::RouterPolicyName(policy_), worker_urls_.size(), PrometheusNote(**router));
  std::fflush(stdout);
  WaitForTerminationSignal();
  (*router)->Shutdown(server_.shutdown_grace());
  return kExitOk;
}

int EmulateCommand::RunFleet() {
  const std::string name = "emulate fleet";
  if (dp_size_ != 1) {
    // sglang_router.launch_server's --dp-size: that many engines behind the router.
    if (fleet_->count("--engines") > 0 && engines_ != dp_size_) {
      return ReportError(name, InvalidArgumentError(fmt::format(
                                   "--engines {} and --dp-size {} disagree: give one of them",
                                   engines_, dp_size_)));
    }
    if (Status s = CheckFlagRange("--dp-size", dp_size_, 1, 256); !s.ok()) {
      return ReportError(name, s);
    }
    engines_ = static_cast<int>(dp_size_);
  }
  if (Status s = CheckFlagRange("--engines", engines_, 1, 256); !s.ok()) {
    return ReportError(name, s);
  }
  const int port = server_.port();
  const int base_port = engine_base_port_ != 0 ? engine_base_port_ : (port == 0 ? 0 : port + 1);
  if (Status s = CheckFlagRange("--engine-base-port",
                                base_port + (base_port == 0 ? 0 : engines_ - 1), 0, 65535);
      !s.ok()) {
    return ReportError(name, s);
  }
  StatusOr<service::EngineEmulatorOptions> parsed = EngineOptions();
  if (!parsed.ok()) return ReportError(name, parsed.status());
  {
    StatusOr<engine::KvPool> pool = engine::SizeKvPool(parsed->runtime.engine);
    Status s = pool.status();
    if (s.ok()) {
      const int64_t per_engine = pool->device_blocks + pool->host_blocks;
      s = CheckKvBlocks(fmt::format("--engines {} x {} blocks per engine", engines_, per_engine),
                        per_engine * engines_);
    }
    if (!s.ok()) return ReportError(name, s);
  }
  BlockTerminationSignals();
  std::vector<std::unique_ptr<service::EngineEmulator>> engines;
  std::vector<std::string> urls;
  for (int i = 0; i < engines_; ++i) {
    service::EngineEmulatorOptions options = *parsed;
    options.http.port = static_cast<uint16_t>(base_port == 0 ? 0 : base_port + i);
    StatusOr<std::unique_ptr<service::EngineEmulator>> engine =
        service::EngineEmulator::Start(options);
    if (!engine.ok()) return ReportError(name, engine.status());
    urls.push_back((*engine)->base_url());
    engines.push_back(*std::move(engine));
  }
  const service::RouterEmulatorOptions router_options = RouterOptions(urls);
  StatusOr<std::unique_ptr<service::RouterEmulator>> router =
      service::RouterEmulator::Start(router_options);
  if (!router.ok()) return ReportError(name, router.status());
  fmt::print("agentkv {}: router {} ({}) over {} engines:", name, (*router)->base_url(),
             routing::RouterPolicyName(policy_), engines.size());
  for (const std::string& url : urls) fmt::print(" {}", url);
  fmt::print("{}\n{}\n", PrometheusNote(**router), kSglangReadyLine);
  std::fflush(stdout);
  WaitForTerminationSignal();
  (*router)->Shutdown(server_.shutdown_grace());
  for (auto& engine : engines) engine->Shutdown(server_.shutdown_grace());
  return kExitOk;
}

}  // namespace agentkv::tools
