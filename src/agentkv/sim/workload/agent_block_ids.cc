#include "agentkv/sim/workload/agent_block_ids.h"

#include <algorithm>
#include <utility>

#include "agentkv/base/check.h"

namespace agentkv::sim {

AgentBlockIds::AgentBlockIds(std::vector<WekaRequest>& requests) {
  ranges_.reserve(requests.size());
  for (WekaRequest& request : requests) {
    const std::vector<uint64_t>& ids = request.hash_ids;
    Range range{pool_.size(), ids.size()};
    if (!ranges_.empty()) {
      const Range& last = ranges_.back();
      const bool ends_pool = last.offset + last.count == pool_.size();
      const auto previous = pool_.begin() + static_cast<std::ptrdiff_t>(last.offset);
      // Extends the previous request's ids, which end the pool: share them.
      if (ends_pool && ids.size() >= last.count &&
          std::equal(previous, previous + static_cast<std::ptrdiff_t>(last.count), ids.begin())) {
        range.offset = last.offset;
        pool_.insert(pool_.end(), ids.begin() + static_cast<std::ptrdiff_t>(last.count), ids.end());
        ranges_.push_back(range);
        std::vector<uint64_t>().swap(request.hash_ids);
        continue;
      }
    }
    pool_.insert(pool_.end(), ids.begin(), ids.end());
    ranges_.push_back(range);
    std::vector<uint64_t>().swap(request.hash_ids);
  }
}

std::span<const uint64_t> AgentBlockIds::At(size_t i) const {
  AGENTKV_CHECK(i < ranges_.size()) << i << " of " << ranges_.size();
  return std::span<const uint64_t>(pool_).subspan(ranges_[i].offset, ranges_[i].count);
}

}  // namespace agentkv::sim
