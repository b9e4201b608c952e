// AgentBlockIds: the block ids of one agent's requests, each id stored once per run of turns.
//
// An agentic turn re-sends the previous prompt and answer, so request i's hash ids usually
// begin with request i-1's: kept per request (as WekaRequest does), an agent of n turns holds
// about n^2 / 2 blocks' ids; kept here, it holds its final context's. Request i's ids are one
// contiguous range of a pool: the previous request's range extended when its ids begin with
// the previous request's (and that range ends the pool), a new range otherwise. The replay's
// driver keeps a streamed conversation this way while it is live. Plain value; thread-compatible.
#ifndef AGENTKV_SIM_WORKLOAD_AGENT_BLOCK_IDS_H_
#define AGENTKV_SIM_WORKLOAD_AGENT_BLOCK_IDS_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "agentkv/sim/workload/weka_trace.h"

namespace agentkv::sim {

class AgentBlockIds {
 public:
  AgentBlockIds() = default;
  // Takes the ids of `requests` in order, leaving each request's hash_ids empty.
  explicit AgentBlockIds(std::vector<WekaRequest>& requests);

  // Request i's ids, equal to its hash_ids before they were taken. Precondition: i < size().
  std::span<const uint64_t> At(size_t i) const;
  size_t size() const { return ranges_.size(); }
  // Ids held, over every request.
  size_t pooled() const { return pool_.size(); }

 private:
  struct Range {
    size_t offset = 0;
    size_t count = 0;
  };
  std::vector<uint64_t> pool_;
  std::vector<Range> ranges_;
};

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_WORKLOAD_AGENT_BLOCK_IDS_H_
