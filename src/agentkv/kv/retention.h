// Retention priorities: how valuable a cached block is, with TensorRT-LLM's
// KvCacheRetentionConfig semantics.
//
// A request may carry a RetentionConfig: token ranges of its prompt, each with a priority and
// an optional duration, plus a priority (and duration) for the blocks holding generated
// tokens. When the request ends, each of its committed blocks covered by the config gets that
// priority; a duration counts scheduler steps from then, after which the block returns to the
// cache's default priority. Lower priorities are evicted first. Value types; thread-compatible.
#ifndef AGENTKV_KV_RETENTION_H_
#define AGENTKV_KV_RETENTION_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/time.h"

namespace agentkv::kv {

// A retention priority: 0 (evicted first) .. 100 (evicted last).
using Priority = int32_t;
inline constexpr Priority kMinPriority = 0;
inline constexpr Priority kMaxPriority = 100;
inline constexpr Priority kDefaultPriority = 35;
inline constexpr int kNumPriorities = kMaxPriority + 1;

// Priority (and optional duration) for the prompt tokens [token_start, token_end).
struct TokenRangeRetention {
  int64_t token_start = 0;
  // Exclusive end; unset means to the end of the prompt.
  std::optional<int64_t> token_end;
  Priority priority = kDefaultPriority;
  // Scheduler steps after which the priority reverts to the cache default; unset = forever.
  std::optional<Step> duration;
};

struct RetentionConfig {
  // Non-overlapping ranges of prompt tokens; blocks not covered keep their priority (new
  // blocks get the cache default).
  std::vector<TokenRangeRetention> token_ranges;
  // Priority of blocks whose first token is a generated (decode) token.
  Priority decode_priority = kDefaultPriority;
  std::optional<Step> decode_duration;

  // InvalidArgument naming the field when a priority is outside [0, 100], a range is empty
  // or negative, two ranges overlap, or a duration is not positive.
  Status Validate() const;
};

// What a config says about one block: a priority to set (or none) and its duration.
struct BlockRetention {
  std::optional<Priority> priority;
  std::optional<Step> duration;
};

// The retention of block `block_index` (covering tokens [i*tpb, (i+1)*tpb)) of a sequence
// whose first `prompt_tokens` tokens are prompt. A block whose first token is in the prompt
// takes the range containing that token (none: no change); any other block is a decode
// block. Precondition: config was validated.
BlockRetention RetentionForBlock(const RetentionConfig& config, int64_t block_index,
                                 int32_t tokens_per_block, int64_t prompt_tokens);

}  // namespace agentkv::kv

#endif  // AGENTKV_KV_RETENTION_H_
