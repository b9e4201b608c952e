// agentkv._agentkv._replay: the replay of `agentkv replay` for agentkv.replay
// (python/agentkv/replay.py), which turns its keyword arguments into the command's flags.
//
// The flags are parsed and checked by the command line's own code (tools/agentkv/replay_flags.h),
// so defaults and error messages are the CLI's. The replay runs with the GIL released, its arms
// on --jobs threads as on the command line; the progress callback is called with the GIL held,
// and an exception it raises (or a signal handler's, e.g. KeyboardInterrupt) stops every arm at
// its next progress report and propagates.
#ifndef AGENTKV_PYTHON_SRC_REPLAY_BINDINGS_H_
#define AGENTKV_PYTHON_SRC_REPLAY_BINDINGS_H_

#include <pybind11/pybind11.h>

namespace agentkv::python {

void BindReplay(pybind11::module_& module);

}  // namespace agentkv::python

#endif  // AGENTKV_PYTHON_SRC_REPLAY_BINDINGS_H_
