// Tests of the replay runner: the correctness gates of `agentkv replay`.
//   (a) one engine, baseline, Mooncake by timestamp with no compute limit == cache-curve;
//   (b) same seed -> byte-identical JSON; another seed -> different but similar;
//   (c) conservation in every arm (requests, leases, ledger, invariants);
//   (d) a golden KV event log of a tiny workload.
// Plus what each arm must change and what the runner must refuse.
#include "agentkv/sim/replay/replay.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "agentkv/base/bounds.h"
#include "agentkv/report/replay_report.h"
#include "agentkv/sim/replay/cache_curve.h"
#include "agentkv/sim/workload/mooncake_trace.h"
#include "agentkv/sim/workload/rollout_workload.h"
#include "agentkv/sim/workload/synthetic_agentic.h"
#include "tests/sim/arm_names.h"
#include "tests/sim/small_workload.h"

namespace agentkv::sim {
namespace {

using testing_support::Arms;

double Value(const ArmResult& arm, std::string_view series) {
  for (const auto& [name, value] : arm.agentic_kv) {
    if (name == series) return value;
  }
  return 0;
}

using testing_support::SmallWorkload;

// Two engines with little KV: the arms must differ.
ReplayOptions SmallFleet() {
  ReplayOptions options;
  options.num_engines = 2;
  options.engine.kv_pool.max_total_tokens = 8 * 1024;
  options.agentic.agentic_admission_max_wait_s = 5;
  return options;
}

// --- (a) cache-curve equivalence -------------------------------------------------------------

TEST(ReplayGateTest, OneEngineBaselineMooncakeEqualsCacheCurve) {
  const std::filesystem::path path =
      std::filesystem::path(AGENTKV_DATA_DIR) / "mooncake" / "conversation_trace.jsonl";
  StatusOr<std::vector<MooncakeRequest>> trace = ReadMooncakeTrace(path.string());
  ASSERT_TRUE(trace.ok()) << trace.status();
  ASSERT_TRUE(std::is_sorted(
      trace->begin(), trace->end(),
      [](const MooncakeRequest& a, const MooncakeRequest& b) { return a.timestamp < b.timestamp; }))
      << "the gate replays by timestamp and the curve in file order";
  CacheCurveOptions curve_options;
  curve_options.fractions = {0.10};
  StatusOr<std::vector<CacheCurvePoint>> curve = RunCacheCurve(*trace, curve_options);
  ASSERT_TRUE(curve.ok()) << curve.status();
  const CacheCurvePoint& point = curve->front();

  // Every request's hash ids are all looked up (one more prompt token than the blocks hold, so
  // the last one is never part of the match) and it produces one token: prefill and finish in
  // one step of 1 ns, one request at a time, no chunking. The engine gets one block more than
  // the curve: the in-flight partial block (the extra token) that the curve does not hold.
  std::vector<OpenLoopRequest> requests;
  for (const MooncakeRequest& r : *trace) {
    OpenLoopRequest request;
    request.arrival = r.timestamp;
    request.hash_ids = r.hash_ids;
    request.prompt_tokens = static_cast<int64_t>(r.hash_ids.size()) * 512 + 1;
    request.output_tokens = 1;
    requests.push_back(std::move(request));
  }
  ReplayOptions options;
  options.arms = Arms({"baseline"});
  options.num_engines = 1;
  options.engine.kv_pool.max_total_tokens = (point.capacity_blocks + 1) * 512;
  options.fixed_step_time = TimeNs(1);
  options.engine.scheduler.max_running_requests = 1;
  options.engine.scheduler.chunked_prefill_size = 0;
  options.engine.scheduler.max_prefill_tokens = int64_t{1} << 30;
  StatusOr<ArmRun> run = RunOpenLoopArm(requests, 512, options, *ParseArm("baseline"));
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->result.prompt_blocks, point.total_blocks);
  EXPECT_EQ(run->result.cached_device_blocks, point.hits);
  EXPECT_DOUBLE_EQ(run->result.block_hit_ratio_device, point.hit_ratio);
  EXPECT_EQ(run->result.requests_completed, static_cast<int64_t>(trace->size()));
}

// --- (b) determinism -------------------------------------------------------------------------

TEST(ReplayGateTest, SameSeedGivesByteIdenticalJsonAndAnotherSeedASimilarResult) {
  ReplayOptions options = SmallFleet();
  options.arms = Arms({"baseline", "all"});
  StatusOr<ReplayResult> first = RunReplay(SmallWorkload(1), "small", 1, options);
  StatusOr<ReplayResult> second = RunReplay(SmallWorkload(1), "small", 1, options);
  StatusOr<ReplayResult> other = RunReplay(SmallWorkload(2), "small", 2, options);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE(other.ok()) << other.status();
  const std::string json = report::ReplayResultJson(*first);
  EXPECT_EQ(json, report::ReplayResultJson(*second));
  EXPECT_NE(json, report::ReplayResultJson(*other));
  // Statistically similar: the same generator, so hit ratios and sizes stay in one range.
  for (size_t a = 0; a < first->arms.size(); ++a) {
    const ArmResult& x = first->arms[a];
    const ArmResult& y = other->arms[a];
    EXPECT_NEAR(x.token_hit_ratio_device + x.token_hit_ratio_host,
                y.token_hit_ratio_device + y.token_hit_ratio_host, 0.15)
        << x.arm;
    EXPECT_GT(y.requests_completed, x.requests_completed / 3) << x.arm;
    EXPECT_LT(y.requests_completed, x.requests_completed * 3) << x.arm;
  }
}

// --- (c) conservation -------------------------------------------------------------------------

TEST(ReplayGateTest, EveryArmConservesRequestsLeasesAndInvariants) {
  ReplayOptions options = SmallFleet();
  // Tight admission so that requests wait, age and are granted as leases return.
  options.agentic.agentic_admission_headroom = 0.3;
  options.agentic.agentic_admission_max_wait_s = 2;
  const AgenticWorkload workload = SmallWorkload(3);
  int64_t expected = 0;
  for (const WekaConversation& c : workload.conversations) expected += c.TotalRequests();
  int64_t total_prompt = -1;
  for (const std::string& name : DefaultArmNames()) {
    SCOPED_TRACE(name);
    StatusOr<ArmRun> run = RunAgenticArm(workload, options, *ParseArm(name));
    // RunAgenticArm returns Internal when a request is lost or completed twice, a lease or a
    // waiter is left, the ledger reserves tokens at the end, or any engine's invariants fail.
    ASSERT_TRUE(run.ok()) << run.status();
    const ArmResult& r = run->result;
    if (total_prompt < 0) total_prompt = r.prompt_tokens + r.refused_prompt_tokens;
    EXPECT_EQ(r.requests_issued, expected);
    EXPECT_EQ(r.requests_completed, expected);
    EXPECT_EQ(r.uncached_tokens, r.cold_tokens + r.evicted_recompute_tokens);
    EXPECT_EQ(r.prompt_tokens, r.cached_device_tokens + r.cached_host_tokens + r.uncached_tokens);
    // Requests over the tight ceiling are refused at once (never dispatched, counted as
    // refused); every other one is dispatched exactly once.
    const auto refused = static_cast<int64_t>(Value(r, "agentic_kv/admission/refused_oversized"));
    EXPECT_EQ(r.queueing_delay.count + refused, expected);
    EXPECT_EQ(r.requests_refused, refused);
    // Every arm offers the same prompts: served plus refused.
    EXPECT_EQ(r.prompt_tokens + r.refused_prompt_tokens, total_prompt) << "vs the first arm";
    EXPECT_EQ(r.session_time.count, static_cast<int64_t>(workload.conversations.size()));
    if (name == "+admission" || name == "all") {
      EXPECT_GT(Value(r, "agentic_kv/admission/wait"), 0);
      EXPECT_EQ(Value(r, "agentic_kv/budget/reserved"), 0);
      EXPECT_EQ(Value(r, "agentic_kv/budget/lease_count"), 0);
      EXPECT_EQ(Value(r, "agentic_kv/admission/waiting"), 0);
      EXPECT_GT(r.admission_wait.max_s, 0);
    } else if (ParseArm(name)->admission_v2) {
      // Conservation: nothing reserved, no lease, no waiter left.
      EXPECT_GT(Value(r, "agentic_kv/admission/admit"), 0);
      EXPECT_EQ(Value(r, "agentic_kv/budget/reserved"), 0);
      EXPECT_EQ(Value(r, "agentic_kv/budget/lease_count"), 0);
      EXPECT_EQ(Value(r, "agentic_kv/admission/waiting"), 0);
    } else {
      EXPECT_EQ(r.admission_wait.max_s, 0);
    }
  }
}

TEST(ReplayTest, StallOffloadArmRunsDeterministicallyAndConserves) {
  ReplayOptions options = SmallFleet();
  options.arms = Arms({"+host-tier", "+stall-offload+host-tier"});
  StatusOr<ReplayResult> first = RunReplay(SmallWorkload(5), "small", 5, options);
  StatusOr<ReplayResult> second = RunReplay(SmallWorkload(5), "small", 5, options);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(report::ReplayResultJson(*first), report::ReplayResultJson(*second));
  const ArmResult& host = first->arms[0];
  const ArmResult& stall = first->arms[1];
  EXPECT_EQ(host.stall_offloaded_blocks, 0);
  // The small fleet is under pressure and its human turns pause for about 30 s: sessions go
  // out and come back.
  EXPECT_GT(stall.stall_offloaded_sessions, 0);
  EXPECT_GT(stall.stall_offloaded_blocks, 0);
  EXPECT_GT(stall.stall_prefetched_blocks + stall.stall_returned_offloaded, 0);
  EXPECT_EQ(stall.requests_completed, host.requests_completed);
  EXPECT_EQ(stall.uncached_tokens, stall.cold_tokens + stall.evicted_recompute_tokens);
  EXPECT_EQ(stall.prompt_tokens,
            stall.cached_device_tokens + stall.cached_host_tokens + stall.uncached_tokens);
  // Both runs' engines passed their end-of-arm invariants (RunAgenticArm checks them).
}

TEST(ReplayTest, StallOffloadWithoutAHostTierIsRefused) {
  ReplayOptions options = SmallFleet();
  ArmSpec arm = *ParseArm("+stall-offload+host-tier");
  arm.host_tier = false;
  options.arms = {arm};
  EXPECT_THAT(RunReplay(SmallWorkload(1), "small", 1, options).status().message(),
              testing::HasSubstr("host tier"));
}

// Gap-aware retention: runs with and without the host tier, conserves everything
// (RunAgenticArm checks the engines' invariants and that nothing is held or reserved at the
// end), is byte-identical run to run, and changes the cache's choices.
TEST(ReplayTest, GapRetentionRunsDeterministicallyAndConserves) {
  ReplayOptions options = SmallFleet();
  options.arms = Arms({"baseline", "+gap-retention", "+gap-retention+host-tier"});
  StatusOr<ReplayResult> first = RunReplay(SmallWorkload(5), "small", 5, options);
  StatusOr<ReplayResult> second = RunReplay(SmallWorkload(5), "small", 5, options);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(report::ReplayResultJson(*first), report::ReplayResultJson(*second));
  ASSERT_EQ(first->arms.size(), 3u);
  const ArmResult& baseline = first->arms[0];
  for (size_t a = 1; a < 3; ++a) {
    const ArmResult& r = first->arms[a];
    EXPECT_EQ(r.requests_completed, baseline.requests_completed) << r.arm;
    EXPECT_EQ(r.uncached_tokens, r.cold_tokens + r.evicted_recompute_tokens) << r.arm;
    EXPECT_EQ(r.prompt_tokens, r.cached_device_tokens + r.cached_host_tokens + r.uncached_tokens)
        << r.arm;
  }
  EXPECT_NE(first->arms[1].device_evictions, baseline.device_evictions);
}

TEST(ReplayTest, ArmsChangeWhatTheyClaimTo) {
  StatusOr<ReplayResult> result = RunReplay(SmallWorkload(4), "small", 4, SmallFleet());
  ASSERT_TRUE(result.ok()) << result.status();
  std::map<std::string, const ArmResult*> arms;
  for (const ArmResult& a : result->arms) arms[a.arm] = &a;
  ASSERT_EQ(arms.size(), DefaultArmNames().size());
  const ArmResult& baseline = *arms["baseline"];
  // The workload is the same in every arm.
  for (const ArmResult& a : result->arms) {
    EXPECT_EQ(a.prompt_tokens, baseline.prompt_tokens) << a.arm;
    EXPECT_EQ(a.cold_tokens, baseline.cold_tokens) << a.arm;
  }
  EXPECT_GT(baseline.device_evictions, 0) << "the fleet must be KV-constrained";
  EXPECT_EQ(baseline.sessions_closed, 0);
  EXPECT_GT(arms["+lifecycle"]->sessions_closed, 0);
  EXPECT_GT(arms["+lifecycle"]->tokens_freed_by_close, 0);
  EXPECT_GT(arms["+host-tier"]->offloads, 0);
  EXPECT_GT(arms["+host-tier"]->cached_host_tokens, 0);
  EXPECT_EQ(baseline.offloads, 0);
  const ArmResult& continuum = *arms["continuum"];
  EXPECT_GT(continuum.ttl_pins, 0);
  // A pin expires first, its session comes back first, or memory pressure releases it first,
  // exactly one of them; the last pins may still be live when the arm ends only if their
  // expiry never ran, which the loop forbids.
  EXPECT_EQ(continuum.ttl_expired + continuum.ttl_returned + continuum.ttl_unpinned_under_pressure,
            continuum.ttl_pins);
  EXPECT_EQ(baseline.ttl_declined_by_cost + baseline.ttl_unpinned_under_pressure, 0);
  const ArmResult& ideal = *arms["infinite-cache"];
  EXPECT_EQ(ideal.device_evictions, 0);
  EXPECT_EQ(ideal.evicted_recompute_tokens, 0);
  for (const ArmResult& a : result->arms) {
    EXPECT_LE(a.token_hit_ratio_device + a.token_hit_ratio_host,
              ideal.token_hit_ratio_device + 1e-12)
        << a.arm << " beats the infinite cache";
  }
  EXPECT_GT(baseline.evicted_recompute_tokens, 0);
  EXPECT_LT(arms["+host-tier"]->evicted_recompute_tokens, baseline.evicted_recompute_tokens);
  EXPECT_FALSE(baseline.kv_usage.empty());
  for (size_t i = 1; i < baseline.kv_usage.size(); ++i) {
    EXPECT_GE(baseline.kv_usage[i].time - baseline.kv_usage[i - 1].time, TimeNs::Seconds(2));
  }
}

// Sub-agents are routed by their own session, so on two engines some run away from their
// parent. Delivered to every engine, the parent's return demotes every eligible child: as many
// as when every child runs on its parent's engine (routed by the parent's key), where the
// parent's own request reaches them all. Without delivery fewer are demoted. Every run
// conserves requests and leaves nothing held (RunAgenticArm checks).
TEST(ReplayTest, DeliveredDemotionReachesEveryEligibleChildAcrossEngines) {
  ReplayOptions options = SmallFleet();
  // No idle bound: every child not in flight when its parent returns is eligible, wherever
  // and whenever the demotion runs.
  options.finished_subagent_min_idle_steps = 0;
  const AgenticWorkload workload = SmallWorkload(4);
  const ArmSpec arm = *ParseArm("+subagent-demotion");
  auto demoted = [&](DemotionDelivery delivery, SubagentRouting routing) {
    ReplayOptions o = options;
    o.subagent_demotion_delivery = delivery;
    o.subagent_routing = routing;
    StatusOr<ArmRun> run = RunAgenticArm(workload, o, arm);
    EXPECT_TRUE(run.ok()) << run.status();
    return run.ok() ? run->result.demoted_children : -1;
  };
  const int64_t all_eligible = demoted(DemotionDelivery::kParentEngine, SubagentRouting::kParent);
  const int64_t local = demoted(DemotionDelivery::kParentEngine, SubagentRouting::kOwn);
  const int64_t delivered = demoted(DemotionDelivery::kEveryEngine, SubagentRouting::kOwn);
  EXPECT_GT(all_eligible, 0);
  EXPECT_LT(local, all_eligible) << "some children run on the other engine";
  EXPECT_EQ(delivered, all_eligible);
  EXPECT_EQ(demoted(DemotionDelivery::kEveryEngine, SubagentRouting::kParent), all_eligible);
}

TEST(ReplayTest, OffloadableDemotionKeepsDemotedBlocksOnTheHostTier) {
  ReplayOptions options = SmallFleet();
  const AgenticWorkload workload = SmallWorkload(4);
  const ArmSpec arm = *ParseArm("+subagent-demotion+host-tier");
  StatusOr<ArmRun> dropped = RunAgenticArm(workload, options, arm);
  options.finished_subagent_offloadable = true;
  StatusOr<ArmRun> kept = RunAgenticArm(workload, options, arm);
  ASSERT_TRUE(dropped.ok()) << dropped.status();
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_GT(kept->result.demoted_blocks, 0);
  EXPECT_LT(kept->result.drops, dropped->result.drops);
  EXPECT_EQ(kept->result.prompt_tokens, dropped->result.prompt_tokens);
}

// --- (d) golden event log ----------------------------------------------------------------------

WekaRequest GoldenRequest(double t, int64_t blocks, uint64_t first_id, int64_t out,
                          const char* stop) {
  WekaRequest r;
  r.t = TimeNs::Seconds(t);
  r.input_tokens = blocks * 16 + 5;
  r.output_tokens = out;
  for (int64_t i = 0; i < blocks; ++i) r.hash_ids.push_back(first_id + static_cast<uint64_t>(i));
  r.stop = stop;
  return r;
}

// Two conversations sharing nothing, one with a sub-agent, on one engine of 24 blocks of 16
// tokens: enough to evict.
AgenticWorkload GoldenWorkload() {
  WekaConversation a;
  a.id = "a";
  a.block_size = 16;
  a.requests = {GoldenRequest(0, 8, 0, 20, "tool_use"), GoldenRequest(2, 12, 0, 20, "tool_use"),
                GoldenRequest(9, 16, 0, 10, "end_turn")};
  WekaSubagent sub;
  sub.agent_id = "agent_001";
  sub.completion = TimeNs::Seconds(4);
  sub.duration = TimeNs::Seconds(1);
  sub.status = SubagentStatus::kCompleted;
  sub.requests = {GoldenRequest(0, 6, 100, 8, "tool_use"), GoldenRequest(1, 9, 100, 8, "end_turn")};
  a.subagents = {sub};
  WekaConversation b;
  b.id = "b";
  b.block_size = 16;
  b.requests = {GoldenRequest(0, 10, 0, 12, "tool_use"), GoldenRequest(4, 14, 0, 12, "end_turn")};
  AgenticWorkload workload;
  workload.conversations = {a, b};
  workload.starts = {TimeNs(0), TimeNs::Seconds(1)};
  return workload;
}

std::string FormatEvents(const std::string& arm, const std::vector<kv::KvEvent>& events) {
  std::ostringstream out;
  out << "# arm " << arm << ": " << events.size() << " events (step kind tier key)\n";
  for (const kv::KvEvent& e : events) {
    out << e.step.value() << ' ' << kv::KvEventKindName(e.kind) << ' '
        << (e.tier == kv::Tier::kDevice ? "device" : "host") << ' ' << std::hex << e.key.value()
        << std::dec << '\n';
  }
  return out.str();
}

TEST(ReplayGateTest, TinyWorkloadMatchesTheGoldenEventLog) {
  ReplayOptions options;
  options.num_engines = 1;
  options.engine.kv_pool.max_total_tokens = 24 * 16;
  options.keep_events = true;
  std::string text;
  for (const char* name : {"baseline", "all", "fixed-ttl", "continuum"}) {
    StatusOr<ArmRun> run = RunAgenticArm(GoldenWorkload(), options, *ParseArm(name));
    ASSERT_TRUE(run.ok()) << run.status();
    ASSERT_EQ(run->engine_events.size(), 1u);
    text += FormatEvents(name, run->engine_events[0]);
  }
  const std::filesystem::path golden =
      std::filesystem::path(AGENTKV_TESTDATA) / "replay_golden_events.txt";
  if (std::getenv("AGENTKV_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(golden) << text;
    GTEST_SKIP() << "rewrote " << golden;
  }
  std::ifstream in(golden);
  ASSERT_TRUE(in) << "missing " << golden << " (run with AGENTKV_UPDATE_GOLDEN=1)";
  std::stringstream expected;
  expected << in.rdbuf();
  EXPECT_EQ(text, expected.str()) << "the KV event log changed; if intended, rerun with "
                                     "AGENTKV_UPDATE_GOLDEN=1 and review the diff";
}

// --- Server time -------------------------------------------------------------------------------

WekaRequest TimedRequest(double t, uint64_t first_id, int64_t out) {
  WekaRequest r;
  r.t = TimeNs::Seconds(t);
  r.input_tokens = 2 * 16;
  r.output_tokens = out;
  r.hash_ids = {first_id, first_id + 1};
  r.stop = "tool_use";
  return r;
}

// Two sessions whose requests never overlap (seconds apart on one engine, each done within
// milliseconds): session A, three main-agent requests and a sub-agent of two; session B, two
// requests, starting 1,000 s later.
AgenticWorkload NonOverlappingWorkload() {
  WekaConversation a;
  a.id = "a";
  a.block_size = 16;
  a.requests = {TimedRequest(0, 0, 3), TimedRequest(100, 10, 5), TimedRequest(200, 20, 2)};
  WekaSubagent sub;
  sub.agent_id = "agent_001";
  sub.completion = TimeNs::Seconds(60);  // Spawned at 50 s.
  sub.duration = TimeNs::Seconds(10);
  sub.requests = {TimedRequest(0, 100, 4), TimedRequest(10, 110, 1)};
  a.subagents = {sub};
  WekaConversation b;
  b.id = "b";
  b.block_size = 16;
  b.requests = {TimedRequest(0, 0, 7), TimedRequest(30, 10, 6)};
  AgenticWorkload workload;
  workload.conversations = {a, b};
  workload.starts = {TimeNs(0), TimeNs::Seconds(1000)};
  return workload;
}

// Every step lasts exactly 1 ms: a request alone on an idle engine takes one step to prefill
// and emit its first token and one step per further token, out x 1 ms from arrival to finish.
ReplayOptions OneMillisecondSteps() {
  ReplayOptions options;
  options.num_engines = 1;
  options.engine.kv_pool.max_total_tokens = 64 * 16;
  options.fixed_step_time = TimeNs::Millis(1);
  return options;
}

TEST(ReplayServerTimeTest, ASessionsServerTimeIsTheSumOfItsAndItsSubAgentsRequestLatencies) {
  ReplayOptions options = OneMillisecondSteps();
  options.arms = Arms({"baseline", "+lifecycle+admission", "infinite-cache"});
  StatusOr<ReplayResult> result = RunReplay(NonOverlappingWorkload(), "timed", 1, options);
  ASSERT_TRUE(result.ok()) << result.status();
  for (const ArmResult& arm : result->arms) {
    SCOPED_TRACE(arm.arm);
    ASSERT_EQ(arm.requests_completed, 7);
    // A: main 3 + 5 + 2 ms, sub-agent 4 + 1 ms = 15 ms; B: 7 + 6 ms = 13 ms.
    EXPECT_EQ(arm.server_time.count, 2);
    EXPECT_NEAR(arm.server_time.mean_s, 0.014, 1e-12);
    EXPECT_NEAR(arm.server_time.p50_s, 0.013, 1e-12);
    EXPECT_NEAR(arm.server_time.max_s, 0.015, 1e-12);
    // Per request: 1 to 7 ms, 28 ms in all.
    EXPECT_EQ(arm.request_server_time.count, 7);
    EXPECT_NEAR(arm.request_server_time.mean_s, 0.004, 1e-12);
    EXPECT_NEAR(arm.request_server_time.p50_s, 0.004, 1e-12);
    EXPECT_NEAR(arm.request_server_time.max_s, 0.007, 1e-12);
    // Session time is mostly the recorded gaps: A lasts past its 200 s request.
    EXPECT_GT(arm.session_time.max_s, 200);
  }
  // Every arm is as fast and as warm as the infinite cache (no eviction, no queueing): there
  // is no gap to take a share of.
  for (const ArmResult& arm : result->arms) {
    EXPECT_EQ(arm.ideal_share.uncached_tokens, std::nullopt) << arm.arm;
    EXPECT_EQ(arm.ideal_share.evicted_recompute_tokens, std::nullopt) << arm.arm;
    EXPECT_EQ(arm.ideal_share.server_time_mean, std::nullopt) << arm.arm;
  }
  const boost::json::value json = boost::json::parse(report::ReplayResultJson(*result));
  const boost::json::object& baseline = json.at("arms").at(0).as_object();
  EXPECT_DOUBLE_EQ(baseline.at("server_time").at("max_s").as_double(), 0.015);
  EXPECT_TRUE(baseline.at("uncached_tokens_ideal_share").is_null());
}

TEST(ReplayServerTimeTest, AnOpenLoopRequestIsItsOwnSession) {
  std::vector<OpenLoopRequest> requests;
  for (const int64_t out : {3, 1, 6}) {
    OpenLoopRequest r;
    r.arrival = TimeNs::Seconds(10.0 * static_cast<double>(requests.size()));
    r.hash_ids = {static_cast<uint64_t>(out), static_cast<uint64_t>(out) + 1};
    r.prompt_tokens = 2 * 16;
    r.output_tokens = out;
    requests.push_back(r);
  }
  ReplayOptions options = OneMillisecondSteps();
  options.arms = Arms({"baseline"});
  StatusOr<ReplayResult> result = RunOpenLoopReplay(requests, 16, "open", 1, options);
  ASSERT_TRUE(result.ok()) << result.status();
  const ArmResult& arm = result->arms[0];
  EXPECT_EQ(arm.server_time.count, 3);
  EXPECT_NEAR(arm.server_time.mean_s, 0.010 / 3, 1e-12);
  EXPECT_NEAR(arm.server_time.max_s, 0.006, 1e-12);
  EXPECT_EQ(arm.server_time, arm.request_server_time);
  // Without client gaps the server time is the session time.
  EXPECT_EQ(arm.server_time, arm.session_time);
  // One arm: no reference arms, no shares.
  EXPECT_EQ(arm.ideal_share, IdealShares{});
}

// On a KV-constrained fleet the shares follow the arms' own values, with the two references
// at exactly 0 and 1.
TEST(ReplayServerTimeTest, SharesOfTheIdealComeFromTheArmsOfTheSameRun) {
  ReplayOptions options = SmallFleet();
  options.arms = Arms({"baseline", "+host-tier", "infinite-cache"});
  StatusOr<ReplayResult> result = RunReplay(SmallWorkload(4), "small", 4, options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->arms.size(), 3u);
  const ArmResult& baseline = result->arms[0];
  const ArmResult& host = result->arms[1];
  const ArmResult& ideal = result->arms[2];
  ASSERT_GT(baseline.evicted_recompute_tokens, 0) << "the fleet must be KV-constrained";
  EXPECT_EQ(baseline.ideal_share, (IdealShares{0.0, 0.0, 0.0}));
  EXPECT_EQ(ideal.ideal_share, (IdealShares{1.0, 1.0, 1.0}));
  ASSERT_TRUE(host.ideal_share.evicted_recompute_tokens.has_value());
  EXPECT_DOUBLE_EQ(
      *host.ideal_share.evicted_recompute_tokens,
      static_cast<double>(baseline.evicted_recompute_tokens - host.evicted_recompute_tokens) /
          static_cast<double>(baseline.evicted_recompute_tokens - ideal.evicted_recompute_tokens));
  EXPECT_GT(*host.ideal_share.evicted_recompute_tokens, 0);
  EXPECT_EQ(host.ideal_share, IdealSharesOf(*result)[1]);
  // The server time leaves the gaps out, so it is far below the session time.
  EXPECT_LT(baseline.server_time.mean_s, baseline.session_time.mean_s);
  EXPECT_EQ(baseline.server_time.count, baseline.session_time.count);
}

// --- Refusals ----------------------------------------------------------------------------------

TEST(ReplayTest, RejectsABadIdleBoundInSeconds) {
  ReplayOptions options = SmallFleet();
  for (const double bad : {-1.0, 1e6 + 1, std::numeric_limits<double>::quiet_NaN()}) {
    options.finished_subagent_min_idle_s = bad;
    const Status s = options.Validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("finished_subagent_min_idle_s"), std::string::npos) << s;
  }
  options.finished_subagent_min_idle_s = 3.0;
  EXPECT_TRUE(options.Validate().ok()) << options.Validate();
}

// The gateway's idle timeout in the replay: shorter than the workload's human pauses, it closes
// sessions mid-conversation (more closes, less KV reused); with every conversation retained the
// run is exactly the run without a timeout.
TEST(ReplayTest, AnIdleTimeoutClosesPausedSessionsUnlessTheWorkloadRetainsThem) {
  AgenticWorkload workload = SmallWorkload(2);
  ReplayOptions options = SmallFleet();
  options.arms = Arms({"+lifecycle"});
  StatusOr<ReplayResult> base = RunReplay(workload, "small", 2, options);
  ASSERT_TRUE(base.ok()) << base.status();
  options.session_idle_timeout_s = 5.0;  // The human pauses are about 30 s.
  StatusOr<ReplayResult> cut = RunReplay(workload, "small", 2, options);
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_GT(cut->arms[0].sessions_closed, base->arms[0].sessions_closed);
  EXPECT_LT(cut->arms[0].cached_device_tokens, base->arms[0].cached_device_tokens);
  EXPECT_EQ(cut->arms[0].requests_completed, base->arms[0].requests_completed);
  workload.retained.assign(workload.conversations.size(), true);
  StatusOr<ReplayResult> kept = RunReplay(workload, "small", 2, options);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->arms, base->arms);

  for (const double bad : {-1.0, 4e7, std::numeric_limits<double>::quiet_NaN()}) {
    options.session_idle_timeout_s = bad;
    const Status s = options.Validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("session_idle_timeout_s"), std::string::npos) << s;
  }
}

TEST(ReplayTest, RejectsBadOptionsNamingTheField) {
  const AgenticWorkload workload = SmallWorkload(1);
  auto error = [&](ReplayOptions options) {
    StatusOr<ReplayResult> r = RunReplay(workload, "small", 1, options);
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : r.status().message();
  };
  ReplayOptions options = SmallFleet();
  options.arms = Arms({"baseline", "baseline"});
  EXPECT_NE(error(options).find("twice"), std::string::npos);
  options = SmallFleet();
  options.num_engines = 0;
  EXPECT_NE(error(options).find("num_engines"), std::string::npos);
  options = SmallFleet();
  options.engine.kv_pool.hicache_ratio = -1;
  EXPECT_NE(error(options).find("hicache_ratio"), std::string::npos);
  options = SmallFleet();
  options.agentic.agentic_admission_headroom = 1.5;
  EXPECT_NE(error(options).find("--agentic-admission-headroom"), std::string::npos);
  options = SmallFleet();
  options.router = static_cast<routing::RouterPolicy>(9);
  EXPECT_NE(error(options).find("policy"), std::string::npos);
  options = SmallFleet();
  options.engine.tp = 3;
  EXPECT_NE(error(options).find("tp"), std::string::npos);
  options = SmallFleet();
  options.engine.kv_pool.hicache_ratio = 0;  // The +host-tier arms need a host tier.
  EXPECT_NE(error(options).find("hicache_ratio"), std::string::npos);
  options = SmallFleet();
  options.engine.kv_pool.hicache_tokens = 1024;  // The replay's host tier is the ratio.
  EXPECT_NE(error(options).find("hicache_tokens"), std::string::npos);
  // The oracle arm runs in the fleet too (fleet_oracle_test.cc).
  options = SmallFleet();
  options.arms = Arms({"baseline", "oracle"});
  EXPECT_TRUE(options.Validate().ok());
}

// Requests larger than an engine's whole KV pool are refused, by the engine (baseline) or by
// admission before they reach one (the admission arms), and complete at once: the run still
// conserves every request, and every arm counts the refused work the same way, in
// requests_refused and refused_prompt_tokens, never as uncached or cold tokens.
TEST(ReplayTest, RefusedWorkIsOneMetricWhoeverRefusedIt) {
  const AgenticWorkload workload = SmallWorkload(1);
  ReplayOptions options = SmallFleet();
  // Not infinite-cache: its engines hold more KV, so they refuse fewer requests.
  options.arms = Arms({"baseline", "+lifecycle+admission", "+admission-v2", "+host-tier"});
  options.engine.kv_pool.max_total_tokens = 1024;  // Smaller than the largest prompt.
  StatusOr<ReplayResult> result = RunReplay(workload, "small", 1, options);
  ASSERT_TRUE(result.ok()) << result.status();
  const ArmResult& baseline = result->arms[0];
  EXPECT_GT(baseline.requests_refused, 0);
  EXPECT_LT(baseline.requests_refused, baseline.requests_issued);
  EXPECT_GT(baseline.refused_prompt_tokens, 0);
  for (const ArmResult& arm : result->arms) {
    SCOPED_TRACE(arm.arm);
    EXPECT_EQ(arm.requests_completed, arm.requests_issued);
    EXPECT_EQ(arm.prompt_tokens,
              arm.cached_device_tokens + arm.cached_host_tokens + arm.uncached_tokens);
    EXPECT_EQ(arm.uncached_tokens, arm.cold_tokens + arm.evicted_recompute_tokens);
    // The same requests fit no engine in any arm, whoever turns them away.
    EXPECT_EQ(arm.requests_refused, baseline.requests_refused);
    EXPECT_EQ(arm.refused_prompt_tokens, baseline.refused_prompt_tokens);
    EXPECT_EQ(arm.prompt_tokens, baseline.prompt_tokens);
    // A refused request never waits in an engine's queue and has no first token.
    EXPECT_EQ(arm.ttft.count + arm.requests_refused, arm.requests_issued);
  }
  // The admission arm refused some of them itself, before any engine.
  EXPECT_GT(Value(result->arms[1], "agentic_kv/admission/refused_oversized"), 0);
}

// A request no engine of the fleet can hold, however absurd (2^40 tokens, int64's limit), is
// rejected by the engines in every arm, the infinite-cache arm included: that arm is sized for
// the requests one engine can hold, so it never tries to allocate a cache for such a request.
TEST(ReplayTest, ARequestNoEngineCanHoldIsRejectedInEveryArmWithoutAllocatingForIt) {
  AgenticWorkload workload = SmallWorkload(1);
  WekaRequest& big = workload.conversations[1].requests[2];
  big.input_tokens = int64_t{1} << 40;
  big.output_tokens = int64_t{1} << 40;
  ReplayOptions options = SmallFleet();
  options.arms = Arms({"baseline", "infinite-cache"});
  StatusOr<ReplayResult> r = RunReplay(workload, "small", 1, options);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const ArmResult& arm : r->arms) {
    EXPECT_EQ(arm.requests_refused, 1) << arm.arm;
    EXPECT_EQ(arm.refused_prompt_tokens, int64_t{1} << 40) << arm.arm;
    EXPECT_EQ(arm.requests_completed, arm.requests_issued) << arm.arm;
  }

  OpenLoopRequest open;
  open.prompt_tokens = kMaxTokens;
  open.output_tokens = kMaxTokens;
  StatusOr<ReplayResult> open_loop =
      RunOpenLoopReplay({OpenLoopRequest{}, open}, 512, "open", 1, options);
  ASSERT_TRUE(open_loop.ok()) << open_loop.status();
  for (const ArmResult& arm : open_loop->arms) EXPECT_EQ(arm.requests_refused, 1) << arm.arm;
  // Past the token bound the API refuses the request (its sums could overflow).
  open.prompt_tokens = std::numeric_limits<int64_t>::max();
  StatusOr<ReplayResult> past =
      RunOpenLoopReplay({OpenLoopRequest{}, open}, 512, "open", 1, options);
  ASSERT_FALSE(past.ok());
  EXPECT_THAT(past.status().message(),
              testing::HasSubstr("requests[1].prompt_tokens: 9223372036854775807 is out of range"));
}

// --- The RL rollout workload ---------------------------------------------------------------------

// A small synchronous rollout: 2 steps x 2 tasks x 3 samples of a few short turns.
RolloutWorkload SmallRollout() {
  RolloutWorkloadOptions options;
  options.prompts = 2;
  options.group_size = 3;
  options.steps = 2;
  options.system_prompt_tokens = 1000;
  options.task_prompt_tokens = LogNormal{500.0, 0.3};
  options.turns = LogNormal{4.0, 0.3};
  options.max_turns = 6;
  options.observation_tokens = LogNormal{300.0, 0.5};
  options.tool_s = LogNormal{2.0, 0.5};
  options.max_context_tokens = 6000;
  StatusOr<RolloutWorkload> rollout = GenerateRolloutWorkload(options);
  EXPECT_TRUE(rollout.ok()) << rollout.status();
  return *std::move(rollout);
}

TEST(ReplayTest, ARolloutCompletesWithConservationAndItsMetrics) {
  const RolloutWorkload rollout = SmallRollout();
  ReplayOptions options = SmallFleet();
  options.arms = Arms({"baseline", "+lifecycle", "+admission", "+admission-v2"});
  options.shared_prefix_ids = rollout.shared_prefix_ids;
  // RunReplay returns Internal when conservation fails in an arm.
  StatusOr<ReplayResult> result = RunReplay(rollout.workload, "rollout", 1, options);
  ASSERT_TRUE(result.ok()) << result.status();
  int64_t requests = 0;
  for (const WekaConversation& c : rollout.workload.conversations) requests += c.TotalRequests();
  for (const ArmResult& arm : result->arms) {
    SCOPED_TRACE(arm.arm);
    EXPECT_EQ(arm.requests_issued, requests);
    EXPECT_EQ(arm.requests_completed, requests);
    EXPECT_EQ(arm.sessions, 12);
    // Group members share their prompt's KV: something is cached from the first step on.
    EXPECT_GT(arm.cached_device_tokens, 0);
    ASSERT_TRUE(arm.rollout.has_value());
    const RolloutMetrics& m = *arm.rollout;
    EXPECT_EQ(m.steps, 2);
    EXPECT_EQ(m.trajectories, 12);
    EXPECT_GT(m.step_makespan_mean_s, 0);
    EXPECT_GE(m.step_makespan_max_s, m.step_makespan_mean_s);
    // Synchronous steps never overlap and follow each other at once: they tile the makespan.
    EXPECT_NEAR(2 * m.step_makespan_mean_s, arm.makespan_s, 1e-6);
    EXPECT_NEAR(m.trajectories_per_s, 12 / arm.makespan_s, 1e-9);
    EXPECT_DOUBLE_EQ(m.generated_tokens_per_s, arm.output_tokens_per_s);
    EXPECT_GT(m.gpu_busy_fraction, 0);
    EXPECT_LE(m.gpu_busy_fraction, 1);
    EXPECT_GT(m.compute_utilization, 0);
    EXPECT_LE(m.compute_utilization, m.gpu_busy_fraction);
    EXPECT_GE(m.kv_token_usage_peak, m.kv_token_usage_mean);
    EXPECT_GE(m.kv_occupancy_mean, m.kv_token_usage_mean);
    EXPECT_GE(m.kv_occupancy_peak, m.kv_occupancy_mean);
    EXPECT_LE(m.kv_occupancy_peak, 1.0);
    EXPECT_GE(static_cast<double>(m.waiting_requests_peak), m.waiting_requests_mean);
  }
  const std::string json = report::ReplayResultJson(*result);
  EXPECT_THAT(json, testing::HasSubstr("\"rollout\": {"));
  EXPECT_THAT(json, testing::HasSubstr("\"rollout_step_makespan_mean_s\""));
  EXPECT_THAT(report::FormatReplayTable(*result), testing::HasSubstr("\nrollout\n  steps"));
  // Same inputs, same bytes.
  StatusOr<ReplayResult> again = RunReplay(rollout.workload, "rollout", 1, options);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(report::ReplayResultJson(*again), json);
}

TEST(ReplayTest, ARolloutGroupSharesItsPromptKvOnlyThroughTheSharedPrefixIds) {
  const RolloutWorkload rollout = SmallRollout();
  ReplayOptions options = SmallFleet();
  options.arms = Arms({"baseline"});
  options.shared_prefix_ids = rollout.shared_prefix_ids;
  StatusOr<ReplayResult> shared = RunReplay(rollout.workload, "rollout", 1, options);
  options.shared_prefix_ids = 0;
  StatusOr<ReplayResult> private_ids = RunReplay(rollout.workload, "rollout", 1, options);
  ASSERT_TRUE(shared.ok() && private_ids.ok());
  // Each trajectory's first prompt is cached only when its group (or the run) computed it.
  EXPECT_GT(shared->arms[0].cached_device_tokens, private_ids->arms[0].cached_device_tokens);
}

TEST(ReplayTest, OnlyAWorkloadWithStepsHasRolloutMetrics) {
  ReplayOptions options = SmallFleet();
  options.arms = Arms({"baseline"});
  StatusOr<ReplayResult> result = RunReplay(SmallWorkload(1), "small", 1, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->arms[0].rollout.has_value());
  EXPECT_THAT(report::ReplayResultJson(*result), testing::Not(testing::HasSubstr("rollout")));
  EXPECT_THAT(report::FormatReplayTable(*result),
              testing::Not(testing::HasSubstr("makespan mean")));
}

}  // namespace
}  // namespace agentkv::sim
