// NextUseIndex: the future of an instant replay's request stream (instant_replay.h), as the
// offline-optimal ("oracle") arm hands it to the cache (kv::NextUseRanking). Built by one
// backward pass over the requests: for every prompt block a request looks up and every output
// block it commits, the index of the next request whose prompt looks the same key up. During
// the replay the runner walks the stream with Enter/Leave, and NextUse(key) answers for the
// key's latest mention: the next request after it that needs the block, or kNever.
//
// What a request "uses" is what the instant replay looks up: its first min(prompt, capacity)
// prompt keys; its output keys (as many as the device holds beside the prompt, none after a
// truncated prompt) are committed but only ever used by later prompts. While request i runs, its
// own output keys rank kNever: a cached copy of one may go first, since request i commits it
// again anyway (Enter lists the keys to re-rank in the cache).
//
// Deterministic; thread-compatible. Memory: one int64 per prompt and output block of the stream.
#ifndef AGENTKV_SIM_REPLAY_NEXT_USE_INDEX_H_
#define AGENTKV_SIM_REPLAY_NEXT_USE_INDEX_H_

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "agentkv/kv/block_key.h"
#include "agentkv/kv/next_use_ranking.h"
#include "agentkv/sim/replay/instant_replay.h"

namespace agentkv::sim {

class NextUseIndex final : public kv::NextUseRanking {
 public:
  // Indexes `workload` as it runs at a device of `capacity` blocks (which truncates prompts and
  // output keys exactly as RunInstantReplay does). Precondition: capacity >= 1.
  NextUseIndex(const InstantWorkload& workload, int64_t capacity);

  NextUseIndex(const NextUseIndex&) = delete;
  NextUseIndex& operator=(const NextUseIndex&) = delete;

  // Request `i` starts: its looked-up prompt keys rank by their next use after i, its committed
  // output keys rank kNever. Returns those output keys (the caller re-ranks the cached ones).
  // Precondition: requests enter in order, each after the previous one left.
  std::span<const kv::BlockKey> Enter(size_t i);
  // Request `i` is about to release its blocks: its output keys rank by their next use after i.
  // Precondition: `i` is the request that entered last.
  void Leave(size_t i);

  int64_t NextUse(kv::BlockKey key) const override;

  // The number of prompt keys request `i` looks up and output keys it commits.
  int64_t prompt_blocks(size_t i) const { return prompt_[i]; }
  int64_t output_blocks(size_t i) const { return output_[i]; }

 private:
  const InstantWorkload& workload_;
  // Per request: looked-up prompt keys, committed output keys, and the offset of its next-use
  // values in next_ (prompt keys first, then output keys).
  std::vector<int64_t> prompt_;
  std::vector<int64_t> output_;
  std::vector<size_t> offset_;
  std::vector<int64_t> next_;
  // Key -> its rank now; keys never mentioned yet are absent (they are not cached either).
  std::unordered_map<uint64_t, int64_t> rank_;
};

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_REPLAY_NEXT_USE_INDEX_H_
