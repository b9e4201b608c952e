// Bearer-token authentication of the control endpoints (the gateway's session close and
// admin reset, the coordinator's admission API): RFC 6750's `Authorization: Bearer <token>`.
// Pure functions; thread-safe.
#ifndef AGENTKV_SERVICE_COMMON_BEARER_TOKEN_H_
#define AGENTKV_SERVICE_COMMON_BEARER_TOKEN_H_

#include <string_view>

namespace agentkv::service {

// Whether an Authorization header value is exactly "Bearer <token>" (the scheme in any case),
// compared in time that depends on neither the token's length nor where the texts differ.
// False when `token` is empty.
bool BearerMatches(std::string_view authorization, std::string_view token);

// Whether a request with this Authorization header value may use an endpoint guarded by
// `token`: always when `token` is empty (authentication off), else BearerMatches.
inline bool BearerAuthorized(std::string_view authorization, std::string_view token) {
  return token.empty() || BearerMatches(authorization, token);
}

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_COMMON_BEARER_TOKEN_H_
