// SHA-256 and HMAC-SHA256 by OpenSSL's libcrypto, one-shot (EVP_Digest, HMAC), and the
// comparison by CRYPTO_memcmp. libcrypto failing to compute SHA-256 (a broken installation, a
// provider configuration without it) is not a case callers could handle: it aborts.
#include "agentkv/service/common/hmac_sha256.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <climits>
#include <cstddef>

#include "agentkv/base/check.h"

namespace agentkv::service {
namespace {

// The bytes of `data` for libcrypto: never a null pointer, even for an empty view (whose data()
// may be null), since libcrypto's documentation does not promise to take a null key or input.
const unsigned char* BytesOf(std::string_view data) {
  static constexpr unsigned char kNoBytes[1] = {0};
  return data.empty() ? kNoBytes : reinterpret_cast<const unsigned char*>(data.data());
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Sha256Digest Sha256(std::string_view data) {
  Sha256Digest digest{};
  unsigned int size = 0;
  AGENTKV_CHECK(
      EVP_Digest(BytesOf(data), data.size(), digest.data(), &size, EVP_sha256(), nullptr) == 1)
      << "libcrypto could not compute SHA-256";
  AGENTKV_CHECK_EQ(size, digest.size());
  return digest;
}

Sha256Digest HmacSha256(std::string_view key, std::string_view message) {
  // HMAC takes the key length as an int; a key past 2 GiB is a programmer error.
  AGENTKV_CHECK_LE(key.size(), static_cast<size_t>(INT_MAX));
  Sha256Digest digest{};
  unsigned int size = 0;
  AGENTKV_CHECK(HMAC(EVP_sha256(), BytesOf(key), static_cast<int>(key.size()), BytesOf(message),
                     message.size(), digest.data(), &size) != nullptr)
      << "libcrypto could not compute HMAC-SHA256";
  AGENTKV_CHECK_EQ(size, digest.size());
  return digest;
}

std::string HexDigest(const Sha256Digest& digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * digest.size());
  for (uint8_t byte : digest) {
    out.push_back(kHex[byte >> 4]);
    out.push_back(kHex[byte & 0xf]);
  }
  return out;
}

std::optional<Sha256Digest> ParseHexDigest(std::string_view hex) {
  Sha256Digest digest{};
  if (hex.size() != 2 * digest.size()) return std::nullopt;
  for (size_t i = 0; i < digest.size(); ++i) {
    const int high = HexValue(hex[2 * i]);
    const int low = HexValue(hex[2 * i + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    digest[i] = static_cast<uint8_t>((high << 4) | low);
  }
  return digest;
}

bool DigestsEqual(const Sha256Digest& a, const Sha256Digest& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace agentkv::service
