// Tenant keys: who a gateway request comes from, and whose sessions it may name.
//
// `--tenant-keys-file FILE` lists one `TENANT KEY` pair a line. With keys configured, every
// data-path request and every session close presents `Authorization: Bearer <key>` of a tenant
// (or the admin --bearer-token); a tenant's session ids are namespaced by its name inside the
// gateway and towards the engines (TenantSessionId), so that one tenant can never close, join or
// abort another's session of the same name. The admin token acts on the raw ids.
//
// ParseTenantKeys is pure; ReadTenantKeysFile reads the file and parses it. Error messages name
// the file and the line, never a key. Pure functions; thread-safe.
#ifndef AGENTKV_SERVICE_GATEWAY_TENANT_KEYS_H_
#define AGENTKV_SERVICE_GATEWAY_TENANT_KEYS_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "agentkv/base/status.h"

namespace agentkv::service {

struct TenantKey {
  // 1 to kMaxTenantNameBytes of [A-Za-z0-9_-] (IsValidTenantName).
  std::string tenant;
  // kMinTenantKeyBytes or more printable ASCII bytes without spaces.
  std::string key;

  friend bool operator==(const TenantKey&, const TenantKey&) = default;
};

inline constexpr size_t kMaxTenantNameBytes = 64;
inline constexpr size_t kMinTenantKeyBytes = 16;
// Joins a tenant's name and the session id it names: "<tenant>.<session_id>". Tenant names
// never hold it, so two tenants' ids never meet, whatever the ids hold.
inline constexpr char kTenantSeparator = '.';

// Whether `name` is a valid tenant name: 1 to kMaxTenantNameBytes of letters, digits, '_' and
// '-' (a subset of the session id characters, without kTenantSeparator).
bool IsValidTenantName(std::string_view name);

// Parses a tenant keys file's `text`: one `TENANT KEY` pair a line (separated by spaces or
// tabs), blank lines and lines starting with `#` (after leading blanks) ignored, CRLF accepted.
// InvalidArgument "<file_name>:<line>: ..." when a line does not hold exactly two fields, a
// name is not valid, a key is shorter than kMinTenantKeyBytes or holds a byte outside printable
// ASCII, or a name or a key appears twice (the message names the earlier line); also when the
// file lists no key. No message holds a key.
StatusOr<std::vector<TenantKey>> ParseTenantKeys(std::string_view text, std::string_view file_name);

// Reads `path` and parses it (ParseTenantKeys). InvalidArgument naming the path when it cannot
// be read or is over 16 MiB.
StatusOr<std::vector<TenantKey>> ReadTenantKeysFile(const std::string& path);

// The rules of ParseTenantKeys on parsed keys (for options built in code), each error naming
// --tenant-keys-file and the tenant (never the key).
Status CheckTenantKeys(const std::vector<TenantKey>& keys);

// Who presents a request's Authorization header value.
struct Caller {
  enum class Kind : uint8_t {
    kAnonymous,  // No credential the gateway knows.
    kAdmin,      // The --bearer-token.
    kTenant,     // One tenant's key.
  };
  Kind kind = Kind::kAnonymous;
  // The tenant's name for kTenant; empty otherwise.
  std::string tenant;
};

// The caller behind `authorization` ("Bearer <token>"): kAdmin when it carries `bearer_token`
// (non-empty), else kTenant when it carries one of `keys`, else kAnonymous. Every comparison
// takes time independent of where the texts differ (BearerMatches); the keys are compared in
// turn, so the cost grows with their number (meant for up to thousands of tenants).
Caller IdentifyCaller(std::string_view authorization, std::string_view bearer_token,
                      const std::vector<TenantKey>& keys);

// The gateway's id of `tenant`'s session `session_id`: "<tenant>.<session_id>".
// InvalidArgument when that is longer than `max_bytes` (the session id bound), naming the
// limit left for the tenant's ids.
StatusOr<std::string> TenantSessionId(std::string_view tenant, std::string_view session_id,
                                      size_t max_bytes);

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_GATEWAY_TENANT_KEYS_H_
