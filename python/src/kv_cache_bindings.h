// agentkv.KvCache: the Python face of kv::KvCacheManager, method for method (snake_case
// names), with strong ids as plain ints, block keys as ints, enumerations as strings and
// failed statuses raised as agentkv.Error subclasses (errors.h). The arguments the core would
// CHECK are validated here first, so no call with arguments of the right types aborts.
#ifndef AGENTKV_PYTHON_SRC_KV_CACHE_BINDINGS_H_
#define AGENTKV_PYTHON_SRC_KV_CACHE_BINDINGS_H_

#include <pybind11/pybind11.h>

#include <optional>
#include <string>
#include <vector>

#include "agentkv/kv/kv_cache_manager.h"

namespace agentkv::python {

// cache.TakeEvents() with only the events of `kinds` (KvEventKindName spellings; every kind
// when none) kept; InvalidArgumentError naming an unknown kind, with nothing taken.
std::vector<kv::KvEvent> TakeEvents(kv::KvCacheManager& cache,
                                    const std::optional<std::vector<std::string>>& kinds);

void BindKvCache(pybind11::module_& module);

}  // namespace agentkv::python

#endif  // AGENTKV_PYTHON_SRC_KV_CACHE_BINDINGS_H_
