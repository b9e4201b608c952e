// Invariants of one replay: requests run one at a time, so after each Release no block is
// held and every cached block is in the device eviction queue; a request never needs more
// blocks than the device has (c <= capacity), so Reserve cannot run out of room; host tier 0
// means a match is all device blocks. Any non-OK status from the cache therefore means a bug,
// reported as Internal, and CheckInvariants() runs once at the end of each point.
#include "agentkv/sim/cache_curve.h"

#include <algorithm>
#include <span>
#include <sstream>
#include <string>
#include <utility>

#include "agentkv/base/strong_id.h"
#include "agentkv/engine/kv_pool.h"
#include "agentkv/kv/block_key.h"
#include "agentkv/kv/kv_cache_manager.h"
#include "agentkv/kv/kv_cache_options.h"

namespace agentkv::sim {
namespace {

// Mooncake traces carry no salt or LoRA namespace, so every chain uses seed 0, extra key 0.
constexpr uint64_t kHashSeed = 0;
constexpr int32_t kMaxBlockTokens = 1 << 20;
constexpr int64_t kMaxCapacityBlocks = int64_t{1} << 30;
constexpr int64_t kProgressInterval = 4096;

using Chains = std::vector<std::vector<kv::BlockKey>>;

std::string Format(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

kv::KvCacheOptions CacheOptions(int32_t block_tokens, int64_t device_blocks) {
  kv::KvCacheOptions options;
  options.tokens_per_block = block_tokens;
  options.device_blocks = device_blocks;
  options.host_blocks = 0;
  options.hash_seed = kHashSeed;
  return options;
}

// The hasher a replay's KvCacheManager uses, so that counted keys are exactly the cache's.
kv::BlockKeyHasher CacheHasher() {
  StatusOr<kv::KvCacheManager> empty = kv::KvCacheManager::Create(CacheOptions(1, 0));
  AGENTKV_CHECK(empty.ok()) << empty.status();
  return empty->hasher();
}

Chains ChainKeys(const std::vector<MooncakeRequest>& requests) {
  const kv::BlockKeyHasher hasher = CacheHasher();
  Chains chains;
  chains.reserve(requests.size());
  for (const MooncakeRequest& r : requests) chains.push_back(hasher.KeysFromBlockIds(r.hash_ids));
  return chains;
}

int64_t CountUniqueKeys(const Chains& chains) {
  std::vector<kv::BlockKey> all;
  for (const std::vector<kv::BlockKey>& chain : chains) {
    all.insert(all.end(), chain.begin(), chain.end());
  }
  std::sort(all.begin(), all.end());
  return std::unique(all.begin(), all.end()) - all.begin();
}

Status ReplayBug(int64_t capacity, size_t request, const char* call, const Status& status) {
  return InternalError("cache-curve replay at " + std::to_string(capacity) + " blocks, request " +
                       std::to_string(request) + ": " + call + " failed: " + status.ToString());
}

// Replays every chain through a fresh cache of `capacity` device blocks.
StatusOr<CacheCurvePoint> ReplayAtCapacity(const std::vector<MooncakeRequest>& requests,
                                           const Chains& chains, const CacheCurveOptions& options,
                                           int point_index, int64_t capacity) {
  const kv::KvCacheOptions cache_options = CacheOptions(options.block_tokens, capacity);
  AGENTKV_ASSIGN_OR_RETURN(kv::KvCacheManager cache, kv::KvCacheManager::Create(cache_options));
  CacheCurvePoint point;
  point.capacity_blocks = capacity;
  for (size_t i = 0; i < chains.size(); ++i) {
    const std::span<const kv::BlockKey> chain(chains[i]);
    const int64_t n = static_cast<int64_t>(chain.size());
    const int64_t c = std::min(n, capacity);
    const std::span<const kv::BlockKey> cached = chain.first(static_cast<size_t>(c));
    const RequestId id(static_cast<int64_t>(i));

    kv::RequestOptions request_options;
    request_options.prompt_tokens = requests[i].input_length;
    StatusOr<kv::PrefixMatch> match = cache.AddRequest(id, cached, request_options);
    if (!match.ok()) return ReplayBug(capacity, i, "AddRequest", match.status());
    point.hits += match->device_blocks;
    point.total_blocks += n;

    if (Status s = cache.Reserve(id, c * options.block_tokens); !s.ok()) {
      return ReplayBug(capacity, i, "Reserve", s);
    }
    if (Status s = cache.Commit(id, cached.subspan(static_cast<size_t>(match->total_blocks())));
        !s.ok()) {
      return ReplayBug(capacity, i, "Commit", s);
    }
    if (Status s = cache.Release(id); !s.ok()) return ReplayBug(capacity, i, "Release", s);

    const int64_t done = static_cast<int64_t>(i) + 1;
    if (options.progress && done % kProgressInterval == 0 && i + 1 < chains.size()) {
      options.progress(point_index, done);
    }
  }
  if (Status s = cache.CheckInvariants(); !s.ok()) {
    return InternalError("cache-curve replay at " + std::to_string(capacity) +
                         " blocks broke a cache invariant: " + s.ToString());
  }
  point.evictions = cache.stats().device_evictions;
  point.hit_ratio = point.total_blocks == 0
                        ? 0.0
                        : static_cast<double>(point.hits) / static_cast<double>(point.total_blocks);
  if (options.progress) options.progress(point_index, static_cast<int64_t>(chains.size()));
  return point;
}

}  // namespace

Status CacheCurveOptions::Validate() const {
  if (block_tokens < 1 || block_tokens > kMaxBlockTokens) {
    return InvalidArgumentError("block_tokens must be in [1, " + std::to_string(kMaxBlockTokens) +
                                "], got " + std::to_string(block_tokens));
  }
  if (capacity_blocks.has_value()) {
    if (*capacity_blocks < 1 || *capacity_blocks > kMaxCapacityBlocks) {
      return InvalidArgumentError("capacity_blocks must be in [1, " +
                                  std::to_string(kMaxCapacityBlocks) + "], got " +
                                  std::to_string(*capacity_blocks));
    }
    return Status::Ok();
  }
  if (fractions.empty()) return InvalidArgumentError("fractions must not be empty");
  for (size_t i = 0; i < fractions.size(); ++i) {
    // Written so that NaN fails too.
    if (!(fractions[i] > 0.0 && fractions[i] <= 1.0)) {
      return InvalidArgumentError("fractions[" + std::to_string(i) + "] must be in (0, 1], got " +
                                  Format(fractions[i]));
    }
  }
  return Status::Ok();
}

int64_t CountUniqueBlocks(const std::vector<MooncakeRequest>& requests) {
  return CountUniqueKeys(ChainKeys(requests));
}

StatusOr<std::vector<CacheCurvePoint>> RunCacheCurve(const std::vector<MooncakeRequest>& requests,
                                                     const CacheCurveOptions& options) {
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  const Chains chains = ChainKeys(requests);
  const int64_t unique_blocks = CountUniqueKeys(chains);

  // (fraction, capacity) per point.
  std::vector<std::pair<double, int64_t>> capacities;
  if (options.capacity_blocks.has_value()) {
    const double fraction = unique_blocks == 0 ? 0.0
                                               : static_cast<double>(*options.capacity_blocks) /
                                                     static_cast<double>(unique_blocks);
    capacities.emplace_back(fraction, *options.capacity_blocks);
  } else {
    for (const double f : options.fractions) {
      capacities.emplace_back(f, engine::BlocksForFraction(f, unique_blocks));
    }
  }

  std::vector<CacheCurvePoint> points;
  points.reserve(capacities.size());
  for (size_t p = 0; p < capacities.size(); ++p) {
    AGENTKV_ASSIGN_OR_RETURN(
        CacheCurvePoint point,
        ReplayAtCapacity(requests, chains, options, static_cast<int>(p), capacities[p].second));
    point.fraction = capacities[p].first;
    points.push_back(point);
  }
  return points;
}

}  // namespace agentkv::sim
