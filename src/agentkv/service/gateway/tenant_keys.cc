#include "agentkv/service/gateway/tenant_keys.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "agentkv/service/common/bearer_token.h"

namespace agentkv::service {
namespace {

// Larger tenant files are refused: a million tenants fit in far less.
constexpr std::streamoff kMaxTenantFileBytes = std::streamoff{16} << 20;

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

bool IsKeyByte(char c) { return c > 0x20 && c < 0x7f; }

// Why `key` is not a valid key; empty when it is.
std::string KeyProblem(std::string_view key) {
  if (key.size() < kMinTenantKeyBytes) {
    return "is shorter than " + std::to_string(kMinTenantKeyBytes) + " bytes";
  }
  if (!std::all_of(key.begin(), key.end(), IsKeyByte)) {
    return "holds a byte outside printable ASCII";
  }
  return "";
}

constexpr std::string_view kNameRule = "tenant names are 1 to 64 letters, digits, '_' or '-'";

}  // namespace

bool IsValidTenantName(std::string_view name) {
  if (name.empty() || name.size() > kMaxTenantNameBytes) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

StatusOr<std::vector<TenantKey>> ParseTenantKeys(std::string_view text,
                                                 std::string_view file_name) {
  std::vector<TenantKey> keys;
  std::map<std::string, size_t, std::less<>> name_lines;
  std::map<std::string, std::pair<size_t, std::string>, std::less<>> key_lines;
  size_t line_number = 0;
  while (!text.empty()) {
    ++line_number;
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const auto where = [&] { return std::string(file_name) + ":" + std::to_string(line_number); };
    std::vector<std::string_view> fields;
    for (size_t i = 0; i < line.size();) {
      if (IsBlank(line[i])) {
        ++i;
        continue;
      }
      size_t j = i;
      while (j < line.size() && !IsBlank(line[j])) ++j;
      fields.push_back(line.substr(i, j - i));
      i = j;
    }
    if (fields.empty() || fields.front().front() == '#') continue;
    if (fields.size() != 2) {
      return InvalidArgumentError(where() + ": expected `TENANT KEY`, got " +
                                  std::to_string(fields.size()) + " fields");
    }
    const std::string_view tenant = fields[0];
    const std::string_view key = fields[1];
    if (!IsValidTenantName(tenant)) {
      return InvalidArgumentError(where() + ": not a valid tenant name (" + std::string(kNameRule) +
                                  ")");
    }
    if (const std::string problem = KeyProblem(key); !problem.empty()) {
      return InvalidArgumentError(where() + ": the key of tenant " + std::string(tenant) + " " +
                                  problem);
    }
    if (auto it = name_lines.find(tenant); it != name_lines.end()) {
      return InvalidArgumentError(where() + ": tenant " + std::string(tenant) +
                                  " is listed twice (first on line " + std::to_string(it->second) +
                                  ")");
    }
    if (auto it = key_lines.find(key); it != key_lines.end()) {
      return InvalidArgumentError(where() + ": the key of tenant " + std::string(tenant) +
                                  " is also the key of tenant " + it->second.second + " (line " +
                                  std::to_string(it->second.first) +
                                  "): every tenant needs its own key");
    }
    name_lines.emplace(std::string(tenant), line_number);
    key_lines.emplace(std::string(key), std::make_pair(line_number, std::string(tenant)));
    keys.push_back(TenantKey{std::string(tenant), std::string(key)});
  }
  if (keys.empty()) {
    return InvalidArgumentError(std::string(file_name) + ": lists no `TENANT KEY` line");
  }
  return keys;
}

StatusOr<std::vector<TenantKey>> ReadTenantKeysFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return InvalidArgumentError("--tenant-keys-file: cannot read " + path);
  file.seekg(0, std::ios::end);
  const std::streamoff size = file.tellg();
  if (size > kMaxTenantFileBytes) {
    return InvalidArgumentError("--tenant-keys-file: " + path + " is over 16 MiB");
  }
  file.seekg(0, std::ios::beg);
  std::ostringstream text;
  text << file.rdbuf();
  if (file.bad()) return InvalidArgumentError("--tenant-keys-file: cannot read " + path);
  return ParseTenantKeys(text.str(), path);
}

Status CheckTenantKeys(const std::vector<TenantKey>& keys) {
  std::map<std::string_view, std::string_view> names;
  std::map<std::string_view, std::string_view> seen_keys;
  for (const TenantKey& entry : keys) {
    if (!IsValidTenantName(entry.tenant)) {
      return InvalidArgumentError("--tenant-keys-file: not a valid tenant name (" +
                                  std::string(kNameRule) + ")");
    }
    if (const std::string problem = KeyProblem(entry.key); !problem.empty()) {
      return InvalidArgumentError("--tenant-keys-file: the key of tenant " + entry.tenant + " " +
                                  problem);
    }
    if (!names.emplace(entry.tenant, entry.tenant).second) {
      return InvalidArgumentError("--tenant-keys-file: tenant " + entry.tenant +
                                  " is listed twice");
    }
    if (auto [it, inserted] = seen_keys.emplace(entry.key, entry.tenant); !inserted) {
      return InvalidArgumentError("--tenant-keys-file: the key of tenant " + entry.tenant +
                                  " is also the key of tenant " + std::string(it->second));
    }
  }
  return Status::Ok();
}

Caller IdentifyCaller(std::string_view authorization, std::string_view bearer_token,
                      const std::vector<TenantKey>& keys) {
  if (authorization.empty()) return Caller{};
  if (BearerMatches(authorization, bearer_token)) return Caller{Caller::Kind::kAdmin, ""};
  // Every key is compared, whichever matches, so that the time taken does not tell which.
  const TenantKey* found = nullptr;
  for (const TenantKey& entry : keys) {
    if (BearerMatches(authorization, entry.key) && found == nullptr) found = &entry;
  }
  if (found == nullptr) return Caller{};
  return Caller{Caller::Kind::kTenant, found->tenant};
}

StatusOr<std::string> TenantSessionId(std::string_view tenant, std::string_view session_id,
                                      size_t max_bytes) {
  const size_t size = tenant.size() + 1 + session_id.size();
  if (size > max_bytes) {
    const size_t left = max_bytes > tenant.size() + 1 ? max_bytes - tenant.size() - 1 : 0;
    return InvalidArgumentError("session_id: tenant " + std::string(tenant) +
                                "'s session ids are at most " + std::to_string(left) +
                                " bytes (the gateway prefixes them with the tenant's name), got " +
                                std::to_string(session_id.size()));
  }
  std::string id;
  id.reserve(size);
  id.append(tenant);
  id.push_back(kTenantSeparator);
  id.append(session_id);
  return id;
}

}  // namespace agentkv::service
