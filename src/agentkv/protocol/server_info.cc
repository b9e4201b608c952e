#include "agentkv/protocol/server_info.h"

#include <algorithm>
#include <array>

#include "agentkv/protocol/json_util.h"

// Invariants: a parsed ServerInfo holds no secret (no key of `extra` satisfies
// IsSecretServerArg), and SerializeServerInfo never writes one.

namespace agentkv::protocol {
namespace {

namespace json = boost::json;

constexpr JsonLimits kServerInfoLimits{.max_bytes = size_t{16} << 20, .max_depth = 64};

// The top-level keys ServerInfo holds in typed fields.
constexpr std::array<std::string_view, 12> kKnownKeys = {"enable_metrics",
                                                         "enable_session_radix_cache",
                                                         "radix_eviction_policy",
                                                         "max_total_num_tokens",
                                                         "max_req_input_len",
                                                         "status",
                                                         "version",
                                                         "model_path",
                                                         "tp_size",
                                                         "dp_size",
                                                         "internal_states",
                                                         "api_key"};

bool IsKnownKey(std::string_view key) {
  for (const std::string_view known : kKnownKeys) {
    if (key == known) return true;
  }
  return false;
}

bool EndsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

}  // namespace

bool IsSecretServerArg(std::string_view key) {
  return EndsWith(key, "api_key") || EndsWith(key, "_password") || EndsWith(key, "_secret") ||
         EndsWith(key, "_token");
}

std::string SerializeServerInfo(const ServerInfo& info) {
  JsonWriter w;
  w.BeginObject();
  for (const json::key_value_pair& member : info.extra) {
    const std::string_view key(member.key().data(), member.key().size());
    if (IsKnownKey(key) || IsSecretServerArg(key)) continue;
    w.Key(key).Value(member.value());
  }
  w.Key("model_path").String(info.model_path);
  w.Key("tp_size").Int(info.tp_size);
  w.Key("dp_size").Int(info.dp_size);
  w.Key("enable_metrics").Bool(info.enable_metrics);
  w.Key("enable_session_radix_cache").Bool(info.enable_session_radix_cache);
  w.Key("radix_eviction_policy").String(info.radix_eviction_policy);
  w.Key("status").String(info.status);
  w.Key("max_total_num_tokens").Int(info.max_total_num_tokens);
  w.Key("max_req_input_len").Int(info.max_req_input_len);
  w.Key("internal_states");
  if (info.internal_states.empty()) {
    // The list always has one dict per DP rank (docs/PROTOCOL.md section 7).
    w.BeginArray();
    for (int64_t rank = 0; rank < std::max<int64_t>(info.dp_size, 1); ++rank) {
      w.BeginObject().Key("dp_rank").Int(rank).EndObject();
    }
    w.EndArray();
  } else {
    w.Value(json::value(info.internal_states));
  }
  w.Key("version").String(info.version);
  w.EndObject();
  return w.Take();
}

StatusOr<ServerInfo> ParseServerInfo(std::string_view body) {
  AGENTKV_ASSIGN_OR_RETURN(const json::value document,
                           ParseJsonObject(body, kServerInfoLimits, "server_info"));
  const json::object* object = &document.as_object();
  ServerInfo info;
  AGENTKV_RETURN_IF_ERROR(
      ReadBool(*object, "enable_metrics", "enable_metrics", &info.enable_metrics));
  AGENTKV_RETURN_IF_ERROR(ReadBool(*object, "enable_session_radix_cache",
                                   "enable_session_radix_cache", &info.enable_session_radix_cache));
  AGENTKV_RETURN_IF_ERROR(ReadString(*object, "radix_eviction_policy", "radix_eviction_policy",
                                     &info.radix_eviction_policy));
  AGENTKV_RETURN_IF_ERROR(ReadNonNegativeInt64(*object, "max_total_num_tokens",
                                               "max_total_num_tokens", &info.max_total_num_tokens));
  AGENTKV_RETURN_IF_ERROR(ReadNonNegativeInt64(*object, "max_req_input_len", "max_req_input_len",
                                               &info.max_req_input_len));
  AGENTKV_RETURN_IF_ERROR(ReadString(*object, "status", "status", &info.status));
  AGENTKV_RETURN_IF_ERROR(ReadString(*object, "version", "version", &info.version));
  AGENTKV_RETURN_IF_ERROR(ReadString(*object, "model_path", "model_path", &info.model_path));
  AGENTKV_RETURN_IF_ERROR(ReadInt64(*object, "tp_size", "tp_size", &info.tp_size));
  AGENTKV_RETURN_IF_ERROR(ReadInt64(*object, "dp_size", "dp_size", &info.dp_size));
  if (const json::value* states = FindNonNull(*object, "internal_states")) {
    const json::array* list = states->if_array();
    if (list == nullptr) return InvalidArgumentError("internal_states: expected a list");
    info.internal_states = *list;
  }
  for (const json::key_value_pair& member : *object) {
    const std::string_view key(member.key().data(), member.key().size());
    if (IsKnownKey(key) || IsSecretServerArg(key)) continue;
    info.extra.emplace(member.key(), member.value());
  }
  return info;
}

}  // namespace agentkv::protocol
