#include "agentkv/service/gateway/gateway_prerequisites.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <string>
#include <vector>

namespace agentkv::service {
namespace {

protocol::ServerInfo Info(bool session_cache, std::string policy, bool metrics) {
  protocol::ServerInfo info;
  info.enable_session_radix_cache = session_cache;
  info.radix_eviction_policy = std::move(policy);
  info.enable_metrics = metrics;
  info.version = std::string(protocol::kSupportedSglangVersion);
  return info;
}

std::vector<EngineServerInfo> Fleet(protocol::ServerInfo second) {
  std::vector<EngineServerInfo> fleet;
  fleet.push_back(EngineServerInfo{"http://a:1", Info(true, "priority", true)});
  fleet.push_back(EngineServerInfo{"http://b:2", std::move(second)});
  return fleet;
}

TEST(CheckPrerequisitesTest, AFleetWithEveryFlagKeepsBothFeatures) {
  StatusOr<PrerequisiteOutcome> outcome = CheckPrerequisites(
      Fleet(Info(true, "priority", true)), true, true, PrerequisitePolicy::kRefuse);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_TRUE(outcome->lifecycle);
  EXPECT_TRUE(outcome->admission);
  EXPECT_TRUE(outcome->warnings.empty());
}

// An engine of another SGLang release (or one that reports none) is a warning, never a refusal;
// the supported release and the emulator pass silently.
TEST(CheckPrerequisitesTest, AnotherSglangVersionWarnsOnly) {
  protocol::ServerInfo old = Info(true, "priority", true);
  old.version = "0.5.9";
  StatusOr<PrerequisiteOutcome> outcome =
      CheckPrerequisites(Fleet(old), true, true, PrerequisitePolicy::kRefuse);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_TRUE(outcome->lifecycle);
  EXPECT_TRUE(outcome->admission);
  ASSERT_EQ(outcome->warnings.size(), 1u);
  EXPECT_EQ(outcome->warnings[0].text(),
            "event=engine_version engine=http://b:2 version=\"0.5.9\" "
            "supported=\"0.5.15.post1\" note=\"agentkv is checked against this SGLang release; "
            "others differ in what /close_session frees and in their metrics\"");
  old.version = "";
  outcome = CheckPrerequisites(Fleet(old), false, true, PrerequisitePolicy::kDisable);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  ASSERT_EQ(outcome->warnings.size(), 1u);
  EXPECT_NE(outcome->warnings[0].text().find("version=\"unreported\""), std::string::npos);
  old.version = std::string(protocol::kEmulatorVersion);
  outcome = CheckPrerequisites(Fleet(old), true, true, PrerequisitePolicy::kRefuse);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_TRUE(outcome->warnings.empty());
}

TEST(CheckPrerequisitesTest, RefuseNamesTheEngineAndTheFlag) {
  StatusOr<PrerequisiteOutcome> no_session = CheckPrerequisites(
      Fleet(Info(false, "priority", true)), true, false, PrerequisitePolicy::kRefuse);
  ASSERT_EQ(no_session.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(
      no_session.status().message().find("engine http://b:2 lacks --enable-session-radix-cache"),
      std::string::npos);
  StatusOr<PrerequisiteOutcome> no_metrics = CheckPrerequisites(
      Fleet(Info(true, "priority", false)), false, true, PrerequisitePolicy::kRefuse);
  ASSERT_EQ(no_metrics.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(no_metrics.status().message().find("--enable-metrics"), std::string::npos);
  StatusOr<PrerequisiteOutcome> lfu =
      CheckPrerequisites(Fleet(Info(true, "lfu", true)), true, false, PrerequisitePolicy::kRefuse);
  EXPECT_NE(lfu.status().message().find("--radix-eviction-policy priority"), std::string::npos);
  std::vector<EngineServerInfo> unreachable;
  unreachable.push_back(EngineServerInfo{"http://c:3", UnavailableError("refused")});
  EXPECT_EQ(
      CheckPrerequisites(unreachable, true, false, PrerequisitePolicy::kRefuse).status().code(),
      StatusCode::kUnavailable);
  EXPECT_EQ(CheckPrerequisites({}, true, false, PrerequisitePolicy::kRefuse).status().code(),
            StatusCode::kUnavailable);
}

TEST(CheckPrerequisitesTest, DisableTurnsOnlyTheAffectedFeatureOff) {
  StatusOr<PrerequisiteOutcome> outcome = CheckPrerequisites(
      Fleet(Info(false, "priority", true)), true, true, PrerequisitePolicy::kDisable);
  ASSERT_TRUE(outcome.ok());
  EXPECT_FALSE(outcome->lifecycle);
  EXPECT_TRUE(outcome->admission);
  ASSERT_EQ(outcome->warnings.size(), 1u);
  EXPECT_NE(
      outcome->warnings[0].text().find("feature=--agentic-session-lifecycle engine=http://b:2"),
      std::string::npos);
  // An unreadable engine or an empty fleet keeps the features (fail-open at run time).
  std::vector<EngineServerInfo> unreachable;
  unreachable.push_back(EngineServerInfo{"http://c:3", UnavailableError("refused")});
  EXPECT_TRUE(CheckPrerequisites(unreachable, true, true, PrerequisitePolicy::kDisable)->lifecycle);
  EXPECT_TRUE(CheckPrerequisites({}, true, true, PrerequisitePolicy::kDisable)->admission);
}

TEST(CheckPrerequisitesTest, LruOnlyWarnsAndDisabledFeaturesCheckNothing) {
  StatusOr<PrerequisiteOutcome> lru =
      CheckPrerequisites(Fleet(Info(true, "lru", true)), true, false, PrerequisitePolicy::kRefuse);
  ASSERT_TRUE(lru.ok());
  EXPECT_TRUE(lru->lifecycle);
  ASSERT_EQ(lru->warnings.size(), 1u);
  EXPECT_NE(lru->warnings[0].text().find("found=lru"), std::string::npos);
  EXPECT_TRUE(CheckPrerequisites({}, false, false, PrerequisitePolicy::kRefuse).ok());
}

// The context length comes from the engines that report one: the largest valid value wins;
// null, absent, non-positive or absurd values are ignored; none at all leaves it unchecked.
TEST(FleetContextLengthTest, TheLargestValidReportedContextLength) {
  auto with = [](std::string json_value) {
    protocol::ServerInfo info = Info(true, "priority", true);
    info.extra = boost::json::parse(R"({"context_length": )" + json_value + "}").as_object();
    return info;
  };
  std::vector<EngineServerInfo> fleet;
  EXPECT_EQ(FleetContextLength(fleet), std::nullopt);
  fleet.push_back(EngineServerInfo{"a", with("null")});
  fleet.push_back(EngineServerInfo{"b", with("-5")});
  fleet.push_back(EngineServerInfo{"c", with("9223372036854775807")});
  fleet.push_back(EngineServerInfo{"d", UnavailableError("down")});
  EXPECT_EQ(FleetContextLength(fleet), std::nullopt);
  fleet.push_back(EngineServerInfo{"e", with("32768")});
  fleet.push_back(EngineServerInfo{"f", with("131072")});
  EXPECT_EQ(FleetContextLength(fleet), 131072);
}

}  // namespace
}  // namespace agentkv::service
