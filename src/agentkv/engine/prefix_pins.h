// PrefixPins: the TTL pins an engine holds on cached prefixes, and Continuum's pin lifecycle.
//
// A pin gives a conversation's prompt blocks the highest priority until the driver ends it at
// its time-to-live (Expire); a later pin of the same conversation supersedes an earlier one,
// and only the current pin's expiry restores the default priority. Pinning and unpinning
// re-queue a chain leaf first, so its root ends the most recently used of its blocks: an
// eviction then takes the chain from its leaf, never its root (which would drop the whole
// chain with it). With Continuum's lifecycle (EngineConfig::continuum_pins) a pin also ends
// when its conversation's next request is admitted (that request holds the blocks from then
// on), and ReleaseUnderPressure releases pins, oldest first, while a prefill chunk would not
// fit (Continuum's unpin under memory pressure; their blocks become the first to go).
//
// Engine owns one and applies it to its cache, which every mutator takes as an argument (the
// engine is movable, so no pointer to its cache is kept). What to pin and for how long is the
// caller's (the gateway's ContinuumPolicy); time is too: the driver calls Expire at the TTL.
// Deterministic: hash maps are looked up, never iterated. Thread-compatible; copyable.
#ifndef AGENTKV_ENGINE_PREFIX_PINS_H_
#define AGENTKV_ENGINE_PREFIX_PINS_H_

#include <cstdint>
#include <map>
#include <span>
#include <unordered_map>
#include <vector>

#include "agentkv/base/strong_id.h"
#include "agentkv/kv/block_key.h"
#include "agentkv/kv/kv_cache_manager.h"

namespace agentkv::engine {

struct PinCounters {
  // Pins taken; pins that expired before their conversation sent another request to this
  // engine; pins whose conversation came back before expiry; pins released under memory
  // pressure before either (Continuum's lifecycle).
  int64_t pins = 0;
  int64_t expired = 0;
  int64_t returned = 0;
  int64_t unpinned_under_pressure = 0;
};

// A pin just taken: the caller ends it with Expire(conversation, generation) at its TTL.
struct PinTicket {
  uint64_t generation = 0;
  // The blocks of the pin's keys that were cached (and are now pinned).
  int64_t pinned_blocks = 0;
};

class PrefixPins {
 public:
  // `continuum`: Continuum's lifecycle (release on return and under pressure) on top of TTLs.
  explicit PrefixPins(bool continuum) : continuum_(continuum) {}

  // Pins the cached blocks of `keys` in `cache` at kv::kMaxPriority on behalf of
  // `conversation`, superseding its earlier pin (whose Expire then does nothing).
  PinTicket Pin(ConversationId conversation, std::span<const kv::BlockKey> keys,
                kv::KvCacheManager& cache);

  // The TTL of pin `generation` of `conversation` elapsed: its blocks still pinned return to
  // the cache's default priority (most recently used end). A no-op when that pin was
  // superseded or already ended.
  void Expire(ConversationId conversation, uint64_t generation, kv::KvCacheManager& cache);

  // Request `id` of `conversation` was submitted: a pin of the conversation not yet returned
  // counts as returned; with Continuum's lifecycle it ends when `id` is admitted or ends.
  void NoteSubmitted(RequestId id, ConversationId conversation);

  // Continuum: request `id` was admitted or ended; ends the pin it returned to, if that pin
  // is still active. A no-op otherwise (and without Continuum's lifecycle).
  void EndReturned(RequestId id, kv::KvCacheManager& cache);

  // Continuum: releases pins, oldest first, while `room_tokens` (the device tier's free plus
  // evictable tokens, pinned ones included) less the pinned tokens is under `chunk_tokens`.
  // Their blocks go to the least recently used end. A no-op without Continuum's lifecycle.
  void ReleaseUnderPressure(int64_t room_tokens, int64_t chunk_tokens, kv::KvCacheManager& cache);

  bool continuum() const { return continuum_; }
  bool empty() const { return pin_order_.empty(); }
  const PinCounters& counters() const { return counters_; }
  // Tokens the active pins named when they were taken (blocks evicted since included).
  int64_t pinned_tokens() const { return pinned_tokens_; }

 private:
  struct HeldPin {
    uint64_t generation = 0;
    std::vector<kv::BlockKey> keys;
    bool returned = false;
    bool active = false;
  };

  // Restores the default priority of the pin's blocks still at the pin's priority, and
  // forgets the pin. The blocks go to the most recently used end of their bucket, or with
  // `evict_first` to its least recently used end; in both cases the chain's root ends the
  // most recent of its blocks.
  void Unpin(ConversationId conversation, bool evict_first, kv::KvCacheManager& cache);

  bool continuum_;
  // Looked up by conversation only.
  std::unordered_map<ConversationId, HeldPin> pins_;
  // Active pins by generation (oldest first): the order pressure releases them in.
  std::map<uint64_t, ConversationId> pin_order_;
  int64_t pinned_tokens_ = 0;
  // Continuum: requests that returned to a pin, and the pin's generation; looked up only.
  std::unordered_map<RequestId, uint64_t> returning_;
  uint64_t next_generation_ = 1;
  PinCounters counters_;
};

}  // namespace agentkv::engine

#endif  // AGENTKV_ENGINE_PREFIX_PINS_H_
