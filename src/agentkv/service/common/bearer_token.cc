#include "agentkv/service/common/bearer_token.h"

#include "agentkv/service/common/hmac_sha256.h"

namespace agentkv::service {

bool BearerMatches(std::string_view authorization, std::string_view token) {
  if (token.empty()) return false;
  constexpr std::string_view kScheme = "Bearer ";
  if (authorization.size() <= kScheme.size()) return false;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    const char c = authorization[i];
    const char lower = c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
    const char want = kScheme[i] >= 'A' && kScheme[i] <= 'Z'
                          ? static_cast<char>(kScheme[i] - 'A' + 'a')
                          : kScheme[i];
    if (lower != want) return false;
  }
  // Compare digests so that neither the length nor the content of the token leaks through
  // timing.
  return DigestsEqual(Sha256(authorization.substr(kScheme.size())), Sha256(token));
}

}  // namespace agentkv::service
