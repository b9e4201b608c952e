#include "python/src/errors.h"

#include <Python.h>

#include <array>
#include <cstddef>

namespace agentkv::python {
namespace py = pybind11;
namespace {

struct ErrorClass {
  StatusCode code;
  const char* name;
  // A built-in exception the class also derives from, or nullptr.
  PyObject* builtin;
  const char* doc;
};

// One slot per StatusCode value (kOk stays empty). The classes live as long as the
// interpreter, so the references are never released.
std::array<PyObject*, static_cast<size_t>(StatusCode::kInternal) + 1> error_classes{};

PyObject* ClassOf(StatusCode code) {
  PyObject* cls = error_classes[static_cast<size_t>(code)];
  return cls != nullptr ? cls : error_classes[0];
}

}  // namespace

void CheckRange(int64_t value, int64_t min, int64_t max, const char* field, const char* range) {
  if (value < min || value > max) {
    throw StatusError(InvalidArgumentError(std::string(field) + " must be in " + range + ", got " +
                                           std::to_string(value)));
  }
}

void RegisterErrors(py::module_& module) {
  const py::object type = py::module_::import("builtins").attr("type");
  const py::object base_str =
      py::reinterpret_borrow<py::object>(PyExc_BaseException).attr("__str__");

  py::dict base_dict;
  base_dict["__module__"] = "agentkv";
  base_dict["__doc__"] =
      "Base class of every error agentkv raises for a failed call: the C++ core's Status, one "
      "subclass per status code. The message is the only argument; `code` names the status "
      "code (e.g. 'INVALID_ARGUMENT').";
  base_dict["code"] = py::none();
  base_dict["__str__"] = base_str;
  const py::object error =
      type("Error", py::make_tuple(py::reinterpret_borrow<py::object>(PyExc_Exception)), base_dict);
  module.attr("Error") = error;
  error_classes[0] = error.inc_ref().ptr();

  const ErrorClass classes[] = {
      {StatusCode::kInvalidArgument, "InvalidArgumentError", PyExc_ValueError,
       "An argument or option is out of its range or malformed (also a ValueError)."},
      {StatusCode::kNotFound, "NotFoundError", PyExc_KeyError,
       "The named request or block is not known (also a KeyError; str() is the message)."},
      {StatusCode::kAlreadyExists, "AlreadyExistsError", nullptr,
       "The request is already active, or a block key is cached under another parent."},
      {StatusCode::kResourceExhausted, "ResourceExhaustedError", nullptr,
       "Not enough free or evictable blocks; nothing was changed."},
      {StatusCode::kFailedPrecondition, "FailedPreconditionError", nullptr,
       "The call does not fit the current state (e.g. committing more blocks than held, "
       "resetting while requests are active)."},
      {StatusCode::kUnavailable, "UnavailableError", nullptr, "A service or peer is unavailable."},
      {StatusCode::kDeadlineExceeded, "DeadlineExceededError", PyExc_TimeoutError,
       "A deadline passed (also a TimeoutError)."},
      {StatusCode::kInternal, "InternalError", nullptr,
       "An internal invariant is broken (check_invariants)."},
  };
  for (const ErrorClass& c : classes) {
    py::dict dict;
    dict["__module__"] = "agentkv";
    dict["__doc__"] = c.doc;
    dict["code"] = std::string(StatusCodeName(c.code));
    // KeyError's own __str__ quotes its argument; every class prints its message as it is.
    dict["__str__"] = base_str;
    const py::tuple bases =
        c.builtin != nullptr ? py::make_tuple(error, py::reinterpret_borrow<py::object>(c.builtin))
                             : py::make_tuple(error);
    const py::object cls = type(c.name, bases, dict);
    module.attr(c.name) = cls;
    error_classes[static_cast<size_t>(c.code)] = cls.inc_ref().ptr();
  }

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      PyErr_SetString(ClassOf(e.status().code()), e.status().message().c_str());
    }
  });
}

}  // namespace agentkv::python
