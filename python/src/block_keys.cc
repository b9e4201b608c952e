#include "python/src/block_keys.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "python/src/errors.h"

namespace agentkv::python {
namespace py = pybind11;
namespace {

// The struct-module format of one buffer item without its byte-order prefix, when the prefix
// means native order and size on this machine ('@', '=', and '<' on a little-endian host).
std::string_view ItemFormat(const std::string& format) {
  std::string_view f = format;
  if (!f.empty() &&
      (f[0] == '@' || f[0] == '=' || (f[0] == '<' && std::endian::native == std::endian::little))) {
    f.remove_prefix(1);
  }
  return f;
}

bool IsBuffer(py::handle obj) {
  return PyObject_CheckBuffer(obj.ptr()) != 0 && !py::isinstance<py::str>(obj);
}

// A one-dimensional, contiguous view of `obj`'s buffer; TypeError otherwise.
py::buffer_info Contiguous(py::handle obj, const char* what) {
  py::buffer_info info = py::reinterpret_borrow<py::buffer>(obj).request();
  if (info.ndim != 1 || (info.shape[0] > 1 && info.strides[0] != info.itemsize)) {
    throw py::type_error(std::string(what) + " must be a one-dimensional contiguous buffer");
  }
  return info;
}

}  // namespace

namespace {

// Checks [start, end) against a sequence of `size` items; returns end (size when unset).
size_t CheckedEnd(int64_t start, std::optional<int64_t> end, size_t size) {
  const int64_t n = static_cast<int64_t>(size);
  const int64_t stop = end.value_or(n);
  if (start < 0 || stop < start || stop > n) {
    throw StatusError(InvalidArgumentError(
        "tokens[start:end] must lie within the " + std::to_string(n) + " tokens, got start " +
        std::to_string(start) + ", end " + std::to_string(stop)));
  }
  return static_cast<size_t>(stop);
}

}  // namespace

TokenIds::TokenIds(py::handle tokens, int64_t start, std::optional<int64_t> end) {
  const auto first = static_cast<size_t>(std::max<int64_t>(start, 0));
  if (IsBuffer(tokens)) {
    py::buffer_info info = Contiguous(tokens, "tokens");
    const std::string_view format = ItemFormat(info.format);
    const size_t count = static_cast<size_t>(info.shape[0]);
    if (info.itemsize == 4 && format == "i") {
      const size_t stop = CheckedEnd(start, end, count);
      span_ = std::span<const int32_t>(static_cast<const int32_t*>(info.ptr) + first, stop - first);
      buffer_.emplace(std::move(info));
      return;
    }
    if (info.itemsize == 1 && (format == "B" || format == "b" || format == "c")) {
      // Raw bytes of native int32 values; copied, as a bytes object need not be aligned.
      if (count % sizeof(int32_t) != 0) {
        throw StatusError(
            InvalidArgumentError("a bytes-like tokens buffer must hold whole int32 values, got " +
                                 std::to_string(count) + " bytes"));
      }
      const size_t stop = CheckedEnd(start, end, count / sizeof(int32_t));
      owned_.resize(stop - first);
      if (stop > first) {
        std::memcpy(owned_.data(), static_cast<const char*>(info.ptr) + first * sizeof(int32_t),
                    (stop - first) * sizeof(int32_t));
      }
      span_ = owned_;
      return;
    }
    throw py::type_error("tokens must be int32: got a buffer of format '" + info.format + "'");
  }
  if (PyList_CheckExact(tokens.ptr())) {
    // The common case (SGLang's token lists): read the ints directly, without the generic
    // sequence caster's per-item objects.
    const size_t stop = CheckedEnd(start, end, static_cast<size_t>(PyList_Size(tokens.ptr())));
    owned_.resize(stop - first);
    for (size_t i = first; i < stop; ++i) {
      PyObject* item = PyList_GET_ITEM(tokens.ptr(), static_cast<Py_ssize_t>(i));
      int overflow = 0;
      const long value = PyLong_Check(item) ? PyLong_AsLongAndOverflow(item, &overflow) : 0;
      if (!PyLong_Check(item) || overflow != 0 || value < INT32_MIN || value > INT32_MAX) {
        throw py::type_error(
            "tokens must be a sequence of int32 token ids, an int32 buffer (array('i')) or "
            "bytes of native int32 values: item " +
            std::to_string(i) + " is " + std::string(py::repr(item)));
      }
      owned_[i - first] = static_cast<int32_t>(value);
    }
    span_ = owned_;
    return;
  }
  try {
    owned_ = tokens.cast<std::vector<int32_t>>();
  } catch (const py::cast_error&) {
    throw py::type_error(
        "tokens must be a sequence of int32 token ids, an int32 buffer (array('i')) or "
        "bytes of native int32 values");
  }
  const size_t stop = CheckedEnd(start, end, owned_.size());
  owned_.erase(owned_.begin() + static_cast<std::ptrdiff_t>(stop), owned_.end());
  owned_.erase(owned_.begin(), owned_.begin() + static_cast<std::ptrdiff_t>(first));
  span_ = owned_;
}

namespace {

// How one 64-bit integer type is read from Python (ReadIntegers): the name and buffer formats
// of its items, the forms a caller may give, and one list item's value (nullopt when it is
// out of range).
template <typename T>
struct IntegerType;

template <>
struct IntegerType<uint64_t> {
  static constexpr const char* kName = "uint64";
  static constexpr const char* kForms =
      " must be a sequence of ints in [0, 2**64) or a uint64 buffer (array('Q'))";
  static bool BufferFormat(std::string_view f) { return f == "Q" || f == "L"; }
  static std::optional<uint64_t> FromLong(PyObject* item) {
    const unsigned long long value = PyLong_AsUnsignedLongLong(item);
    if (value == static_cast<unsigned long long>(-1) && PyErr_Occurred() != nullptr) {
      PyErr_Clear();
      return std::nullopt;
    }
    return value;
  }
};

template <>
struct IntegerType<int64_t> {
  static constexpr const char* kName = "int64";
  static constexpr const char* kForms =
      " must be a sequence of ints in the int64 range or an int64 buffer (array('q'))";
  static bool BufferFormat(std::string_view f) { return f == "q" || f == "l"; }
  static std::optional<int64_t> FromLong(PyObject* item) {
    int overflow = 0;
    const long long value = PyLong_AsLongLongAndOverflow(item, &overflow);
    if (overflow != 0) return std::nullopt;
    return value;
  }
};

// 64-bit integers from a buffer of T (read in place), a list of ints (read without the generic
// caster's per-item objects: the common case, keys from keys_from_tokens) or any sequence of
// ints; TypeError naming `what` and the offending item or format otherwise.
template <typename T>
std::vector<T> ReadIntegers(py::handle values, const char* what) {
  using Type = IntegerType<T>;
  if (IsBuffer(values)) {
    const py::buffer_info info = Contiguous(values, what);
    if (info.itemsize != 8 || !Type::BufferFormat(ItemFormat(info.format))) {
      throw py::type_error(std::string(what) + " must be " + Type::kName +
                           ": got a buffer of format '" + info.format + "'");
    }
    const auto* first = static_cast<const T*>(info.ptr);
    return std::vector<T>(first, first + info.shape[0]);
  }
  if (PyList_CheckExact(values.ptr())) {
    const Py_ssize_t count = PyList_Size(values.ptr());
    std::vector<T> out(static_cast<size_t>(count));
    for (Py_ssize_t i = 0; i < count; ++i) {
      PyObject* item = PyList_GET_ITEM(values.ptr(), i);
      const std::optional<T> value = PyLong_Check(item) ? Type::FromLong(item) : std::optional<T>();
      if (!value.has_value()) {
        throw py::type_error(std::string(what) + Type::kForms + ": item " + std::to_string(i) +
                             " is " + std::string(py::repr(item)));
      }
      out[static_cast<size_t>(i)] = *value;
    }
    return out;
  }
  try {
    return values.cast<std::vector<T>>();
  } catch (const py::cast_error&) {
    throw py::type_error(std::string(what) + Type::kForms);
  }
}

}  // namespace

std::vector<uint64_t> ReadUint64s(py::handle values, const char* what) {
  return ReadIntegers<uint64_t>(values, what);
}

std::vector<int64_t> ReadInt64s(py::handle values, const char* what) {
  return ReadIntegers<int64_t>(values, what);
}

std::vector<kv::BlockKey> ReadKeys(py::handle keys) {
  const std::vector<uint64_t> values = ReadUint64s(keys, "keys");
  std::vector<kv::BlockKey> out;
  out.reserve(values.size());
  for (const uint64_t v : values) out.emplace_back(v);
  return out;
}

py::list KeysToList(const std::vector<kv::BlockKey>& keys) {
  py::list out(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    out[i] = py::reinterpret_steal<py::object>(PyLong_FromUnsignedLongLong(keys[i].value()));
  }
  return out;
}

void BindBlockKeys(py::module_& m) {
  py::class_<kv::BlockKeyHasher>(
      m, "BlockKeyHasher",
      "Computes chained block keys: a block's key hashes its parent's key and its content (its "
      "token ids, or one precomputed block id), so equal keys mean equal prefixes. Chains with "
      "different extra keys (a LoRA adapter, a cache salt) never share a block. A KvCache "
      "computes keys with the hasher of its hash_seed (KvCache.hasher). Keys are ints in "
      "[0, 2**64). Immutable; safe to use from several threads.")
      .def(py::init<uint64_t>(), py::arg("seed") = 0,
           "A hasher with `seed` (KvCacheOptions.hash_seed); ranks that must agree use the same "
           "seed.")
      .def(
          "root_key",
          [](const kv::BlockKeyHasher& h, uint64_t extra_key) {
            return h.RootKey(extra_key).value();
          },
          py::arg("extra_key") = 0,
          "The key every chain with `extra_key` starts from (the parent of block 0).")
      .def(
          "keys_from_tokens",
          [](const kv::BlockKeyHasher& h, py::handle tokens, int64_t tokens_per_block,
             uint64_t extra_key) {
            CheckRange(tokens_per_block, 1, 1 << 20, "tokens_per_block", "[1, 1048576]");
            const TokenIds ids(tokens);
            std::vector<kv::BlockKey> keys;
            if (ids.span().size() >= kReleaseGilTokens) {
              const py::gil_scoped_release release;
              keys =
                  h.KeysFromTokens(ids.span(), static_cast<int32_t>(tokens_per_block), extra_key);
            } else {
              keys =
                  h.KeysFromTokens(ids.span(), static_cast<int32_t>(tokens_per_block), extra_key);
            }
            return KeysToList(keys);
          },
          py::arg("tokens"), py::arg("tokens_per_block"), py::arg("extra_key") = 0,
          "The keys of the full blocks of `tokens`, in order (a trailing partial block gets no "
          "key), as a list of ints. `tokens`: a list of ints, an int32 buffer (array('i'), a "
          "NumPy int32 array) or bytes of native int32 values, read without a per-token Python "
          "loop; long inputs are hashed with the GIL released. InvalidArgumentError unless "
          "1 <= tokens_per_block <= 1048576.")
      .def(
          "keys_from_block_ids",
          [](const kv::BlockKeyHasher& h, py::handle block_ids, uint64_t extra_key) {
            const std::vector<uint64_t> ids = ReadUint64s(block_ids, "block_ids");
            return KeysToList(h.KeysFromBlockIds(ids, extra_key));
          },
          py::arg("block_ids"), py::arg("extra_key") = 0,
          "The keys of a chain of precomputed block ids, one id per block (Mooncake or WEKA "
          "hash_ids), in order. `block_ids`: a sequence of ints or a uint64 buffer "
          "(array('Q')).")
      .def_static(
          "token_block_key",
          [](uint64_t parent, py::handle tokens) {
            const TokenIds ids(tokens);
            return kv::BlockKeyHasher::TokenBlockKey(kv::BlockKey(parent), ids.span()).value();
          },
          py::arg("parent"), py::arg("tokens"),
          "The key of one block of `tokens` whose parent has key `parent`.")
      .def_static(
          "id_block_key",
          [](uint64_t parent, uint64_t block_id) {
            return kv::BlockKeyHasher::IdBlockKey(kv::BlockKey(parent), block_id).value();
          },
          py::arg("parent"), py::arg("block_id"),
          "The key of one block identified by `block_id` whose parent has key `parent`.");
}

}  // namespace agentkv::python
