// Tests of the replay arm grammar: the default arms' flags, feature combinations, the
// agentic-curve aliases, demotion priorities, the errors (with the valid spellings in the
// message), the per-arm descriptions and the cache policy of an arm.
#include "agentkv/sim/replay/replay_arms.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace agentkv::sim {
namespace {

// The flags of an arm, for table-driven comparisons (the name is checked separately).
struct Flags {
  bool lifecycle = false;
  bool admission = false;
  bool demotion = false;
  bool host_tier = false;
  bool fixed_ttl = false;
  bool continuum = false;
  bool infinite_cache = false;
  bool oracle = false;
  bool admission_v2 = false;
  bool gap_retention = false;
  bool stall_offload = false;
  bool working_set = false;
  bool program_fcfs = false;
};

ArmSpec SpecOf(std::string_view name, const Flags& f) {
  ArmSpec spec;
  spec.name = std::string(name);
  spec.session_lifecycle = f.lifecycle;
  spec.program_admission = f.admission;
  spec.subagent_demotion = f.demotion;
  spec.host_tier = f.host_tier;
  spec.fixed_ttl = f.fixed_ttl;
  spec.continuum = f.continuum;
  spec.infinite_cache = f.infinite_cache;
  spec.oracle = f.oracle;
  spec.admission_v2 = f.admission_v2;
  spec.gap_retention = f.gap_retention;
  spec.stall_offload = f.stall_offload;
  spec.working_set = f.working_set;
  spec.program_fcfs = f.program_fcfs;
  return spec;
}

struct ArmCase {
  std::string_view name;
  Flags flags;
};

ArmSpec ParseOrDie(std::string_view name) {
  StatusOr<ArmSpec> arm = ParseArm(name);
  EXPECT_TRUE(arm.ok()) << name << ": " << arm.status();
  return arm.ok() ? *arm : ArmSpec{};
}

std::string ErrorOf(std::string_view name) {
  StatusOr<ArmSpec> arm = ParseArm(name);
  EXPECT_FALSE(arm.ok()) << "arm \"" << name << "\" should not parse";
  if (arm.ok()) return "";
  EXPECT_EQ(arm.status().code(), StatusCode::kInvalidArgument) << arm.status();
  return arm.status().message();
}

TEST(ReplayArmsTest, DefaultArmsParseToTheirDocumentedFlags) {
  const std::vector<ArmCase> cases = {
      {"baseline", {}},
      {"+lifecycle", {.lifecycle = true}},
      {"+admission", {.admission = true}},
      {"+admission-v2", {.admission_v2 = true}},
      {"+subagent-demotion", {.demotion = true}},
      {"+gap-retention", {.gap_retention = true}},
      {"+working-set", {.working_set = true}},
      {"+program-fcfs", {.program_fcfs = true}},
      {"+host-tier", {.host_tier = true}},
      {"+stall-offload+host-tier", {.host_tier = true, .stall_offload = true}},
      {"all", {.lifecycle = true, .admission = true, .demotion = true, .host_tier = true}},
      // The recommended sets (scripts/choose_arms.py): the host tier's set has no working set.
      {"agentkv", {.lifecycle = true, .admission_v2 = true, .working_set = true}},
      {"agentkv+host-tier", {.lifecycle = true, .host_tier = true, .admission_v2 = true}},
      {"continuum", {.continuum = true}},
      {"oracle", {.oracle = true}},
      {"infinite-cache", {.infinite_cache = true}},
  };
  std::vector<std::string> names;
  std::vector<ArmSpec> specs;
  for (const ArmCase& c : cases) {
    names.emplace_back(c.name);
    specs.push_back(SpecOf(c.name, c.flags));
    EXPECT_EQ(ParseOrDie(c.name), specs.back()) << c.name;
  }
  EXPECT_EQ(DefaultArmNames(), names) << "the defaults, in the documented order";
  EXPECT_EQ(DefaultArms(), specs) << "the typed defaults are the names parsed";
  EXPECT_EQ(BaselineArm(), ParseOrDie("baseline"));
  EXPECT_EQ(AgentkvArm(), ParseOrDie("agentkv"));
}

TEST(ReplayArmsTest, FeaturesCombineOverABase) {
  const std::vector<ArmCase> cases = {
      {"+lifecycle+host-tier", {.lifecycle = true, .host_tier = true}},
      {"baseline+admission", {.admission = true}},
      {"baseline+lifecycle+admission+subagent-demotion+host-tier+continuum",
       {.lifecycle = true,
        .admission = true,
        .demotion = true,
        .host_tier = true,
        .continuum = true}},
      {"all+fixed-ttl",
       {.lifecycle = true,
        .admission = true,
        .demotion = true,
        .host_tier = true,
        .fixed_ttl = true}},
      {"fixed-ttl+lifecycle", {.lifecycle = true, .fixed_ttl = true}},
      {"continuum+lifecycle", {.lifecycle = true, .continuum = true}},
      {"infinite-cache+admission", {.admission = true, .infinite_cache = true}},
      {"+fixed-ttl", {.fixed_ttl = true}},
      {"+continuum", {.continuum = true}},
  };
  for (const ArmCase& c : cases) EXPECT_EQ(ParseOrDie(c.name), SpecOf(c.name, c.flags)) << c.name;
}

TEST(ReplayArmsTest, TheNameIsKeptAsGiven) {
  EXPECT_EQ(ParseOrDie("+host-tier+lifecycle").name, "+host-tier+lifecycle");
  // Order of features does not change the flags.
  ArmSpec a = ParseOrDie("+host-tier+lifecycle");
  ArmSpec b = ParseOrDie("+lifecycle+host-tier");
  b.name = a.name;
  EXPECT_EQ(a, b);
}

TEST(ReplayArmsTest, EmptyNameIsAnError) { EXPECT_NE(ErrorOf(""), ""); }

TEST(ReplayArmsTest, UnknownBaseNamesItAndTheValidBases) {
  const std::string message = ErrorOf("baseline2");
  EXPECT_NE(message.find("\"baseline2\""), std::string::npos) << message;
  for (std::string_view valid :
       {"baseline", "all", "fixed-ttl", "continuum", "infinite-cache", "oracle"}) {
    EXPECT_NE(message.find(valid), std::string::npos) << valid << " missing in: " << message;
  }
  // Case matters and there is no trimming.
  ErrorOf("Baseline");
  ErrorOf(" all");
  ErrorOf("lifecycle");  // A feature without its '+' is not a base.
}

TEST(ReplayArmsTest, UnknownFeatureNamesItAndTheValidFeatures) {
  const std::string message = ErrorOf("+lifecycel");
  EXPECT_NE(message.find("arm \"+lifecycel\""), std::string::npos) << message;
  EXPECT_NE(message.find("unknown feature \"lifecycel\""), std::string::npos) << message;
  EXPECT_NE(message.find("lifecycle, admission, subagent-demotion[=P], per-conversation, "
                         "host-tier, fixed-ttl, continuum"),
            std::string::npos)
      << message;
  // Bases that are not features, and empty features.
  EXPECT_NE(ErrorOf("+infinite-cache").find("\"infinite-cache\""), std::string::npos);
  EXPECT_NE(ErrorOf("baseline+all").find("\"all\""), std::string::npos);
  ErrorOf("+");
  ErrorOf("baseline+");
  ErrorOf("+lifecycle+");
  ErrorOf("+lifecycle++host-tier");
}

// The former fixed-TTL name is refused, as a base or a feature, naming both replacements.
TEST(ReplayArmsTest, TheRetiredContinuumTtlNameNamesItsReplacements) {
  for (std::string_view name : {"continuum-ttl", "all+continuum-ttl", "+continuum-ttl"}) {
    const std::string message = ErrorOf(name);
    EXPECT_NE(message.find("renamed"), std::string::npos) << name << ": " << message;
    EXPECT_NE(message.find("\"fixed-ttl\""), std::string::npos) << message;
    EXPECT_NE(message.find("\"continuum\""), std::string::npos) << message;
  }
}

TEST(ReplayArmsTest, AdmissionV2IsItsOwnFeatureExclusiveWithTheSeedsAdmission) {
  const ArmSpec v2 = ParseOrDie("+admission-v2");
  EXPECT_TRUE(v2.admission_v2);
  EXPECT_FALSE(v2.program_admission);
  EXPECT_FALSE(v2.IsBaseline());
  EXPECT_NE(v2.Description().find("admission v2"), std::string::npos);
  EXPECT_TRUE(ParseOrDie("+admission-v2+host-tier").host_tier);
  EXPECT_NE(ErrorOf("+admission+admission-v2").find("exclusive"), std::string::npos);
  ArmSpec both = v2;
  both.program_admission = true;
  EXPECT_NE(ValidateArms({both}).message().find("exclusive"), std::string::npos);
}

TEST(ReplayArmsTest, FixedTtlAndContinuumAreExclusive) {
  EXPECT_NE(ErrorOf("continuum+fixed-ttl").find("exclusive"), std::string::npos);
  EXPECT_NE(ErrorOf("+fixed-ttl+continuum").find("exclusive"), std::string::npos);
  ArmSpec both = ParseOrDie("continuum");
  both.fixed_ttl = true;
  EXPECT_NE(ValidateArms({both}).message().find("exclusive"), std::string::npos);
}

TEST(ReplayArmsTest, OracleIsABaseWithoutFeatures) {
  const ArmSpec oracle = ParseOrDie("oracle");
  EXPECT_TRUE(oracle.oracle);
  EXPECT_FALSE(oracle.IsBaseline());
  ArmSpec plain;
  plain.name = "oracle";
  plain.oracle = true;
  EXPECT_EQ(oracle, plain);
  EXPECT_THAT(oracle.Description(), ::testing::HasSubstr("Belady"));
  for (std::string_view name : {"oracle+lifecycle", "oracle+host-tier", "oracle+continuum"}) {
    EXPECT_THAT(ErrorOf(name), ::testing::HasSubstr("oracle (offline-optimal eviction) takes no "
                                                    "features"))
        << name;
  }
  EXPECT_THAT(ErrorOf("+oracle"), ::testing::HasSubstr("unknown feature \"oracle\""));
  ArmSpec mixed = ParseOrDie("+lifecycle");
  mixed.oracle = true;
  EXPECT_THAT(ValidateArms({mixed}).message(), ::testing::HasSubstr("takes no features"));
  EXPECT_TRUE(ValidateArms({oracle, ParseOrDie("lru")}).ok());
}

TEST(ReplayArmsTest, StallOffloadNeedsTheHostTierAndSaysSo) {
  const ArmSpec arm = ParseOrDie("+stall-offload+host-tier");
  EXPECT_TRUE(arm.stall_offload);
  EXPECT_TRUE(arm.host_tier);
  EXPECT_EQ(ParseOrDie("baseline+host-tier+stall-offload").stall_offload, true);
  EXPECT_THAT(arm.Description(), ::testing::HasSubstr("stall offload"));
  const std::string error = ErrorOf("+stall-offload");
  EXPECT_THAT(error, ::testing::HasSubstr("+stall-offload"));
  EXPECT_THAT(error, ::testing::HasSubstr("add +host-tier"));
  ArmSpec typed;
  typed.name = "typed";
  typed.stall_offload = true;
  EXPECT_THAT(ValidateArms({typed}).message(), ::testing::HasSubstr("add +host-tier"));
  typed.host_tier = true;
  EXPECT_TRUE(ValidateArms({typed}).ok());
  EXPECT_THAT(ErrorOf("+stall-offlod+host-tier"), ::testing::HasSubstr("stall-offload"));
}

TEST(ReplayArmsTest, AFeatureNamedTwiceIsAnError) {
  for (std::string_view name :
       {"+lifecycle+lifecycle", "all+host-tier", "all+lifecycle", "continuum+continuum",
        "fixed-ttl+fixed-ttl", "+admission+host-tier+admission"}) {
    const std::string message = ErrorOf(name);
    EXPECT_NE(message.find("twice"), std::string::npos) << name << ": " << message;
  }
}

TEST(ReplayArmsTest, DescriptionsDifferPerArm) {
  std::set<std::string> seen;
  for (const std::string& name : DefaultArmNames()) {
    const std::string description = ParseOrDie(name).Description();
    EXPECT_FALSE(description.empty()) << name;
    EXPECT_TRUE(seen.insert(description).second) << name << " repeats: " << description;
  }
  EXPECT_NE(ParseOrDie("baseline").Description().find("SGLang"), std::string::npos);
  for (const std::string& name : DefaultArmNames()) {
    if (name == "baseline") continue;
    EXPECT_EQ(ParseOrDie(name).Description().find("SGLang"), std::string::npos) << name;
  }
  // A combination lists every feature it turns on.
  const std::string both = ParseOrDie("+lifecycle+host-tier").Description();
  EXPECT_EQ(both,
            ParseOrDie("+lifecycle").Description() + ", " + ParseOrDie("+host-tier").Description());
}

TEST(ReplayArmsTest, AgenticCurveNamesAreAliasesOfTheGrammar) {
  EXPECT_THAT(AgenticCurveArmNames(),
              ::testing::ElementsAre("lru", "per_conversation", "demote_p1", "demote_p20",
                                     "session_release", "demote_p1+release"));
  const std::vector<std::pair<std::string_view, std::string_view>> aliases = {
      {"lru", "baseline"},
      {"per_conversation", "+per-conversation"},
      {"demote_p1", "+subagent-demotion=1"},
      {"demote_p20", "+subagent-demotion=20"},
      {"session_release", "+lifecycle"},
      {"demote_p1+release", "+subagent-demotion=1+lifecycle"},
  };
  ASSERT_EQ(AgenticCurveArms().size(), aliases.size());
  for (size_t i = 0; i < aliases.size(); ++i) {
    EXPECT_EQ(AgenticCurveArms()[i], ParseOrDie(aliases[i].first)) << "the typed list, parsed";
  }
  for (const auto& [alias, canonical] : aliases) {
    ArmSpec by_alias = ParseOrDie(alias);
    EXPECT_EQ(by_alias.name, alias);
    by_alias.name = std::string(canonical);
    EXPECT_EQ(by_alias, ParseOrDie(canonical)) << alias;
  }
  EXPECT_TRUE(ParseOrDie("lru").IsBaseline());
  EXPECT_TRUE(ParseOrDie("baseline").IsBaseline());
  EXPECT_FALSE(ParseOrDie("per_conversation").IsBaseline());
  EXPECT_FALSE(ParseOrDie("infinite-cache").IsBaseline());
  // An alias is a whole name: it is neither a base nor case-insensitive.
  EXPECT_NE(ErrorOf("lru+host-tier").find("unknown arm \"lru\""), std::string::npos);
  ErrorOf("LRU");
  ErrorOf("+demote_p1");
}

TEST(ReplayArmsTest, PerConversationAndDemotionPriorities) {
  const ArmSpec plain = ParseOrDie("+per-conversation");
  EXPECT_TRUE(plain.per_conversation);
  EXPECT_FALSE(plain.subagent_demotion);
  EXPECT_EQ(ParseOrDie("+subagent-demotion").demotion_priority, std::nullopt);
  EXPECT_EQ(ParseOrDie("+subagent-demotion=0").demotion_priority, 0);
  // `all` already demotes (at the run's priority).
  EXPECT_NE(ErrorOf("all+subagent-demotion=20").find("twice"), std::string::npos);
  for (std::string_view bad :
       {"+subagent-demotion=", "+subagent-demotion=101", "+subagent-demotion=-1",
        "+subagent-demotion=1x", "+subagent-demotion=p1"}) {
    const std::string message = ErrorOf(bad);
    EXPECT_NE(message.find("priority must be an integer in [0, 100]"), std::string::npos)
        << bad << ": " << message;
  }
  EXPECT_NE(ErrorOf("+subagent-demotion=1+subagent-demotion=20").find("twice"), std::string::npos);
  EXPECT_NE(ErrorOf("+per-conversation+per-conversation").find("twice"), std::string::npos);
  EXPECT_NE(ErrorOf("+subagent-demotion20").find("unknown feature"), std::string::npos);
  EXPECT_EQ(ParseOrDie("+subagent-demotion=20").Description(),
            "finished sub-agent demotion to priority 20");
  EXPECT_EQ(plain.Description(), "per-conversation retention");
}

TEST(ReplayArmsTest, ParseArmsKeepsTheOrderAndRefusesRepeats) {
  StatusOr<std::vector<ArmSpec>> arms = ParseArms({"lru", "all", "baseline"});
  ASSERT_TRUE(arms.ok()) << arms.status();
  ASSERT_EQ(arms->size(), 3u);
  EXPECT_EQ((*arms)[0].name, "lru");
  EXPECT_EQ((*arms)[1], ParseOrDie("all"));
  EXPECT_EQ(ParseArms({}).status().message(), "arms must not be empty");
  EXPECT_EQ(ParseArms({"lru", "all", "lru"}).status().message(), "arm \"lru\" is named twice");
  EXPECT_NE(ParseArms({"lru", "+bogus"}).status().message().find("unknown feature"),
            std::string::npos);
}

TEST(ReplayArmsTest, ParseArmsNamesTheArmThatDoesNotParse) {
  const auto error = [](const std::vector<std::string>& names) {
    StatusOr<std::vector<ArmSpec>> arms = ParseArms(names);
    EXPECT_EQ(arms.status().code(), StatusCode::kInvalidArgument);
    return arms.ok() ? std::string() : arms.status().message();
  };
  EXPECT_THAT(error({"baseline", "+lifecycel"}),
              ::testing::HasSubstr("arm \"+lifecycel\": unknown feature \"lifecycel\""));
  EXPECT_THAT(error({"+bogus"}), ::testing::HasSubstr("unknown feature \"bogus\""));
  EXPECT_THAT(error({"lru", "fifo"}), ::testing::HasSubstr("unknown arm \"fifo\""));
  EXPECT_EQ(error({"lru", ""}), "arm name is empty");
}

TEST(ReplayArmsTest, ValidateArmsChecksTheTypedList) {
  EXPECT_TRUE(ValidateArms(DefaultArms()).ok());
  EXPECT_TRUE(ValidateArms(AgenticCurveArms()).ok());
  EXPECT_EQ(ValidateArms({}).message(), "arms must not be empty");
  EXPECT_EQ(ValidateArms({ParseOrDie("lru"), ParseOrDie("all"), ParseOrDie("lru")}).message(),
            "arm \"lru\" is named twice");
  // Names, not specs, must differ: an alias and its canonical spelling are two arms.
  EXPECT_TRUE(ValidateArms({ParseOrDie("lru"), ParseOrDie("baseline")}).ok());
  ArmSpec unnamed = ParseOrDie("all");
  unnamed.name.clear();
  EXPECT_EQ(ValidateArms({unnamed}).message(), "arm name is empty");
  ArmSpec stray = ParseOrDie("+lifecycle");
  stray.demotion_priority = 3;
  EXPECT_THAT(ValidateArms({stray}).message(),
              ::testing::HasSubstr("arm \"+lifecycle\": a demotion priority needs"));
  ArmSpec high = ParseOrDie("+subagent-demotion=20");
  high.demotion_priority = 101;
  EXPECT_THAT(ValidateArms({high}).message(),
              ::testing::HasSubstr("priority must be an integer in [0, 100], got 101"));
}

TEST(ReplayArmsTest, ForEachArmRunsInOrderAndNamesTheFailingArm) {
  std::vector<std::string> seen;
  StatusOr<std::vector<size_t>> ran =
      ForEachArm<size_t>(*ParseArms({"baseline", "+lifecycle"}),
                         [&](size_t i, const ArmSpec& arm) -> StatusOr<size_t> {
                           seen.push_back(arm.name);
                           return i * 10;
                         });
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_THAT(*ran, ::testing::ElementsAre(0u, 10u));
  EXPECT_THAT(seen, ::testing::ElementsAre("baseline", "+lifecycle"));

  seen.clear();
  StatusOr<std::vector<size_t>> failed =
      ForEachArm<size_t>(*ParseArms({"baseline", "+lifecycle", "all"}),
                         [&](size_t i, const ArmSpec& arm) -> StatusOr<size_t> {
                           seen.push_back(arm.name);
                           if (i == 1) return InternalError("boom");
                           return i;
                         });
  EXPECT_EQ(failed.status().code(), StatusCode::kInternal);
  EXPECT_EQ(failed.status().message(), "arm +lifecycle: boom");
  EXPECT_THAT(seen, ::testing::ElementsAre("baseline", "+lifecycle")) << "stops at the failure";
  EXPECT_EQ(ForEachArm<size_t>(std::vector<ArmSpec>{},
                               [](size_t i, const ArmSpec&) -> StatusOr<size_t> { return i; })
                .status()
                .message(),
            "arms must not be empty");
}

TEST(ReplayArmsTest, ArmCachePolicySetsOnlyThePolicyFields) {
  kv::KvCacheOptions base;
  base.device_blocks = 77;
  base.max_num_turns = 3;
  base.session_close_mode = kv::SessionCloseMode::kRelease;
  const auto policy = [&](std::string_view arm) {
    return ArmCachePolicy(ParseOrDie(arm), base, 7);
  };
  using kv::BlockReusePolicy;
  EXPECT_EQ(policy("baseline").block_reuse_policy, BlockReusePolicy::kDefault);
  EXPECT_EQ(policy("baseline").finished_subagent_priority, std::nullopt);
  EXPECT_EQ(policy("+lifecycle").block_reuse_policy, BlockReusePolicy::kDefault);
  EXPECT_EQ(policy("per_conversation").block_reuse_policy, BlockReusePolicy::kPerConversation);
  EXPECT_EQ(policy("per_conversation").finished_subagent_priority, std::nullopt);
  EXPECT_EQ(policy("+subagent-demotion").block_reuse_policy, BlockReusePolicy::kPerConversation);
  EXPECT_EQ(policy("+subagent-demotion").finished_subagent_priority, 7);
  EXPECT_EQ(policy("demote_p1").finished_subagent_priority, 1);
  EXPECT_EQ(policy("demote_p20").finished_subagent_priority, 20);
  EXPECT_EQ(policy("all").finished_subagent_priority, 7);
  for (const std::string& name : AgenticCurveArmNames()) {
    const kv::KvCacheOptions options = policy(name);
    EXPECT_EQ(options.device_blocks, 77) << name;
    EXPECT_EQ(options.max_num_turns, 3) << name;
    EXPECT_EQ(options.session_close_mode, kv::SessionCloseMode::kRelease) << name;
  }
}

TEST(ReplayArmsTest, AgentkvWithAHostTierIsItsOwnRecommendedSetPlusWhatIsNamed) {
  EXPECT_EQ(
      ParseOrDie("agentkv+host-tier"),
      SpecOf("agentkv+host-tier", {.lifecycle = true, .host_tier = true, .admission_v2 = true}));
  // A feature named after it is added, the working set included.
  EXPECT_EQ(
      ParseOrDie("agentkv+host-tier+working-set"),
      SpecOf("agentkv+host-tier+working-set",
             {.lifecycle = true, .host_tier = true, .admission_v2 = true, .working_set = true}));
  EXPECT_TRUE(ParseOrDie("agentkv+gap-retention").working_set);
  EXPECT_NE(ErrorOf("agentkv+lifecycle").find("named twice"), std::string::npos);
}

TEST(ReplayArmsTest, WorkingSetAndProgramFcfsAreFeaturesOfTheirOwn) {
  const ArmSpec working_set = ParseOrDie("+working-set");
  EXPECT_TRUE(working_set.working_set);
  EXPECT_FALSE(working_set.program_fcfs);
  EXPECT_FALSE(working_set.IsBaseline());
  EXPECT_NE(working_set.Description().find("working-set admission"), std::string::npos);
  const ArmSpec fcfs = ParseOrDie("+program-fcfs");
  EXPECT_TRUE(fcfs.program_fcfs);
  EXPECT_FALSE(fcfs.continuum) << "program FCFS without Continuum's pins";
  EXPECT_NE(fcfs.Description().find("program-level FCFS"), std::string::npos);
  const ArmSpec both = ParseOrDie("+working-set+program-fcfs+host-tier");
  EXPECT_TRUE(both.working_set && both.program_fcfs && both.host_tier);
  EXPECT_NE(ErrorOf("+working-set+working-set").find("named twice"), std::string::npos);
  EXPECT_NE(ErrorOf("oracle+program-fcfs"), "");
  EXPECT_NE(ErrorOf("+working").find("working-set"), std::string::npos);
  EXPECT_NE(ErrorOf("+working").find("program-fcfs"), std::string::npos);
}

TEST(ReplayArmsTest, GapRetentionIsAFeatureThatSelectsTheGapAwareOrder) {
  const ArmSpec alone = ParseOrDie("+gap-retention");
  EXPECT_TRUE(alone.gap_retention);
  EXPECT_FALSE(alone.IsBaseline());
  ArmSpec expected = SpecOf("+gap-retention+host-tier", {.host_tier = true});
  expected.gap_retention = true;
  EXPECT_EQ(ParseOrDie("+gap-retention+host-tier"), expected);
  EXPECT_TRUE(ParseOrDie("all+gap-retention").gap_retention);
  EXPECT_TRUE(ParseOrDie("continuum+gap-retention").gap_retention);
  EXPECT_NE(ErrorOf("+gap-retention+gap-retention").find("named twice"), std::string::npos);
  EXPECT_NE(ErrorOf("oracle+gap-retention"), "");
  EXPECT_NE(alone.Description().find("gap-aware retention"), std::string::npos);
  EXPECT_NE(ErrorOf("+gap").find("gap-retention"), std::string::npos);
  const kv::KvCacheOptions base;
  EXPECT_EQ(ArmCachePolicy(alone, base, 7).eviction_order, kv::EvictionOrder::kGapAware);
  EXPECT_EQ(ArmCachePolicy(ParseOrDie("baseline"), base, 7).eviction_order,
            kv::EvictionOrder::kLru);
}

}  // namespace
}  // namespace agentkv::sim
