// Status and StatusOr<T>: expected failures as values, with canonical codes.
//
// Every fallible API in agentkv returns one of these; exceptions never cross a module
// boundary. A Status is cheap to copy when OK (no allocation). StatusOr<T> holds either a T or
// a non-OK Status; reading the value of a failed StatusOr is a programmer error and aborts.
// Thread-compatible value types.
#ifndef AGENTKV_BASE_STATUS_H_
#define AGENTKV_BASE_STATUS_H_

#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>

#include "agentkv/base/check.h"

namespace agentkv {

// The canonical codes agentkv uses (a subset of the gRPC / absl canonical space).
enum class StatusCode {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kResourceExhausted,
  kFailedPrecondition,
  kUnavailable,
  kDeadlineExceeded,
  kInternal,
};

// Returns the canonical upper-case name, e.g. "INVALID_ARGUMENT".
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  // An OK status.
  Status() = default;
  // A status with `code` and a human-readable `message`; `code` may be kOk only with an empty
  // message.
  Status(StatusCode code, std::string message);

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "OK" or "CODE_NAME: message".
  std::string ToString() const;

  // Marks a status as deliberately ignored.
  void IgnoreError() const {}

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

std::ostream& operator<<(std::ostream& os, const Status& status);

Status InvalidArgumentError(std::string message);
Status NotFoundError(std::string message);
Status AlreadyExistsError(std::string message);
Status ResourceExhaustedError(std::string message);
Status FailedPreconditionError(std::string message);
Status UnavailableError(std::string message);
Status DeadlineExceededError(std::string message);
Status InternalError(std::string message);

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  // Implicit from a value or from a non-OK status, so functions can `return value;` or
  // `return NotFoundError(...);`.
  StatusOr(T value) : value_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    AGENTKV_CHECK(!status_.ok()) << "StatusOr constructed from an OK status without a value";
  }

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  // Precondition: ok().
  const T& value() const& {
    CheckOk();
    return *value_;
  }
  T& value() & {
    CheckOk();
    return *value_;
  }
  T&& value() && {
    CheckOk();
    return std::move(*value_);
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  void CheckOk() const {
    AGENTKV_CHECK(status_.ok()) << "value() of a failed StatusOr: " << status_.ToString();
  }

  Status status_;
  std::optional<T> value_;
};

}  // namespace agentkv

#define AGENTKV_STATUS_CONCAT_INNER_(a, b) a##b
#define AGENTKV_STATUS_CONCAT_(a, b) AGENTKV_STATUS_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function when `expr` is not OK.
#define AGENTKV_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    ::agentkv::Status agentkv_status_ = (expr);        \
    if (!agentkv_status_.ok()) return agentkv_status_; \
  } while (false)

// `AGENTKV_ASSIGN_OR_RETURN(auto x, MakeX());` declares `x` from an OK StatusOr, or returns
// its status from the enclosing function.
#define AGENTKV_ASSIGN_OR_RETURN(lhs, expr) \
  AGENTKV_ASSIGN_OR_RETURN_IMPL_(AGENTKV_STATUS_CONCAT_(agentkv_statusor_, __LINE__), lhs, expr)
#define AGENTKV_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return tmp.status();                  \
  lhs = std::move(tmp).value()

#endif  // AGENTKV_BASE_STATUS_H_
