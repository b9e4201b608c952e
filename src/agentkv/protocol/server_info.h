// SGLang `GET /server_info` (alias `/get_server_info`, docs/PROTOCOL.md section 7).
//
// The coordinator reads it once per engine at startup to check the flags agentkv relies on
// and the KV pool size; the engine emulator serves it. The body is every ServerArgs field at
// top level, the scheduler info (`status`, `max_total_num_tokens`, `max_req_input_len`),
// `internal_states` (one dict per DP rank) and `version`. Secrets are never kept: some SGLang
// versions return `api_key` unredacted, and ParseServerInfo drops it (IsSecretServerArg) so
// that nothing downstream can log it. Pure functions; value types are thread-compatible.
#ifndef AGENTKV_PROTOCOL_SERVER_INFO_H_
#define AGENTKV_PROTOCOL_SERVER_INFO_H_

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <cstdint>
#include <string>
#include <string_view>

#include "agentkv/base/status.h"

namespace agentkv::protocol {

// The SGLang release agentkv targets, as its /server_info `version` reads: the release seed 000
// pins, with the session radix cache (--enable-session-radix-cache, which on current builds
// needs SGLANG_ENABLE_UNIFIED_RADIX_TREE=1) and --radix-eviction-policy priority
// (docs/GATEWAY.md, "Engine prerequisites").
inline constexpr std::string_view kSupportedSglangVersion = "0.5.15.post1";
// The `version` agentkv's engine emulator reports (service/emulator): what it emulates is
// kSupportedSglangVersion's protocol.
inline constexpr std::string_view kEmulatorVersion = "agentkv-emulator";

// The fields agentkv checks, plus everything else the engine reported (minus secrets).
// Absent fields keep the defaults below, which are SGLang's defaults.
struct ServerInfo {
  bool enable_metrics = false;              // Must be true for /metrics.
  bool enable_session_radix_cache = false;  // Must be true for the session lifecycle.
  std::string radix_eviction_policy = "lru";
  int64_t max_total_num_tokens = 0;  // KV pool size in tokens; 0 when absent.
  int64_t max_req_input_len = 0;
  std::string status = "ready";
  std::string version;
  std::string model_path;
  int64_t tp_size = 1;
  int64_t dp_size = 1;
  // One object per DP rank. Empty: SerializeServerInfo writes {"dp_rank": r} per rank.
  boost::json::array internal_states;
  // Every other top-level field, in the order received, without secrets.
  boost::json::object extra;

  friend bool operator==(const ServerInfo&, const ServerInfo&) = default;
};

// True for a ServerArgs field that holds a credential: `api_key`, `admin_api_key` and any
// key ending in "api_key", "_password", "_secret" or "_token".
bool IsSecretServerArg(std::string_view key);

// One JSON object: `extra` members first (secrets skipped), then model_path, tp_size,
// dp_size, enable_metrics, enable_session_radix_cache, radix_eviction_policy, status,
// max_total_num_tokens, max_req_input_len, internal_states, version.
std::string SerializeServerInfo(const ServerInfo& info);

// Reads a /server_info body, tolerant of every field it does not know (kept in `extra`,
// secrets dropped). InvalidArgument when `body` is not a JSON object or a known field has the
// wrong type; ResourceExhausted over 16 MiB or 64 levels of nesting.
StatusOr<ServerInfo> ParseServerInfo(std::string_view body);

}  // namespace agentkv::protocol

#endif  // AGENTKV_PROTOCOL_SERVER_INFO_H_
