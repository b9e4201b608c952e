// Fuzzes the router discovery parsers and the engine base URL rule.
//
// Invariants: failures are InvalidArgument/ResourceExhausted; EngineBaseUrls returns
// non-empty, distinct URLs, each the stripped URL of a healthy worker, in first-seen order;
// both /workers shapes and /list_workers round-trip what was parsed.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agentkv/protocol/workers.h"
#include "fuzz_check.h"

namespace {

using agentkv::StatusCode;
using namespace agentkv::protocol;

bool IsInputError(const agentkv::Status& status) {
  return status.code() == StatusCode::kInvalidArgument ||
         status.code() == StatusCode::kResourceExhausted;
}

// The base URLs computed the slow, obvious way.
std::vector<std::string> Expected(const std::vector<std::string>& candidates) {
  std::vector<std::string> out;
  for (const std::string& url : candidates) {
    const std::string base = StripRankSuffix(url);
    if (base.empty()) continue;
    bool seen = false;
    for (const std::string& existing : out) seen = seen || existing == base;
    if (!seen) out.push_back(base);
  }
  return out;
}

bool SameWorker(const WorkerInfo& a, const WorkerInfo& b) {
  // The cost is compared loosely: Boost.JSON 1.81 may read a double one ulp off.
  const bool same_cost =
      a.cost == b.cost || std::fabs(a.cost - b.cost) <= 1e-15 * std::fmax(std::fabs(a.cost), 1.0);
  return a.url == b.url && a.id == b.id && a.model_id == b.model_id &&
         a.worker_type == b.worker_type && a.is_healthy == b.is_healthy && a.load == b.load &&
         a.connection_mode == b.connection_mode && a.priority == b.priority && same_cost &&
         a.bootstrap_port == b.bootstrap_port;
}

void CheckRoundTrip(std::vector<WorkerInfo> workers, WorkersShape shape) {
  for (WorkerInfo& w : workers) {
    if (shape == WorkersShape::kInline) w.id.clear();
    if (shape == WorkersShape::kWorkerList) w.bootstrap_port.reset();
  }
  const agentkv::StatusOr<std::vector<WorkerInfo>> again =
      ParseWorkers(SerializeWorkers(workers, shape));
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->size() == workers.size());
  for (size_t i = 0; i < workers.size(); ++i) FUZZ_CHECK(SameWorker((*again)[i], workers[i]));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);

  const agentkv::StatusOr<std::vector<WorkerInfo>> workers = ParseWorkers(body);
  FUZZ_CHECK(workers.ok() || IsInputError(workers.status()));
  if (workers.ok()) {
    std::vector<std::string> healthy;
    for (const WorkerInfo& w : *workers) {
      if (w.is_healthy) healthy.push_back(w.url);
    }
    FUZZ_CHECK(EngineBaseUrls(*workers) == Expected(healthy));
    CheckRoundTrip(*workers, WorkersShape::kInline);
    CheckRoundTrip(*workers, WorkersShape::kWorkerList);
  }

  const agentkv::StatusOr<std::vector<std::string>> urls = ParseListWorkers(body);
  FUZZ_CHECK(urls.ok() || IsInputError(urls.status()));
  if (urls.ok()) {
    FUZZ_CHECK(EngineBaseUrls(*urls) == Expected(*urls));
    const agentkv::StatusOr<std::vector<std::string>> again =
        ParseListWorkers(SerializeListWorkers(*urls));
    FUZZ_CHECK(again.ok() && *again == *urls);
  }

  const agentkv::StatusOr<RouterFlushCacheResult> flush = ParseRouterFlushCache(body);
  FUZZ_CHECK(flush.ok() || IsInputError(flush.status()));
  const agentkv::StatusOr<std::vector<WorkerLoad>> loads = ParseLoads(body);
  FUZZ_CHECK(loads.ok() || IsInputError(loads.status()));
  if (loads.ok()) {
    const agentkv::StatusOr<std::vector<WorkerLoad>> again = ParseLoads(SerializeLoads(*loads));
    FUZZ_CHECK(again.ok() && *again == *loads);
  }
  return 0;
}
