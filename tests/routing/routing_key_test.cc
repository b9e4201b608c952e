// Tests of the session routing key: stable across runs (pinned values), distinct for
// distinct sessions, and the identity on numbered sessions.
#include "agentkv/routing/routing_key.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <unordered_set>

namespace agentkv::routing {
namespace {

TEST(RoutingKeyTest, StringKeysArePinnedAcrossRunsAndPlatforms) {
  // A changed value would move every WEKA conversation to another engine: the replay's
  // deterministic output depends on these.
  EXPECT_EQ(SessionRoutingKey("conversation-a"), 0xf962945c472c66adULL);
  EXPECT_EQ(SessionRoutingKey(""), 0xf60d7a5ef28e3287ULL);
  EXPECT_EQ(SessionRoutingKey("conversation-a"), SessionRoutingKey(std::string("conversation-a")));
}

TEST(RoutingKeyTest, DistinctSessionsGetDistinctKeys) {
  std::unordered_set<uint64_t> keys;
  for (int i = 0; i < 10000; ++i) keys.insert(SessionRoutingKey("session-" + std::to_string(i)));
  EXPECT_EQ(keys.size(), 10000u);
}

TEST(RoutingKeyTest, NumberedSessionsAreTheirNumber) {
  EXPECT_EQ(SessionRoutingKey(SessionId(17)), 17u);
  EXPECT_EQ(SessionRoutingKey(SessionId(0)), 0u);
}

}  // namespace
}  // namespace agentkv::routing
