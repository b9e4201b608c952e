// Output keys of a trace request: which blocks of a request's answer the next turn re-sends.
//
// SGLang caches a finished request's prompt + output (cache_finished_req), so the next turn
// of a conversation, whose prompt re-sends the previous prompt and answer, finds the answer
// cached. A trace has no output token ids, but an agentic trace (WEKA, synthetic, Bailian
// grouped into conversations) gives the next request's block ids: when the next prompt extends
// this one (its first hash ids are this request's), its ids after this prompt's name the
// blocks the answer completed. The replay gives those keys to the engine as
// SchedulerRequest::output_keys, and the instant single cache commits them the same way, so
// both modes cache the same blocks. An open-loop trace (Mooncake) has no next turn and no
// output keys. Pure functions; thread-safe.
#ifndef AGENTKV_SIM_WORKLOAD_OUTPUT_KEYS_H_
#define AGENTKV_SIM_WORKLOAD_OUTPUT_KEYS_H_

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "agentkv/kv/block_key.h"
#include "agentkv/sim/workload/weka_trace.h"

namespace agentkv::sim {

// Block positions [begin, end) of a request's prompt + output, in its next turn's hash ids.
struct OutputBlocks {
  int64_t begin = 0;
  int64_t end = 0;

  bool empty() const { return end <= begin; }
  friend bool operator==(const OutputBlocks&, const OutputBlocks&) = default;
};

// The blocks of `current`'s answer that `next` (the next request of the same agent) re-sends:
// begin = n = current.hash_ids.size() and end = min(next.hash_ids.size(), (P + O - 1) /
// block_size), where P = max(in, n * block_size, 1) and O = max(1, out) are the prompt and
// output the replay submits; the "- 1" because the last generated token has no KV (SGLang
// inserts (prompt + output)[:-1]), so the engine never commits a block that ends with it.
// Empty when next's first n ids are not current's (the next prompt does not extend this one:
// a rewritten history, a partial last block whose id changed) or no such block is full.
// Precondition: block_size >= 1.
OutputBlocks ReusedOutputBlocks(const WekaRequest& current, const WekaRequest& next,
                                int32_t block_size);

// The chained keys of ReusedOutputBlocks(current, next, block_size): keys_of(the first `end`
// ids of next) from position `begin` on, where keys_of chains ids into keys as the caller
// names prompt blocks (hasher, namespace). Empty when the range is.
using BlockKeysOf = std::function<std::vector<kv::BlockKey>(std::span<const uint64_t> ids)>;
std::vector<kv::BlockKey> ReusedOutputKeys(const WekaRequest& current, const WekaRequest& next,
                                           int32_t block_size, const BlockKeysOf& keys_of);

// The same two with the hash ids given apart from the requests (a driver that keeps them in
// AgentBlockIds): `current` gives the token counts, `current_ids` and `next_ids` the ids.
OutputBlocks ReusedOutputBlocks(const WekaRequest& current, std::span<const uint64_t> current_ids,
                                std::span<const uint64_t> next_ids, int32_t block_size);
std::vector<kv::BlockKey> ReusedOutputKeys(const WekaRequest& current,
                                           std::span<const uint64_t> current_ids,
                                           std::span<const uint64_t> next_ids, int32_t block_size,
                                           const BlockKeysOf& keys_of);

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_WORKLOAD_OUTPUT_KEYS_H_
