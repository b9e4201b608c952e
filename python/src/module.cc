// agentkv._agentkv: the extension module under the Python package agentkv (python/agentkv),
// which re-exports everything here. The version is the one the command line prints.
#include <pybind11/pybind11.h>

#include "python/src/block_keys.h"
#include "python/src/errors.h"
#include "python/src/kv_cache_bindings.h"
#include "python/src/kv_types.h"
#include "python/src/replay_bindings.h"

PYBIND11_MODULE(_agentkv, m) {
  m.doc() =
      "agentkv's C++ core for Python: the engine-side KV cache (KvCache), block keys "
      "(BlockKeyHasher), the simulator's replay (_replay, behind agentkv.replay) and the error "
      "classes of its status codes. Import the package "
      "`agentkv`, which re-exports this module.";
  m.attr("__version__") = AGENTKV_VERSION;
  agentkv::python::RegisterErrors(m);
  agentkv::python::BindBlockKeys(m);
  agentkv::python::BindKvTypes(m);
  agentkv::python::BindKvCache(m);
  agentkv::python::BindReplay(m);
}
