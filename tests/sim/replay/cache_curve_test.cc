// Tests of RunCacheCurve against an independent reference replay.
//
// The reference below shares no code with production (no KvCacheManager, no BlockKeyHasher):
// a block's identity is a chain id assigned on first sight of (parent chain id, hash id), so
// the unique blocks are the chain ids; residency is an LRU std::list of chain ids, least
// recently used at the front. Per request: count the leading resident blocks (hits), hold
// them (out of the list), evict from the front while resident + new blocks would exceed the
// capacity, insert the new blocks, then put all the request's blocks at the back deepest
// first, so a parent is always more recent than its children; it asserts that an evicted
// block never has a resident child. Numbers must match exactly: hits, totals, evictions and
// capacities, on a hand-computed scenario, on random traces and on the public Mooncake traces.
#include "agentkv/sim/replay/cache_curve.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "agentkv/base/rng.h"
#include "agentkv/sim/workload/mooncake_trace.h"

namespace agentkv::sim {
namespace {

using ::testing::HasSubstr;

// ---- The reference ------------------------------------------------------------------------

struct ReferencePoint {
  int64_t capacity = 0;
  int64_t hits = 0;
  int64_t total = 0;
  int64_t evictions = 0;
};

class ReferenceReplay {
 public:
  explicit ReferenceReplay(const std::vector<MooncakeRequest>& requests) {
    std::map<std::pair<int64_t, uint64_t>, int64_t> chain_ids;
    for (const MooncakeRequest& r : requests) {
      std::vector<int64_t> chain;
      int64_t parent = -1;
      for (const uint64_t h : r.hash_ids) {
        auto [it, inserted] =
            chain_ids.try_emplace({parent, h}, static_cast<int64_t>(parent_of_.size()));
        if (inserted) parent_of_.push_back(parent);
        parent = it->second;
        chain.push_back(parent);
      }
      chains_.push_back(std::move(chain));
    }
  }

  int64_t unique_blocks() const { return static_cast<int64_t>(parent_of_.size()); }

  // Replays every request at `capacity` blocks into `*out` (void so that ASSERTs may stop it).
  void Replay(int64_t capacity, ReferencePoint* out) const {
    *out = ReferencePoint{capacity, 0, 0, 0};
    std::list<int64_t> lru;  // Unheld resident blocks, least recently used first.
    std::map<int64_t, std::list<int64_t>::iterator> in_lru;
    std::vector<bool> resident(parent_of_.size(), false);
    std::vector<int64_t> resident_children(parent_of_.size(), 0);
    int64_t resident_count = 0;
    for (const std::vector<int64_t>& chain : chains_) {
      const int64_t n = static_cast<int64_t>(chain.size());
      const int64_t c = std::min(n, capacity);
      int64_t matched = 0;
      while (matched < c && resident[Idx(chain[Idx(matched)])]) ++matched;
      out->hits += matched;
      out->total += n;
      for (int64_t j = 0; j < matched; ++j) {  // Hold the matched prefix.
        lru.erase(in_lru.at(chain[Idx(j)]));
        in_lru.erase(chain[Idx(j)]);
      }
      while (resident_count + (c - matched) > capacity) {
        ASSERT_FALSE(lru.empty()) << "nothing evictable";
        const int64_t victim = lru.front();
        ASSERT_EQ(resident_children[Idx(victim)], 0) << "LRU front " << victim << " has a child";
        lru.pop_front();
        in_lru.erase(victim);
        SetResident(victim, false, resident, resident_children);
        --resident_count;
        ++out->evictions;
      }
      for (int64_t j = matched; j < c; ++j) {
        ASSERT_FALSE(resident[Idx(chain[Idx(j)])]) << "resident block after a miss";
        SetResident(chain[Idx(j)], true, resident, resident_children);
        ++resident_count;
      }
      for (int64_t j = c - 1; j >= 0; --j) {
        in_lru[chain[Idx(j)]] = lru.insert(lru.end(), chain[Idx(j)]);
      }
    }
  }

 private:
  static size_t Idx(int64_t i) { return static_cast<size_t>(i); }

  void SetResident(int64_t block, bool value, std::vector<bool>& resident,
                   std::vector<int64_t>& resident_children) const {
    resident[Idx(block)] = value;
    const int64_t parent = parent_of_[Idx(block)];
    if (parent >= 0) resident_children[Idx(parent)] += value ? 1 : -1;
  }

  std::vector<int64_t> parent_of_;
  std::vector<std::vector<int64_t>> chains_;
};

int64_t CapacityFor(double fraction, int64_t unique_blocks) {
  return std::max<int64_t>(
      1, static_cast<int64_t>(std::floor(fraction * static_cast<double>(unique_blocks))));
}

// Runs production and reference at every fraction and compares all numbers.
void ExpectMatchesReference(const std::vector<MooncakeRequest>& trace,
                            const std::vector<double>& fractions) {
  const ReferenceReplay reference(trace);
  ASSERT_EQ(CountUniqueBlocks(trace), reference.unique_blocks());
  CacheCurveOptions options;
  options.fractions = fractions;
  StatusOr<std::vector<CacheCurvePoint>> curve = RunCacheCurve(trace, options);
  ASSERT_TRUE(curve.ok()) << curve.status();
  ASSERT_EQ(curve->size(), fractions.size());
  for (size_t p = 0; p < fractions.size(); ++p) {
    SCOPED_TRACE("fraction " + std::to_string(fractions[p]));
    ReferencePoint want;
    ASSERT_NO_FATAL_FAILURE(
        reference.Replay(CapacityFor(fractions[p], reference.unique_blocks()), &want));
    const CacheCurvePoint& got = (*curve)[p];
    EXPECT_EQ(got.fraction, fractions[p]);
    EXPECT_EQ(got.capacity_blocks, want.capacity);
    EXPECT_EQ(got.hits, want.hits);
    EXPECT_EQ(got.total_blocks, want.total);
    EXPECT_EQ(got.evictions, want.evictions);
    if (want.total > 0) {
      EXPECT_DOUBLE_EQ(got.hit_ratio,
                       static_cast<double>(want.hits) / static_cast<double>(want.total));
    }
  }
}

MooncakeRequest Request(std::vector<uint64_t> hash_ids) {
  const auto n = static_cast<int64_t>(hash_ids.size());
  return MooncakeRequest{TimeNs(0), n * 512, 1, std::move(hash_ids)};
}

// ---- Hand-computed -----------------------------------------------------------------------

// Five chain positions ({1}, {1,2}, {1,3}, {1,2,4}, {5}); capacity 2, LRU front first:
//   [1,2]   miss 2                        -> resident 1,2    LRU: 2 1
//   [1,3]   hit 1; evict 2; insert 3      -> resident 1,3    LRU: 3 1
//   [1,2]   hit 1; evict 3; insert 2      -> resident 1,2    LRU: 2 1
//   [1,2,4] c = 2: hit 2 (block 4 is never cached)           LRU: 2 1
//   [5]     miss; evict 2; insert 5       -> resident 1,5    LRU: 1 5
// hits 0+1+1+2+0 = 4 of 2+2+2+3+1 = 10 blocks, 3 evictions.
std::vector<MooncakeRequest> HandTrace() {
  return {Request({1, 2}), Request({1, 3}), Request({1, 2}), Request({1, 2, 4}), Request({5})};
}

TEST(CacheCurveTest, HandComputedScenarioAtCapacityTwo) {
  CacheCurveOptions options;
  options.capacity_blocks = 2;
  StatusOr<std::vector<CacheCurvePoint>> curve = RunCacheCurve(HandTrace(), options);
  ASSERT_TRUE(curve.ok()) << curve.status();
  ASSERT_EQ(curve->size(), 1u);
  const CacheCurvePoint& p = (*curve)[0];
  EXPECT_EQ(p.capacity_blocks, 2);
  EXPECT_EQ(p.hits, 4);
  EXPECT_EQ(p.total_blocks, 10);
  EXPECT_EQ(p.evictions, 3);
  EXPECT_DOUBLE_EQ(p.hit_ratio, 0.4);
  EXPECT_DOUBLE_EQ(p.fraction, 2.0 / 5.0);

  ReferencePoint want;
  ReferenceReplay(HandTrace()).Replay(2, &want);
  EXPECT_EQ(want.hits, 4);
  EXPECT_EQ(want.evictions, 3);
}

TEST(CacheCurveTest, FractionsMapToFlooredCapacitiesOfAtLeastOne) {
  ASSERT_EQ(CountUniqueBlocks(HandTrace()), 5);
  CacheCurveOptions options;
  options.fractions = {0.01, 0.4, 0.5, 1.0};
  StatusOr<std::vector<CacheCurvePoint>> curve = RunCacheCurve(HandTrace(), options);
  ASSERT_TRUE(curve.ok()) << curve.status();
  ASSERT_EQ(curve->size(), 4u);
  EXPECT_EQ((*curve)[0].capacity_blocks, 1);
  EXPECT_EQ((*curve)[1].capacity_blocks, 2);
  EXPECT_EQ((*curve)[1].hits, 4);
  EXPECT_EQ((*curve)[2].capacity_blocks, 2);
  EXPECT_EQ((*curve)[3].capacity_blocks, 5);
  // With room for every unique block, only first sightings miss and nothing is evicted.
  EXPECT_EQ((*curve)[3].hits, 10 - 5);
  EXPECT_EQ((*curve)[3].evictions, 0);
  ExpectMatchesReference(HandTrace(), options.fractions);
}

TEST(CacheCurveTest, RequestLongerThanTheDeviceCachesOnlyItsFirstBlocks) {
  const std::vector<MooncakeRequest> trace = {Request({1, 2, 3, 4, 5}), Request({1, 2, 3, 4, 5})};
  CacheCurveOptions options;
  options.capacity_blocks = 2;
  StatusOr<std::vector<CacheCurvePoint>> curve = RunCacheCurve(trace, options);
  ASSERT_TRUE(curve.ok()) << curve.status();
  EXPECT_EQ((*curve)[0].hits, 2);
  EXPECT_EQ((*curve)[0].total_blocks, 10);
  EXPECT_EQ((*curve)[0].evictions, 0);
}

TEST(CacheCurveTest, SameHashIdAfterADifferentPrefixIsADifferentBlock) {
  const std::vector<MooncakeRequest> trace = {Request({1, 9}), Request({2, 9}), Request({2, 9})};
  EXPECT_EQ(CountUniqueBlocks(trace), 4);
  CacheCurveOptions options;
  options.fractions = {1.0};
  StatusOr<std::vector<CacheCurvePoint>> curve = RunCacheCurve(trace, options);
  ASSERT_TRUE(curve.ok()) << curve.status();
  EXPECT_EQ((*curve)[0].hits, 2);
}

TEST(CacheCurveTest, EmptyTraceHasZeroRatio) {
  StatusOr<std::vector<CacheCurvePoint>> curve = RunCacheCurve({}, CacheCurveOptions());
  ASSERT_TRUE(curve.ok()) << curve.status();
  ASSERT_EQ(curve->size(), 6u);
  for (const CacheCurvePoint& p : *curve) {
    EXPECT_EQ(p.capacity_blocks, 1);
    EXPECT_EQ(p.total_blocks, 0);
    EXPECT_EQ(p.hit_ratio, 0.0);
  }
}

TEST(CacheCurveTest, ProgressReportsEachCompletedPointInOrder) {
  CacheCurveOptions options;
  options.fractions = {0.5, 1.0};
  std::vector<std::pair<int, int64_t>> calls;
  options.progress = [&](int point, int64_t done) { calls.emplace_back(point, done); };
  ASSERT_TRUE(RunCacheCurve(HandTrace(), options).ok());
  EXPECT_EQ(calls, (std::vector<std::pair<int, int64_t>>{{0, 5}, {1, 5}}));
}

// ---- Option validation -------------------------------------------------------------------

Status RunError(const CacheCurveOptions& options) {
  StatusOr<std::vector<CacheCurvePoint>> r = RunCacheCurve(HandTrace(), options);
  EXPECT_FALSE(r.ok());
  return r.ok() ? Status() : r.status();
}

TEST(CacheCurveTest, InvalidOptionsNameTheOptionAndValue) {
  CacheCurveOptions o;
  o.block_tokens = 0;
  EXPECT_EQ(RunError(o).code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(RunError(o).message(), HasSubstr("block_tokens must be in [1, 1048576], got 0"));

  o = CacheCurveOptions();
  o.fractions = {0.1, 1.5};
  EXPECT_THAT(RunError(o).message(), HasSubstr("fractions[1] must be in (0, 1], got 1.5"));
  o.fractions = {0.0};
  EXPECT_THAT(RunError(o).message(), HasSubstr("fractions[0] must be in (0, 1], got 0"));
  o.fractions = {std::numeric_limits<double>::quiet_NaN()};
  EXPECT_THAT(RunError(o).message(), HasSubstr("fractions[0] must be in (0, 1]"));
  o.fractions = {};
  EXPECT_THAT(RunError(o).message(), HasSubstr("fractions must not be empty"));

  o = CacheCurveOptions();
  o.capacity_blocks = -5;
  EXPECT_EQ(RunError(o).code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(RunError(o).message(), HasSubstr("capacity_blocks must be in [1, "));
  EXPECT_THAT(RunError(o).message(), HasSubstr("got -5"));
}

// ---- Against the reference: random traces and the public Mooncake traces -------------------

// Small id vocabularies make prefixes shared and the same id recur under different parents.
std::vector<MooncakeRequest> RandomTrace(uint64_t seed) {
  Rng rng(seed);
  std::vector<MooncakeRequest> trace;
  const int64_t requests = rng.Uniform(1, 200);
  const auto vocabulary = static_cast<uint64_t>(rng.Uniform(1, 6));
  for (int64_t i = 0; i < requests; ++i) {
    std::vector<uint64_t> ids(static_cast<size_t>(rng.Uniform(0, 12)));
    for (uint64_t& id : ids)
      id = static_cast<uint64_t>(rng.Uniform(0, static_cast<int64_t>(vocabulary) - 1));
    trace.push_back(Request(std::move(ids)));
  }
  return trace;
}

TEST(CacheCurveTest, RandomTracesMatchTheReference) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    ExpectMatchesReference(RandomTrace(seed), {0.01, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0});
    if (HasFatalFailure()) return;
  }
}

class BundledTraceTest : public ::testing::TestWithParam<const char*> {};

// The Mooncake traces bundled in data/mooncake (the synthetic one gzip-compressed).
TEST_P(BundledTraceTest, MatchesTheReferenceAtEveryDefaultFraction) {
  const std::filesystem::path dir = AGENTKV_DATA_DIR;
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << "data folder " << dir << " is absent";
  StatusOr<std::vector<MooncakeRequest>> trace =
      ReadMooncakeTrace((dir / "mooncake" / GetParam()).string());
  ASSERT_TRUE(trace.ok()) << trace.status();
  ASSERT_FALSE(trace->empty());
  ExpectMatchesReference(*trace, CacheCurveOptions().fractions);
}

INSTANTIATE_TEST_SUITE_P(Mooncake, BundledTraceTest,
                         ::testing::Values("conversation_trace.jsonl", "synthetic_trace.jsonl.gz"),
                         [](const ::testing::TestParamInfo<const char*>& param) {
                           std::string name = param.param;
                           return name.substr(0, name.find('_'));
                         });

}  // namespace
}  // namespace agentkv::sim
