// The processes of the gateway hold bench (gateway_hold.cc): the state its children share with
// it, the figures it reads from /proc, the descriptor limit it raises, the children it
// re-executes (a slow engine stub, the gateway) and a child's main loop. Linux only; not
// thread-safe (the client's main thread starts and stops the children).
#ifndef AGENTKV_BENCH_GATEWAY_HOLD_PROCESS_H_
#define AGENTKV_BENCH_GATEWAY_HOLD_PROCESS_H_

#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <vector>

namespace agentkv::bench {

// Written by the children, read by the client: one shared mapping of a memfd the children
// inherit (see SharedMapping). Lock-free atomics only.
struct SharedState {
  std::atomic<int64_t> stub_received{0};
  std::atomic<int64_t> stub_held{0};
  std::atomic<int64_t> stub_answered{0};
  std::atomic<uint64_t> stub_nofile{0};
  std::atomic<uint64_t> gateway_nofile{0};
  std::atomic<int64_t> gateway_warnings{0};
  // The gateway's upstream max_connections_per_host and queue_timeout in force.
  std::atomic<int64_t> upstream_connections{0};
  std::atomic<int64_t> upstream_queue_timeout_ms{0};
};

// The shared state in a memfd, so that the re-executed children can map it too.
class SharedMapping {
 public:
  // Creates and maps a fresh SharedState; null on failure.
  static std::unique_ptr<SharedMapping> Create() {
    const int fd = ::memfd_create("gateway_hold", 0);  // Inherited across exec on purpose.
    if (fd < 0) return nullptr;
    std::unique_ptr<SharedMapping> mapping;
    if (::ftruncate(fd, sizeof(SharedState)) == 0) mapping = Map(fd, /*construct=*/true);
    if (!mapping) ::close(fd);
    return mapping;
  }
  // Maps the state created by the client (a child's side).
  static std::unique_ptr<SharedMapping> Map(int fd, bool construct = false) {
    void* mapping = ::mmap(nullptr, sizeof(SharedState), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (mapping == MAP_FAILED) return nullptr;
    auto* state = static_cast<SharedState*>(mapping);
    if (construct) new (state) SharedState();
    return std::unique_ptr<SharedMapping>(new SharedMapping(fd, state));
  }
  SharedMapping(const SharedMapping&) = delete;
  SharedMapping& operator=(const SharedMapping&) = delete;
  ~SharedMapping() {
    ::munmap(state_, sizeof(SharedState));
    ::close(fd_);
  }
  // Zeroes every counter (between runs, with no child alive).
  void Reset() { new (state_) SharedState(); }
  int fd() const { return fd_; }
  SharedState* state() const { return state_; }

 private:
  SharedMapping(int fd, SharedState* state) : fd_(fd), state_(state) {}
  int fd_;
  SharedState* state_;
};

struct ProcStatus {
  int threads = -1;
  int64_t rss_kb = -1;
  int64_t hwm_kb = -1;
  int fds = -1;  // Entries of /proc/<pid>/fd.
};

// /proc/<pid>/status's Threads, VmRSS and VmHWM, and the entries of /proc/<pid>/fd; -1 for
// what cannot be read.
ProcStatus ReadProcStatus(pid_t pid);

inline double MiB(int64_t kb) { return static_cast<double>(kb) / 1024.0; }

// Raises RLIMIT_NOFILE to at least `wanted` (the hard limit too, which needs
// CAP_SYS_RESOURCE); returns the soft limit in force afterwards.
rlim_t RaiseFileLimit(rlim_t wanted);

// A child running this program with `args` (a --role and its flags), serving until SIGTERM.
// The destructor stops it: SIGTERM, up to 10 s for it to exit, then SIGKILL; always reaped.
class ChildProcess {
 public:
  // Forks and re-executes /proc/self/exe with `args` plus --port-fd; the child asks for
  // SIGTERM when this process dies (PR_SET_PDEATHSIG survives exec), starts its server and
  // writes its port (0 on failure) to the pipe. Returns null when the fork or exec fails or
  // the child reports no port (that child is stopped and reaped).
  static std::unique_ptr<ChildProcess> Start(const char* name, std::vector<std::string> args);

  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() { Stop(); }

  // SIGTERM, wait up to 10 s, then SIGKILL; reaps. Idempotent.
  void Stop();

  pid_t pid() const { return pid_; }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  ChildProcess(const char* name, pid_t pid) : name_(name), pid_(pid) {}
  const char* name_;
  pid_t pid_;
  uint16_t port_ = 0;
};

// A child's main: blocks SIGTERM and SIGINT before any thread starts (threads inherit the
// mask), runs `serve` (starts the servers, returns the port or 0), writes the port to
// `port_fd`, waits for SIGTERM or SIGINT, runs `stop`.
int ServeUntilSignalled(int port_fd, const std::function<uint16_t()>& serve,
                        const std::function<void()>& stop);

}  // namespace agentkv::bench

#endif  // AGENTKV_BENCH_GATEWAY_HOLD_PROCESS_H_
