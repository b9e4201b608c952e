// Tests of the glossary: every row the arm table can show has a definition, the share rows say
// their reference, and the admission series name themselves.
#include "agentkv/report/replay_glossary.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "agentkv/sim/replay/replay_result.h"

namespace agentkv::report {
namespace {

using sim::ArmResult;
using sim::ReplayResult;
using ::testing::HasSubstr;

// Arms with every counter non-zero (so that every row shows) and a rollout.
ReplayResult EveryRow() {
  ReplayResult result;
  for (const char* name : {"baseline", "infinite-cache", "oracle"}) {
    ArmResult arm;
    arm.arm = name;
    int64_t n = 1;
    for (int64_t* field :
         {&arm.evicted_recompute_after_tool_call, &arm.evicted_recompute_after_subagent_wait,
          &arm.evicted_recompute_after_human_turn, &arm.evicted_recompute_first,
          &arm.demoted_blocks, &arm.restored_children, &arm.ttl_returned, &arm.ttl_declined_by_cost,
          &arm.ttl_unpinned_under_pressure, &arm.working_set_waited, &arm.working_set_aged,
          &arm.working_set_holds_returned, &arm.working_set_holds_expired,
          &arm.stall_offloaded_blocks, &arm.stall_prefetched_blocks, &arm.requests_refused,
          &arm.refused_prompt_tokens, &arm.uncached_tokens, &arm.evicted_recompute_tokens}) {
      *field = ++n * (arm.arm == "baseline" ? 3 : 1);
    }
    arm.server_time.mean_s = arm.arm == "baseline" ? 10 : 5;
    arm.admission_wait = {10, 1, 1, 1, 1, 1, 1};
    arm.agentic_kv = {{"agentic_kv/admission/admit", 3}};
    arm.rollout = sim::RolloutMetrics{.steps = 2, .compute_utilization = 0.5};
    result.arms.push_back(arm);
  }
  sim::FillIdealShares(result);
  return result;
}

TEST(RowDefinitionTest, EveryRowOfTheTableIsDefined) {
  const std::vector<ReplayTableRow> rows = ReplayTableRows(EveryRow(), NumberStyle::kCompact);
  ASSERT_GT(rows.size(), 70u);
  for (const ReplayTableRow& row : rows) {
    EXPECT_FALSE(RowDefinition(row).empty()) << row.section << " / " << row.label;
  }
}

TEST(RowDefinitionTest, DefinesTheRowsReadersAskAbout) {
  const auto define = [](const std::string& section, const std::string& label) {
    return RowDefinition(ReplayTableRow{section, label, "", MetricSense::kNeutral, {}});
  };
  EXPECT_THAT(define("engines", "drops"), HasSubstr("no colder copy"));
  EXPECT_THAT(define("engines", "onboards"), HasSubstr("host -> device"));
  EXPECT_THAT(define("lifecycle", "ttl pins"), HasSubstr("working-set holds"));
  EXPECT_THAT(define("share of oracle (baseline = 0%, oracle = 100%)", "uncached tokens"),
              HasSubstr("Reference: oracle."));
  EXPECT_THAT(define("share of ideal (baseline = 0%, infinite-cache = 100%)", "server time mean"),
              HasSubstr("Reference: infinite-cache."));
  EXPECT_THAT(define("admission", "admission/admit"), HasSubstr("agentic_kv/admission/admit"));
  EXPECT_EQ(define("engines", "no such row"), "");
}

}  // namespace
}  // namespace agentkv::report
