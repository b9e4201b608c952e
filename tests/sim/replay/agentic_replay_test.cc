// Tests of the agentic replay (a view of the instant single cache): a hand-computed scenario of
// two conversations and one sub-agent through every arm, the aliases against their canonical
// spellings, the idle bound, determinism, input errors, and the lru arm against an independent
// reference on random traces. The merged timeline is tested in instant_sources_test.cc.
//
// The reference shares no code with production (no KvCacheManager, no BlockKeyHasher, no
// BuildAgenticSchedule): it merges the requests by sorting (time, conversation, sub-agent,
// request) itself; a block is a chain id assigned on first sight of (conversation, parent
// chain id, hash id); residency is an LRU std::list of chain ids, least recently used at the
// front. Per request: count the leading resident blocks (hits), hold them, evict from the
// front while resident + new blocks exceed the capacity, insert the new blocks, then put all
// the request's blocks at the back deepest first, so a parent is always more recent than its
// children.
#include "agentkv/sim/replay/agentic_replay.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <list>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "agentkv/base/rng.h"
#include "agentkv/sim/workload/weka_trace.h"
#include "tests/sim/arm_names.h"
#include "tests/sim/weka_builders.h"

namespace agentkv::sim {
namespace {

using testing_support::Arms;

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kBlockTokens = 64;
// Every hand-made request has this many tokens after its last full block (the partial block
// WEKA leaves out of hash_ids), so uncached tokens = sum(in) - 64 * hits.
constexpr int64_t kPartialTokens = 10;

WekaRequest Request(double t_s, std::vector<uint64_t> ids) {
  WekaRequest r;
  r.t = TimeNs(static_cast<int64_t>(t_s * 1e9));
  r.input_tokens = static_cast<int64_t>(ids.size()) * kBlockTokens + kPartialTokens;
  r.output_tokens = 1;
  r.hash_ids = std::move(ids);
  return r;
}

using testing_support::Conversation;
using testing_support::Subagent;

// ---- The hand scenario --------------------------------------------------------------------

// Conversation 0 (main agent a, starts at 0 s): a0 at 0 s uses blocks [1 2]; its sub-agent c,
// spawned at 2 s, runs once at 2 s on [11 12 13] (disjoint from the parent's); a1 at 5 s uses
// [1 2 3 4 5]. Conversation 1 (b, starts at the 1 s stagger): b0 at 1 s on [21 22 23], b1 at
// 7 s on [21 22 23 24]. The device holds 8 blocks; 17 blocks are looked up in all.
//
// lru: after c the device is full, LRU first [a2 a1 b23 b22 b21 c13 c12 c11] last. a1 hits
// [1 2] and evicts b23 b22 b21 for its 3 new blocks; b1 then misses everything and evicts
// c13 c12 c11 a5. Hits 2, evictions 7.
// demote_p1: when a1 arrives, c has been idle 3 s = 120 steps >= 32, so its 3 blocks get
// priority 1 and go first: a1 evicts c13 c12 c11, b1 then hits [21 22 23] and evicts a5 for
// its one new block. Hits 5, evictions 4.
// session_release: closing c's session after its only request frees its 3 blocks, so a1
// finds room; closing a after a1 frees a's 5 blocks; b1 hits 3 and b's close frees 4.
std::vector<WekaConversation> HandScenario() {
  return {
      Conversation("a.json", {Request(0, {1, 2}), Request(5, {1, 2, 3, 4, 5})},
                   {Subagent("agent_001", 2, {Request(0, {11, 12, 13})})}),
      Conversation("b.json", {Request(0, {21, 22, 23}), Request(6, {21, 22, 23, 24})}),
  };
}

AgenticReplayOptions HandOptions() {
  AgenticReplayOptions options;
  options.capacity_blocks = 8;
  options.stagger = TimeNs::Seconds(1);
  return options;
}

constexpr int64_t kHandLookupBlocks = 2 + 3 + 3 + 5 + 4;
constexpr int64_t kHandPromptTokens = kHandLookupBlocks * kBlockTokens + 5 * kPartialTokens;

const AgenticArmResult& Arm(const AgenticReplayResult& r, std::string_view arm) {
  for (const AgenticArmResult& a : r.arms) {
    if (a.arm == arm) return a;
  }
  ADD_FAILURE() << "no arm " << arm;
  return r.arms.front();
}

int64_t Hits(const AgenticArmResult& a) {
  return a.stats.matched_device_blocks + a.stats.matched_host_blocks;
}

TEST(AgenticReplayTest, HandScenarioHeader) {
  AgenticReplayOptions options = HandOptions();
  options.capacity_blocks.reset();
  options.capacity_fraction = 0.7;  // floor(0.7 * 12 unique blocks) = 8.
  options.arms = Arms({"lru"});
  StatusOr<AgenticReplayResult> r = RunAgenticReplay(HandScenario(), options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->conversations, 2);
  EXPECT_EQ(r->subagents, 1);
  EXPECT_EQ(r->requests, 5);
  EXPECT_EQ(r->unique_blocks, 5 + 3 + 4);
  EXPECT_EQ(r->tokens_per_block, 64);
  EXPECT_EQ(r->device_blocks, 8);
  EXPECT_EQ(r->host_blocks, 0);
  EXPECT_EQ(r->span, TimeNs::Seconds(7));
  EXPECT_EQ(r->steps, 7000 / 25);
  ASSERT_EQ(r->arms.size(), 1u);
  EXPECT_EQ(r->arms[0].stats.lookup_blocks, kHandLookupBlocks);
  EXPECT_EQ(Hits(r->arms[0]), 2);
}

TEST(AgenticReplayTest, HandScenarioLruIsExact) {
  AgenticReplayOptions options = HandOptions();
  options.arms = Arms({"lru", "per_conversation"});
  StatusOr<AgenticReplayResult> r = RunAgenticReplay(HandScenario(), options);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const AgenticArmResult& a : r->arms) {
    SCOPED_TRACE(a.arm);
    EXPECT_EQ(a.stats.lookups, 5);
    EXPECT_EQ(a.stats.lookup_blocks, kHandLookupBlocks);
    EXPECT_EQ(Hits(a), 2);
    EXPECT_DOUBLE_EQ(a.hit_ratio, 2.0 / kHandLookupBlocks);
    EXPECT_EQ(a.stats.uncached_tokens, kHandPromptTokens - 2 * kBlockTokens);
    EXPECT_EQ(a.stats.device_evictions, 7);
    EXPECT_EQ(a.stats.demoted_blocks, 0);
    EXPECT_EQ(a.stats.tokens_freed_by_close, 0);
    EXPECT_EQ(a.stats.closed_sessions, 0);
    // Every session stays open: 2 main agents and 1 sub-agent.
    EXPECT_EQ(a.stats.open_sessions, 3);
    EXPECT_EQ(a.uncached_change_vs_baseline_percent, 0.0);
  }
}

TEST(AgenticReplayTest, HandScenarioDemotionEvictsTheFinishedSubagentFirst) {
  AgenticReplayOptions options = HandOptions();
  StatusOr<AgenticReplayResult> r = RunAgenticReplay(HandScenario(), options);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->arms.size(), AgenticCurveArmNames().size());
  const AgenticArmResult& lru = Arm(*r, "lru");
  for (const std::string_view arm : {"demote_p1", "demote_p20"}) {
    SCOPED_TRACE(arm);
    const AgenticArmResult& demote = Arm(*r, arm);
    EXPECT_EQ(demote.stats.demoted_children, 1);
    EXPECT_EQ(demote.stats.demoted_blocks, 3);
    EXPECT_EQ(demote.stats.restored_children, 0);
    EXPECT_EQ(Hits(demote), 5);
    EXPECT_EQ(demote.stats.uncached_tokens, kHandPromptTokens - 5 * kBlockTokens);
    EXPECT_LE(demote.stats.uncached_tokens, lru.stats.uncached_tokens);
    EXPECT_EQ(demote.stats.device_evictions, 4);
    ASSERT_TRUE(demote.uncached_change_vs_baseline_percent.has_value());
    EXPECT_DOUBLE_EQ(
        *demote.uncached_change_vs_baseline_percent,
        100.0 * (-3.0 * kBlockTokens) / static_cast<double>(kHandPromptTokens - 2 * kBlockTokens));
  }
}

TEST(AgenticReplayTest, HandScenarioSessionReleaseFreesEachConversationAtItsEnd) {
  StatusOr<AgenticReplayResult> r = RunAgenticReplay(HandScenario(), HandOptions());
  ASSERT_TRUE(r.ok()) << r.status();
  const AgenticArmResult& release = Arm(*r, "session_release");
  EXPECT_EQ(release.stats.closed_sessions, 3);
  EXPECT_EQ(release.stats.open_sessions, 0);
  EXPECT_EQ(release.stats.tokens_freed_by_close, (3 + 5 + 4) * kBlockTokens);
  EXPECT_EQ(Hits(release), 5);
  EXPECT_EQ(release.stats.device_evictions, 0);
  EXPECT_EQ(release.stats.demoted_children, 0);

  // The close already freed the sub-agent's blocks, so the demotion finds none to demote.
  const AgenticArmResult& both = Arm(*r, "demote_p1+release");
  EXPECT_EQ(both.stats.closed_sessions, 3);
  EXPECT_EQ(both.stats.tokens_freed_by_close, (3 + 5 + 4) * kBlockTokens);
  EXPECT_EQ(both.stats.demoted_children, 1);
  EXPECT_EQ(both.stats.demoted_blocks, 0);
  EXPECT_EQ(Hits(both), 5);
}

TEST(AgenticReplayTest, IdleBoundInStepsGatesDemotion) {
  // At 100 ms per step the sub-agent has been idle 30 steps (2 s -> 5 s) when its parent
  // returns: below the bound of 32, so nothing is demoted and demote_p1 plays out as lru.
  AgenticReplayOptions options = HandOptions();
  options.step_interval = TimeNs::Millis(100);
  options.arms = Arms({"lru", "demote_p1"});
  StatusOr<AgenticReplayResult> slow = RunAgenticReplay(HandScenario(), options);
  ASSERT_TRUE(slow.ok()) << slow.status();
  EXPECT_EQ(slow->steps, 70);
  EXPECT_EQ(Arm(*slow, "demote_p1").stats.demoted_children, 0);
  EXPECT_EQ(Hits(Arm(*slow, "demote_p1")), 2);

  options.min_idle_steps = 30;  // Exactly the idle time: now eligible.
  StatusOr<AgenticReplayResult> eligible = RunAgenticReplay(HandScenario(), options);
  ASSERT_TRUE(eligible.ok()) << eligible.status();
  EXPECT_EQ(Arm(*eligible, "demote_p1").stats.demoted_blocks, 3);
  EXPECT_EQ(Hits(Arm(*eligible, "demote_p1")), 5);
}

TEST(AgenticReplayTest, ProgressReportsEachArmInOrder) {
  AgenticReplayOptions options = HandOptions();
  options.arms = Arms({"demote_p20", "lru"});
  std::vector<std::pair<size_t, std::string>> seen;
  options.on_arm_done = [&](size_t index, const AgenticArmResult& result) {
    seen.emplace_back(index, result.arm);
    EXPECT_FALSE(result.uncached_change_vs_baseline_percent.has_value());
  };
  StatusOr<AgenticReplayResult> r = RunAgenticReplay(HandScenario(), options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(seen, ElementsAre(std::pair<size_t, std::string>{0, "demote_p20"},
                                std::pair<size_t, std::string>{1, "lru"}));
  // The change against lru is filled in for arms that ran before lru too.
  ASSERT_TRUE(r->arms[0].uncached_change_vs_baseline_percent.has_value());
  EXPECT_LT(*r->arms[0].uncached_change_vs_baseline_percent, 0.0);

  options.arms = Arms({"demote_p20"});
  options.on_arm_done = nullptr;
  StatusOr<AgenticReplayResult> without_lru = RunAgenticReplay(HandScenario(), options);
  ASSERT_TRUE(without_lru.ok()) << without_lru.status();
  EXPECT_FALSE(without_lru->arms[0].uncached_change_vs_baseline_percent.has_value());
}

TEST(AgenticReplayTest, AliasesReplayLikeTheirCanonicalSpellings) {
  AgenticReplayOptions canonical = HandOptions();
  canonical.arms = Arms({"baseline", "+per-conversation", "+subagent-demotion=1",
                         "+subagent-demotion=20", "+lifecycle", "+subagent-demotion=1+lifecycle"});
  StatusOr<AgenticReplayResult> by_alias = RunAgenticReplay(HandScenario(), HandOptions());
  StatusOr<AgenticReplayResult> by_grammar = RunAgenticReplay(HandScenario(), canonical);
  ASSERT_TRUE(by_alias.ok()) << by_alias.status();
  ASSERT_TRUE(by_grammar.ok()) << by_grammar.status();
  ASSERT_EQ(by_alias->arms.size(), by_grammar->arms.size());
  for (size_t i = 0; i < by_alias->arms.size(); ++i) {
    SCOPED_TRACE(by_alias->arms[i].arm);
    EXPECT_EQ(by_grammar->arms[i].arm, canonical.arms[i].name);
    EXPECT_EQ(by_alias->arms[i].stats, by_grammar->arms[i].stats);
    EXPECT_EQ(by_alias->arms[i].uncached_change_vs_baseline_percent,
              by_grammar->arms[i].uncached_change_vs_baseline_percent);
  }
}

TEST(AgenticReplayTest, ArmsComposeBeyondTheAliases) {
  // Demotion at priority 20 with session release: what demote_p1+release does, at 20.
  AgenticReplayOptions options = HandOptions();
  options.arms = Arms({"demote_p1+release", "+subagent-demotion=20+lifecycle"});
  StatusOr<AgenticReplayResult> r = RunAgenticReplay(HandScenario(), options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->arms[1].stats.closed_sessions, 3);
  EXPECT_EQ(r->arms[1].stats.demoted_children, 1);
  EXPECT_EQ(r->arms[0].stats, r->arms[1].stats);
  // Without a plain baseline arm, there is no change column.
  EXPECT_FALSE(r->arms[0].uncached_change_vs_baseline_percent.has_value());
}

// ---- Errors -------------------------------------------------------------------------------

Status ReplayError(const std::vector<WekaConversation>& conversations,
                   const AgenticReplayOptions& options) {
  StatusOr<AgenticReplayResult> r = RunAgenticReplay(conversations, options);
  EXPECT_FALSE(r.ok());
  return r.ok() ? Status() : r.status();
}

TEST(AgenticReplayTest, InvalidOptionsNameTheOption) {
  const auto error = [](auto mutate) {
    AgenticReplayOptions options = HandOptions();
    mutate(options);
    const Status s = ReplayError(HandScenario(), options);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    return s.message();
  };
  EXPECT_EQ(error([](AgenticReplayOptions& o) {
              o.capacity_blocks.reset();
              o.capacity_fraction = 0;
            }),
            "capacity_fractions[0] must be in (0, 1], got 0");
  EXPECT_THAT(error([](AgenticReplayOptions& o) { o.capacity_blocks = 0; }),
              HasSubstr("capacity_blocks must be in [1, "));
  EXPECT_THAT(error([](AgenticReplayOptions& o) { o.host_blocks = -1; }),
              HasSubstr("host_blocks must be in [0, "));
  EXPECT_THAT(error([](AgenticReplayOptions& o) { o.stagger = TimeNs(-1); }),
              HasSubstr("stagger must be in [0, 1e6] s"));
  EXPECT_THAT(error([](AgenticReplayOptions& o) { o.step_interval = TimeNs(0); }),
              HasSubstr("step_interval must be in"));
  EXPECT_THAT(error([](AgenticReplayOptions& o) { o.max_num_turns = 0; }),
              HasSubstr("max_num_turns must be in [1, "));
  EXPECT_THAT(error([](AgenticReplayOptions& o) { o.min_idle_steps = -1; }),
              HasSubstr("min_idle_steps must be in"));
  EXPECT_EQ(error([](AgenticReplayOptions& o) { o.arms.clear(); }), "arms must not be empty");
  EXPECT_EQ(error([](AgenticReplayOptions& o) {
              o.arms = Arms({"lru", "demote_p1", "lru"});
            }),
            "arm \"lru\" is named twice");
  EXPECT_THAT(error([](AgenticReplayOptions& o) {
                o.arms = Arms({"lru", "+admission"});
              }),
              HasSubstr("arm \"+admission\": admission needs the simulated fleet"));
}

TEST(AgenticReplayTest, InputsThatCannotShareOneCacheAreErrors) {
  EXPECT_EQ(ReplayError({}, HandOptions()).message(), "no conversations to replay");

  std::vector<WekaConversation> mixed = HandScenario();
  mixed[1].block_size = 32;
  EXPECT_EQ(ReplayError(mixed, HandOptions()).message(),
            "all traces of one replay need the same block_size: a.json has 64, b.json has 32");

  AgenticReplayOptions small = HandOptions();
  small.capacity_blocks = 4;
  const Status s = ReplayError(HandScenario(), small);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "the device capacity of 4 blocks is below the longest request (a.json request 1: "
            "5 blocks); raise the capacity");

  AgenticReplayOptions tiny_steps = HandOptions();
  tiny_steps.step_interval = TimeNs(1000);
  tiny_steps.stagger = TimeNs::Seconds(1e6);
  EXPECT_THAT(ReplayError(HandScenario(), tiny_steps).message(), HasSubstr("steps are supported"));
}

// ---- Determinism and the public traces ----------------------------------------------------

TEST(AgenticReplayTest, TwoRunsAreIdentical) {
  const std::vector<WekaConversation> conversations = HandScenario();
  StatusOr<AgenticReplayResult> a = RunAgenticReplay(conversations, HandOptions());
  StatusOr<AgenticReplayResult> b = RunAgenticReplay(conversations, HandOptions());
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->arms.size(), b->arms.size());
  for (size_t i = 0; i < a->arms.size(); ++i) {
    EXPECT_EQ(a->arms[i].stats, b->arms[i].stats) << a->arms[i].arm;
  }
}

TEST(AgenticReplayTest, PublicSubagentTracesReplayDeterministically) {
  const std::filesystem::path dir = std::filesystem::path(AGENTKV_DATA_DIR) / "weka";
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << "data folder " << dir << " is absent";
  StatusOr<std::vector<WekaConversation>> conversations = ReadWekaTraces(
      {(dir / "trace_0277.json.gz").string(), (dir / "trace_0291.json.gz").string()});
  ASSERT_TRUE(conversations.ok()) << conversations.status();
  const AgenticReplayOptions options;
  StatusOr<AgenticReplayResult> a = RunAgenticReplay(*conversations, options);
  StatusOr<AgenticReplayResult> b = RunAgenticReplay(*conversations, options);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  // trace_0277: 9 main requests and 4 sub-agents (44 requests); trace_0291: 20 main requests
  // and 2 sub-agents (12 requests).
  EXPECT_EQ(a->conversations, 2);
  EXPECT_EQ(a->subagents, 6);
  EXPECT_EQ(a->requests, 9 + 44 + 20 + 12);
  for (size_t i = 0; i < a->arms.size(); ++i) {
    const AgenticArmResult& arm = a->arms[i];
    SCOPED_TRACE(arm.arm);
    EXPECT_EQ(arm.stats, b->arms[i].stats);
    EXPECT_EQ(arm.stats.lookups, a->requests);
    EXPECT_GT(arm.hit_ratio, 0.5);
  }
}

// ---- The lru arm against the reference ----------------------------------------------------

struct ReferenceResult {
  int64_t lookup_blocks = 0;
  int64_t hits = 0;
  int64_t uncached_tokens = 0;
  int64_t evictions = 0;
  int64_t unique_blocks = 0;
};

// See the file comment. Capacity must be at least the longest request.
ReferenceResult ReferenceLru(const std::vector<WekaConversation>& conversations, TimeNs stagger,
                             int64_t capacity) {
  // (time, conversation, sub-agent or -1, request) -> the request.
  std::map<std::tuple<int64_t, int32_t, int32_t, int32_t>, const WekaRequest*> timeline;
  for (size_t k = 0; k < conversations.size(); ++k) {
    const int64_t start = static_cast<int64_t>(k) * stagger.ns();
    const WekaConversation& c = conversations[k];
    for (size_t r = 0; r < c.requests.size(); ++r) {
      timeline[{start + c.requests[r].t.ns(), static_cast<int32_t>(k), -1,
                static_cast<int32_t>(r)}] = &c.requests[r];
    }
    for (size_t j = 0; j < c.subagents.size(); ++j) {
      const WekaSubagent& s = c.subagents[j];
      for (size_t r = 0; r < s.requests.size(); ++r) {
        timeline[{start + s.spawn().ns() + s.requests[r].t.ns(), static_cast<int32_t>(k),
                  static_cast<int32_t>(j), static_cast<int32_t>(r)}] = &s.requests[r];
      }
    }
  }
  std::map<std::tuple<int32_t, int64_t, uint64_t>, int64_t> chain_ids;
  std::vector<int64_t> parent_of;
  std::list<int64_t> lru;  // Unheld resident blocks, least recently used first.
  std::map<int64_t, std::list<int64_t>::iterator> resident;
  ReferenceResult result;
  for (const auto& [key, request] : timeline) {
    const int32_t conversation = std::get<1>(key);
    std::vector<int64_t> chain;
    int64_t parent = -1;
    for (const uint64_t h : request->hash_ids) {
      auto [it, inserted] =
          chain_ids.try_emplace({conversation, parent, h}, static_cast<int64_t>(parent_of.size()));
      if (inserted) parent_of.push_back(parent);
      parent = it->second;
      chain.push_back(parent);
    }
    const auto n = static_cast<int64_t>(chain.size());
    int64_t hits = 0;
    while (hits < n && resident.contains(chain[static_cast<size_t>(hits)])) ++hits;
    for (int64_t i = 0; i < hits; ++i) lru.erase(resident[chain[static_cast<size_t>(i)]]);
    while (static_cast<int64_t>(resident.size()) + (n - hits) > capacity) {
      const int64_t victim = lru.front();
      lru.pop_front();
      resident.erase(victim);
      ++result.evictions;
      for (const auto& [block, unused] : resident) {
        EXPECT_NE(parent_of[static_cast<size_t>(block)], victim) << "evicted a parent";
      }
    }
    for (int64_t i = hits; i < n; ++i) resident[chain[static_cast<size_t>(i)]] = lru.end();
    for (int64_t i = n; i-- > 0;) {
      const int64_t b = chain[static_cast<size_t>(i)];
      resident[b] = lru.insert(lru.end(), b);
    }
    result.lookup_blocks += n;
    result.hits += hits;
    result.uncached_tokens += std::max<int64_t>(0, request->input_tokens - hits * kBlockTokens);
  }
  result.unique_blocks = static_cast<int64_t>(parent_of.size());
  return result;
}

// Random conversations shaped like the WEKA ones: a main agent whose context mostly grows and
// sometimes restarts from a shorter prefix, and sub-agents on ids disjoint from the parent's
// whose siblings share their first blocks.
std::vector<WekaConversation> RandomConversations(Rng& rng) {
  std::vector<WekaConversation> conversations;
  const int64_t count = rng.Uniform(1, 4);
  for (int64_t k = 0; k < count; ++k) {
    WekaConversation c;
    c.source = "random_" + std::to_string(k);
    uint64_t next_id = 1;
    std::vector<uint64_t> context;
    int64_t t_ms = 0;
    const int64_t requests = rng.Uniform(1, 8);
    for (int64_t r = 0; r < requests; ++r) {
      if (!context.empty() && rng.Uniform(0, 4) == 0) {
        context.resize(static_cast<size_t>(rng.Uniform(0, static_cast<int64_t>(context.size()))));
      }
      for (int64_t add = rng.Uniform(0, 4); add > 0; --add) context.push_back(next_id++);
      WekaRequest request;
      request.t = TimeNs::Millis(t_ms);
      request.hash_ids = context;
      request.input_tokens =
          static_cast<int64_t>(context.size()) * kBlockTokens + rng.Uniform(0, kBlockTokens - 1);
      c.requests.push_back(std::move(request));
      t_ms += rng.Uniform(0, 3000);
    }
    const std::vector<uint64_t> sibling_prefix = {100'000, 100'001, 100'002};
    uint64_t next_sub_id = 200'000;
    for (int64_t j = rng.Uniform(0, 2); j > 0; --j) {
      WekaSubagent s;
      s.agent_id = "agent_" + std::to_string(j);
      s.completion = TimeNs::Millis(rng.Uniform(0, t_ms));
      std::vector<uint64_t> sub_context = sibling_prefix;
      int64_t sub_t_ms = 0;
      for (int64_t r = rng.Uniform(1, 5); r > 0; --r) {
        for (int64_t add = rng.Uniform(0, 3); add > 0; --add) sub_context.push_back(next_sub_id++);
        WekaRequest request;
        request.t = TimeNs::Millis(sub_t_ms);
        request.hash_ids = sub_context;
        request.input_tokens = static_cast<int64_t>(sub_context.size()) * kBlockTokens + 1;
        s.requests.push_back(std::move(request));
        sub_t_ms += rng.Uniform(0, 2000);
      }
      c.subagents.push_back(std::move(s));
    }
    conversations.push_back(std::move(c));
  }
  return conversations;
}

TEST(AgenticReplayTest, LruArmMatchesTheReferenceOnRandomTraces) {
  constexpr uint64_t kSeed = 20251130;
  Rng rng(kSeed);
  for (int iteration = 0; iteration < 200; ++iteration) {
    SCOPED_TRACE("seed " + std::to_string(kSeed) + ", iteration " + std::to_string(iteration));
    const std::vector<WekaConversation> conversations = RandomConversations(rng);
    const TimeNs stagger = TimeNs::Millis(rng.Uniform(0, 5000));
    int64_t longest = 1;
    for (const WekaConversation& c : conversations) {
      for (const WekaRequest& r : c.requests) {
        longest = std::max(longest, static_cast<int64_t>(r.hash_ids.size()));
      }
      for (const WekaSubagent& s : c.subagents) {
        for (const WekaRequest& r : s.requests) {
          longest = std::max(longest, static_cast<int64_t>(r.hash_ids.size()));
        }
      }
    }
    const int64_t capacity = longest + rng.Uniform(0, 12);
    const ReferenceResult expected = ReferenceLru(conversations, stagger, capacity);

    AgenticReplayOptions options;
    options.capacity_blocks = capacity;
    options.stagger = stagger;
    options.arms = Arms({"lru"});
    StatusOr<AgenticReplayResult> r = RunAgenticReplay(conversations, options);
    ASSERT_TRUE(r.ok()) << r.status();
    const kv::KvCacheStats& s = r->arms[0].stats;
    EXPECT_EQ(r->unique_blocks, expected.unique_blocks);
    EXPECT_EQ(s.lookup_blocks, expected.lookup_blocks);
    EXPECT_EQ(s.matched_device_blocks, expected.hits);
    EXPECT_EQ(s.uncached_tokens, expected.uncached_tokens);
    EXPECT_EQ(s.device_evictions, expected.evictions);
    if (HasFailure()) break;
  }
}

// The oracle is the bound of every policy the instant single cache runs: on random traces with
// main agents, sub-agents and sessions, it never computes more than any agentic-curve arm, and
// never less than the infinite cache.
TEST(AgenticReplayTest, OracleIsNeverWorseThanAnyArmOnRandomTraces) {
  constexpr uint64_t kSeed = 20261201;
  Rng rng(kSeed);
  std::vector<std::string> names = AgenticCurveArmNames();
  names.push_back("+subagent-demotion=20+lifecycle");
  names.push_back("infinite-cache");
  names.push_back("oracle");
  std::vector<ArmSpec> arms;
  for (const std::string& name : names) arms.push_back(*ParseArm(name));
  int64_t below_lru = 0;
  for (int iteration = 0; iteration < 200; ++iteration) {
    SCOPED_TRACE("seed " + std::to_string(kSeed) + ", iteration " + std::to_string(iteration));
    const std::vector<WekaConversation> conversations = RandomConversations(rng);
    int64_t longest = 1;
    for (const WekaConversation& c : conversations) {
      for (const WekaRequest& r : c.requests) {
        longest = std::max(longest, static_cast<int64_t>(r.hash_ids.size()));
      }
      for (const WekaSubagent& s : c.subagents) {
        for (const WekaRequest& r : s.requests) {
          longest = std::max(longest, static_cast<int64_t>(r.hash_ids.size()));
        }
      }
    }
    AgenticReplayOptions options;
    options.capacity_blocks = longest + rng.Uniform(0, 12);
    options.stagger = TimeNs::Millis(rng.Uniform(0, 5000));
    options.step_interval = TimeNs::Millis(rng.Uniform(1, 50));
    options.min_idle_steps = rng.Uniform(0, 40);
    options.arms = arms;
    StatusOr<AgenticReplayResult> r = RunAgenticReplay(conversations, options);
    ASSERT_TRUE(r.ok()) << r.status();
    const int64_t oracle = r->arms.back().stats.uncached_tokens;
    ASSERT_EQ(r->arms.back().arm, "oracle");
    for (const AgenticArmResult& arm : r->arms) {
      if (arm.spec.infinite_cache) {
        EXPECT_LE(arm.stats.uncached_tokens, oracle);
      } else {
        EXPECT_LE(oracle, arm.stats.uncached_tokens) << arm.arm;
      }
    }
    if (oracle < r->arms.front().stats.uncached_tokens) ++below_lru;
    if (HasFailure()) break;
  }
  EXPECT_GT(below_lru, 10);
}

}  // namespace
}  // namespace agentkv::sim
