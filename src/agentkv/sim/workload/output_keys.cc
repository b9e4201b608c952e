// The range is computed from token counts and id prefixes only; the keys are the caller's
// chain of next's ids, so they equal the keys next's own prompt gets (same hasher, same
// namespace) and the next turn's lookup finds the committed answer.
#include "agentkv/sim/workload/output_keys.h"

#include <algorithm>
#include <cstddef>

#include "agentkv/base/bounds.h"
#include "agentkv/base/check.h"

namespace agentkv::sim {

OutputBlocks ReusedOutputBlocks(const WekaRequest& current, const WekaRequest& next,
                                int32_t block_size) {
  return ReusedOutputBlocks(current, current.hash_ids, next.hash_ids, block_size);
}

OutputBlocks ReusedOutputBlocks(const WekaRequest& current, std::span<const uint64_t> current_ids,
                                std::span<const uint64_t> next_ids, int32_t block_size) {
  AGENTKV_CHECK(block_size >= 1) << block_size;
  const auto n = static_cast<int64_t>(current_ids.size());
  const auto next_n = static_cast<int64_t>(next_ids.size());
  if (next_n <= n || !std::equal(current_ids.begin(), current_ids.end(), next_ids.begin())) {
    return {};
  }
  // Saturating: token counts come from a trace (each at most 2^40, so this never saturates
  // in practice).
  const int64_t prompt =
      std::max<int64_t>({current.input_tokens, SaturatingMul(n, block_size), int64_t{1}});
  const int64_t output = std::max<int64_t>(1, current.output_tokens);
  const int64_t computed = SaturatingAdd(prompt, output) - 1;
  const int64_t end = std::min(next_n, computed / block_size);
  if (end <= n) return {};
  return OutputBlocks{n, end};
}

std::vector<kv::BlockKey> ReusedOutputKeys(const WekaRequest& current, const WekaRequest& next,
                                           int32_t block_size, const BlockKeysOf& keys_of) {
  return ReusedOutputKeys(current, current.hash_ids, next.hash_ids, block_size, keys_of);
}

std::vector<kv::BlockKey> ReusedOutputKeys(const WekaRequest& current,
                                           std::span<const uint64_t> current_ids,
                                           std::span<const uint64_t> next_ids, int32_t block_size,
                                           const BlockKeysOf& keys_of) {
  const OutputBlocks blocks = ReusedOutputBlocks(current, current_ids, next_ids, block_size);
  if (blocks.empty()) return {};
  std::vector<kv::BlockKey> keys = keys_of(next_ids.first(static_cast<size_t>(blocks.end)));
  AGENTKV_CHECK(static_cast<int64_t>(keys.size()) == blocks.end)
      << "keys_of gave " << keys.size() << " keys for " << blocks.end << " ids";
  keys.erase(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(blocks.begin));
  return keys;
}

}  // namespace agentkv::sim
