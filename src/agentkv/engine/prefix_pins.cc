// Invariants: pin_order_ holds exactly the generations of pins_ (each pin in pins_ is active);
// pinned_tokens_ is the sum over pins_ of their keys times the cache's block size, so it is 0
// exactly when no pin is held; returning_ names generations that may have ended since (a
// lookup in pin_order_ tells).
#include "agentkv/engine/prefix_pins.h"

#include <optional>

#include "agentkv/base/check.h"
#include "agentkv/base/status.h"
#include "agentkv/kv/retention.h"

namespace agentkv::engine {

PinTicket PrefixPins::Pin(ConversationId conversation, std::span<const kv::BlockKey> keys,
                          kv::KvCacheManager& cache) {
  if (pins_.contains(conversation)) {
    // Superseded: the earlier pin's expiry finds another generation and does nothing.
    HeldPin& old = pins_.at(conversation);
    pin_order_.erase(old.generation);
    pinned_tokens_ -= static_cast<int64_t>(old.keys.size()) * cache.tokens_per_block();
  }
  HeldPin& pin = pins_[conversation];
  pin.generation = next_generation_++;
  pin.keys.assign(keys.begin(), keys.end());
  pin.returned = false;
  pin.active = true;
  pin_order_.emplace(pin.generation, conversation);
  pinned_tokens_ += static_cast<int64_t>(keys.size()) * cache.tokens_per_block();
  ++counters_.pins;
  PinTicket ticket;
  ticket.generation = pin.generation;
  // Leaf first: each block goes to the most recently used end of the top bucket, so the root
  // ends the most recent and an eviction takes the chain from its leaf.
  for (auto key = keys.rbegin(); key != keys.rend(); ++key) {
    if (cache.SetPriority(*key, kv::kMaxPriority).ok()) ++ticket.pinned_blocks;
  }
  return ticket;
}

void PrefixPins::Expire(ConversationId conversation, uint64_t generation,
                        kv::KvCacheManager& cache) {
  auto it = pins_.find(conversation);
  if (it == pins_.end() || it->second.generation != generation) return;
  if (!it->second.returned) ++counters_.expired;
  // Back to the most recently used end: under SGLang's LRU the program that outlived its TTL
  // usually still comes back, and its KV is as recent as its last turn.
  Unpin(conversation, /*evict_first=*/false, cache);
}

void PrefixPins::NoteSubmitted(RequestId id, ConversationId conversation) {
  auto pin = pins_.find(conversation);
  if (pin == pins_.end() || !pin->second.active || pin->second.returned) return;
  pin->second.returned = true;
  ++counters_.returned;
  // Continuum: the returning request takes the blocks over at its admission; the pin
  // protects them until then.
  if (continuum_) returning_.emplace(id, pin->second.generation);
}

void PrefixPins::EndReturned(RequestId id, kv::KvCacheManager& cache) {
  auto it = returning_.find(id);
  if (it == returning_.end()) return;
  const uint64_t generation = it->second;
  returning_.erase(it);
  auto order = pin_order_.find(generation);
  // Expired, superseded or released under pressure meanwhile: nothing left to end.
  if (order != pin_order_.end()) Unpin(order->second, /*evict_first=*/false, cache);
}

void PrefixPins::ReleaseUnderPressure(int64_t room_tokens, int64_t chunk_tokens,
                                      kv::KvCacheManager& cache) {
  if (!continuum_) return;
  while (!pin_order_.empty() && room_tokens - pinned_tokens_ < chunk_tokens) {
    const ConversationId oldest = pin_order_.begin()->second;
    // A pin whose program already returned counts as returned, not as released.
    if (!pins_.at(oldest).returned) ++counters_.unpinned_under_pressure;
    Unpin(oldest, /*evict_first=*/true, cache);
  }
}

void PrefixPins::Unpin(ConversationId conversation, bool evict_first, kv::KvCacheManager& cache) {
  auto it = pins_.find(conversation);
  AGENTKV_CHECK(it != pins_.end());
  HeldPin& pin = it->second;
  const kv::Priority fallback = cache.options().default_priority;
  auto unpin = [&](kv::BlockKey key) {
    StatusOr<kv::Priority> priority = cache.GetPriority(key);
    if (priority.ok() && *priority == kv::kMaxPriority) {
      AGENTKV_CHECK(cache.SetPriority(key, fallback, std::nullopt, evict_first).ok());
    }
  };
  // Either way the root ends the most recently used of the chain, so an eviction takes the
  // chain from its leaf: to the most recently used end leaf first, to the least recently used
  // end (evict_first) root first.
  if (evict_first) {
    for (const kv::BlockKey key : pin.keys) unpin(key);
  } else {
    for (auto key = pin.keys.rbegin(); key != pin.keys.rend(); ++key) unpin(*key);
  }
  pin_order_.erase(pin.generation);
  pinned_tokens_ -= static_cast<int64_t>(pin.keys.size()) * cache.tokens_per_block();
  AGENTKV_CHECK_GE(pinned_tokens_, 0);
  pins_.erase(it);
}

}  // namespace agentkv::engine
