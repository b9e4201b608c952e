// The value types of the KV cache API in Python: KvCacheOptions (the C++ field names, defaults
// and validation), TokenRangeRetention and RetentionConfig, PrefixMatch, TierGauges and
// KvCacheStats, KvEvent; and the conversions kv_cache_bindings.cc shares (enum spellings,
// options from keyword arguments, step counts). Enumerations are strings in Python, spelled as
// the command line and the C++ *Name functions spell them ("lru", "per_conversation", ...).
#ifndef AGENTKV_PYTHON_SRC_KV_TYPES_H_
#define AGENTKV_PYTHON_SRC_KV_TYPES_H_

#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <string>

#include "agentkv/base/pause.h"
#include "agentkv/base/time.h"
#include "agentkv/kv/kv_cache_options.h"
#include "agentkv/kv/kv_cache_stats.h"
#include "agentkv/kv/pause_estimator.h"

namespace agentkv::python {

// The largest step count (a duration, a number of steps to advance) accepted from Python, so
// that step arithmetic in the core cannot overflow.
inline constexpr int64_t kMaxSteps = int64_t{1} << 62;

// `base` (None: the defaults) with each keyword argument set as the KvCacheOptions attribute
// of that name. TypeError for a name that is no option; the attribute setters' errors.
kv::KvCacheOptions OptionsFromPython(pybind11::handle base, const pybind11::kwargs& overrides);

// A duration in scheduler steps from Python (None stays unset); InvalidArgumentError naming
// `field` beyond kMaxSteps. Positivity is the core's check.
std::optional<Step> DurationArg(std::optional<int64_t> value, const char* field);

// The pause kind `name` spells (agentkv::ParsePauseKind, base/pause.h); InvalidArgumentError
// naming `field` and listing the valid names for a spelling that names no kind.
PauseKind PauseKindArg(const std::string& name, const char* field);
const char* TierName(kv::Tier tier);

void BindKvTypes(pybind11::module_& module);

}  // namespace agentkv::python

#endif  // AGENTKV_PYTHON_SRC_KV_TYPES_H_
