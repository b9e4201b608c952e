// Seeded 64-bit hashing: the one hash function family agentkv uses for keys.
//
// `Hash64(bytes, seed)` is a fast non-cryptographic hash built on the 64x64->128-bit multiply
// ("mum") mixing step, processing 32 bytes per round in two lanes; `Mix64` is the SplitMix64
// finalizer. Measured against XXH3 (libxxhash) on block keys and kept, as fast or faster at
// every block size: docs/PERFORMANCE.md, "Block hash against XXH3". Identical inputs and seed
// give identical results on every machine and process (no per-process randomization), which
// keeps block keys rank-identical. Not suitable where an adversary picks inputs to collide;
// callers that need collision safety say how they get it. Pure functions, thread-safe.
#ifndef AGENTKV_BASE_HASH_H_
#define AGENTKV_BASE_HASH_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

namespace agentkv {

// The SplitMix64 finalizer: a bijection on 64-bit values with full avalanche.
constexpr uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

namespace hash_internal {

inline constexpr uint64_t kP0 = 0xa0761d6478bd642fULL;
inline constexpr uint64_t kP1 = 0xe7037ed1a0b428dbULL;
inline constexpr uint64_t kP2 = 0x8ebc6af09c88c6e3ULL;

// Multiplies to 128 bits and folds the halves: the core mixing step.
inline uint64_t Mum(uint64_t a, uint64_t b) {
  __extension__ using U128 = unsigned __int128;
  const U128 r = static_cast<U128>(a) * b;
  return static_cast<uint64_t>(r) ^ static_cast<uint64_t>(r >> 64);
}

inline uint64_t Load64(const std::byte* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;  // Little-endian hosts only; agentkv targets x86-64 and aarch64.
}

inline uint64_t Load32(const std::byte* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

}  // namespace hash_internal

// Hashes `bytes` with `seed`. Two independent lanes consume 32 bytes per round, so the
// multiply latency of one lane overlaps the other's.
inline uint64_t Hash64(std::span<const std::byte> bytes, uint64_t seed) {
  using namespace hash_internal;
  const std::byte* p = bytes.data();
  size_t n = bytes.size();
  uint64_t lane0 = seed ^ Mum(seed ^ kP0, kP1 ^ n);
  uint64_t lane1 = lane0 ^ kP2;
  while (n >= 32) {
    lane0 = Mum(Load64(p) ^ kP1, Load64(p + 8) ^ lane0);
    lane1 = Mum(Load64(p + 16) ^ kP2, Load64(p + 24) ^ lane1);
    p += 32;
    n -= 32;
  }
  if (n >= 16) {
    lane0 = Mum(Load64(p) ^ kP1, Load64(p + 8) ^ lane0);
    p += 16;
    n -= 16;
  }
  uint64_t a = 0;
  uint64_t b = 0;
  if (n >= 8) {
    a = Load64(p);
    b = Load64(p + n - 8);
  } else if (n >= 4) {
    a = Load32(p);
    b = Load32(p + n - 4);
  } else if (n > 0) {
    a = (static_cast<uint64_t>(p[0]) << 16) | (static_cast<uint64_t>(p[n >> 1]) << 8) |
        static_cast<uint64_t>(p[n - 1]);
  }
  return Mum(lane1 ^ kP2 ^ bytes.size(), Mum(a ^ kP1, b ^ lane0));
}

inline uint64_t Hash64(std::string_view s, uint64_t seed) {
  return Hash64(std::as_bytes(std::span<const char>(s.data(), s.size())), seed);
}

// Combines two 64-bit values into one; order matters.
inline uint64_t HashCombine(uint64_t a, uint64_t b) {
  using namespace hash_internal;
  return Mum(a ^ kP0, b ^ kP1);
}

}  // namespace agentkv

#endif  // AGENTKV_BASE_HASH_H_
