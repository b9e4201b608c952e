// Shared support for the chaos suite: a child process of the built `agentkv` binary (to kill an
// emulated engine the hard way) and the resident set size of a process.
#ifndef AGENTKV_TESTS_CHAOS_CHAOS_SUPPORT_H_
#define AGENTKV_TESTS_CHAOS_CHAOS_SUPPORT_H_

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

extern char** environ;

namespace agentkv::chaos {

// One child process whose stdout is a pipe to the test. The destructor kills it (SIGKILL) if
// it still runs and reaps it. Not copyable.
class ChildProcess {
 public:
  // Starts `argv[0]` with `argv`; nullptr when it cannot be started.
  static std::unique_ptr<ChildProcess> Spawn(const std::vector<std::string>& argv) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return nullptr;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = 0;
    const int error = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    if (error != 0) {
      close(fds[0]);
      return nullptr;
    }
    return std::unique_ptr<ChildProcess>(new ChildProcess(pid, fds[0]));
  }

  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() {
    Kill(SIGKILL);
    close(out_);
  }

  pid_t pid() const { return pid_; }

  // The next line of the child's stdout (without the newline), or nullopt at end of file or
  // when `timeout` passes first.
  std::optional<std::string> ReadLine(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (const size_t nl = buffer_.find('\n'); nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return line;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char chunk[4096];
      const ssize_t n = read(out_, chunk, sizeof(chunk));
      if (n <= 0) return std::nullopt;
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

  // Sends `signal` and reaps the child (once). Returns its wait status, or -1 when it was
  // reaped already.
  int Kill(int signal) {
    if (reaped_) return -1;
    kill(pid_, signal);
    int status = 0;
    waitpid(pid_, &status, 0);
    reaped_ = true;
    return status;
  }

 private:
  ChildProcess(pid_t pid, int out) : pid_(pid), out_(out) {}

  pid_t pid_;
  int out_;
  bool reaped_ = false;
  std::string buffer_;
};

// VmRSS of process `pid` ("self" for this one) in KiB, or -1 when unreadable.
// Whether the resident set measures the code under test. Under ThreadSanitizer it does not: the
// TSan runtime keeps shadow memory and metadata for every allocation and synchronisation
// object, which grows with a run by itself, so soaks run there but skip their flatness bound.
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kResidentSetIsTheProcesses = false;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool kResidentSetIsTheProcesses = false;
#else
inline constexpr bool kResidentSetIsTheProcesses = true;
#endif
#else
inline constexpr bool kResidentSetIsTheProcesses = true;
#endif

inline int64_t ResidentKiB(const std::string& pid = "self") {
  std::ifstream status("/proc/" + pid + "/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      int64_t kib = -1;
      status >> kib;
      return kib;
    }
    status.ignore(1 << 16, '\n');
  }
  return -1;
}

}  // namespace agentkv::chaos

#endif  // AGENTKV_TESTS_CHAOS_CHAOS_SUPPORT_H_
