// Mutex, SharedMutex, their scoped locks and CondVar: std::mutex, std::shared_mutex and
// std::condition_variable with Clang thread-safety annotations (base/thread_annotations.h).
//
// libstdc++'s mutexes carry no capability attributes, so -Wthread-safety cannot check code that
// locks them. These thin wrappers (the shape of abseil's absl::Mutex, absl::MutexLock and
// absl::CondVar) make every field marked AGENTKV_GUARDED_BY(mu_) checked at compile time under
// Clang; with GCC they compile to the std types and nothing more. Condition waits take the
// mutex explicitly and are written as loops at the call site (`while (!ready_) cv_.Wait(&mu_);`)
// so that the analysis sees the guarded reads under the lock.
//
// Thread-safe (that is their purpose). Not copyable or movable: a lock is identified by its
// address.
#ifndef AGENTKV_SYNC_MUTEX_H_
#define AGENTKV_SYNC_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#include "agentkv/base/thread_annotations.h"

namespace agentkv::sync {

// An exclusive lock. Not recursive: locking a held Mutex on the same thread deadlocks.
class AGENTKV_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() AGENTKV_ACQUIRE() { mu_.lock(); }
  void Unlock() AGENTKV_RELEASE() { mu_.unlock(); }
  // True when the lock was taken (then the caller must Unlock).
  [[nodiscard]] bool TryLock() AGENTKV_TRY_ACQUIRE(true) { return mu_.try_lock(); }

  // Tells the analysis that the caller holds the lock where it cannot see so (a callback run
  // under it); no run-time check.
  void AssertHeld() const AGENTKV_ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex for its scope.
class AGENTKV_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) AGENTKV_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;
  ~MutexLock() AGENTKV_RELEASE() { mu_->Unlock(); }

 private:
  Mutex* const mu_;
};

// Holds a Mutex for its scope, and may release and take it again inside (to run callbacks or
// blocking work without it). The destructor releases it only if held.
class AGENTKV_SCOPED_CAPABILITY ReleasableMutexLock {
 public:
  explicit ReleasableMutexLock(Mutex* mu) AGENTKV_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ReleasableMutexLock(const ReleasableMutexLock&) = delete;
  ReleasableMutexLock& operator=(const ReleasableMutexLock&) = delete;
  ~ReleasableMutexLock() AGENTKV_RELEASE() {
    if (held_) mu_->Unlock();
  }

  // Precondition: held.
  void Unlock() AGENTKV_RELEASE() {
    held_ = false;
    mu_->Unlock();
  }
  // Precondition: not held.
  void Lock() AGENTKV_ACQUIRE() {
    mu_->Lock();
    held_ = true;
  }

 private:
  Mutex* const mu_;
  bool held_ = true;
};

// A reader-writer lock: many readers (ReaderLock) or one writer (Lock).
class AGENTKV_CAPABILITY("shared mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void Lock() AGENTKV_ACQUIRE() { mu_.lock(); }
  void Unlock() AGENTKV_RELEASE() { mu_.unlock(); }
  void ReaderLock() AGENTKV_ACQUIRE_SHARED() { mu_.lock_shared(); }
  void ReaderUnlock() AGENTKV_RELEASE_SHARED() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Holds a SharedMutex exclusively for its scope.
class AGENTKV_SCOPED_CAPABILITY WriterMutexLock {
 public:
  explicit WriterMutexLock(SharedMutex* mu) AGENTKV_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  WriterMutexLock(const WriterMutexLock&) = delete;
  WriterMutexLock& operator=(const WriterMutexLock&) = delete;
  ~WriterMutexLock() AGENTKV_RELEASE() { mu_->Unlock(); }

 private:
  SharedMutex* const mu_;
};

// Holds a SharedMutex shared for its scope.
class AGENTKV_SCOPED_CAPABILITY ReaderMutexLock {
 public:
  explicit ReaderMutexLock(SharedMutex* mu) AGENTKV_ACQUIRE_SHARED(mu) : mu_(mu) {
    mu_->ReaderLock();
  }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;
  ~ReaderMutexLock() AGENTKV_RELEASE_GENERIC() { mu_->ReaderUnlock(); }

 private:
  SharedMutex* const mu_;
};

// A condition variable used with a Mutex. Every wait may wake spuriously: callers loop on
// their condition. Notify may be called with or without the mutex held.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Releases `mu`, blocks until notified (or a spurious wake-up), and holds `mu` again.
  void Wait(Mutex* mu) AGENTKV_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // `mu` stays held; the caller's scope releases it.
  }

  // As Wait, but returns at `deadline` at the latest. True when the deadline passed.
  template <typename Clock, typename Duration>
  bool WaitWithDeadline(Mutex* mu, std::chrono::time_point<Clock, Duration> deadline)
      AGENTKV_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool timed_out = cv_.wait_until(lock, deadline) == std::cv_status::timeout;
    lock.release();
    return timed_out;
  }

  // As Wait, but returns after `timeout` at the latest. True when the timeout passed.
  template <typename Rep, typename Period>
  bool WaitWithTimeout(Mutex* mu, std::chrono::duration<Rep, Period> timeout) AGENTKV_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool timed_out = cv_.wait_for(lock, timeout) == std::cv_status::timeout;
    lock.release();
    return timed_out;
  }

  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace agentkv::sync

#endif  // AGENTKV_SYNC_MUTEX_H_
