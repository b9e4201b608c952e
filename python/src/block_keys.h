// Block keys across the Python boundary: reading token ids, block ids and keys from Python
// objects without a per-element Python loop, returning keys as a list of ints, and the
// BlockKeyHasher class.
//
// Token ids come as a buffer of int32 (array('i'), a NumPy int32 array, a memoryview), as a
// bytes-like object holding native int32 values, or as any sequence of ints. Keys and block
// ids come as a buffer of uint64 (array('Q')) or a sequence of ints. A buffer is read in
// place; a sequence is converted in C++. Called with the GIL held; the readers keep the Python
// object's buffer alive, so their spans may be used with the GIL released.
#ifndef AGENTKV_PYTHON_SRC_BLOCK_KEYS_H_
#define AGENTKV_PYTHON_SRC_BLOCK_KEYS_H_

#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "agentkv/kv/block_key.h"

namespace agentkv::python {

// Token ids read from a Python object. TypeError for anything else, InvalidArgumentError for a
// bytes-like object whose length is not a multiple of 4.
class TokenIds {
 public:
  explicit TokenIds(pybind11::handle tokens) : TokenIds(tokens, 0, std::nullopt) {}
  // Only tokens[start:end] (end None: to the end), read without touching the rest of a list.
  // InvalidArgumentError unless 0 <= start <= end <= len(tokens).
  TokenIds(pybind11::handle tokens, int64_t start, std::optional<int64_t> end);
  TokenIds(const TokenIds&) = delete;
  TokenIds& operator=(const TokenIds&) = delete;

  std::span<const int32_t> span() const { return span_; }

 private:
  std::optional<pybind11::buffer_info> buffer_;
  std::vector<int32_t> owned_;
  std::span<const int32_t> span_;
};

// A sequence of uint64 (block keys or block ids) read from a Python object; `what` names the
// argument in the TypeError for anything else.
std::vector<uint64_t> ReadUint64s(pybind11::handle values, const char* what);
std::vector<kv::BlockKey> ReadKeys(pybind11::handle keys);
// A sequence of int64 (payloads) from a list of ints, an int64 buffer (array('q')) or any
// sequence of ints; `what` names the argument in the TypeError for anything else.
std::vector<int64_t> ReadInt64s(pybind11::handle values, const char* what);

pybind11::list KeysToList(const std::vector<kv::BlockKey>& keys);

// Inputs of at least this many tokens are hashed with the GIL released.
inline constexpr size_t kReleaseGilTokens = 4096;

void BindBlockKeys(pybind11::module_& module);

}  // namespace agentkv::python

#endif  // AGENTKV_PYTHON_SRC_BLOCK_KEYS_H_
