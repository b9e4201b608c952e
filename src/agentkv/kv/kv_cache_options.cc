#include "agentkv/kv/kv_cache_options.h"

#include <string>

namespace agentkv::kv {
namespace {

Status OutOfRange(const char* field, int64_t value, const char* range) {
  return InvalidArgumentError(std::string(field) + " must be in " + range + ", got " +
                              std::to_string(value));
}

}  // namespace

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
  return Status::Ok();
}

}  // namespace agentkv::kv
