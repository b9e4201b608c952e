// Invariants: `contexts_` never changes after construction; `threads_` run them until Join joined
// them (for kShared every thread runs contexts_[0], for kPerThread thread i runs contexts_[i]);
// `work_guards_` keep every context's threads running while idle until Join releases them.
#include "agentkv/net/io_loops.h"

#include <pthread.h>

#include <algorithm>
#include <string>

#include "agentkv/base/check.h"
#include "agentkv/net/io_thread.h"

namespace agentkv::net {

namespace {

// Linux keeps at most 15 characters of a thread's name.
constexpr size_t kMaxThreadName = 15;

}  // namespace

IoLoops::IoLoops(int threads, Shape shape, const char* what, std::string_view thread_name) {
  AGENTKV_CHECK(threads >= 1) << "IoLoops needs at least one thread, got " << threads;
  const size_t count = static_cast<size_t>(threads);
  const size_t contexts = shape == Shape::kShared ? 1 : count;
  // Asio's concurrency hint 1 makes a context's scheduler single-threaded: a handler posted
  // from its own thread goes to that thread's private queue and wakes no other.
  const int hint = shape == Shape::kShared ? threads : 1;
  contexts_.reserve(contexts);
  work_guards_.reserve(contexts);
  for (size_t i = 0; i < contexts; ++i) {
    contexts_.push_back(std::make_unique<Context>(hint));
    work_guards_.emplace_back(contexts_.back()->get_executor());
  }
  sync::MutexLock lock(&join_mu_);  // Not shared yet; for the lock annotations.
  threads_.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    Context* context = contexts_[std::min(i, contexts - 1)].get();
    threads_.emplace_back(
        [context, what, name = std::string(thread_name.substr(0, kMaxThreadName))] {
          pthread_setname_np(pthread_self(), name.c_str());
          internal::RunIoThread(*context, what);
        });
  }
}

IoLoops::~IoLoops() {
  Join(JoinMode::kStopNow);
  DestroyPendingWork();
}

std::optional<size_t> IoLoops::CurrentIndex() const {
  for (size_t i = 0; i < contexts_.size(); ++i) {
    if (contexts_[i]->get_executor().running_in_this_thread()) return i;
  }
  return std::nullopt;
}

size_t IoLoops::NextIndex() {
  if (contexts_.size() == 1) return 0;
  return next_index_.fetch_add(1, std::memory_order_relaxed) % contexts_.size();
}

void IoLoops::Join(JoinMode mode) {
  AGENTKV_CHECK(!RunningInThisThread()) << "IoLoops joined from one of its own threads";
  sync::MutexLock lock(&join_mu_);
  if (joined_) return;
  joining_.store(true, std::memory_order_release);
  for (auto& guard : work_guards_) guard.reset();
  if (mode == JoinMode::kStopNow) {
    for (auto& context : contexts_) context->stop();
  }
  for (auto& thread : threads_) thread.join();
  threads_.clear();
  joined_ = true;
}

void IoLoops::DestroyPendingWork() {
  {
    sync::MutexLock lock(&join_mu_);
    AGENTKV_CHECK(joined_) << "IoLoops::DestroyPendingWork before Join";
    if (destroyed_) return;
    destroyed_ = true;
  }
  // Outside the lock: a destroyed handler may release objects whose destructors use the loops.
  for (auto& context : contexts_) context->DestroyPendingWork();
}

}  // namespace agentkv::net
