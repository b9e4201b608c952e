#include "agentkv/kv/block_key.h"

#include <cstddef>

#include "agentkv/base/check.h"
#include "agentkv/base/hash.h"

namespace agentkv::kv {
namespace {

// Distinct constants keep the three derivations (root, token block, id block) apart.
constexpr uint64_t kRootDomain = 0x6b76726f6f740001ULL;
constexpr uint64_t kIdDomain = 0x6b7669640002ULL;
constexpr uint64_t kTokenDomain = 0x6b76746f6b0003ULL;

// The hash of one block's token ids (their little-endian 4-byte representation), independent
// of its parent: the blocks of a sequence hash in parallel, and only ChainTokenKey, one
// multiply, is serial along the chain.
inline uint64_t TokenContentHash(std::span<const int32_t> tokens) {
  return Hash64(std::as_bytes(tokens), kTokenDomain);
}

// Chains a block's content hash to its parent's key. The trailing xor keeps different contents
// apart even for the one parent value that zeroes the multiply.
inline BlockKey ChainTokenKey(BlockKey parent, uint64_t content) {
  return BlockKey(HashCombine(parent.value(), content) ^ content);
}

// Appends the keys of `full` blocks of kTokens tokens each. With the block size known at
// compile time the content hash is fully unrolled: no loop over rounds, no tail branches.
template <size_t kTokens>
BlockKey ChainFixedBlocks(const int32_t* tokens, size_t full, BlockKey parent, BlockKey* out) {
  for (size_t i = 0; i < full; ++i) {
    parent = ChainTokenKey(parent, TokenContentHash(std::span(tokens + i * kTokens, kTokens)));
    out[i] = parent;
  }
  return parent;
}

}  // namespace

std::ostream& operator<<(std::ostream& os, BlockKey k) {
  return os << "0x" << std::hex << k.value() << std::dec;
}

BlockKey BlockKeyHasher::RootKey(uint64_t extra_key) const {
  return BlockKey(HashCombine(Mix64(seed_ ^ kRootDomain), Mix64(extra_key)));
}

BlockKey BlockKeyHasher::TokenBlockKey(BlockKey parent, std::span<const int32_t> tokens) {
  return ChainTokenKey(parent, TokenContentHash(tokens));
}

BlockKey BlockKeyHasher::IdBlockKey(BlockKey parent, uint64_t block_id) {
  return BlockKey(HashCombine(parent.value() ^ kIdDomain, Mix64(block_id)));
}

std::vector<BlockKey> BlockKeyHasher::KeysFromTokens(std::span<const int32_t> tokens,
                                                     int32_t tokens_per_block,
                                                     uint64_t extra_key) const {
  std::vector<BlockKey> keys;
  AppendKeysFromTokens(tokens, tokens_per_block, extra_key, keys);
  return keys;
}

void BlockKeyHasher::AppendKeysFromTokens(std::span<const int32_t> tokens, int32_t tokens_per_block,
                                          uint64_t extra_key, std::vector<BlockKey>& out) const {
  AppendChainedKeys(tokens, tokens_per_block, RootKey(extra_key), out);
}

void BlockKeyHasher::AppendChainedKeys(std::span<const int32_t> tokens, int32_t tokens_per_block,
                                       BlockKey parent, std::vector<BlockKey>& out) {
  AGENTKV_CHECK(tokens_per_block > 0);
  const size_t block = static_cast<size_t>(tokens_per_block);
  const size_t full = tokens.size() / block;
  const size_t first = out.size();
  out.resize(first + full);
  BlockKey* keys = out.data() + first;
  // The content hash of block i + 1 does not wait for key i: out-of-order execution overlaps
  // consecutive blocks. 1 token is SGLang's default page, 16 vLLM's default block size, 32
  // agentkv's. (Unrolling 64 measured slower than the loop: docs/PERFORMANCE.md, "Block hash
  // against XXH3".)
  switch (block) {
    case 1:
      ChainFixedBlocks<1>(tokens.data(), full, parent, keys);
      return;
    case 16:
      ChainFixedBlocks<16>(tokens.data(), full, parent, keys);
      return;
    case 32:
      ChainFixedBlocks<32>(tokens.data(), full, parent, keys);
      return;
    default:
      break;
  }
  for (size_t i = 0; i < full; ++i) {
    parent = ChainTokenKey(parent, TokenContentHash(tokens.subspan(i * block, block)));
    keys[i] = parent;
  }
}

std::vector<BlockKey> BlockKeyHasher::KeysFromBlockIds(std::span<const uint64_t> block_ids,
                                                       uint64_t extra_key) const {
  std::vector<BlockKey> keys;
  keys.reserve(block_ids.size());
  BlockKey parent = RootKey(extra_key);
  for (uint64_t id : block_ids) {
    parent = IdBlockKey(parent, id);
    keys.push_back(parent);
  }
  return keys;
}

}  // namespace agentkv::kv
