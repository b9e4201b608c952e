#include "python/src/replay_bindings.h"

#include <Python.h>
#include <pybind11/stl.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentkv/report/replay_report.h"
#include "python/src/errors.h"
#include "tools/agentkv/arm_threads.h"
#include "tools/agentkv/cli_support.h"
#include "tools/agentkv/replay_flags.h"

namespace agentkv::python {
namespace py = pybind11;
namespace {

constexpr const char* kReplayDoc =
    "Runs `agentkv replay` with the command-line flags `args` (e.g. ['--sessions=6', "
    "'--arms=baseline,all', '--json=', '--html=']) and returns the JSON report it writes as "
    "text. agentkv.replay is the keyword-argument face of this function.\n\n"
    "`progress`, if not None, is called as progress(arm, fraction) with the GIL held, from "
    "the thread that runs the arm: fraction 0 when the arm starts, then non-decreasing, 1 "
    "when it ends. An exception it raises stops the replay and propagates; so does one a "
    "signal handler raises (KeyboardInterrupt). The GIL is released while the replay runs.\n\n"
    "Bad flags raise InvalidArgumentError with the command line's message; an unreadable "
    "trace or report path the matching agentkv.Error.";

// Thrown through the simulator from the progress callback to stop a replay once the callback
// (or a signal handler) raised; caught by the arm runner below, which rethrows it after every
// arm stopped.
struct ReplayAborted {};

// Shared by the arms of one replay.
struct AbortState {
  std::atomic<bool> aborted{false};
  // The first exception raised in the callback; read and written with the GIL held.
  py::object error;
};

// The message `agentkv replay` prints for a parse error, without its "agentkv replay: error: "
// prefix and the line's end.
std::string ParseErrorMessage(const CLI::App& app, const CLI::ParseError& error) {
  std::string line = tools::ParseFailureMessage(&app, error);
  const std::string_view prefix = "agentkv replay: error: ";
  if (std::string_view(line).starts_with(prefix)) line.erase(0, prefix.size());
  while (!line.empty() && line.back() == '\n') line.pop_back();
  return line;
}

std::string Replay(std::vector<std::string> args, const py::object& progress) {
  // The command line's parser: the same App shape as main.cc's, so that errors read the same.
  CLI::App app("agentkv", "agentkv");
  CLI::App* command = app.add_subcommand("replay");
  tools::ReplayFlags flags;
  flags.set_streamed();
  flags.Add(*command);
  args.insert(args.begin(), "replay");
  std::reverse(args.begin(), args.end());  // CLI::App::parse takes them last first.
  try {
    app.parse(args);
  } catch (const CLI::ParseError& error) {
    throw StatusError(InvalidArgumentError(ParseErrorMessage(app, error)));
  }

  AbortState state;
  const bool has_callback = !progress.is_none();
  const sim::ReplayProgress on_progress = [&](size_t /*arm_index*/, size_t /*num_arms*/,
                                              std::string_view arm, double fraction) {
    if (state.aborted.load()) throw ReplayAborted{};
    const py::gil_scoped_acquire gil;
    try {
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
      if (has_callback) progress(py::str(arm.data(), arm.size()), fraction);
    } catch (py::error_already_set& e) {
      if (!state.error) state.error = e.value();
      state.aborted.store(true);
      throw ReplayAborted{};
    }
  };

  std::string json;
  try {
    const py::gil_scoped_release release;
    StatusOr<tools::ReplayPlan> plan = flags.Plan();
    ThrowIfError(plan.status());
    const size_t jobs = plan->jobs;
    // Each arm's task stops at its next progress report once one aborted; the runner returns
    // when every task did, then fails the replay.
    const sim::ArmTaskRunner runner = [&state,
                                       jobs](const std::vector<std::function<void()>>& tasks) {
      std::vector<std::function<void()>> guarded;
      guarded.reserve(tasks.size());
      for (const std::function<void()>& task : tasks) {
        guarded.emplace_back([&task, &state] {
          if (state.aborted.load()) return;
          try {
            task();
          } catch (const ReplayAborted&) {
            state.aborted.store(true);
          }
        });
      }
      tools::RunOnThreads(guarded, jobs);
      if (state.aborted.load()) throw ReplayAborted{};
    };
    StatusOr<sim::ReplayResult> result = tools::RunReplayPlan(*plan, on_progress, runner);
    ThrowIfError(result.status());
    json = report::ReplayResultJson(*result);
    // The reports the command line would write, in its order.
    if (!plan->json_path.empty()) ThrowIfError(tools::WriteFileAtomically(plan->json_path, json));
    if (!plan->html_path.empty()) {
      ThrowIfError(tools::WriteFileAtomically(plan->html_path, report::ReplayResultHtml(*result)));
    }
  } catch (const ReplayAborted&) {
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(state.error.ptr())), state.error.ptr());
    throw py::error_already_set();
  }
  return json;
}

}  // namespace

void BindReplay(py::module_& module) {
  module.def("_replay", &Replay, py::arg("args"), py::arg("progress") = py::none(), kReplayDoc);
}

}  // namespace agentkv::python
