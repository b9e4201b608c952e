#include "agentkv/kv/internal/block_index.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "agentkv/base/rng.h"

namespace agentkv::kv::internal {
namespace {

// A BlockIndex over an arena of full keys, as the cache manager uses it: block `id` has key
// `keys[id]`.
class IndexedArena {
 public:
  explicit IndexedArena(int64_t max_entries)
      : index_(max_entries), keys_(static_cast<size_t>(max_entries), 0) {}

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

  // The low 32 key bits whose home slot is `home` (the inverse of the multiply-shift map).
  uint32_t LowBitsWithHome(int64_t home) const {
    const uint64_t n = static_cast<uint64_t>(slot_count());
    const uint64_t lo = ((static_cast<uint64_t>(home) << 32) + n - 1) / n;
    return static_cast<uint32_t>(lo);
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

TEST(BlockIndexTest, SizedAsAPowerOfTwoForLoadFactorAtMostTwoThirds) {
  for (const int64_t max_entries : {0, 1, 7, 100, 1000, 123457}) {
    const BlockIndex index(max_entries);
    EXPECT_GE(index.slot_count(), 8) << max_entries;
    EXPECT_EQ(index.slot_count() & (index.slot_count() - 1), 0) << max_entries;
    EXPECT_GE(2 * index.slot_count(), 3 * max_entries) << max_entries;
    EXPECT_GT(index.slot_count(), max_entries) << "one slot must stay empty";
    EXPECT_EQ(index.MemoryBytes(), index.slot_count() * 8) << max_entries;
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

TEST(BlockIndexTest, EraseFromTheHeadMiddleAndTailOfACollisionRun) {
  const uint32_t lo = 0xabcdef01;
  for (int erased = 0; erased < 6; ++erased) {
    SCOPED_TRACE(testing::Message() << "erasing entry " << erased << " of the run");
    IndexedArena arena(6);
    for (int32_t id = 0; id < 6; ++id) arena.Insert(KeyWith(static_cast<uint32_t>(id), lo), id);
    arena.Erase(KeyWith(static_cast<uint32_t>(erased), lo), erased);
    for (int32_t id = 0; id < 6; ++id) {
      const int32_t want = id == erased ? BlockIndex::kNone : id;
      EXPECT_EQ(arena.Find(KeyWith(static_cast<uint32_t>(id), lo)), want) << "id " << id;
    }
    // The hole is reusable and the run stays intact.
    arena.Insert(KeyWith(99, lo), erased);
    EXPECT_EQ(arena.Find(KeyWith(99, lo)), erased);
    EXPECT_EQ(arena.index().size(), 6);
  }
}

TEST(BlockIndexTest, BackwardShiftKeepsEntriesWhoseHomeIsPastTheHole) {
  // Slots h, h+1, h+2 hold X (home h), Y (home h+1) and Z (home h, displaced). Erasing X must
  // move Z back into slot h but leave Y, whose home is after the hole, where it is.
  IndexedArena arena(20);
  const int64_t h = 10;
  const uint64_t x = KeyWith(1, arena.LowBitsWithHome(h));
  const uint64_t y = KeyWith(2, arena.LowBitsWithHome(h + 1));
  const uint64_t z = KeyWith(3, arena.LowBitsWithHome(h));
  arena.Insert(x, 0);
  arena.Insert(y, 1);
  arena.Insert(z, 2);
  arena.Erase(x, 0);
  EXPECT_EQ(arena.Find(x), BlockIndex::kNone);
  EXPECT_EQ(arena.Find(y), 1);
  EXPECT_EQ(arena.Find(z), 2);
  arena.Erase(y, 1);
  EXPECT_EQ(arena.Find(z), 2);
  arena.Erase(z, 2);
  EXPECT_EQ(arena.index().size(), 0);
}

TEST(BlockIndexTest, RunsThatWrapPastTheLastSlot) {
  IndexedArena arena(12);
  const int64_t last = arena.slot_count() - 1;
  // Six entries homed at the last slot and two at slot 0: the run wraps to the front.
  std::vector<uint64_t> keys;
  for (uint32_t i = 0; i < 6; ++i) keys.push_back(KeyWith(i, arena.LowBitsWithHome(last)));
  for (uint32_t i = 0; i < 2; ++i) keys.push_back(KeyWith(100 + i, arena.LowBitsWithHome(0)));
  for (uint32_t i = 0; i < 2; ++i)
    keys.push_back(KeyWith(200 + i, arena.LowBitsWithHome(last - 1)));
  for (size_t i = 0; i < keys.size(); ++i) arena.Insert(keys[i], static_cast<int32_t>(i));
  // Erase in an order that shifts entries back across the wrap point.
  for (const size_t victim : {0u, 8u, 6u, 3u, 9u}) {
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
        (void)arena.FindOrInsert(2, 0);
      },
      "CHECK failed");
}

// Drives the index and std::unordered_map with the same random operations. Low key bits come
// from a handful of values (some homed at the last slots, so runs wrap), so almost every
// operation walks a long collision run and every erase shifts entries back.
TEST(BlockIndexTest, MatchesUnorderedMapUnderHeavyLowBitCollisions) {
  const uint64_t seed = 20240611;
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  Rng rng(seed);
  constexpr int64_t kMaxEntries = 700;
  constexpr int kOps = 200'000;
  IndexedArena arena(kMaxEntries);
  const int64_t n = arena.slot_count();
  const std::vector<uint32_t> low_bits = {arena.LowBitsWithHome(0),
                                          arena.LowBitsWithHome(1),
                                          arena.LowBitsWithHome(n / 2),
                                          arena.LowBitsWithHome(n - 3),
                                          arena.LowBitsWithHome(n - 1),
                                          arena.LowBitsWithHome(n - 1) + 1,
                                          0xffffffffu,
                                          0u};

  std::unordered_map<uint64_t, int32_t> model;
  std::vector<uint64_t> live_keys;  // for picking a present key
  std::vector<int32_t> free_ids;
  for (int32_t id = static_cast<int32_t>(kMaxEntries) - 1; id >= 0; --id) free_ids.push_back(id);

  auto random_key = [&] {
    const uint32_t lo = rng.Bernoulli(0.9) ? low_bits[static_cast<size_t>(rng.Uniform(0, 7))]
                                           : static_cast<uint32_t>(rng.Next());
    return KeyWith(static_cast<uint32_t>(rng.Uniform(0, 4000)), lo);
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
