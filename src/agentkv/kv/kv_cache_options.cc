#include "agentkv/kv/kv_cache_options.h"

#include <cmath>
#include <string>

namespace agentkv::kv {
namespace {

Status OutOfRange(const char* field, int64_t value, const char* range) {
  return InvalidArgumentError(std::string(field) + " must be in " + range + ", got " +
                              std::to_string(value));
}

}  // namespace

std::string_view SessionCloseModeName(SessionCloseMode mode) {
  return mode == SessionCloseMode::kRelease ? "release" : "dereference";
}

std::string_view EvictionOrderName(EvictionOrder order) {
  return order == EvictionOrder::kGapAware ? "gap_aware" : "lru";
}

std::string_view BlockReusePolicyName(BlockReusePolicy policy) {
  return policy == BlockReusePolicy::kPerConversation ? "per_conversation" : "default";
}

Status KvCacheOptions::Validate() const {
  if (tokens_per_block < 1 || tokens_per_block > (1 << 20)) {
    return OutOfRange("tokens_per_block", tokens_per_block, "[1, 1048576]");
  }
  if (device_blocks < 0 || device_blocks > (int64_t{1} << 30)) {
    return OutOfRange("device_blocks", device_blocks, "[0, 1073741824]");
  }
  if (host_blocks < 0 || host_blocks > (int64_t{1} << 30)) {
    return OutOfRange("host_blocks", host_blocks, "[0, 1073741824]");
  }
  // Block ids of both tiers share one int32 arena.
  if (device_blocks + host_blocks > (int64_t{1} << 31) - 2) {
    return OutOfRange("device_blocks + host_blocks", device_blocks + host_blocks,
                      "[0, 2147483646]");
  }
  if (offload_threshold < 0 || offload_threshold > kMaxPriority + 1) {
    return OutOfRange("offload_threshold", offload_threshold, "[0, 101]");
  }
  if (default_priority < kMinPriority || default_priority > kMaxPriority) {
    return OutOfRange("default_priority", default_priority, "[0, 100]");
  }
  if (event_log_capacity < 0 || event_log_capacity > (int64_t{1} << 26)) {
    return OutOfRange("event_log_capacity", event_log_capacity, "[0, 67108864]");
  }
  if (closed_session_tombstones < 1 || closed_session_tombstones > (int64_t{1} << 24)) {
    return OutOfRange("closed_session_tombstones", closed_session_tombstones, "[1, 16777216]");
  }
  if (max_num_turns < 1 || max_num_turns > (1 << 20)) {
    return OutOfRange("block_reuse_config.max_num_turns", max_num_turns, "[1, 1048576]");
  }
  if (finished_subagent_priority.has_value()) {
    if (*finished_subagent_priority < kMinPriority || *finished_subagent_priority > kMaxPriority) {
      return OutOfRange("block_reuse_config.finished_subagent_priority",
                        *finished_subagent_priority, "[0, 100]");
    }
    if (block_reuse_policy != BlockReusePolicy::kPerConversation) {
      return InvalidArgumentError(
          "block_reuse_config.finished_subagent_priority requires "
          "block_reuse_config.policy = per_conversation, got policy = " +
          std::string(BlockReusePolicyName(block_reuse_policy)));
    }
  }
  if (finished_subagent_min_idle_iterations < 0 ||
      finished_subagent_min_idle_iterations > (int64_t{1} << 40)) {
    return OutOfRange("block_reuse_config.finished_subagent_min_idle_iterations",
                      finished_subagent_min_idle_iterations, "[0, 1099511627776]");
  }
  if (finished_subagent_min_idle_s.has_value()) {
    const double s = *finished_subagent_min_idle_s;
    if (!std::isfinite(s) || s < 0.0 || s > kMaxFinishedSubagentMinIdleS) {
      return InvalidArgumentError(
          "block_reuse_config.finished_subagent_min_idle_s must be in [0, 1000000] seconds, "
          "got " +
          std::to_string(s));
    }
  }
  return Status::Ok();
}

}  // namespace agentkv::kv
