#include "agentkv/load/prompt_book.h"

#include <algorithm>
#include <string>
#include <utility>

#include "agentkv/base/hash.h"

namespace agentkv::load {

StatusOr<PromptBook> PromptBook::Create(int32_t tokens_per_block, int64_t vocab_size,
                                        uint64_t salt) {
  if (tokens_per_block < 1) {
    return InvalidArgumentError("tokens_per_block must be >= 1, got " +
                                std::to_string(tokens_per_block));
  }
  if (vocab_size <= kFirstToken || vocab_size > kMaxVocabSize) {
    return InvalidArgumentError("vocab_size must be in (" + std::to_string(kFirstToken) +
                                ", 2^31], got " + std::to_string(vocab_size));
  }
  return PromptBook(tokens_per_block, vocab_size, salt);
}

int64_t PromptBook::Derived(uint64_t name, int64_t j) const {
  const uint64_t h = HashCombine(HashCombine(salt_, name), static_cast<uint64_t>(j));
  // The high 32 bits scaled onto the range, without a division (span < 2^31, Create).
  const uint64_t span = static_cast<uint64_t>(vocab_size_ - kFirstToken);
  return kFirstToken + static_cast<int64_t>(((h >> 32) * span) >> 32);
}

std::vector<int64_t> PromptBook::Prompt(std::span<const kv::BlockKey> keys, int64_t prompt_tokens,
                                        uint64_t request_salt) const {
  std::vector<int64_t> ids;
  ids.reserve(static_cast<size_t>(std::max<int64_t>(prompt_tokens, 0)));
  const int64_t block = tokens_per_block_;
  for (size_t b = 0; b < keys.size() && static_cast<int64_t>(ids.size()) < prompt_tokens; ++b) {
    const int64_t take = std::min(block, prompt_tokens - static_cast<int64_t>(ids.size()));
    if (auto it = content_.find(keys[b].value()); it != content_.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.begin() + take);
      continue;
    }
    for (int64_t j = 0; j < take; ++j) ids.push_back(Derived(keys[b].value(), j));
  }
  // The tail: unique to the request (a distinct name space from the keys': the salt is hashed).
  const uint64_t tail = Mix64(request_salt ^ 0x7461696cULL);
  for (int64_t j = 0; static_cast<int64_t>(ids.size()) < prompt_tokens; ++j) {
    ids.push_back(Derived(tail, j));
  }
  return ids;
}

void PromptBook::RememberAnswer(std::span<const kv::BlockKey> output_keys, int64_t first_block,
                                std::span<const int64_t> prompt, std::span<const int64_t> output,
                                SessionId owner) {
  const int64_t block = tokens_per_block_;
  // (prompt + output)[:-1]: the tokens whose KV the server holds.
  const int64_t cached = static_cast<int64_t>(prompt.size() + output.size()) - 1;
  std::vector<uint64_t>& owned = owned_[owner.value()];
  for (size_t q = 0; q < output_keys.size(); ++q) {
    const int64_t begin = (first_block + static_cast<int64_t>(q)) * block;
    if (begin < 0 || begin + block > cached) break;
    std::vector<int64_t> content;
    content.reserve(static_cast<size_t>(block));
    for (int64_t p = begin; p < begin + block; ++p) {
      content.push_back(p < static_cast<int64_t>(prompt.size())
                            ? prompt[static_cast<size_t>(p)]
                            : output[static_cast<size_t>(p) - prompt.size()]);
    }
    const uint64_t key = output_keys[q].value();
    if (content_.emplace(key, std::move(content)).second) owned.push_back(key);
  }
  if (owned.empty()) owned_.erase(owner.value());
}

void PromptBook::Forget(SessionId owner) {
  auto it = owned_.find(owner.value());
  if (it == owned_.end()) return;
  for (uint64_t key : it->second) content_.erase(key);
  owned_.erase(it);
}

}  // namespace agentkv::load
