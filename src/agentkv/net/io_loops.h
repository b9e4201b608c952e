// IoLoops: the event loops and I/O threads an HttpServer or an HttpClient runs on, in one of two
// shapes:
//  - kShared: one io_context run by every thread. Any thread serves any connection; a handler
//    that blocks delays nothing else while another thread is free.
//  - kPerThread: one single-threaded io_context per thread, as nginx runs one event loop per
//    worker. A connection lives on one loop; work posted from that loop's own thread stays on
//    it (Asio's single-threaded scheduler keeps it in the thread's private queue) and wakes no
//    other thread. An HttpServer and an HttpClient built on the same kPerThread loops serve a
//    request and its upstream call on the thread that read the request (the gateway's data
//    path; docs/NET.md, "Event loops").
//
// Thread-safe, except that Join and the destructor must not run on one of the loops' threads.
#ifndef AGENTKV_NET_IO_LOOPS_H_
#define AGENTKV_NET_IO_LOOPS_H_

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <cstddef>
#include <memory>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "agentkv/sync/mutex.h"

namespace agentkv::net {

class IoLoops {
 public:
  enum class Shape { kShared, kPerThread };
  enum class JoinMode {
    // The threads return once no work is left (pending operations and timers complete).
    kFinishWork,
    // The threads return at once; queued work stays queued (DestroyPendingWork drops it).
    kStopNow,
  };

  // Starts `threads` I/O threads (at least 1) in `shape`, named `thread_name` (as `top -H` and
  // `perf` show them; at most 15 characters are kept). `what` names the code whose escaped
  // exception a thread reports on stderr (e.g. "an HttpServer handler"); it must outlive this.
  IoLoops(int threads, Shape shape, const char* what, std::string_view thread_name);
  IoLoops(const IoLoops&) = delete;
  IoLoops& operator=(const IoLoops&) = delete;
  // Join(kStopNow) and DestroyPendingWork, if not done.
  ~IoLoops();

  // The io_contexts: 1 for kShared, one per thread for kPerThread.
  size_t size() const { return contexts_.size(); }
  boost::asio::io_context& context(size_t index) { return *contexts_.at(index); }

  // The index of the io_context the calling thread is running (a handler on one of the
  // loops), or nullopt on any other thread.
  std::optional<size_t> CurrentIndex() const;
  bool RunningInThisThread() const { return CurrentIndex().has_value(); }
  // Indexes in turn (0, 1, ..., size()-1, 0, ...): where new connections and calls made from
  // outside the loops go.
  size_t NextIndex();

  // Joins the threads (see JoinMode). Idempotent; concurrent calls wait for the first. Must not
  // be called on one of the loops' threads (a violation aborts).
  void Join(JoinMode mode);
  // Whether Join started: work posted from now on may never run.
  bool joining() const { return joining_.load(std::memory_order_acquire); }
  // Precondition: Join returned. Destroys the handlers still queued (which may hold the last
  // references to connections and calls) without running them. Idempotent.
  void DestroyPendingWork();

 private:
  // An io_context whose queued handlers can be destroyed while it stays alive, so that sockets
  // and timers bound to it may still be destroyed afterwards.
  class Context : public boost::asio::io_context {
   public:
    using boost::asio::io_context::io_context;
    void DestroyPendingWork() { shutdown(); }
  };
  using WorkGuard = boost::asio::executor_work_guard<boost::asio::io_context::executor_type>;

  std::vector<std::unique_ptr<Context>> contexts_;
  std::vector<WorkGuard> work_guards_;  // Reset by Join.
  std::atomic<size_t> next_index_{0};
  std::atomic<bool> joining_{false};
  sync::Mutex join_mu_;
  std::vector<std::thread> threads_ AGENTKV_GUARDED_BY(join_mu_);
  bool joined_ AGENTKV_GUARDED_BY(join_mu_) = false;
  bool destroyed_ AGENTKV_GUARDED_BY(join_mu_) = false;
};

}  // namespace agentkv::net

#endif  // AGENTKV_NET_IO_LOOPS_H_
