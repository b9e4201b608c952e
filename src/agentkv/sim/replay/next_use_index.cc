// Invariant: after Enter(i) (and Leave(i)), rank_ maps every key mentioned by requests 0..i to
// the index of the first request after its latest mention whose looked-up prompt holds it, or
// kNever; the one exception is request i's output keys between Enter and Leave (kNever).
#include "agentkv/sim/replay/next_use_index.h"

#include <algorithm>

#include "agentkv/base/check.h"

namespace agentkv::sim {

NextUseIndex::NextUseIndex(const InstantWorkload& workload, int64_t capacity)
    : workload_(workload) {
  AGENTKV_CHECK_GE(capacity, 1);
  const std::vector<InstantRequest>& requests = workload.requests;
  const size_t n = requests.size();
  prompt_.resize(n);
  output_.resize(n);
  offset_.resize(n);
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    const InstantRequest& r = requests[i];
    // As PointReplay::Run: the prompt truncated to the device, the output keys the device holds
    // beside it, none after a truncated prompt.
    const auto keys = static_cast<int64_t>(r.keys.size());
    const int64_t c = std::min(keys, capacity);
    prompt_[i] = c;
    output_[i] = c == keys ? std::min(static_cast<int64_t>(r.output_keys.size()), capacity - c) : 0;
    offset_[i] = total;
    total += static_cast<size_t>(prompt_[i] + output_[i]);
  }
  next_.resize(total);
  // Backward: `first_use` maps a key to the first request after the current one looking it up.
  std::unordered_map<uint64_t, int64_t> first_use;
  const auto next_of = [&first_use](kv::BlockKey key) {
    auto it = first_use.find(key.value());
    return it == first_use.end() ? kNever : it->second;
  };
  for (size_t i = n; i-- > 0;) {
    const InstantRequest& r = requests[i];
    int64_t* next = next_.data() + offset_[i];
    for (int64_t p = 0; p < prompt_[i]; ++p) next[p] = next_of(r.keys[static_cast<size_t>(p)]);
    for (int64_t q = 0; q < output_[i]; ++q) {
      next[prompt_[i] + q] = next_of(r.output_keys[static_cast<size_t>(q)]);
    }
    for (int64_t p = 0; p < prompt_[i]; ++p) {
      first_use[r.keys[static_cast<size_t>(p)].value()] = static_cast<int64_t>(i);
    }
  }
}

std::span<const kv::BlockKey> NextUseIndex::Enter(size_t i) {
  const InstantRequest& r = workload_.requests[i];
  const int64_t* next = next_.data() + offset_[i];
  for (int64_t p = 0; p < prompt_[i]; ++p) rank_[r.keys[static_cast<size_t>(p)].value()] = next[p];
  const std::span<const kv::BlockKey> outputs =
      std::span(r.output_keys).first(static_cast<size_t>(output_[i]));
  for (const kv::BlockKey key : outputs) rank_[key.value()] = kNever;
  return outputs;
}

void NextUseIndex::Leave(size_t i) {
  const InstantRequest& r = workload_.requests[i];
  const int64_t* next = next_.data() + offset_[i] + prompt_[i];
  for (int64_t q = 0; q < output_[i]; ++q) {
    rank_[r.output_keys[static_cast<size_t>(q)].value()] = next[q];
  }
}

int64_t NextUseIndex::NextUse(kv::BlockKey key) const {
  auto it = rank_.find(key.value());
  return it == rank_.end() ? kNever : it->second;
}

}  // namespace agentkv::sim
