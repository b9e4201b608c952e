#include "agentkv/service/common/bearer_token.h"

#include <gtest/gtest.h>

namespace agentkv::service {
namespace {

TEST(BearerTokenTest, MatchesExactlyTheConfiguredToken) {
  EXPECT_TRUE(BearerMatches("Bearer s3cret", "s3cret"));
  EXPECT_TRUE(BearerMatches("bearer s3cret", "s3cret"));
  EXPECT_TRUE(BearerMatches("BEARER s3cret", "s3cret"));
  EXPECT_FALSE(BearerMatches("Bearer s3cre", "s3cret"));
  EXPECT_FALSE(BearerMatches("Bearer s3cret ", "s3cret"));
  EXPECT_FALSE(BearerMatches("Bearer S3cret", "s3cret"));
  EXPECT_FALSE(BearerMatches("s3cret", "s3cret"));
  EXPECT_FALSE(BearerMatches("Basic s3cret", "s3cret"));
  EXPECT_FALSE(BearerMatches("Bearer  s3cret", "s3cret"));
  EXPECT_FALSE(BearerMatches("Bearer ", ""));
  EXPECT_FALSE(BearerMatches("Bearer x", ""));
}

TEST(BearerTokenTest, AnEmptyTokenTurnsAuthenticationOff) {
  EXPECT_TRUE(BearerAuthorized("", ""));
  EXPECT_TRUE(BearerAuthorized("Basic anything", ""));
  EXPECT_FALSE(BearerAuthorized("", "s3cret"));
  EXPECT_FALSE(BearerAuthorized("Bearer wrong", "s3cret"));
  EXPECT_TRUE(BearerAuthorized("Bearer s3cret", "s3cret"));
}

}  // namespace
}  // namespace agentkv::service
