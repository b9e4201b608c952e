// PromptBook: the token ids `agentkv load` sends for a replayed request, so that a live server's
// prefix cache sees the sharing the simulator's block keys describe.
//
// The simulator names a prompt by its chained block keys (one per `tokens_per_block` tokens;
// equal keys mean equal prefixes). A live server matches token ids instead, so every key gets
// token content: the content the book remembers for it (an answer a server returned, which the
// agent re-sends in its next turn, as every agent framework does), or else tokens derived from
// the key and the book's salt. Equal key chains therefore give equal token prefixes, and a
// turn that re-sends the previous turn's answer re-sends the very ids the server generated, so
// the server's cache of prompt + output (SGLang's cache_finished_req) is found as the simulator
// finds its output keys. Tokens past the keyed blocks (a partial last block) are unique to the
// request. Different salts share nothing (two runs against one server do not hit each other).
//
// Remembered answers are kept per owner (the session that produced them) until Forget(owner),
// so memory follows the live sessions. Derived ids lie in [kFirstToken, vocab_size).
// Thread-compatible.
#ifndef AGENTKV_LOAD_PROMPT_BOOK_H_
#define AGENTKV_LOAD_PROMPT_BOOK_H_

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/strong_id.h"
#include "agentkv/kv/block_key.h"

namespace agentkv::load {

class PromptBook {
 public:
  // The smallest derived token id: ids below it are left to a tokenizer's special tokens.
  static constexpr int64_t kFirstToken = 1000;
  static constexpr int64_t kMaxVocabSize = int64_t{1} << 31;

  // InvalidArgument unless tokens_per_block >= 1 and vocab_size in (kFirstToken,
  // kMaxVocabSize].
  static StatusOr<PromptBook> Create(int32_t tokens_per_block, int64_t vocab_size, uint64_t salt);

  // The `prompt_tokens` ids of a prompt whose full blocks have `keys` (block b covers positions
  // [b * tokens_per_block, (b + 1) * tokens_per_block)); positions past keys.size() blocks are
  // derived from `request_salt`. When prompt_tokens is shorter than the keyed blocks, the ids
  // stop at prompt_tokens.
  std::vector<int64_t> Prompt(std::span<const kv::BlockKey> keys, int64_t prompt_tokens,
                              uint64_t request_salt) const;

  // A response to `prompt` (as Prompt made it) produced `output`: block first_block + q of
  // prompt + output is remembered as the content of output_keys[q], for every such block that
  // prompt + output fills (the answer's last token has no KV: SGLang caches (prompt +
  // output)[:-1], so a block ending with it is not remembered). `owner` forgets them.
  void RememberAnswer(std::span<const kv::BlockKey> output_keys, int64_t first_block,
                      std::span<const int64_t> prompt, std::span<const int64_t> output,
                      SessionId owner);
  // Drops every block `owner` remembered.
  void Forget(SessionId owner);

  // Blocks remembered now.
  int64_t remembered_blocks() const { return static_cast<int64_t>(content_.size()); }
  int32_t tokens_per_block() const { return tokens_per_block_; }

 private:
  PromptBook(int32_t tokens_per_block, int64_t vocab_size, uint64_t salt)
      : tokens_per_block_(tokens_per_block), vocab_size_(vocab_size), salt_(salt) {}

  // Derived id `j` of a block named `name`.
  int64_t Derived(uint64_t name, int64_t j) const;

  int32_t tokens_per_block_;
  int64_t vocab_size_;
  uint64_t salt_;
  // Remembered content by key value, and the keys each owner remembered.
  std::unordered_map<uint64_t, std::vector<int64_t>> content_;
  std::unordered_map<int64_t, std::vector<uint64_t>> owned_;
};

}  // namespace agentkv::load

#endif  // AGENTKV_LOAD_PROMPT_BOOK_H_
