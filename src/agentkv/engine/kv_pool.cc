// The sizing rule of kv_pool.h. A returned pool always has device_blocks >= 1 and
// host_blocks >= 0, both computed with no overflow: every input is range-checked first, and a
// ratio's product is computed in double and clamped before it becomes an integer.
#include "agentkv/engine/kv_pool.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

#include "agentkv/base/check.h"

namespace agentkv::engine {
namespace {

constexpr int64_t kMaxTokens = int64_t{1} << 40;
constexpr int32_t kMaxTokensPerBlock = 1 << 20;

template <typename T>
Status OutOfRange(std::string_view field, T value, std::string_view range) {
  std::ostringstream msg;
  msg << "kv_pool." << field << " must be in " << range << ", got " << value;
  return InvalidArgumentError(msg.str());
}

}  // namespace

Status KvPoolOptions::Validate() const {
  if (tokens_per_block < 1 || tokens_per_block > kMaxTokensPerBlock) {
    return OutOfRange("tokens_per_block", tokens_per_block, "[1, 2^20]");
  }
  if (max_total_tokens < 0 || max_total_tokens > kMaxTokens) {
    return OutOfRange("max_total_tokens", max_total_tokens, "[0, 2^40]");
  }
  if (min_device_blocks < 0 || min_device_blocks > kMaxKvPoolBlocks) {
    return OutOfRange("min_device_blocks", min_device_blocks, "[0, 2^30]");
  }
  if (!(hicache_ratio >= 0.0 && hicache_ratio <= 100.0)) {  // NaN fails too.
    return OutOfRange("hicache_ratio", hicache_ratio, "[0, 100]");
  }
  if (hicache_tokens < 0 || hicache_tokens > kMaxTokens) {
    return OutOfRange("hicache_tokens", hicache_tokens, "[0, 2^40]");
  }
  return Status::Ok();
}

StatusOr<KvPool> SizeKvPool(const KvPoolOptions& options, int64_t kv_capacity_tokens) {
  AGENTKV_CHECK(kv_capacity_tokens >= 0) << "kv_capacity_tokens = " << kv_capacity_tokens;
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  const int64_t tpb = options.tokens_per_block;
  KvPool pool;
  pool.tokens_per_block = options.tokens_per_block;
  if (options.max_total_tokens > 0) {
    pool.device_blocks = options.max_total_tokens / tpb;
    if (pool.device_blocks < 1) {
      return InvalidArgumentError("max_total_tokens " + std::to_string(options.max_total_tokens) +
                                  " is less than one block of " + std::to_string(tpb) + " tokens");
    }
  } else {
    pool.device_blocks = kv_capacity_tokens / tpb;
    if (pool.device_blocks < 1) {
      return InvalidArgumentError("the cost model leaves " + std::to_string(kv_capacity_tokens) +
                                  " KV tokens, less than one block of " + std::to_string(tpb) +
                                  " tokens");
    }
  }
  pool.device_blocks = std::max(pool.device_blocks, options.min_device_blocks);
  if (options.hicache_tokens > 0) {
    pool.host_blocks = options.hicache_tokens / tpb;
  } else {
    const double host = std::floor(static_cast<double>(pool.device_blocks) * options.hicache_ratio);
    pool.host_blocks = host >= static_cast<double>(kMaxKvPoolBlocks) ? kMaxKvPoolBlocks
                                                                     : static_cast<int64_t>(host);
  }
  return pool;
}

int64_t BlocksForFraction(double fraction, int64_t working_set_blocks) {
  AGENTKV_CHECK(fraction > 0.0 && fraction <= 1.0) << "fraction = " << fraction;
  AGENTKV_CHECK(working_set_blocks >= 0) << "working_set_blocks = " << working_set_blocks;
  return std::max<int64_t>(
      1, static_cast<int64_t>(std::floor(fraction * static_cast<double>(working_set_blocks))));
}

}  // namespace agentkv::engine
