// GapAwareOrder (gap_aware_order.h): the session-end walk and the consistency check.
#include "agentkv/kv/internal/gap_aware_order.h"

#include <string>

namespace agentkv::kv::internal {

void GapAwareOrder::OnSessionEnded(int32_t tip, std::span<Block> blocks,
                                   PriorityLruQueue<Block>& host_queue) {
  constexpr int32_t kNone = -1;
  constexpr int64_t kUnneeded = GapOrderHeap::kUnneeded;
  int32_t below = kNone;
  for (int32_t b = tip; b != kNone; b = blocks[static_cast<size_t>(b)].parent) {
    const Block& blk = blocks[static_cast<size_t>(b)];
    // A running request holds it (and every block above it).
    if (blk.ref_count > 0) return;
    // Another path that is still needed extends it. (A held child has held ancestors, so the
    // walk never reaches the parent of a block being computed.)
    for (int32_t c = blk.first_child; c != kNone; c = blocks[static_cast<size_t>(c)].next_sibling) {
      if (c != below && heap_.last_use(c) != kUnneeded) return;
    }
    heap_.set_last_use(b, kUnneeded);
    if (blk.state == BlockState::kDevice) {
      heap_.Push(b, blk.queue_bucket());
    } else {
      // The host tier orders by recency: first there.
      host_queue.Remove(blocks, b);
      host_queue.Push(blocks, b, /*front=*/true);
    }
    below = b;
  }
}

Status GapAwareOrder::CheckQueued(std::span<const Block> blocks,
                                  std::span<const int8_t> in_device_queue,
                                  int64_t device_queue_size) const {
  const auto broken = [](const std::string& what) {
    return InternalError("invariant broken: " + what);
  };
  if (heap_.size() != device_queue_size) {
    return broken("the gap-order heap and the device queue hold different counts");
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    const auto b = static_cast<int32_t>(i);
    if ((in_device_queue[i] == 1) != heap_.queued(b)) {
      return broken("block " + std::to_string(i) +
                    " is in only one of the device queue and the gap-order heap");
    }
    if (in_device_queue[i] == 1 && heap_.bucket(b) != blocks[i].queue_bucket()) {
      return broken("block " + std::to_string(i) + " sits in a stale bucket of the gap-order heap");
    }
  }
  return Status::Ok();
}

}  // namespace agentkv::kv::internal
