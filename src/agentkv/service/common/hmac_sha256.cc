#include "agentkv/service/common/hmac_sha256.h"

#include <cstddef>

// SHA-256 over whole 64-byte blocks: the message is padded with 0x80, zeros and its bit
// length (big-endian) as FIPS 180-4 section 5.1.1 requires, then compressed block by block.

namespace agentkv::service {
namespace {

constexpr std::array<uint32_t, 64> kRoundConstants = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr size_t kBlockBytes = 64;

uint32_t RotateRight(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

class Sha256State {
 public:
  void Update(std::string_view data) {
    for (char c : data) {
      block_[fill_++] = static_cast<uint8_t>(c);
      if (fill_ == kBlockBytes) {
        Compress();
        fill_ = 0;
      }
    }
    length_bytes_ += data.size();
  }

  Sha256Digest Finish() {
    const uint64_t bit_length = static_cast<uint64_t>(length_bytes_) * 8;
    block_[fill_++] = 0x80;
    if (fill_ > kBlockBytes - 8) {
      while (fill_ < kBlockBytes) block_[fill_++] = 0;
      Compress();
      fill_ = 0;
    }
    while (fill_ < kBlockBytes - 8) block_[fill_++] = 0;
    for (int i = 7; i >= 0; --i) block_[fill_++] = static_cast<uint8_t>(bit_length >> (8 * i));
    Compress();
    Sha256Digest digest;
    for (size_t i = 0; i < 8; ++i) {
      for (size_t b = 0; b < 4; ++b) {
        digest[4 * i + b] = static_cast<uint8_t>(h_[i] >> (24 - 8 * b));
      }
    }
    return digest;
  }

 private:
  void Compress() {
    std::array<uint32_t, 64> w{};
    for (size_t i = 0; i < 16; ++i) {
      w[i] = (uint32_t{block_[4 * i]} << 24) | (uint32_t{block_[4 * i + 1]} << 16) |
             (uint32_t{block_[4 * i + 2]} << 8) | uint32_t{block_[4 * i + 3]};
    }
    for (size_t i = 16; i < 64; ++i) {
      const uint32_t s0 = RotateRight(w[i - 15], 7) ^ RotateRight(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const uint32_t s1 = RotateRight(w[i - 2], 17) ^ RotateRight(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
    for (size_t i = 0; i < 64; ++i) {
      const uint32_t s1 = RotateRight(e, 6) ^ RotateRight(e, 11) ^ RotateRight(e, 25);
      const uint32_t choose = (e & f) ^ (~e & g);
      const uint32_t t1 = h + s1 + choose + kRoundConstants[i] + w[i];
      const uint32_t s0 = RotateRight(a, 2) ^ RotateRight(a, 13) ^ RotateRight(a, 22);
      const uint32_t majority = (a & b) ^ (a & c) ^ (b & c);
      const uint32_t t2 = s0 + majority;
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    h_[0] += a;
    h_[1] += b;
    h_[2] += c;
    h_[3] += d;
    h_[4] += e;
    h_[5] += f;
    h_[6] += g;
    h_[7] += h;
  }

  std::array<uint32_t, 8> h_ = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  std::array<uint8_t, kBlockBytes> block_{};
  size_t fill_ = 0;
  size_t length_bytes_ = 0;
};

std::string_view AsChars(const Sha256Digest& digest) {
  return std::string_view(reinterpret_cast<const char*>(digest.data()), digest.size());
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Sha256Digest Sha256(std::string_view data) {
  Sha256State state;
  state.Update(data);
  return state.Finish();
}

Sha256Digest HmacSha256(std::string_view key, std::string_view message) {
  std::array<uint8_t, kBlockBytes> key_block{};
  if (key.size() > kBlockBytes) {
    const Sha256Digest hashed = Sha256(key);
    for (size_t i = 0; i < hashed.size(); ++i) key_block[i] = hashed[i];
  } else {
    for (size_t i = 0; i < key.size(); ++i) key_block[i] = static_cast<uint8_t>(key[i]);
  }
  std::string inner_pad(kBlockBytes, '\0');
  std::string outer_pad(kBlockBytes, '\0');
  for (size_t i = 0; i < kBlockBytes; ++i) {
    inner_pad[i] = static_cast<char>(key_block[i] ^ 0x36);
    outer_pad[i] = static_cast<char>(key_block[i] ^ 0x5c);
  }
  Sha256State inner;
  inner.Update(inner_pad);
  inner.Update(message);
  const Sha256Digest inner_digest = inner.Finish();
  Sha256State outer;
  outer.Update(outer_pad);
  outer.Update(AsChars(inner_digest));
  return outer.Finish();
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
  // Accumulate every difference; volatile keeps the compiler from stopping at the first.
  volatile uint8_t difference = 0;
  for (size_t i = 0; i < a.size(); ++i)
    difference = static_cast<uint8_t>(difference | (a[i] ^ b[i]));
  return difference == 0;
}

}  // namespace agentkv::service
