// Options of the engine-side KV cache manager, validated once by KvCacheManager::Create.
#ifndef AGENTKV_KV_KV_CACHE_OPTIONS_H_
#define AGENTKV_KV_KV_CACHE_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <string_view>

#include "agentkv/base/status.h"
#include "agentkv/kv/retention.h"

namespace agentkv::kv {

// What CloseSession does with the blocks of the session it closes.
enum class SessionCloseMode : uint8_t {
  // SGLang's session radix cache as first merged (PR #27058): free at once every block only
  // this session references and no running request holds.
  kRelease,
  // Later SGLang (PR #29173): drop the session's references only; the blocks go back to the
  // normal eviction order and stay reusable until memory pressure evicts them.
  kDereference,
};

// TensorRT-LLM's kv_cache_config.block_reuse_config.policy.
enum class BlockReusePolicy : uint8_t { kDefault, kPerConversation };

// The largest finished_subagent_min_idle_s accepted (about 11.6 days).
inline constexpr double kMaxFinishedSubagentMinIdleS = 1e6;
// How the device tier orders the evictable blocks of one retention priority (priorities, and
// the eviction classes of block_cache.h, always come first).
enum class EvictionOrder : uint8_t {
  // Least recently used first (SGLang, vLLM, TensorRT-LLM).
  kLru,
  // Gap-aware retention: by effective last use, a finished request's blocks counting as used
  // at its finish less the gap its session is expected to pause for (learned online per pause
  // kind and tool, PauseEstimator), so a session waiting for a human ranks as older than one
  // waiting for a tool; an ended session's own blocks first. Equal expected gaps give LRU.
  kGapAware,
};

std::string_view SessionCloseModeName(SessionCloseMode mode);
// "lru" or "gap_aware".
std::string_view EvictionOrderName(EvictionOrder order);
std::string_view BlockReusePolicyName(BlockReusePolicy policy);

struct KvCacheOptions {
  // Tokens per KV block (page). Default: 32. Range: [1, 1 << 20].
  int32_t tokens_per_block = 32;
  // Blocks of the device (GPU, hot) tier. Default: 0. Range: [0, 1 << 30]; together with
  // host_blocks at most 2^31 - 2.
  int64_t device_blocks = 0;
  // Blocks of the host (cold) tier; 0 disables offloading. Default: 0. Range: [0, 1 << 30].
  int64_t host_blocks = 0;
  // A block evicted from the device is offloaded to the host when its priority is at least
  // this (TensorRT-LLM's secondary_offload_min_priority), else dropped.
  // Default: 30. Range: [0, 101] (101 = never offload).
  Priority offload_threshold = 30;
  // Priority of blocks no retention config covers, and the one durations revert to.
  // Default: 35. Range: [0, 100].
  Priority default_priority = kDefaultPriority;
  // Seed of the block key chain; ranks that must agree use the same seed. Default: 0.
  uint64_t hash_seed = 0;
  // Order of eviction within a priority (EvictionOrder). Default: kLru.
  EvictionOrder eviction_order = EvictionOrder::kLru;
  // Capacity of the bounded event log; 0 disables it. Default: 0. Range: [0, 1 << 26].
  int64_t event_log_capacity = 0;

  // --- Sessions (SGLang --enable-session-radix-cache) ---
  // Default: kDereference (current SGLang).
  SessionCloseMode session_close_mode = SessionCloseMode::kDereference;
  // Closed session ids remembered so that a late request of a closed session re-references
  // nothing; the oldest are forgotten first. Default: 8192 (as SGLang). Range: [1, 1 << 24].
  int64_t closed_session_tombstones = 8192;

  // --- Conversations (TensorRT-LLM block_reuse_config) ---
  // block_reuse_config.policy. Default: kDefault.
  BlockReusePolicy block_reuse_policy = BlockReusePolicy::kDefault;
  // block_reuse_config.max_num_turns: turns whose retention records a conversation keeps.
  // Default: 1. Range: [1, 1 << 20].
  int32_t max_num_turns = 1;
  // block_reuse_config.finished_subagent_priority: the priority a finished sub-agent's own
  // committed blocks get when its parent sends its next request; unset = off. Requires
  // block_reuse_policy = kPerConversation. Default: unset. Range: [0, 100].
  std::optional<Priority> finished_subagent_priority;
  // block_reuse_config.finished_subagent_min_idle_iterations: scheduler steps a child must
  // have been idle before it may be demoted. Default: 32. Range: [0, 1 << 40].
  int64_t finished_subagent_min_idle_iterations = 32;
  // The idle bound in seconds of the caller's clock (KvCacheManager::SetClock) instead of
  // steps: when set, it replaces finished_subagent_min_idle_iterations (which is then not
  // read), because a step count is only a proxy for time and does not advance on an idle
  // engine. Ranks that must decide alike pass the same clock. Default: unset (steps).
  // Range: [0, 1e6], finite.
  std::optional<double> finished_subagent_min_idle_s;
  // With a host tier (host_blocks > 0) and offload_threshold <= 100, a demoted block gets
  // max(finished_subagent_priority, offload_threshold) instead, so that it is still evicted
  // before default-priority blocks (when the threshold is below the default) but is offloaded
  // to the host rather than dropped. Without a host tier it changes nothing.
  // Default: false (the seed: below the threshold demoted blocks are dropped).
  bool finished_subagent_offloadable = false;

  // InvalidArgument naming the first field out of range and its value.
  Status Validate() const;
};

}  // namespace agentkv::kv

#endif  // AGENTKV_KV_KV_CACHE_OPTIONS_H_
