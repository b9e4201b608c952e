#include "bench/gateway_hold_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

namespace agentkv::bench {

using std::chrono::milliseconds;

ProcStatus ReadProcStatus(pid_t pid) {
  ProcStatus status;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Threads:", 0) == 0) status.threads = std::stoi(line.substr(8));
    if (line.rfind("VmRSS:", 0) == 0) status.rss_kb = std::stoll(line.substr(6));
    if (line.rfind("VmHWM:", 0) == 0) status.hwm_kb = std::stoll(line.substr(6));
  }
  if (DIR* dir = ::opendir(("/proc/" + std::to_string(pid) + "/fd").c_str())) {
    status.fds = 0;
    while (dirent* entry = ::readdir(dir)) {
      if (entry->d_name[0] != '.') ++status.fds;
    }
    ::closedir(dir);
  }
  return status;
}

rlim_t RaiseFileLimit(rlim_t wanted) {
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  if (limit.rlim_cur < wanted) {
    if (limit.rlim_max < wanted) {
      rlimit both{wanted, wanted};
      if (::setrlimit(RLIMIT_NOFILE, &both) != 0) {
        rlimit raised{limit.rlim_max, limit.rlim_max};
        ::setrlimit(RLIMIT_NOFILE, &raised);
      }
    } else {
      rlimit raised{wanted, limit.rlim_max};
      ::setrlimit(RLIMIT_NOFILE, &raised);
    }
  }
  ::getrlimit(RLIMIT_NOFILE, &limit);
  return limit.rlim_cur;
}

std::unique_ptr<ChildProcess> ChildProcess::Start(const char* name, std::vector<std::string> args) {
  int port_pipe[2];
  if (::pipe2(port_pipe, O_CLOEXEC) != 0) return nullptr;
  args.insert(args.begin(), std::string("gateway_hold-") + name);  // argv[0], for ps.
  args.push_back("--port-fd=" + std::to_string(port_pipe[1]));
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(port_pipe[0]);
    ::close(port_pipe[1]);
    return nullptr;
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) _exit(1);  // The client died before prctl.
    ::fcntl(port_pipe[1], F_SETFD, 0);    // This end survives exec.
    ::execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  ::close(port_pipe[1]);
  auto child = std::unique_ptr<ChildProcess>(new ChildProcess(name, pid));
  uint16_t port = 0;
  const bool read_ok = ::read(port_pipe[0], &port, sizeof(port)) == sizeof(port);
  ::close(port_pipe[0]);
  if (!read_ok || port == 0) {
    std::fprintf(stderr, "%s failed to start\n", name);
    return nullptr;  // The destructor stops and reaps it.
  }
  child->port_ = port;
  return child;
}
void ChildProcess::Stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  int status = 0;
  bool reaped = false;
  for (int i = 0; i < 200 && !reaped; ++i) {
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      reaped = true;
    } else {
      std::this_thread::sleep_for(milliseconds(50));
    }
  }
  if (!reaped) {
    std::fprintf(stderr, "%s did not stop within 10 s; SIGKILL\n", name_);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status, 0);
  } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "%s ended with status 0x%x\n", name_, static_cast<unsigned>(status));
  }
  pid_ = -1;
}
// A child's main: blocks SIGTERM and SIGINT before any thread starts (threads inherit the
// mask), runs `serve` (starts the servers, returns the port or 0), writes the port to
// `port_fd`, waits for SIGTERM or SIGINT, runs `stop`.
int ServeUntilSignalled(int port_fd, const std::function<uint16_t()>& serve,
                        const std::function<void()>& stop) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  ::pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  const uint16_t port = serve();
  const bool reported = ::write(port_fd, &port, sizeof(port)) == sizeof(port);
  ::close(port_fd);
  if (port != 0 && reported) {
    int signal = 0;
    ::sigwait(&signals, &signal);
  }
  stop();
  return port != 0 ? 0 : 1;
}

}  // namespace agentkv::bench
