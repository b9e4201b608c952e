// `agentkv emulate engine|router|fleet`: SGLang-compatible engine and sgl-router emulators.
//
// `engine` serves one EngineEmulator, `router` one RouterEmulator in front of given worker
// URLs, and `fleet` starts N engines on consecutive ports and a router in front of them in one
// process, so that an agent framework can be pointed at a whole fleet with one command. Every
// mode runs until SIGINT or SIGTERM, then shuts down gracefully (in-flight requests get
// `--shutdown-grace-s` to finish). Owned by main; not copyable or movable.
#ifndef AGENTKV_TOOLS_AGENTKV_EMULATE_COMMAND_H_
#define AGENTKV_TOOLS_AGENTKV_EMULATE_COMMAND_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "agentkv/routing/router.h"
#include "agentkv/service/emulator/engine_emulator.h"
#include "agentkv/service/emulator/router_emulator.h"
#include "tools/agentkv/server_flags.h"
#include "tools/agentkv/sglang_flags.h"

namespace agentkv::tools {

class EmulateCommand {
 public:
  static constexpr const char* kName = "emulate";

  explicit EmulateCommand(CLI::App& app);
  EmulateCommand(const EmulateCommand&) = delete;
  EmulateCommand& operator=(const EmulateCommand&) = delete;

  bool selected() const { return command_->parsed(); }
  // Runs the selected mode until a signal; 0 after a clean shutdown, 2 for bad flags or a
  // port that cannot be bound, 1 for an internal failure.
  int Run();

 private:
  // The router's flags of `mode`, for `fleet` also by sglang_router.launch_server's
  // "--router-" names.
  void AddRouterFlags(CLI::App& mode, bool fleet);
  // Checks the SGLang flags given (refused ones are errors) and names the ignored ones on
  // stderr, in one line.
  [[nodiscard]] Status CheckForeignFlags(const std::string& name) const;
  int RunEngine();
  // The router flags (address, port, threads, policy, worker shape, health checks) over
  // `worker_urls`.
  service::RouterEmulatorOptions RouterOptions(std::vector<std::string> worker_urls) const;
  int RunRouter();
  int RunFleet();
  // The engine options the flags give (presets and policies parsed from their names);
  // NotFound or InvalidArgument for an unknown name.
  StatusOr<service::EngineEmulatorOptions> EngineOptions() const;
  // --model / --model-path: a preset, or SGLang's model path (the served name, and the preset
  // nearest its size).
  [[nodiscard]] Status ApplyModelFlag(engine::EngineConfig& config,
                                      service::EngineEmulatorOptions& options) const;
  // --enable-hierarchical-cache with --hicache-size or --hicache-ratio, as a host tier in tokens.
  [[nodiscard]] Status ApplyHierarchicalCache(engine::EngineConfig& config) const;

  CLI::App* command_ = nullptr;
  CLI::App* engine_ = nullptr;
  CLI::App* router_ = nullptr;
  CLI::App* fleet_ = nullptr;

  // Shared.
  ServerFlags server_{/*port=*/30000, /*shutdown_grace_s=*/10.0};
  // SGLang's and sgl-router's flags the emulator ignores or refuses.
  ForeignFlags foreign_;
  // Engine.
  service::EngineEmulatorOptions engine_options_;
  // Preset and policy names, parsed once by EngineOptions().
  std::string model_ = "llama-3.1-8b";
  std::string gpu_ = "h100";
  std::string radix_eviction_policy_ = "lru";
  std::string schedule_policy_ = "fcfs";
  std::string eviction_order_ = "lru";
  std::string session_close_mode_ = "release";
  bool unpaced_ = false;
  int64_t hicache_tokens_ = 0;
  // SGLang's --dp-size, --enable-hierarchical-cache, --hicache-ratio and --hicache-size.
  int64_t dp_size_ = 1;
  bool hierarchical_cache_ = false;
  double hicache_ratio_ = 2.0;
  double hicache_size_gb_ = 0;
  // Finished-sub-agent demotion (kv block_reuse_config): off while the priority is -1.
  int64_t finished_subagent_priority_ = -1;
  double finished_subagent_min_idle_s_ = -1;
  // --stall-offload: the engine's stall offload (needs --hicache-tokens).
  bool stall_offload_ = false;
  // Router.
  std::vector<std::string> worker_urls_;
  routing::RouterPolicy policy_ = routing::RouterPolicy::kCacheAware;
  std::string workers_shape_ = "list";
  double health_check_interval_s_ = 1.0;
  bool disable_health_check_ = false;
  // cache_aware's thresholds (RouterEmulatorOptions' defaults).
  double cache_threshold_ = service::RouterEmulatorOptions{}.cache_threshold;
  int64_t balance_abs_threshold_ = service::RouterEmulatorOptions{}.balance_abs_threshold;
  double balance_rel_threshold_ = service::RouterEmulatorOptions{}.balance_rel_threshold;
  // sgl-router's Prometheus listener: -1 = none; an empty host = --host.
  int prometheus_port_ = -1;
  std::string prometheus_host_;
  int64_t max_tree_size_ = int64_t{1} << 20;
  // sgl-router --request-timeout-secs (RouterEmulatorOptions::request_timeout).
  int64_t request_timeout_secs_ = 1800;
  int64_t max_received_requests_ = 4096;
  // Fleet.
  int engines_ = 2;
  int engine_base_port_ = 0;
};

}  // namespace agentkv::tools

#endif  // AGENTKV_TOOLS_AGENTKV_EMULATE_COMMAND_H_
