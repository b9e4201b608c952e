// BoundedLog<T>: the newest `capacity` entries of an append-only log, and a count of the older
// entries dropped to stay within it. The emulators keep what they received in one (for tests
// and operators), so that their memory stays flat however long they serve.
//
// Thread-compatible; the owner locks. Entries are kept oldest first.
#ifndef AGENTKV_SERVICE_EMULATOR_BOUNDED_LOG_H_
#define AGENTKV_SERVICE_EMULATOR_BOUNDED_LOG_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>

namespace agentkv::service {

template <typename T>
class BoundedLog {
 public:
  // A capacity of 0 keeps nothing (every entry counts as dropped).
  explicit BoundedLog(size_t capacity) : capacity_(capacity) {}

  // Appends `entry`, dropping the oldest entry when the log is full.
  void Append(T entry) {
    if (capacity_ == 0) {
      ++dropped_;
      return;
    }
    if (entries_.size() == capacity_) {
      entries_.pop_front();
      ++dropped_;
    }
    entries_.push_back(std::move(entry));
  }

  // The entries kept, oldest first.
  const std::deque<T>& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }
  size_t capacity() const { return capacity_; }
  // Entries appended and no longer kept, since creation.
  int64_t dropped() const { return dropped_; }

 private:
  size_t capacity_;
  std::deque<T> entries_;
  int64_t dropped_ = 0;
};

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_EMULATOR_BOUNDED_LOG_H_
