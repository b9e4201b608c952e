// AGENTKV_CHECK: programmer errors abort with a message.
//
// A failed check prints "file:line: CHECK failed: <condition> <streamed message>" to stderr
// and aborts. Checks stay on in release builds: they guard invariants whose violation would
// silently corrupt cache accounting. Expected failures use Status instead (status.h).
#ifndef AGENTKV_BASE_CHECK_H_
#define AGENTKV_BASE_CHECK_H_

#include <sstream>

namespace agentkv::internal {

// Collects the streamed message of a failed check and aborts in its destructor.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  CheckFailure(const CheckFailure&) = delete;
  CheckFailure& operator=(const CheckFailure&) = delete;
  [[noreturn]] ~CheckFailure();

  template <typename T>
  CheckFailure& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }

 private:
  std::ostringstream stream_;
};

// Lets the ternary in AGENTKV_CHECK have type void on both branches.
struct Voidify {
  void operator&(const CheckFailure&) {}
};

}  // namespace agentkv::internal

#define AGENTKV_CHECK(condition)         \
  (__builtin_expect(!!(condition), 1))   \
      ? (void)0                          \
      : ::agentkv::internal::Voidify() & \
            ::agentkv::internal::CheckFailure(__FILE__, __LINE__, #condition)

#define AGENTKV_CHECK_EQ(a, b) AGENTKV_CHECK((a) == (b)) << (a) << " vs " << (b) << " "
#define AGENTKV_CHECK_NE(a, b) AGENTKV_CHECK((a) != (b)) << (a) << " vs " << (b) << " "
#define AGENTKV_CHECK_LT(a, b) AGENTKV_CHECK((a) < (b)) << (a) << " vs " << (b) << " "
#define AGENTKV_CHECK_LE(a, b) AGENTKV_CHECK((a) <= (b)) << (a) << " vs " << (b) << " "
#define AGENTKV_CHECK_GE(a, b) AGENTKV_CHECK((a) >= (b)) << (a) << " vs " << (b) << " "

// Debug-only check for hot paths whose invariant CheckInvariants() also verifies.
#ifdef NDEBUG
#define AGENTKV_DCHECK(condition) \
  while (false) AGENTKV_CHECK(condition)
#else
#define AGENTKV_DCHECK(condition) AGENTKV_CHECK(condition)
#endif

#endif  // AGENTKV_BASE_CHECK_H_
