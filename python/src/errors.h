// The Python exceptions of agentkv's Status codes, and the way binding code raises them.
//
// Each non-OK StatusCode has one exception class, all under agentkv.Error (InvalidArgumentError
// is also a ValueError, NotFoundError a KeyError, DeadlineExceededError a TimeoutError), each
// carrying the Status message as its only argument and the code's name as the class attribute
// `code`. Binding code turns a Status into one by throwing StatusError (ThrowIfError,
// ValueOrThrow); the translator RegisterErrors installs raises the matching class. The calls
// that would hit a CHECK in the core validate their arguments first and throw
// InvalidArgumentError the same way. Called with the GIL held.
#ifndef AGENTKV_PYTHON_SRC_ERRORS_H_
#define AGENTKV_PYTHON_SRC_ERRORS_H_

#include <pybind11/pybind11.h>

#include <cstdint>
#include <exception>
#include <string>
#include <utility>

#include "agentkv/base/status.h"

namespace agentkv::python {

// A non-OK Status on its way to Python.
class StatusError : public std::exception {
 public:
  explicit StatusError(Status status) : status_(std::move(status)) {}
  const Status& status() const { return status_; }
  const char* what() const noexcept override { return status_.message().c_str(); }

 private:
  Status status_;
};

inline void ThrowIfError(const Status& status) {
  if (!status.ok()) throw StatusError(status);
}

template <typename T>
T ValueOrThrow(StatusOr<T> result) {
  if (!result.ok()) throw StatusError(result.status());
  return std::move(result).value();
}

// Throws InvalidArgumentError "<field> must be in <range>, got <value>" unless
// min <= value <= max.
void CheckRange(int64_t value, int64_t min, int64_t max, const char* field, const char* range);

// Creates agentkv.Error and one subclass per code in `module` and installs the translator of
// StatusError.
void RegisterErrors(pybind11::module_& module);

}  // namespace agentkv::python

#endif  // AGENTKV_PYTHON_SRC_ERRORS_H_
