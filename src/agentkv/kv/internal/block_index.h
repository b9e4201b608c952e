// BlockIndex: the prefix index's key -> block map, a chunked open-addressing hash table.
//
// The table is an array of 64-byte chunks, one cache line each, of 10 entries: the block ids
// and a 16-bit tag of each entry's key (15 key bits and a set low bit; an empty slot's tag is
// 0), side by side with an occupancy mask. A key's home chunk comes from its low 32 bits, its
// tag from its top 15; a lookup compares the tag with all 10 tags at once and reads the full key
// of a block (the owner supplies it through a `KeyOf` callable) only where a tag matches, so a
// probe touches one line of the index and, on a likely hit, the block: a miss reads a block
// about once in 5,000 probes (with 8-bit tags it was once in 40, a random read each). An entry goes
// into its home chunk, or when that is full into the next chunk with room; each chunk counts the
// entries that overflowed past it (F14's scheme), so a lookup stops at the first chunk whose count
// is zero and an erase empties one slot in place: no tombstones, no backward shift, and probe cost
// does not grow with the number of erasures. Counts saturate at 255 and are then never lowered (a
// saturated chunk only makes lookups probe on).
//
// Sized once for the most blocks the cache can hold (both tiers), so it never rehashes and its
// memory is fixed: a power of two of chunks with at most 5 entries each on average (half full),
// 6.4 to 12.8 bytes per entry. At half load a chunk overflows rarely (a Poisson count of mean 5
// exceeds 10 about once in 70 chunks), so nearly every probe reads one line.
// Thread-compatible.
#ifndef AGENTKV_KV_INTERNAL_BLOCK_INDEX_H_
#define AGENTKV_KV_INTERNAL_BLOCK_INDEX_H_

#include <bit>
#include <cstdint>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "agentkv/base/check.h"
#include "agentkv/base/huge_page_allocator.h"

namespace agentkv::kv::internal {

class BlockIndex {
 public:
  static constexpr int32_t kNone = -1;
  // Entries per chunk, and the most entries per chunk the sizing allows on average.
  static constexpr int kChunkSlots = 10;
  static constexpr int kMaxMeanChunkLoad = 5;

  BlockIndex() = default;
  // An empty index for up to `max_entries` entries.
  explicit BlockIndex(int64_t max_entries);

  int64_t size() const { return size_; }
  int64_t chunk_count() const { return static_cast<int64_t>(chunks_.size()); }
  int64_t slot_count() const { return chunk_count() * kChunkSlots; }
  int64_t MemoryBytes() const { return chunk_count() * static_cast<int64_t>(sizeof(Chunk)); }
  // The chunk where `key` is looked up first (exposed for tests that build collisions).
  int64_t HomeChunk(uint64_t key) const { return static_cast<int64_t>(Home(key)); }

  // The block whose key is `key`, or kNone. `key_of(id)` returns the full key of block `id`.
  template <typename KeyOf>
  int32_t Find(uint64_t key, const KeyOf& key_of) const {
    if (chunks_.empty()) return kNone;
    const uint16_t tag = Tag(key);
    size_t c = Home(key);
    // Bounded by the chunk count: saturated counts could otherwise send a miss round forever.
    for (size_t probed = 0; probed < chunks_.size(); ++probed, c = Next(c)) {
      const Chunk& chunk = chunks_[c];
      for (uint32_t m = chunk.Matches(tag); m != 0; m &= m - 1) {
        const uint32_t id = chunk.ids[Chunk::SlotOf(m)];
        if (key_of(id) == key) return static_cast<int32_t>(id);
      }
      if (chunk.overflow == 0) return kNone;
    }
    return kNone;
  }

  // The block whose key is `key` if present; otherwise adds `key` -> `id` and returns kNone.
  // Precondition: size() < max_entries when absent.
  template <typename KeyOf>
  int32_t FindOrInsert(uint64_t key, int32_t id, const KeyOf& key_of) {
    const int32_t found = Find(key, key_of);
    if (found == kNone) Insert(key, id);
    return found;
  }

  // Starts loading the home chunk of `key` into the cache ahead of a Find, FindOrInsert or
  // Erase of it. A hint: no effect on contents.
  void Prefetch(uint64_t key) const {
    if (!chunks_.empty()) __builtin_prefetch(&chunks_[Home(key)]);
  }

  // The first block in `key`'s home chunk whose tag matches the key's (the block Find would
  // compare first), or kNone; no full-key comparison. For prefetching the block ahead of a
  // Find: a likely hit, not a certain one.
  int32_t Candidate(uint64_t key) const {
    if (chunks_.empty()) return kNone;
    const Chunk& chunk = chunks_[Home(key)];
    const uint32_t m = chunk.Matches(Tag(key));
    return m == 0 ? kNone : static_cast<int32_t>(chunk.ids[Chunk::SlotOf(m)]);
  }

  // Adds `key` -> `id`. Precondition: `key` is absent and size() < max_entries.
  void Insert(uint64_t key, int32_t id);

  // Removes the entry of block `id` whose key is `key`. Precondition: it is present.
  void Erase(uint64_t key, int32_t id);

  // Removes every entry.
  void Clear();

 private:
  struct alignas(64) Chunk {
    uint16_t tags[kChunkSlots] = {};  // 0 where the slot is empty
    uint16_t occupied = 0;            // Bit i: slot i holds an entry.
    // Entries whose home chunk precedes this one (cyclically, within their probe) stored past
    // it; 255 means "at least 255" and is never lowered.
    uint8_t overflow = 0;
    uint8_t unused = 0;
    uint32_t ids[kChunkSlots] = {};

    // Bit 2i set when slot i holds an entry tagged `tag` (a nonzero tag: empty slots never
    // match); the slot of bit b is b / 2.
    uint32_t Matches(uint16_t tag) const {
#if defined(__SSE2__)
      // Tags 0-7 are the chunk's first 16 bytes, tags 8-9 the first 4 of the next 16; each
      // 16-bit lane compared sets two mask bits, of which the even one is kept.
      const __m128i want = _mm_set1_epi16(static_cast<int16_t>(tag));
      const __m128i* head = reinterpret_cast<const __m128i*>(this);
      const uint32_t lo =
          static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi16(_mm_load_si128(head), want)));
      const uint32_t hi =
          static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi16(_mm_load_si128(head + 1), want)));
      return (lo | (hi & 0xFu) << 16) & 0x55555u;
#else
      uint32_t m = 0;
      for (int i = 0; i < kChunkSlots; ++i) m |= static_cast<uint32_t>(tags[i] == tag) << (2 * i);
      return m;
#endif
    }
    static int SlotOf(uint32_t match_bits) { return std::countr_zero(match_bits) / 2; }
    bool Full() const { return occupied == kAllOccupied; }
  };
  static_assert(sizeof(Chunk) == 64, "one chunk per cache line");
  static constexpr uint16_t kAllOccupied = (1u << kChunkSlots) - 1;
  static constexpr uint8_t kOverflowSaturated = 255;

  size_t Home(uint64_t key) const { return static_cast<size_t>((key & 0xFFFFFFFFu) >> shift_); }
  static uint16_t Tag(uint64_t key) { return static_cast<uint16_t>((key >> 48) | 1u); }
  size_t Next(size_t c) const { return (c + 1) & mask_; }

  std::vector<Chunk, HugePageAllocator<Chunk>> chunks_;
  int shift_ = 32;   // 32 - log2(chunk count)
  size_t mask_ = 0;  // chunk count - 1
  int64_t size_ = 0;
  int64_t max_entries_ = 0;
};

}  // namespace agentkv::kv::internal

#endif  // AGENTKV_KV_INTERNAL_BLOCK_INDEX_H_
