// Time in agentkv: `TimeNs` for simulated or wall time, `Step` for scheduler iterations.
//
// The pure core never reads a clock: callers pass `TimeNs now` or advance a `Step` counter.
// Engines decide by steps, not time, so that tensor-parallel ranks that see the same requests
// make the same choices. Both are thin strong wrappers over int64 with the arithmetic that
// makes sense (a difference of two times is a duration, also a TimeNs). Thread-compatible.
#ifndef AGENTKV_BASE_TIME_H_
#define AGENTKV_BASE_TIME_H_

#include <compare>
#include <cstdint>
#include <ostream>

namespace agentkv {

// Nanoseconds since an arbitrary epoch, or a duration in nanoseconds.
class TimeNs {
 public:
  constexpr TimeNs() = default;
  constexpr explicit TimeNs(int64_t ns) : ns_(ns) {}

  static constexpr TimeNs Seconds(double s) { return TimeNs(static_cast<int64_t>(s * 1e9)); }
  static constexpr TimeNs Millis(int64_t ms) { return TimeNs(ms * 1'000'000); }

  constexpr int64_t ns() const { return ns_; }
  constexpr double seconds() const { return static_cast<double>(ns_) * 1e-9; }

  friend constexpr auto operator<=>(TimeNs, TimeNs) = default;
  friend constexpr TimeNs operator+(TimeNs a, TimeNs b) { return TimeNs(a.ns_ + b.ns_); }
  friend constexpr TimeNs operator-(TimeNs a, TimeNs b) { return TimeNs(a.ns_ - b.ns_); }
  constexpr TimeNs& operator+=(TimeNs d) {
    ns_ += d.ns_;
    return *this;
  }
  friend std::ostream& operator<<(std::ostream& os, TimeNs t) { return os << t.ns_ << "ns"; }

 private:
  int64_t ns_ = 0;
};

// A scheduler iteration number, or a number of iterations.
class Step {
 public:
  constexpr Step() = default;
  constexpr explicit Step(int64_t value) : value_(value) {}

  constexpr int64_t value() const { return value_; }

  friend constexpr auto operator<=>(Step, Step) = default;
  friend constexpr Step operator+(Step a, Step b) { return Step(a.value_ + b.value_); }
  friend constexpr Step operator-(Step a, Step b) { return Step(a.value_ - b.value_); }
  constexpr Step& operator++() {
    ++value_;
    return *this;
  }
  friend std::ostream& operator<<(std::ostream& os, Step s) { return os << "step " << s.value_; }

 private:
  int64_t value_ = 0;
};

}  // namespace agentkv

#endif  // AGENTKV_BASE_TIME_H_
