// The gateway's startup check of the engine flags its features need, from each engine's
// GET /server_info (docs/PROTOCOL.md section 7):
//   --agentic-session-lifecycle needs enable_session_radix_cache, and the seed pairs it with
//     radix_eviction_policy "priority" ("lru" only warns: without request priorities SGLang's
//     priority policy orders exactly like LRU; any other policy is a violation);
//   --agentic-program-admission needs enable_metrics (the ledger reads /metrics);
//   an engine whose `version` is not protocol::kSupportedSglangVersion (nor the emulator's)
//     only warns: agentkv is checked against that release, and others differ in what a close
//     frees and in their metrics.
// Under PrerequisitePolicy::kRefuse the first violation fails the start; under kDisable the
// feature is turned off with a warning. A pure function over what was fetched; thread-safe.
#ifndef AGENTKV_SERVICE_GATEWAY_GATEWAY_PREREQUISITES_H_
#define AGENTKV_SERVICE_GATEWAY_GATEWAY_PREREQUISITES_H_

#include <optional>
#include <string>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/protocol/server_info.h"
#include "agentkv/service/common/log_sink.h"
#include "agentkv/service/gateway/gateway_options.h"

namespace agentkv::service {

// One engine's /server_info, or why it could not be read.
struct EngineServerInfo {
  std::string engine;
  StatusOr<protocol::ServerInfo> info;
};

struct PrerequisiteOutcome {
  // The features that stay on.
  bool lifecycle = false;
  bool admission = false;
  // Structured log lines (`event=... engine=... flag=...`) to emit as warnings.
  std::vector<LogLine> warnings;
};

// Checks `engines` for the requested features. kRefuse: FailedPrecondition naming the engine
// and the flag for a missing flag; Unavailable for an engine whose /server_info could not be
// read, or when there is no engine at all (while a feature is on). kDisable: the same findings
// become warnings; a missing flag turns its feature off, an unreadable engine or an empty fleet
// keeps it on (it fails open at run time).
StatusOr<PrerequisiteOutcome> CheckPrerequisites(const std::vector<EngineServerInfo>& engines,
                                                 bool lifecycle, bool admission,
                                                 PrerequisitePolicy policy);

// The model's context length as the engines report it: the largest `context_length` (SGLang's
// --context-length, a ServerArgs field of /server_info) among the engines that report a value
// in (0, kMaxTokens]; nullopt when none does (SGLang leaves it null unless the flag is set).
std::optional<int64_t> FleetContextLength(const std::vector<EngineServerInfo>& engines);

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_GATEWAY_GATEWAY_PREREQUISITES_H_
