// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), for the gateway's signed sub-agent parent
// hints (parent_hint in gateway_request.h) and the bearer-token comparison (bearer_token.h).
//
// Computed by OpenSSL's libcrypto (EVP_Digest, HMAC(EVP_sha256(), ...)), the one crypto
// library in agentkv's dependency set (Debian libssl-dev); comparisons run in constant time
// (CRYPTO_memcmp). The tests hold it to the FIPS 180-4 examples and the RFC 4231 vectors. Pure
// functions; thread-safe (libcrypto's one-shot calls need no initialization since 1.1.0).
#ifndef AGENTKV_SERVICE_COMMON_HMAC_SHA256_H_
#define AGENTKV_SERVICE_COMMON_HMAC_SHA256_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace agentkv::service {

using Sha256Digest = std::array<uint8_t, 32>;

// The SHA-256 digest of `data`.
Sha256Digest Sha256(std::string_view data);

// HMAC-SHA256(key, message) per RFC 2104: keys longer than the 64-byte block are hashed first.
Sha256Digest HmacSha256(std::string_view key, std::string_view message);

// Lower-case hex of `digest` (64 characters).
std::string HexDigest(const Sha256Digest& digest);

// The 32 bytes spelled by `hex` (64 hex digits, either case); nullopt otherwise.
std::optional<Sha256Digest> ParseHexDigest(std::string_view hex);

// Whether `a` and `b` are equal, in time that does not depend on where they differ.
bool DigestsEqual(const Sha256Digest& a, const Sha256Digest& b);

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_COMMON_HMAC_SHA256_H_
