// KvPool: the one rule that sizes an engine's KV cache tiers, in blocks.
//
// Every engine the project builds (the simulator's, the engine emulator's, the replay's report
// of them) gets its device and host tiers from SizeKvPool, so that a flag means the same pool
// everywhere. The device tier is SGLang's --max-total-tokens rounded down to whole blocks, or,
// without it, whatever the cost model leaves after the weights (CostModel::kv_capacity_tokens);
// the host (HiCache) tier is a token count or a multiple of the device tier. The offline curves
// (cache-curve, agentic-curve) size a cache as a share of a workload's working set through
// BlocksForFraction instead. Pure functions of their arguments; thread-safe.
#ifndef AGENTKV_ENGINE_KV_POOL_H_
#define AGENTKV_ENGINE_KV_POOL_H_

#include <cstdint>

#include "agentkv/base/status.h"

namespace agentkv::engine {

// The largest tier SizeKvPool returns from a ratio, and the largest min_device_blocks:
// kv::KvCacheOptions' bound on either tier.
inline constexpr int64_t kMaxKvPoolBlocks = int64_t{1} << 30;

struct KvPoolOptions {
  // Tokens per KV block (SGLang --page-size; a trace's block size). Default: 16.
  // Range: [1, 2^20].
  int32_t tokens_per_block = 16;
  // SGLang --max-total-tokens: device KV in tokens, rounded down to whole blocks; 0 = what the
  // cost model leaves after the weights. Default: 0. Range: [0, 2^40].
  int64_t max_total_tokens = 0;
  // The device tier has at least this many blocks (the simulator's infinite-cache arm grows it
  // to the whole workload). Default: 0. Range: [0, 2^30].
  int64_t min_device_blocks = 0;
  // SGLang --hicache-ratio: host tier blocks = floor(device blocks x ratio), at most 2^30;
  // 0 = no host tier. Ignored when hicache_tokens > 0. Default: 0. Range: [0, 100].
  double hicache_ratio = 0.0;
  // Host tier in tokens, rounded down to whole blocks (the emulator's --hicache-tokens);
  // overrides hicache_ratio when > 0. Default: 0. Range: [0, 2^40].
  int64_t hicache_tokens = 0;

  // InvalidArgument naming the first field out of range ("kv_pool.<field>") and its value.
  [[nodiscard]] Status Validate() const;
};

// One engine's KV tiers.
struct KvPool {
  int32_t tokens_per_block = 0;
  int64_t device_blocks = 0;
  int64_t host_blocks = 0;

  // SGLang's max_total_num_tokens: the device tier in tokens.
  int64_t device_tokens() const { return device_blocks * tokens_per_block; }
  int64_t host_tokens() const { return host_blocks * tokens_per_block; }

  friend bool operator==(const KvPool&, const KvPool&) = default;
};

// The rule. With `kv_capacity_tokens` the KV tokens the cost model leaves after the weights:
//   device = max(max_total_tokens > 0 ? max_total_tokens / tpb : kv_capacity_tokens / tpb,
//                min_device_blocks)
//   host   = hicache_tokens > 0 ? hicache_tokens / tpb
//                               : min(2^30, floor(device x hicache_ratio))
// (divisions floor). InvalidArgument when `options` are invalid, or when max_total_tokens (or,
// without it, the cost model's capacity) is under one block, whatever min_device_blocks says.
// Precondition: kv_capacity_tokens >= 0.
[[nodiscard]] StatusOr<KvPool> SizeKvPool(const KvPoolOptions& options, int64_t kv_capacity_tokens);

// A cache sized as a share of a working set of `working_set_blocks` distinct blocks:
// max(1, floor(fraction x working_set_blocks)). The offline curves' capacities.
// Preconditions: fraction in (0, 1]; working_set_blocks >= 0.
int64_t BlocksForFraction(double fraction, int64_t working_set_blocks);

}  // namespace agentkv::engine

#endif  // AGENTKV_ENGINE_KV_POOL_H_
