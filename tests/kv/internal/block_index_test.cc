#include "agentkv/kv/internal/block_index.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "agentkv/base/rng.h"

namespace agentkv::kv::internal {
namespace {

// A BlockIndex over an arena of full keys, as the cache manager uses it: block `id` has key
// `keys[id]`. The arena has one block more than the index has room for, so that a test can
// offer a free block to a full index.
class IndexedArena {
 public:
  explicit IndexedArena(int64_t max_entries)
      : index_(max_entries), keys_(static_cast<size_t>(max_entries) + 1, 0) {}

  void Insert(uint64_t key, int32_t id) {
    keys_[static_cast<size_t>(id)] = key;
    index_.Insert(key, id);
  }
  void Erase(uint64_t key, int32_t id) { index_.Erase(key, id); }
  int32_t Find(uint64_t key) const {
    return index_.Find(key, [this](uint32_t id) { return keys_[id]; });
  }
  int32_t FindOrInsert(uint64_t key, int32_t id) {
    // The arena slot `id` is free, so giving it the key first is what the manager does too.
    const uint64_t previous = keys_[static_cast<size_t>(id)];
    keys_[static_cast<size_t>(id)] = key;
    const int32_t found = index_.FindOrInsert(key, id, [this](uint32_t i) { return keys_[i]; });
    if (found != BlockIndex::kNone) keys_[static_cast<size_t>(id)] = previous;
    return found;
  }

  BlockIndex& index() { return index_; }
  int64_t slot_count() const { return index_.slot_count(); }

  // A key whose home chunk is `home`, with top bits `hi` (which carry the tag) and `n` to tell
  // keys of one home apart. Home chunks come from the top bits of the low 32: `n` sits below.
  uint64_t KeyHomedAt(int64_t home, uint32_t hi, uint32_t n = 0) const {
    const int64_t chunks = index_.chunk_count();
    const int bits = std::countr_zero(static_cast<uint64_t>(chunks));
    const uint32_t lo = bits == 0 ? n : (static_cast<uint32_t>(home) << (32 - bits)) | n;
    const uint64_t key = (uint64_t{hi} << 32) | lo;
    EXPECT_EQ(index_.HomeChunk(key), home);
    return key;
  }

 private:
  BlockIndex index_;
  std::vector<uint64_t> keys_;
};

uint64_t KeyWith(uint32_t hi, uint32_t lo) { return (uint64_t{hi} << 32) | lo; }

TEST(BlockIndexTest, EmptyIndexFindsNothing) {
  const BlockIndex unsized;
  EXPECT_EQ(unsized.Find(1, [](uint32_t) { return uint64_t{1}; }), BlockIndex::kNone);
  EXPECT_EQ(unsized.size(), 0);
  IndexedArena arena(16);
  EXPECT_EQ(arena.Find(0), BlockIndex::kNone);
  EXPECT_EQ(arena.Find(0xdeadbeef), BlockIndex::kNone);
}

TEST(BlockIndexTest, SizedAsAPowerOfTwoOfChunksAtMostHalfFull) {
  for (const int64_t max_entries : {0, 1, 6, 7, 100, 1000, 123457}) {
    const BlockIndex index(max_entries);
    EXPECT_GE(index.chunk_count(), 1) << max_entries;
    EXPECT_EQ(index.chunk_count() & (index.chunk_count() - 1), 0) << max_entries;
    EXPECT_EQ(index.slot_count(), index.chunk_count() * BlockIndex::kChunkSlots);
    EXPECT_GE(index.slot_count(), 2 * max_entries) << "at most half the slots hold entries";
    if (index.chunk_count() > 1) {
      EXPECT_LT(index.slot_count(), 4 * max_entries) << "the smallest such power of two";
    }
    EXPECT_EQ(index.MemoryBytes(), index.chunk_count() * 64) << "one cache line per chunk";
  }
}

TEST(BlockIndexTest, InsertFindErase) {
  IndexedArena arena(10);
  arena.Insert(0x1111, 0);
  arena.Insert(0x2222, 5);
  arena.Insert(0xffffffffffffffffULL, 9);
  EXPECT_EQ(arena.index().size(), 3);
  EXPECT_EQ(arena.Find(0x1111), 0);
  EXPECT_EQ(arena.Find(0x2222), 5);
  EXPECT_EQ(arena.Find(0xffffffffffffffffULL), 9);
  EXPECT_EQ(arena.Find(0x3333), BlockIndex::kNone);
  arena.Erase(0x2222, 5);
  EXPECT_EQ(arena.index().size(), 2);
  EXPECT_EQ(arena.Find(0x2222), BlockIndex::kNone);
  EXPECT_EQ(arena.Find(0x1111), 0);
  EXPECT_EQ(arena.Find(0xffffffffffffffffULL), 9);
  // The same key under a new block id.
  arena.Insert(0x2222, 7);
  EXPECT_EQ(arena.Find(0x2222), 7);
}

TEST(BlockIndexTest, FindOrInsertFindsOrAddsInOneCall) {
  IndexedArena arena(4);
  EXPECT_EQ(arena.FindOrInsert(0x77, 2), BlockIndex::kNone);  // absent: inserted
  EXPECT_EQ(arena.index().size(), 1);
  EXPECT_EQ(arena.Find(0x77), 2);
  EXPECT_EQ(arena.FindOrInsert(0x77, 3), 2);  // present: the existing block, nothing added
  EXPECT_EQ(arena.index().size(), 1);
  EXPECT_EQ(arena.Find(0x77), 2);
  // Equal low bits, different key: a new entry at the end of the run.
  const uint64_t twin = KeyWith(9, 0x77);
  EXPECT_EQ(arena.FindOrInsert(twin, 3), BlockIndex::kNone);
  EXPECT_EQ(arena.Find(twin), 3);
  EXPECT_EQ(arena.Find(0x77), 2);
  arena.Erase(0x77, 2);
  EXPECT_EQ(arena.FindOrInsert(twin, 0), 3) << "found after the run shifted back";
  EXPECT_EQ(arena.index().size(), 1);
}

TEST(BlockIndexTest, EqualLowBitsAreToldApartByTheFullKey) {
  IndexedArena arena(8);
  const uint32_t lo = 0x12345678;
  for (int32_t id = 0; id < 8; ++id) arena.Insert(KeyWith(static_cast<uint32_t>(id + 1), lo), id);
  for (int32_t id = 0; id < 8; ++id) {
    EXPECT_EQ(arena.Find(KeyWith(static_cast<uint32_t>(id + 1), lo)), id);
  }
  EXPECT_EQ(arena.Find(KeyWith(100, lo)), BlockIndex::kNone);
  EXPECT_EQ(arena.Find(KeyWith(1, lo + 1)), BlockIndex::kNone);
}

TEST(BlockIndexTest, EraseAnyEntryOfAFullChunkAndItsOverflow) {
  // Twice a chunk's worth of entries homed at one chunk: half fill it, half overflow into the
  // next. Whichever is erased, the others stay found and the freed slot is reused.
  constexpr int kEntries = 2 * BlockIndex::kChunkSlots;
  for (int erased = 0; erased < kEntries; ++erased) {
    SCOPED_TRACE(testing::Message() << "erasing entry " << erased);
    IndexedArena arena(2 * kEntries);
    ASSERT_GE(arena.index().chunk_count(), 4);
    std::vector<uint64_t> keys;
    for (uint32_t i = 0; i < kEntries; ++i) keys.push_back(arena.KeyHomedAt(1, i + 1, i));
    for (size_t i = 0; i < keys.size(); ++i) arena.Insert(keys[i], static_cast<int32_t>(i));
    arena.Erase(keys[static_cast<size_t>(erased)], erased);
    for (size_t i = 0; i < keys.size(); ++i) {
      const int32_t want = static_cast<int>(i) == erased ? BlockIndex::kNone : static_cast<int>(i);
      EXPECT_EQ(arena.Find(keys[i]), want) << "entry " << i;
    }
    const uint64_t again = arena.KeyHomedAt(1, 99, 99);
    arena.Insert(again, erased);
    EXPECT_EQ(arena.Find(again), erased);
    EXPECT_EQ(arena.index().size(), kEntries);
  }
}

TEST(BlockIndexTest, OverflowedEntriesStayFoundAndMissesEndWhereNothingOverflowed) {
  // A full chunk 1 spills one entry into chunk 2; chunk 2, filled by its own keys too, spills
  // into chunk 3. Every entry is found, absent keys of either home are not, and once the
  // spilled entries are erased the counts are back to zero.
  constexpr int kSlots = BlockIndex::kChunkSlots;
  IndexedArena arena(6 * kSlots);
  ASSERT_GE(arena.index().chunk_count(), 8);
  for (int i = 0; i < kSlots; ++i) {
    const uint32_t n = static_cast<uint32_t>(i);
    arena.Insert(arena.KeyHomedAt(1, n, n), i);
  }
  const uint64_t spilled = arena.KeyHomedAt(1, 50, 50);
  arena.Insert(spilled, kSlots);  // chunk 1 is full: stored in chunk 2
  EXPECT_EQ(arena.Find(spilled), kSlots);
  for (int i = 0; i < kSlots; ++i) {
    const uint32_t n = static_cast<uint32_t>(i);
    arena.Insert(arena.KeyHomedAt(2, 100 + n, n), kSlots + 1 + i);
  }
  const uint64_t spilled2 = arena.KeyHomedAt(2, 200, 200);
  arena.Insert(spilled2, 3 * kSlots);
  EXPECT_EQ(arena.Find(spilled2), 3 * kSlots);
  EXPECT_EQ(arena.Find(spilled), kSlots);
  for (int i = 0; i < kSlots; ++i) {
    const uint32_t n = static_cast<uint32_t>(i);
    EXPECT_EQ(arena.Find(arena.KeyHomedAt(1, n, n)), i);
    EXPECT_EQ(arena.Find(arena.KeyHomedAt(2, 100 + n, n)), kSlots + 1 + i);
  }
  EXPECT_EQ(arena.Find(arena.KeyHomedAt(1, 77, 77)), BlockIndex::kNone);
  EXPECT_EQ(arena.Find(arena.KeyHomedAt(2, 77, 77)), BlockIndex::kNone);
  arena.Erase(spilled, kSlots);
  arena.Erase(spilled2, 3 * kSlots);
  EXPECT_EQ(arena.Find(spilled), BlockIndex::kNone);
  EXPECT_EQ(arena.Find(spilled2), BlockIndex::kNone);
  EXPECT_EQ(arena.index().size(), 2 * kSlots);
}

TEST(BlockIndexTest, SaturatedOverflowCountsStayCorrect) {
  // 600 keys homed at one chunk overflow it 590 times: its count saturates at 255 and is
  // never lowered, which may only lengthen probes, never lose an entry.
  constexpr int kKeys = 600;
  IndexedArena arena(2000);
  std::vector<uint64_t> keys;
  for (uint32_t i = 0; i < kKeys; ++i) keys.push_back(arena.KeyHomedAt(3, i + 1, i));
  for (int i = 0; i < kKeys; ++i) arena.Insert(keys[static_cast<size_t>(i)], i);
  for (int i = 0; i < kKeys; i += 2) arena.Erase(keys[static_cast<size_t>(i)], i);
  for (int i = 0; i < kKeys; ++i) {
    EXPECT_EQ(arena.Find(keys[static_cast<size_t>(i)]), i % 2 == 0 ? BlockIndex::kNone : i);
  }
  for (int i = 1; i < kKeys; i += 2) arena.Erase(keys[static_cast<size_t>(i)], i);
  EXPECT_EQ(arena.index().size(), 0);
  const uint64_t fresh = arena.KeyHomedAt(3, 9999, 9999);
  arena.Insert(fresh, 7);
  EXPECT_EQ(arena.Find(fresh), 7);
}

TEST(BlockIndexTest, OverflowWrapsPastTheLastChunk) {
  IndexedArena arena(48);
  const int64_t last = arena.index().chunk_count() - 1;
  ASSERT_GE(last, 3);
  // 16 entries homed at the last chunk (6 wrap into chunk 0), then 4 homed at chunk 0.
  std::vector<uint64_t> keys;
  for (uint32_t i = 0; i < 16; ++i) keys.push_back(arena.KeyHomedAt(last, i, i));
  for (uint32_t i = 0; i < 4; ++i) keys.push_back(arena.KeyHomedAt(0, 100 + i, i));
  for (size_t i = 0; i < keys.size(); ++i) arena.Insert(keys[i], static_cast<int32_t>(i));
  for (const size_t victim : {0u, 15u, 16u, 13u, 19u}) {
    arena.Erase(keys[victim], static_cast<int32_t>(victim));
    keys[victim] = 0;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (keys[i] == 0) continue;
      EXPECT_EQ(arena.Find(keys[i]), static_cast<int32_t>(i))
          << "key " << i << " after erasing " << victim;
    }
  }
}

TEST(BlockIndexTest, ClearEmptiesTheIndex) {
  IndexedArena arena(4);
  arena.Insert(1, 0);
  arena.Insert(2, 1);
  arena.index().Clear();
  EXPECT_EQ(arena.index().size(), 0);
  EXPECT_EQ(arena.Find(1), BlockIndex::kNone);
  EXPECT_EQ(arena.Find(2), BlockIndex::kNone);
  // Full capacity is usable again.
  for (int32_t id = 0; id < 4; ++id) arena.Insert(static_cast<uint64_t>(10 + id), id);
  EXPECT_EQ(arena.Find(13), 3);
}

TEST(BlockIndexDeathTest, PreconditionsAbort) {
  EXPECT_DEATH(
      {
        IndexedArena arena(1);
        arena.Insert(1, 0);
        arena.Insert(2, 0);
      },
      "CHECK failed");
  EXPECT_DEATH(
      {
        IndexedArena arena(4);
        arena.Insert(1, 0);
        arena.Erase(2, 1);
      },
      "absent block 1");
  EXPECT_DEATH(
      {
        IndexedArena arena(1);
        (void)arena.FindOrInsert(1, 0);
        (void)arena.FindOrInsert(2, 1);
      },
      "CHECK failed");
}

// Drives the index and std::unordered_map with the same random operations. Most keys are
// homed at a handful of chunks (two of them the last, so overflow wraps), so chunks fill,
// entries overflow several chunks deep and every erase has counts to lower; tags repeat too
// (the top bits take 16 values), so full-key comparison decides most lookups.
TEST(BlockIndexTest, MatchesUnorderedMapUnderHeavyCollisions) {
  const uint64_t seed = 20240611;
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  Rng rng(seed);
  constexpr int64_t kMaxEntries = 700;
  constexpr int kOps = 200'000;
  IndexedArena arena(kMaxEntries);
  const int64_t n = arena.index().chunk_count();
  const std::vector<int64_t> homes = {0, 1, n / 2, n - 2, n - 1};

  std::unordered_map<uint64_t, int32_t> model;
  std::vector<uint64_t> live_keys;  // for picking a present key
  std::vector<int32_t> free_ids;
  for (int32_t id = static_cast<int32_t>(kMaxEntries) - 1; id >= 0; --id) free_ids.push_back(id);

  auto random_key = [&] {
    const uint32_t hi = static_cast<uint32_t>(rng.Uniform(0, 15)) << 28 |
                        static_cast<uint32_t>(rng.Uniform(0, 250));
    if (!rng.Bernoulli(0.9)) return KeyWith(hi, static_cast<uint32_t>(rng.Next()));
    return arena.KeyHomedAt(homes[static_cast<size_t>(rng.Uniform(0, 4))], hi,
                            static_cast<uint32_t>(rng.Uniform(0, 3)));
  };

  for (int op = 0; op < kOps; ++op) {
    const int64_t kind = rng.Uniform(0, 9);
    if (kind < 5 && !free_ids.empty()) {
      const uint64_t key = random_key();
      if (const auto it = model.find(key); it != model.end()) {
        ASSERT_EQ(arena.FindOrInsert(key, free_ids.back()), it->second) << "op " << op;
        continue;
      }
      const int32_t id = free_ids.back();
      free_ids.pop_back();
      if (rng.Bernoulli(0.5)) {
        arena.Insert(key, id);
      } else {
        ASSERT_EQ(arena.FindOrInsert(key, id), BlockIndex::kNone) << "op " << op;
      }
      model.emplace(key, id);
      live_keys.push_back(key);
    } else if (kind < 8 && !live_keys.empty()) {
      const size_t pick =
          static_cast<size_t>(rng.Uniform(0, static_cast<int64_t>(live_keys.size()) - 1));
      const uint64_t key = live_keys[pick];
      live_keys[pick] = live_keys.back();
      live_keys.pop_back();
      const int32_t id = model.at(key);
      arena.Erase(key, id);
      model.erase(key);
      free_ids.push_back(id);
    } else {
      const uint64_t key = random_key();
      const auto it = model.find(key);
      const int32_t want = it == model.end() ? BlockIndex::kNone : it->second;
      ASSERT_EQ(arena.Find(key), want) << "op " << op << " key " << key;
    }
    ASSERT_EQ(arena.index().size(), static_cast<int64_t>(model.size())) << "op " << op;
    if (op % 2003 == 0) {
      for (const auto& [key, id] : model) {
        ASSERT_EQ(arena.Find(key), id) << "op " << op << " key " << key;
      }
    }
  }
  for (const auto& [key, id] : model) ASSERT_EQ(arena.Find(key), id) << "final key " << key;
}

}  // namespace
}  // namespace agentkv::kv::internal
