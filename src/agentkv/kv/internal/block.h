// The representation of BlockCache (agentkv/kv/block_cache.h): one arena slot per block and
// the per-request hold list. Internal to the kv module: only kv sources and tests include it.
#ifndef AGENTKV_KV_INTERNAL_BLOCK_H_
#define AGENTKV_KV_INTERNAL_BLOCK_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "agentkv/kv/internal/priority_lru_queue.h"
#include "agentkv/kv/retention.h"

namespace agentkv::kv::internal {

enum class BlockState : uint8_t {
  kFree,         // In the free list; no key.
  kUncommitted,  // On the device, held by one request, not in the prefix index.
  kDevice,       // Committed, on the device (held, or in the device eviction queue).
  kHost,         // Committed, on the host (in the host eviction queue).
};

// One arena slot, 40 bytes. Links are block ids (arena indices); -1 means none.
struct Block {
  uint64_t key = 0;
  int32_t parent = -1;
  // Its position in the eviction queue of its tier (PriorityLruQueue), kNotQueued if none.
  uint32_t queue_pos = kNotQueued;
  // The next block of the free list while free.
  int32_t next = -1;
  // Children in the prefix tree (committed blocks of either tier), newest first.
  int32_t first_child = -1;
  int32_t next_sibling = -1;
  int32_t prev_sibling = -1;
  int32_t ref_count = 0;
  uint8_t priority = kDefaultPriority;
  BlockState state = BlockState::kFree;
  // Whether the expiry queue holds a pending expiry for this block (spares the lookup).
  bool expires = false;
  // Whether a key reference names this block's key (its eviction class).
  bool key_referenced = false;

  // Eviction class, then priority: unreferenced blocks go before referenced ones.
  int queue_bucket() const { return (key_referenced ? kNumPriorities : 0) + priority; }
  // Which eviction queue it may be in: its tier's.
  int queue_tag() const { return static_cast<int>(state); }
};

static_assert(sizeof(Block) == 40, "keep per-block metadata small: 40 B + 6.4-12.8 B of index");

// What BlockCache keeps about one running request.
struct RequestState {
  // Held blocks in sequence order: committed ones first, then uncommitted.
  std::vector<int32_t> blocks;
  int64_t num_committed = 0;
  // Blocks found cached at admission: the prefix this request reused.
  int64_t reused_blocks = 0;
  int64_t prompt_tokens = 0;
  std::optional<RetentionConfig> retention;
};

}  // namespace agentkv::kv::internal

#endif  // AGENTKV_KV_INTERNAL_BLOCK_H_
