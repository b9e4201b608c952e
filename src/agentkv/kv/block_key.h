// Block keys: the identity of a full KV block in the prefix index.
//
// A block's key is a chained hash of (parent key, the block's content, an extra key): equal
// keys mean equal prefixes, so the cache never needs the tokens themselves. Content is either
// the block's token ids or, for traces that carry no tokens, one precomputed block id per
// block (Mooncake `hash_ids`, WEKA `hash_ids`). The extra key namespaces the chain (LoRA
// adapter, cache salt): chains with different extra keys never share a block.
//
// Collision safety. Keys are 64 bits and are not re-checked against tokens. A false hit needs
// two different blocks resident at the same time, under the same parent block (the prefix
// index checks the parent of every matched block, so keys from different prefixes never
// alias), with equal 64-bit keys: for a parent with c resident children the probability is
// about c^2 / 2^65, below 3e-10 even for 100,000 children of one block. agentkv decides what
// to keep, not what an engine computes: a collision would mis-count one hit, never corrupt
// served tokens. Pure functions; thread-safe.
#ifndef AGENTKV_KV_BLOCK_KEY_H_
#define AGENTKV_KV_BLOCK_KEY_H_

#include <compare>
#include <cstdint>
#include <functional>
#include <ostream>
#include <span>
#include <vector>

namespace agentkv::kv {

class BlockKey {
 public:
  constexpr BlockKey() = default;
  constexpr explicit BlockKey(uint64_t value) : value_(value) {}
  constexpr uint64_t value() const { return value_; }
  friend constexpr auto operator<=>(BlockKey, BlockKey) = default;
  friend std::ostream& operator<<(std::ostream& os, BlockKey k);

 private:
  uint64_t value_ = 0;
};

// Computes chained block keys with one seed (`KvCacheOptions::hash_seed`). Cheap to copy.
class BlockKeyHasher {
 public:
  explicit BlockKeyHasher(uint64_t seed) : seed_(seed) {}

  // The key every chain with this extra key starts from (the parent of block 0). Extra key 0
  // is the default namespace.
  BlockKey RootKey(uint64_t extra_key = 0) const;

  // Key of one block of `tokens` whose parent has key `parent`.
  static BlockKey TokenBlockKey(BlockKey parent, std::span<const int32_t> tokens);

  // Key of one block identified by a precomputed block id whose parent has key `parent`.
  static BlockKey IdBlockKey(BlockKey parent, uint64_t block_id);

  // Keys of the full blocks of `tokens` (a trailing partial block gets no key), in order.
  // Precondition: tokens_per_block > 0.
  std::vector<BlockKey> KeysFromTokens(std::span<const int32_t> tokens, int32_t tokens_per_block,
                                       uint64_t extra_key = 0) const;
  // Appends to `out` instead of returning a new vector (hot paths reuse the buffer).
  void AppendKeysFromTokens(std::span<const int32_t> tokens, int32_t tokens_per_block,
                            uint64_t extra_key, std::vector<BlockKey>& out) const;
  // Appends the keys of the full blocks of `tokens` continuing the chain after the block whose
  // key is `parent`: the keys KeysFromTokens gives those blocks after the blocks `parent` ends.
  static void AppendChainedKeys(std::span<const int32_t> tokens, int32_t tokens_per_block,
                                BlockKey parent, std::vector<BlockKey>& out);

  // Keys of a sequence of precomputed block ids (one id per block), in order.
  std::vector<BlockKey> KeysFromBlockIds(std::span<const uint64_t> block_ids,
                                         uint64_t extra_key = 0) const;

 private:
  uint64_t seed_;
};

}  // namespace agentkv::kv

template <>
struct std::hash<agentkv::kv::BlockKey> {
  size_t operator()(agentkv::kv::BlockKey k) const noexcept { return k.value(); }
};

#endif  // AGENTKV_KV_BLOCK_KEY_H_
