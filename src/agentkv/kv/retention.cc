#include "agentkv/kv/retention.h"

#include <algorithm>
#include <string>

namespace agentkv::kv {
namespace {

bool ValidPriority(Priority p) { return p >= kMinPriority && p <= kMaxPriority; }

}  // namespace

Status RetentionConfig::Validate() const {
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (size_t i = 0; i < token_ranges.size(); ++i) {
    const TokenRangeRetention& r = token_ranges[i];
    const std::string field = "token_ranges[" + std::to_string(i) + "]";
    if (!ValidPriority(r.priority)) {
      return InvalidArgumentError(field + ".priority must be in [0, 100], got " +
                                  std::to_string(r.priority));
    }
    if (r.token_start < 0) {
      return InvalidArgumentError(field + ".token_start must be >= 0, got " +
                                  std::to_string(r.token_start));
    }
    if (r.token_end.has_value() && *r.token_end <= r.token_start) {
      return InvalidArgumentError(field + ".token_end must be > token_start (" +
                                  std::to_string(r.token_start) + "), got " +
                                  std::to_string(*r.token_end));
    }
    if (r.duration.has_value() && r.duration->value() <= 0) {
      return InvalidArgumentError(field + ".duration must be > 0 steps, got " +
                                  std::to_string(r.duration->value()));
    }
    spans.emplace_back(r.token_start, r.token_end.value_or(INT64_MAX));
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].first < spans[i - 1].second) {
      return InvalidArgumentError("token_ranges overlap at token " +
                                  std::to_string(spans[i].first));
    }
  }
  if (!ValidPriority(decode_priority)) {
    return InvalidArgumentError("decode_priority must be in [0, 100], got " +
                                std::to_string(decode_priority));
  }
  if (decode_duration.has_value() && decode_duration->value() <= 0) {
    return InvalidArgumentError("decode_duration must be > 0 steps, got " +
                                std::to_string(decode_duration->value()));
  }
  return Status::Ok();
}

BlockRetention RetentionForBlock(const RetentionConfig& config, int64_t block_index,
                                 int32_t tokens_per_block, int64_t prompt_tokens) {
  const int64_t first_token = block_index * tokens_per_block;
  if (first_token >= prompt_tokens) {
    return BlockRetention{config.decode_priority, config.decode_duration};
  }
  for (const TokenRangeRetention& r : config.token_ranges) {
    if (first_token >= r.token_start && first_token < r.token_end.value_or(INT64_MAX)) {
      return BlockRetention{r.priority, r.duration};
    }
  }
  return BlockRetention{};
}

}  // namespace agentkv::kv
