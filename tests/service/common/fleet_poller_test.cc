#include "agentkv/service/common/fleet_poller.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace agentkv::service {
namespace {

TEST(SnapshotFromScrapeTest, TpReplicatedGaugesAggregateByMaxNotSum) {
  const std::string text =
      "# HELP sglang:max_total_num_tokens x\n"
      "# TYPE sglang:max_total_num_tokens gauge\n"
      "sglang:max_total_num_tokens{tp_rank=\"0\"} 262144\n"
      "sglang:max_total_num_tokens{tp_rank=\"1\"} 262144\n"
      "sglang:num_used_tokens{tp_rank=\"0\"} 239901\n"
      "sglang:num_used_tokens{tp_rank=\"1\"} 239901\n"
      "sglang:token_usage{tp_rank=\"0\"} 0.915\n"
      "sglang:token_usage{tp_rank=\"1\"} 0.915\n";
  const control::EngineSnapshot snapshot =
      SnapshotFromScrape("http://e:1", net::ClientResponse{200, {}, text});
  EXPECT_EQ(snapshot.engine_id, "http://e:1");
  EXPECT_TRUE(snapshot.healthy);
  EXPECT_EQ(snapshot.max_total_num_tokens, 262144);
  EXPECT_EQ(snapshot.num_used_tokens, 239901);
  EXPECT_DOUBLE_EQ(snapshot.token_usage, 0.915);
}

TEST(SnapshotFromScrapeTest, UsageFallsBackToUsedOverCapacity) {
  const control::EngineSnapshot snapshot = SnapshotFromScrape(
      "http://e:1", net::ClientResponse{
                        200, {}, "sglang:max_total_num_tokens 1000\nsglang:num_used_tokens 250\n"});
  EXPECT_DOUBLE_EQ(snapshot.token_usage, 0.25);
}

TEST(SnapshotFromScrapeTest, AFailedScrapeMarksOnlyThatEngineUnhealthy) {
  for (const StatusOr<net::ClientResponse>& scrape :
       {StatusOr<net::ClientResponse>(UnavailableError("refused")),
        StatusOr<net::ClientResponse>(net::ClientResponse{503, {}, ""}),
        StatusOr<net::ClientResponse>(net::ClientResponse{200, {}, "bad line {"})}) {
    const control::EngineSnapshot snapshot = SnapshotFromScrape("http://e:1", scrape);
    EXPECT_FALSE(snapshot.healthy);
    EXPECT_EQ(snapshot.engine_id, "http://e:1");
    EXPECT_EQ(snapshot.max_total_num_tokens, 0);
  }
}

TEST(FleetPollerTest, StartsPollsAndStopsWithAFixedEngineList) {
  // No engine answers (port 9 on loopback is closed): each poll yields one unhealthy snapshot.
  EngineDirectory directory("", {"http://127.0.0.1:9"}, nullptr);
  net::HttpClientOptions client_options;
  client_options.connect_timeout = std::chrono::milliseconds(500);
  net::HttpClient client(client_options);
  std::mutex mu;
  std::vector<std::vector<control::EngineSnapshot>> polls;
  FleetPollerOptions options;
  options.interval = std::chrono::milliseconds(20);
  FleetPoller poller(
      options, &directory, &client,
      [&](std::vector<control::EngineSnapshot> snapshots) {
        std::lock_guard<std::mutex> lock(mu);
        polls.push_back(std::move(snapshots));
      },
      [](LogLevel, std::string_view) {});
  poller.Start();
  for (int i = 0; i < 200 && poller.polls() < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  poller.Stop();
  poller.Stop();  // Idempotent.
  const int64_t after_stop = poller.polls();
  EXPECT_GE(after_stop, 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  EXPECT_EQ(poller.polls(), after_stop);
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_FALSE(polls.empty());
  ASSERT_EQ(polls[0].size(), 1u);
  EXPECT_FALSE(polls[0][0].healthy);
}

}  // namespace
}  // namespace agentkv::service
