// NextUseOrder (next_use_order.h): re-ranking and the consistency check.
#include "agentkv/kv/internal/next_use_order.h"

#include <algorithm>
#include <string>

namespace agentkv::kv::internal {

void NextUseOrder::Refresh(int32_t block, std::span<const Block> blocks) {
  if (!heap_.queued(block)) return;
  // Never later than a cached child: evicting the block would take the child with it. (Children
  // of an evictable block are evictable, and device-resident without a host tier.)
  const Block& blk = blocks[static_cast<size_t>(block)];
  int64_t rank = ranking_->NextUse(BlockKey(blk.key));
  for (int32_t c = blk.first_child; c != -1; c = blocks[static_cast<size_t>(c)].next_sibling) {
    if (heap_.queued(c)) rank = std::min(rank, heap_.rank(c));
  }
  heap_.Push(block, rank, blk.key);
}

Status NextUseOrder::CheckQueued(std::span<const Block> blocks,
                                 std::span<const int8_t> in_device_queue,
                                 int64_t device_queue_size) const {
  if (heap_.size() != device_queue_size) {
    return InternalError(
        "invariant broken: the next-use heap and the device queue hold different counts");
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    if ((in_device_queue[i] == 1) != heap_.queued(static_cast<int32_t>(i))) {
      return InternalError("invariant broken: block " + std::to_string(i) +
                           " is in only one of the device queue and the next-use heap");
    }
  }
  return Status::Ok();
}

}  // namespace agentkv::kv::internal
