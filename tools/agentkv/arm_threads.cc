#include "tools/agentkv/arm_threads.h"

#include <algorithm>
#include <atomic>
#include <thread>

namespace agentkv::tools {

size_t ArmJobs(int64_t jobs, size_t arms) {
  size_t n = jobs > 0 ? static_cast<size_t>(jobs) : std::thread::hardware_concurrency();
  return std::max<size_t>(1, std::min(n, arms));
}

void RunOnThreads(const std::vector<std::function<void()>>& tasks, size_t threads) {
  if (threads <= 1 || tasks.size() <= 1) {
    for (const std::function<void()>& task : tasks) task();
    return;
  }
  std::atomic<size_t> next{0};
  const auto work = [&] {
    for (size_t i = next.fetch_add(1); i < tasks.size(); i = next.fetch_add(1)) tasks[i]();
  };
  std::vector<std::thread> helpers;
  helpers.reserve(std::min(threads, tasks.size()) - 1);
  for (size_t t = 1; t < std::min(threads, tasks.size()); ++t) helpers.emplace_back(work);
  work();
  for (std::thread& helper : helpers) helper.join();
}

}  // namespace agentkv::tools
