// Rng: the seeded random number generator of agentkv (SplitMix64).
//
// Every random choice in the project flows from one explicit seed through this class, so
// equal seeds give equal bytes. SplitMix64 draw i (0-based) equals Mix64(seed + (i+1)*golden),
// which also makes it a counter-based stream. Thread-compatible; copy to fork a stream.
#ifndef AGENTKV_BASE_RNG_H_
#define AGENTKV_BASE_RNG_H_

#include <cstdint>

#include "agentkv/base/check.h"
#include "agentkv/base/hash.h"

namespace agentkv {

class Rng {
 public:
  static constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;

  explicit Rng(uint64_t seed) : state_(seed) {}

  // The next 64 uniformly distributed bits.
  uint64_t Next() {
    state_ += kGolden;
    return Mix64(state_);
  }

  // Uniform in [lo, hi] by `lo + draw % (hi - lo + 1)` (the modulo bias is below 2^-40 for the
  // ranges agentkv draws, and the formula is what external trace specs use). Precondition:
  // lo <= hi.
  int64_t Uniform(int64_t lo, int64_t hi) {
    AGENTKV_CHECK_LE(lo, hi);
    const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
    return lo + static_cast<int64_t>(span == 0 ? Next() : Next() % span);
  }

  // Uniform in [0, 1).
  double UniformDouble() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

  // True with probability `p`.
  bool Bernoulli(double p) { return UniformDouble() < p; }

 private:
  uint64_t state_;
};

}  // namespace agentkv

#endif  // AGENTKV_BASE_RNG_H_
