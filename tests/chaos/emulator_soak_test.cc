// Soak test of the emulators (issue 12): 40,000 small requests, each with a new rid and a new
// session id, through an emulated router into an emulated engine (in this process), plus the
// control requests a client fans out (/close_session, /abort_request, /open_session). Every
// per-request and per-session structure must be bounded, so the resident set must be flat:
// once the bounds are full (they are set small enough to fill within the first quarter of the
// run), the growth from the end of the first quarter to the end of the run stays under
// kMaxGrowthKiB.
//
// Why 6 MiB: the leaks this guards against cost 0.55 KB (a finished scheduler request) to
// 2.7 KB (a router log entry) per request, so over the last 30,000 requests any one of them
// grows the resident set by 16 to 80 MiB (the code before the fix grew 0.9 KiB per request);
// the allocator's own drift over such a run (arenas of the I/O threads, a hash table's next
// bucket array) measured under 1 MiB. A leak of 0.2 KB per request would still fail.
//
// Under ThreadSanitizer the soak still runs but its bound is not checked (chaos_support.h,
// kResidentSetIsTheProcesses): TSan's runtime grew the resident set by 6.2 to 6.6 MiB over the
// last 30,000 requests on a 2-core CI machine by itself.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/json.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "agentkv/net/http_client.h"
#include "agentkv/service/emulator/engine_emulator.h"
#include "agentkv/service/emulator/router_emulator.h"
#include "chaos_support.h"

namespace agentkv::service {
namespace {

using namespace std::chrono_literals;
namespace http = net::http;

constexpr int kRequests = 40'000;
constexpr int kBatches = 20;
constexpr int kConcurrency = 32;
constexpr int64_t kMaxGrowthKiB = 6 * 1024;

// Runs up to kConcurrency requests at once and waits for all of them.
class Pump {
 public:
  explicit Pump(net::HttpClient& client) : client_(client) {}

  void Post(const std::string& base, const std::string& path, std::string body) {
    std::unique_lock<std::mutex> lock(mu_);
    room_.wait(lock, [this] { return in_flight_ < kConcurrency; });
    ++in_flight_;
    lock.unlock();
    client_.AsyncRequest(http::verb::post, base, path, {{"Content-Type", "application/json"}},
                         std::move(body), [this](StatusOr<net::ClientResponse> r) {
                           std::lock_guard<std::mutex> guard(mu_);
                           if (!r.ok() || r->status != 200) {
                             ++failures_;
                             if (first_failure_.empty()) {
                               first_failure_ = r.ok() ? std::to_string(r->status) + " " + r->body
                                                       : r.status().ToString();
                             }
                           }
                           --in_flight_;
                           room_.notify_all();
                         });
  }

  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    room_.wait(lock, [this] { return in_flight_ == 0; });
  }

  int failures() const {
    std::lock_guard<std::mutex> lock(mu_);
    return failures_;
  }
  std::string first_failure() const {
    std::lock_guard<std::mutex> lock(mu_);
    return first_failure_;
  }

 private:
  net::HttpClient& client_;
  mutable std::mutex mu_;
  std::condition_variable room_;
  int in_flight_ = 0;
  int failures_ = 0;
  std::string first_failure_;
};

std::string Body(int i) {
  // 40 distinct tokens: two full pages (cached, routed by cache_aware) and a partial one.
  std::string ids;
  for (int t = 0; t < 40; ++t) ids += (t ? "," : "") + std::to_string(1000 + (i * 40 + t) % 30000);
  return R"({"input_ids": [)" + ids +
         R"(], "sampling_params": {"max_new_tokens": 4}, "rid": "soak-)" + std::to_string(i) +
         R"(", "session_id": "session-)" + std::to_string(i) + "\"" +
         (i % 10 == 0 ? R"(, "stream": true)" : "") + "}";
}

// Batch `batch` of the soak: its generate requests through the router, and the control
// requests a client fans out to every engine.
void PostBatch(Pump& pump, const std::string& router_url, const std::string& engine_url,
               int batch) {
  for (int i = batch * (kRequests / kBatches); i < (batch + 1) * (kRequests / kBatches); ++i) {
    pump.Post(router_url, "/generate", Body(i));
    // The control requests a client fans out to every engine: closes, aborts of rids that
    // already finished, and legacy sessions that are opened and never closed.
    if (i % 4 == 0) {
      pump.Post(engine_url, "/close_session",
                R"({"session_id": "session-)" + std::to_string(i) + "\"}");
    }
    if (i % 8 == 0) {
      pump.Post(engine_url, "/abort_request", R"({"rid": "soak-)" + std::to_string(i) + "\"}");
    }
    if (i % 8 == 4) {
      pump.Post(
          engine_url, "/open_session",
          R"({"capacity_of_str_len": 1000, "session_id": "legacy-)" + std::to_string(i) + "\"}");
    }
  }
}

TEST(EmulatorSoakTest, ResidentSetStaysFlatOverFortyThousandRequests) {
  EngineEmulatorOptions engine_options;
  engine_options.runtime.paced = false;
  engine_options.runtime.engine.kv_pool.tokens_per_block = 16;
  engine_options.runtime.engine.kv_pool.max_total_tokens = 65536;
  engine_options.runtime.enable_session_radix_cache = true;
  engine_options.runtime.max_sessions = 1024;
  engine_options.max_recorded_requests = 1024;
  StatusOr<std::unique_ptr<EngineEmulator>> engine = EngineEmulator::Start(engine_options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  RouterEmulatorOptions router_options;
  router_options.worker_urls = {(*engine)->base_url()};
  router_options.health_check_interval = std::chrono::milliseconds(0);
  router_options.max_tree_size = 2048;
  router_options.max_received_requests = 2048;
  StatusOr<std::unique_ptr<RouterEmulator>> router = RouterEmulator::Start(router_options);
  ASSERT_TRUE(router.ok()) << router.status();

  net::HttpClientOptions client_options;
  client_options.connect_timeout = 5s;
  client_options.header_timeout = 10s;
  client_options.body_timeout = 10s;
  client_options.queue_timeout = 10s;
  net::HttpClient client(client_options);
  Pump pump(client);
  const std::string router_url = (*router)->base_url();
  const std::string engine_url = (*engine)->base_url();

  const auto start = std::chrono::steady_clock::now();
  std::vector<int64_t> rss;  // After each batch, in KiB.
  for (int batch = 0; batch < kBatches; ++batch) {
    PostBatch(pump, router_url, engine_url, batch);
    pump.Wait();
    rss.push_back(chaos::ResidentKiB());
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(pump.failures(), 0) << pump.first_failure();

  const int64_t quarter = rss[kBatches / 4 - 1];
  const int64_t last = rss.back();
  std::string trace;
  for (int64_t kib : rss) trace += " " + std::to_string(kib / 1024);
  std::printf(
      "soak: %d requests in %.1f s (%.0f req/s); RSS MiB per 2,000:%s; "
      "first quarter %lld KiB, end %lld KiB, growth %lld KiB\n",
      kRequests, seconds, kRequests / seconds, trace.c_str(), static_cast<long long>(quarter),
      static_cast<long long>(last), static_cast<long long>(last - quarter));
  if (!chaos::kResidentSetIsTheProcesses) {
    std::printf("soak: ThreadSanitizer build, the resident-set bound is not checked\n");
  }
  for (int b = kBatches / 4; chaos::kResidentSetIsTheProcesses && b < kBatches; ++b) {
    EXPECT_LT(rss[static_cast<size_t>(b)] - quarter, kMaxGrowthKiB)
        << "after " << (b + 1) * (kRequests / kBatches) << " requests";
  }

  // The bounds themselves, and the counters an operator reads.
  EXPECT_EQ((*router)->received_requests(), 2048);
  EXPECT_EQ((*router)->received_requests_dropped(), kRequests - 2048);
  EXPECT_EQ((*engine)->recorded_requests(), 1024);
  EXPECT_GT((*engine)->recorded_requests_dropped(), 0);
  EXPECT_LE((*engine)->open_sessions(), 1024);
  EXPECT_GT((*engine)->open_sessions_evicted(), 0);
  const RuntimeSnapshot snapshot = (*engine)->runtime().Snapshot();
  EXPECT_LE(snapshot.sessions, 1024);
  EXPECT_GT(snapshot.sessions_evicted_total, 0);
  EXPECT_EQ(snapshot.gauges.num_running_reqs + snapshot.gauges.num_queue_reqs, 0);
  EXPECT_LE(snapshot.cache.open_sessions, 1024);
  (*router)->Shutdown(1s);
  (*engine)->Shutdown(1s);
}

}  // namespace
}  // namespace agentkv::service
