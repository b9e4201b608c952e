#include "agentkv/protocol/workers.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "protocol_test_support.h"

namespace agentkv::protocol {
namespace {

using testing_support::ExpectInputError;
using testing_support::ForEachMalformedVariant;
using testing_support::ReadTestdata;

using Urls = std::vector<std::string>;

std::vector<WorkerInfo> MustParse(std::string_view body) {
  StatusOr<std::vector<WorkerInfo>> workers = ParseWorkers(body);
  EXPECT_TRUE(workers.ok()) << workers.status();
  return workers.ok() ? *std::move(workers) : std::vector<WorkerInfo>{};
}

WorkerInfo Worker(std::string url, bool healthy, std::string type = "regular") {
  WorkerInfo worker;
  worker.url = std::move(url);
  worker.is_healthy = healthy;
  worker.worker_type = std::move(type);
  return worker;
}

TEST(WorkersTest, InlineShapeIsExactlyTheReference) {
  WorkerInfo w = Worker("http://10.0.0.1:30000", true);
  w.load = 3;
  EXPECT_EQ(SerializeWorkers({w}, WorkersShape::kInline),
            R"({"workers":[{"url":"http://10.0.0.1:30000","model_id":"unknown",)"
            R"("worker_type":"regular","is_healthy":true,"load":3,"connection_mode":"Http",)"
            R"("priority":50,"cost":1.0}],"total":1,"stats":{"prefill_count":0,)"
            R"("decode_count":0,"regular_count":1}})");
}

TEST(WorkersTest, WorkerListShapeHasIdsAndAggregateStats) {
  WorkerInfo a = Worker("http://a:1@0", true);
  a.id = "w-a";
  a.model_id = "m1";
  a.load = 2;
  WorkerInfo b = Worker("http://b:1", false, "prefill");
  b.id = "w-b";
  b.model_id = "m2";
  b.load = 5;
  b.cost = 0.5;
  EXPECT_EQ(SerializeWorkers({a, b}, WorkersShape::kWorkerList),
            R"({"workers":[{"id":"w-a","url":"http://a:1@0","model_id":"m1","priority":50,)"
            R"("cost":1.0,"worker_type":"regular","is_healthy":true,"load":2,)"
            R"("connection_mode":"Http"},{"id":"w-b","url":"http://b:1","model_id":"m2",)"
            R"("priority":50,"cost":0.5,"worker_type":"prefill","is_healthy":false,"load":5,)"
            R"("connection_mode":"Http"}],"total":2,"stats":{"total_workers":2,)"
            R"("healthy_workers":1,"total_models":2,"total_load":7,)"
            R"("by_type":{"regular":1,"prefill":1,"decode":0}}})");
}

TEST(WorkersTest, BothShapesRoundTrip) {
  WorkerInfo prefill = Worker("http://p:1", true, "prefill");
  prefill.bootstrap_port = 8998;
  const std::vector<WorkerInfo> inline_workers = {Worker("http://a:1", true), prefill,
                                                  Worker("http://b:1@3", false, "decode")};
  EXPECT_EQ(MustParse(SerializeWorkers(inline_workers, WorkersShape::kInline)), inline_workers);
  std::vector<WorkerInfo> listed = inline_workers;
  for (WorkerInfo& w : listed) {
    w.id = "id-" + w.url;
    w.bootstrap_port.reset();  // Not part of WorkerListResponse.
  }
  EXPECT_EQ(MustParse(SerializeWorkers(listed, WorkersShape::kWorkerList)), listed);
}

TEST(WorkersTest, ParsesTheInlineFixture) {
  const std::vector<WorkerInfo> workers = MustParse(ReadTestdata("workers_inline.json"));
  ASSERT_EQ(workers.size(), 3u);
  EXPECT_EQ(workers[0].load, 3);
  EXPECT_FALSE(workers[1].is_healthy);
  EXPECT_EQ(workers[2].worker_type, "prefill");
  EXPECT_EQ(workers[2].bootstrap_port, 8998);
  EXPECT_EQ(EngineBaseUrls(workers), (Urls{"http://10.0.0.1:30000", "http://10.0.0.3:30000"}));
}

// url@rank entries collapse onto their engine; the unhealthy engine and the empty url are
// dropped; order is first-seen.
TEST(WorkersTest, EngineBaseUrlsStripRanksDedupeAndKeepOrder) {
  const std::vector<WorkerInfo> workers = MustParse(ReadTestdata("workers_list.json"));
  ASSERT_EQ(workers.size(), 6u);
  EXPECT_EQ(workers[0].id, "w-0");
  EXPECT_EQ(workers[0].model_id, "Qwen/Qwen3-8B");
  EXPECT_EQ(workers[4].url, "");
  EXPECT_EQ(EngineBaseUrls(workers), (Urls{"http://10.0.0.1:30000", "http://10.0.0.3:30000"}));
}

TEST(WorkersTest, ListWorkersFallback) {
  StatusOr<Urls> urls = ParseListWorkers(ReadTestdata("list_workers.json"));
  ASSERT_TRUE(urls.ok()) << urls.status();
  EXPECT_EQ(urls->size(), 4u);
  EXPECT_EQ(EngineBaseUrls(*urls), (Urls{"http://10.0.0.1:30000", "http://10.0.0.2:30000"}));
  EXPECT_EQ(SerializeListWorkers({"http://a:1", "http://b:2@0"}),
            R"({"urls":["http://a:1","http://b:2@0"]})");
  EXPECT_EQ(*ParseListWorkers(SerializeListWorkers({"x"})), Urls{"x"});
  EXPECT_EQ(ParseListWorkers(R"({"urls": [1]})").status(),
            InvalidArgumentError("urls[0]: expected a string"));
  EXPECT_EQ(ParseListWorkers("{}").status(), InvalidArgumentError("urls: required"));
}

TEST(WorkersTest, StripRankSuffixOnlyRemovesTrailingDigits) {
  EXPECT_EQ(StripRankSuffix("http://h:30000@3"), "http://h:30000");
  EXPECT_EQ(StripRankSuffix("http://h:30000@12"), "http://h:30000");
  EXPECT_EQ(StripRankSuffix("http://h:30000"), "http://h:30000");
  EXPECT_EQ(StripRankSuffix("http://h:30000@"), "http://h:30000@");
  EXPECT_EQ(StripRankSuffix("http://h:30000@x1"), "http://h:30000@x1");
  EXPECT_EQ(StripRankSuffix("http://user@h:30000"), "http://user@h:30000");
  EXPECT_EQ(StripRankSuffix("http://user@h:30000@0"), "http://user@h:30000");
  EXPECT_EQ(StripRankSuffix("@0"), "");
  EXPECT_EQ(EngineBaseUrls(Urls{"@0", "", "a@1", "a"}), Urls{"a"});
}

TEST(WorkersTest, OtherFieldsOfTheWrongTypeKeepDefaults) {
  const std::vector<WorkerInfo> workers = MustParse(
      R"({"workers": [{"url": "http://a:1", "worker_type": {"Prefill": {"bootstrap_port": 1}},
          "load": "high", "priority": null, "cost": "1", "model_id": 3}]})");
  ASSERT_EQ(workers.size(), 1u);
  EXPECT_EQ(workers[0], Worker("http://a:1", true));
  EXPECT_EQ(ParseWorkers(R"({"workers": [{"url": 1}]})").status(),
            InvalidArgumentError("workers[0].url: expected a string"));
  EXPECT_EQ(ParseWorkers(R"({"workers": [{"url": "a", "is_healthy": "yes"}]})").status(),
            InvalidArgumentError("workers[0].is_healthy: expected a boolean"));
  EXPECT_EQ(ParseWorkers(R"({"workers": [1]})").status(),
            InvalidArgumentError("workers[0]: expected an object"));
  EXPECT_EQ(ParseWorkers(R"({"workers": {}})").status(),
            InvalidArgumentError("workers: expected a list"));
  EXPECT_EQ(ParseWorkers(R"([])").status(),
            InvalidArgumentError("workers: expected a JSON object"));
}

TEST(WorkersTest, FlushCacheIs200OnSuccessAnd206OnPartialFailure) {
  RouterFlushCacheResult ok{.successful = {"http://a:1", "http://b:1"},
                            .failed = {},
                            .total_http_workers = 2,
                            .total_workers = 2,
                            .message = ""};
  EXPECT_EQ(RouterFlushCacheStatus(ok), 200);
  EXPECT_EQ(SerializeRouterFlushCache(ok),
            R"({"status":"success","message":"Successfully flushed cache on all 2 HTTP workers",)"
            R"("workers_flushed":2,"total_http_workers":2,"total_workers":2})");
  RouterFlushCacheResult partial = ok;
  partial.successful = {"http://a:1"};
  partial.failed = {{.worker = "http://b:1", .error = "HTTP 500 Internal Server Error"}};
  EXPECT_EQ(RouterFlushCacheStatus(partial), 206);
  EXPECT_EQ(SerializeRouterFlushCache(partial),
            R"({"status":"partial_success","message":"Cache flush completed: 1 succeeded, 1 )"
            R"x(failed (out of 2 HTTP workers)","workers_flushed":1,"total_http_workers":2,)x"
            R"("total_workers":2,"successful":["http://a:1"],"failed":[{"worker":"http://b:1",)"
            R"("error":"HTTP 500 Internal Server Error"}]})");
  StatusOr<RouterFlushCacheResult> parsed =
      ParseRouterFlushCache(SerializeRouterFlushCache(partial));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->failed, partial.failed);
  EXPECT_EQ(parsed->successful, partial.successful);
  EXPECT_EQ(parsed->total_http_workers, 2);
}

TEST(WorkersTest, LoadsShape) {
  const std::vector<WorkerLoad> loads = {{.worker = "http://a:1", .load = 12},
                                         {.worker = "http://b:1", .load = -1}};
  EXPECT_EQ(SerializeLoads(loads),
            R"({"workers":[{"worker":"http://a:1","load":12},{"worker":"http://b:1","load":-1}]})");
  EXPECT_EQ(*ParseLoads(SerializeLoads(loads)), loads);
}

TEST(WorkersTest, MalformedBodiesNeverCrash) {
  for (const std::string_view name :
       {"workers_inline.json", "workers_list.json", "list_workers.json"}) {
    ForEachMalformedVariant(ReadTestdata(name), 23, [](const std::string& body) {
      const StatusOr<std::vector<WorkerInfo>> workers = ParseWorkers(body);
      ExpectInputError(workers.status());
      if (workers.ok()) {
        const std::vector<std::string> urls = EngineBaseUrls(*workers);
        for (size_t i = 0; i < urls.size(); ++i) {
          EXPECT_FALSE(urls[i].empty());
          for (size_t j = 0; j < i; ++j) EXPECT_NE(urls[i], urls[j]);
        }
      }
      const StatusOr<std::vector<std::string>> urls = ParseListWorkers(body);
      ExpectInputError(urls.status());
      ExpectInputError(ParseRouterFlushCache(body).status());
      ExpectInputError(ParseLoads(body).status());
    });
  }
}

}  // namespace
}  // namespace agentkv::protocol
