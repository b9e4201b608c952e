#include "agentkv/service/gateway/tenant_keys.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "agentkv/service/gateway/gateway_request.h"

namespace agentkv::service {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr std::string_view kKeyA = "aaaaaaaaaaaaaaaa-secret-a";
constexpr std::string_view kKeyB = "bbbbbbbbbbbbbbbb-secret-b";

// The error message ParseTenantKeys gives `text`, as the file "keys.txt".
std::string ErrorOf(std::string_view text) {
  StatusOr<std::vector<TenantKey>> parsed = ParseTenantKeys(text, "keys.txt");
  EXPECT_FALSE(parsed.ok()) << text;
  if (parsed.ok()) return "";
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  return parsed.status().message();
}

TEST(TenantKeysTest, ParsesPairsCommentsBlankLinesAndCrlf) {
  const std::string text = "# tenants of the fleet\n\n  acme\t" + std::string(kKeyA) +
                           "\r\n   # indented comment\nrl-team_2 " + std::string(kKeyB) + "  ";
  StatusOr<std::vector<TenantKey>> parsed = ParseTenantKeys(text, "keys.txt");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, (std::vector<TenantKey>{{"acme", std::string(kKeyA)},
                                             {"rl-team_2", std::string(kKeyB)}}));
}

TEST(TenantKeysTest, EachErrorNamesTheFileAndLineAndNeverTheKey) {
  const std::string a(kKeyA);
  const std::string b(kKeyB);
  EXPECT_EQ(ErrorOf("acme\n"), "keys.txt:1: expected `TENANT KEY`, got 1 fields");
  EXPECT_EQ(ErrorOf("# c\nacme " + a + " extra\n"),
            "keys.txt:2: expected `TENANT KEY`, got 3 fields");
  EXPECT_THAT(ErrorOf("ac.me " + a), HasSubstr("keys.txt:1: not a valid tenant name"));
  EXPECT_THAT(ErrorOf(std::string(65, 'x') + " " + a), HasSubstr("keys.txt:1: not a valid"));
  EXPECT_EQ(ErrorOf("\nacme short-key"),
            "keys.txt:2: the key of tenant acme is shorter than 16 bytes");
  EXPECT_EQ(ErrorOf("acme " + a + "\x01"),
            "keys.txt:1: the key of tenant acme holds a byte outside printable ASCII");
  EXPECT_EQ(ErrorOf("acme " + a + "\nacme " + b),
            "keys.txt:2: tenant acme is listed twice (first on line 1)");
  const std::string shared = ErrorOf("acme " + a + "\n\nbeta " + a);
  EXPECT_EQ(shared,
            "keys.txt:3: the key of tenant beta is also the key of tenant acme (line 1): every "
            "tenant needs its own key");
  EXPECT_EQ(ErrorOf("# nothing\n\n"), "keys.txt: lists no `TENANT KEY` line");
  for (const std::string& message : {shared, ErrorOf("acme " + a + " x"), ErrorOf("acme.x " + b),
                                     ErrorOf("acme " + a + "\x01")}) {
    EXPECT_THAT(message, Not(HasSubstr("secret"))) << message;
  }
}

TEST(TenantKeysTest, ReadsAFileAndNamesAnUnreadableOne) {
  const std::string path = ::testing::TempDir() + "/tenant_keys_test.txt";
  {
    std::ofstream out(path);
    out << "acme " << kKeyA << "\nacme " << kKeyB << "\n";
  }
  StatusOr<std::vector<TenantKey>> read = ReadTenantKeysFile(path);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().message(), path + ":2: tenant acme is listed twice (first on line 1)");
  std::remove(path.c_str());
  read = ReadTenantKeysFile(path);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().message(), "--tenant-keys-file: cannot read " + path);
}

TEST(TenantKeysTest, CheckTenantKeysAppliesTheFileRules) {
  EXPECT_TRUE(CheckTenantKeys({}).ok());
  EXPECT_TRUE(CheckTenantKeys({{"acme", std::string(kKeyA)}, {"beta", std::string(kKeyB)}}).ok());
  EXPECT_THAT(CheckTenantKeys({{"a b", std::string(kKeyA)}}).message(),
              HasSubstr("--tenant-keys-file: not a valid tenant name"));
  EXPECT_EQ(CheckTenantKeys({{"acme", "short"}}).message(),
            "--tenant-keys-file: the key of tenant acme is shorter than 16 bytes");
  EXPECT_EQ(CheckTenantKeys({{"acme", std::string(kKeyA)}, {"beta", std::string(kKeyA)}}).message(),
            "--tenant-keys-file: the key of tenant beta is also the key of tenant acme");
  EXPECT_EQ(CheckTenantKeys({{"acme", std::string(kKeyA)}, {"acme", std::string(kKeyB)}}).message(),
            "--tenant-keys-file: tenant acme is listed twice");
}

TEST(TenantKeysTest, TenantNamesAreASubsetOfSessionIdsWithoutTheSeparator) {
  EXPECT_TRUE(IsValidTenantName("Acme-2_x"));
  EXPECT_TRUE(IsValidTenantName(std::string(kMaxTenantNameBytes, 'a')));
  EXPECT_TRUE(IsValidSessionId(std::string(kMaxTenantNameBytes, 'a')));
  for (std::string_view bad : {"", "a.b", "a b", "a/b", "é"}) {
    EXPECT_FALSE(IsValidTenantName(bad)) << bad;
  }
  EXPECT_FALSE(IsValidTenantName(std::string(kMaxTenantNameBytes + 1, 'a')));
}

TEST(TenantKeysTest, IdentifiesTheAdminATenantOrNobody) {
  const std::vector<TenantKey> keys = {{"acme", std::string(kKeyA)}, {"beta", std::string(kKeyB)}};
  const std::string admin = "admin-token-0123456789";
  EXPECT_EQ(IdentifyCaller("", admin, keys).kind, Caller::Kind::kAnonymous);
  EXPECT_EQ(IdentifyCaller("Bearer " + admin, admin, keys).kind, Caller::Kind::kAdmin);
  const Caller beta = IdentifyCaller("bearer " + std::string(kKeyB), admin, keys);
  EXPECT_EQ(beta.kind, Caller::Kind::kTenant);
  EXPECT_EQ(beta.tenant, "beta");
  EXPECT_EQ(IdentifyCaller("Bearer " + std::string(kKeyA), "", keys).tenant, "acme");
  EXPECT_EQ(IdentifyCaller("Bearer " + std::string(kKeyA) + "x", admin, keys).kind,
            Caller::Kind::kAnonymous);
  EXPECT_EQ(IdentifyCaller(std::string(kKeyA), admin, keys).kind, Caller::Kind::kAnonymous);
  EXPECT_EQ(IdentifyCaller("Bearer ", "", keys).kind, Caller::Kind::kAnonymous);
}

TEST(TenantKeysTest, TenantSessionIdsAreNamespacedAndBounded) {
  EXPECT_EQ(TenantSessionId("acme", "s1", kMaxSessionIdBytes).value(), "acme.s1");
  // Another tenant's id of the same name, or one that looks namespaced, never meets it.
  EXPECT_NE(TenantSessionId("beta", "s1", kMaxSessionIdBytes).value(), "acme.s1");
  EXPECT_EQ(TenantSessionId("acme", "beta.s1", kMaxSessionIdBytes).value(), "acme.beta.s1");
  const std::string longest(kMaxSessionIdBytes - 5, 's');
  EXPECT_EQ(TenantSessionId("acme", longest, kMaxSessionIdBytes).value().size(),
            kMaxSessionIdBytes);
  StatusOr<std::string> too_long = TenantSessionId("acme", longest + "s", kMaxSessionIdBytes);
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(too_long.status().message(),
            "session_id: tenant acme's session ids are at most 251 bytes (the gateway prefixes "
            "them with the tenant's name), got 252");
}

}  // namespace
}  // namespace agentkv::service
