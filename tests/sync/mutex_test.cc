#include "agentkv/sync/mutex.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

namespace agentkv::sync {
namespace {

using std::chrono::milliseconds;

// A counter whose every access the analysis checks against its mutex.
class GuardedCounter {
 public:
  void Add() AGENTKV_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    ++value_;
  }
  int value() const AGENTKV_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    return value_;
  }

 private:
  mutable Mutex mu_;
  int value_ AGENTKV_GUARDED_BY(mu_) = 0;
};

TEST(MutexTest, MutexLockSerializesIncrementsFromManyThreads) {
  GuardedCounter counter;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&counter] {
      for (int i = 0; i < 10000; ++i) counter.Add();
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(counter.value(), 40000);
}

TEST(MutexTest, TryLockFailsWhileAnotherThreadHoldsTheLock) {
  Mutex mu;
  mu.Lock();
  bool taken = false;
  std::thread other([&] {
    if (mu.TryLock()) {
      taken = true;
      mu.Unlock();
    }
  });
  other.join();
  mu.Unlock();
  EXPECT_FALSE(taken);
  const bool relocked = mu.TryLock();
  EXPECT_TRUE(relocked);
  if (relocked) mu.Unlock();
}

TEST(MutexTest, ReadersShareAndAWriterExcludesThem) {
  SharedMutex mu;
  int value = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        WriterMutexLock lock(&mu);
        ++value;
      }
    });
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        ReaderMutexLock lock(&mu);
        EXPECT_GE(value, 0);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  ReaderMutexLock lock(&mu);
  EXPECT_EQ(value, 2000);
}

TEST(CondVarTest, WaitReturnsOnceAnotherThreadSetsTheConditionAndSignals) {
  Mutex mu;
  CondVar cv;
  bool ready = false;
  std::thread setter([&] {
    MutexLock lock(&mu);
    ready = true;
    cv.SignalAll();
  });
  {
    MutexLock lock(&mu);
    while (!ready) cv.Wait(&mu);
    EXPECT_TRUE(ready);
  }
  setter.join();
}

TEST(CondVarTest, TimedWaitsReportTheTimeoutWhenNobodySignals) {
  Mutex mu;
  CondVar cv;
  MutexLock lock(&mu);
  const auto start = std::chrono::steady_clock::now();
  bool timed_out = false;
  while (!timed_out) timed_out = cv.WaitWithTimeout(&mu, milliseconds(20));
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(20));
  const auto deadline = std::chrono::steady_clock::now() + milliseconds(20);
  timed_out = false;
  while (!timed_out) timed_out = cv.WaitWithDeadline(&mu, deadline);
  EXPECT_GE(std::chrono::steady_clock::now(), deadline);
  // The mutex is held again after each wait: another thread cannot take it.
  bool taken = false;
  std::thread other([&] {
    if (mu.TryLock()) {
      taken = true;
      mu.Unlock();
    }
  });
  other.join();
  EXPECT_FALSE(taken);
}

}  // namespace
}  // namespace agentkv::sync
