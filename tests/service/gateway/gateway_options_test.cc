#include "agentkv/service/gateway/gateway_options.h"

#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <string>
#include <string_view>

namespace agentkv::service {
namespace {

GatewayOptions Valid() {
  GatewayOptions options;
  options.router_url = "http://127.0.0.1:30000";
  return options;
}

// Applies `mutate` to valid options and returns the validation message.
std::string ErrorOf(const std::function<void(GatewayOptions&)>& mutate) {
  GatewayOptions options = Valid();
  mutate(options);
  const Status status = options.Validate();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  return status.message();
}

TEST(GatewayOptionsTest, DefaultsWithAnUpstreamAreValid) {
  EXPECT_TRUE(Valid().Validate().ok());
  GatewayOptions engines;
  engines.engine_urls = {"http://127.0.0.1:1", "http://127.0.0.1:2@1"};
  EXPECT_TRUE(engines.Validate().ok()) << engines.Validate();
  EXPECT_EQ(Valid().session_header, "X-Session-Id");
  EXPECT_EQ(Valid().close_timeout_s, 2.0);
  EXPECT_EQ(Valid().prerequisite_policy, PrerequisitePolicy::kRefuse);
  EXPECT_EQ(Valid().router_policy, SglRouterPolicy::kCacheAware);
}

TEST(GatewayOptionsTest, RouterPolicyNamesRoundTripThroughTheParser) {
  const SglRouterPolicy all[] = {SglRouterPolicy::kCacheAware,
                                 SglRouterPolicy::kRoundRobin,
                                 SglRouterPolicy::kRandom,
                                 SglRouterPolicy::kPowerOfTwo,
                                 SglRouterPolicy::kConsistentHashing,
                                 SglRouterPolicy::kManual,
                                 SglRouterPolicy::kPrefixHash,
                                 SglRouterPolicy::kBucket};
  ASSERT_EQ(std::size(all), std::size(kSglRouterPolicyNames));
  for (SglRouterPolicy policy : all) {
    const std::string_view name = SglRouterPolicyName(policy);
    StatusOr<SglRouterPolicy> parsed = ParseSglRouterPolicy(name);
    ASSERT_TRUE(parsed.ok()) << name << ": " << parsed.status();
    EXPECT_EQ(*parsed, policy) << name;
    GatewayOptions options = Valid();
    options.router_policy = policy;
    EXPECT_TRUE(options.Validate().ok()) << name;
  }
  EXPECT_EQ(SglRouterPolicyName(SglRouterPolicy::kConsistentHashing), "consistent_hashing");
  EXPECT_EQ(SglRouterPolicyName(static_cast<SglRouterPolicy>(200)), "invalid");
}

TEST(GatewayOptionsTest, AnUnknownRouterPolicyNamesTheFlagAndTheValidNames) {
  for (std::string_view bad : {"sticky", "", "Cache_Aware", "cache_aware "}) {
    StatusOr<SglRouterPolicy> parsed = ParseSglRouterPolicy(bad);
    ASSERT_FALSE(parsed.ok()) << "\"" << bad << "\"";
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(parsed.status().message(),
              "--router-policy must be one of cache_aware, round_robin, random, power_of_two, "
              "consistent_hashing, manual, prefix_hash, bucket, got \"" +
                  std::string(bad) + "\"");
  }
}

TEST(GatewayOptionsTest, EachBadFieldIsNamedByItsFlag) {
  EXPECT_NE(ErrorOf([](GatewayOptions& o) {
              o.router_url.clear();
            }).find("one of --router-url and --engine-urls"),
            std::string::npos);
  EXPECT_NE(ErrorOf([](GatewayOptions& o) { o.engine_urls = {"http://h:1"}; }).find("exclusive"),
            std::string::npos);
  EXPECT_NE(ErrorOf([](GatewayOptions& o) { o.router_url = "https://h"; }).find("--router-url"),
            std::string::npos);
  EXPECT_NE(ErrorOf([](GatewayOptions& o) {
              o.router_url.clear();
              o.engine_urls = {"nope"};
            }).find("--engine-urls"),
            std::string::npos);
  EXPECT_NE(ErrorOf([](GatewayOptions& o) {
              o.router_policy = static_cast<SglRouterPolicy>(200);
            }).find("--router-policy"),
            std::string::npos);
  EXPECT_NE(
      ErrorOf([](GatewayOptions& o) { o.session_header = "X Session"; }).find("--session-header"),
      std::string::npos);
  EXPECT_EQ(ErrorOf([](GatewayOptions& o) { o.close_timeout_s = 0; }),
            "--close-timeout-s must be finite and > 0, got 0");
  EXPECT_NE(ErrorOf([](GatewayOptions& o) {
              o.session_idle_timeout_s = -1;
            }).find("--session-idle-timeout-s"),
            std::string::npos);
  EXPECT_NE(ErrorOf([](GatewayOptions& o) {
              o.session_drain_timeout_s = 1.0 / 0.0;
            }).find("--session-drain-timeout-s"),
            std::string::npos);
  EXPECT_NE(ErrorOf([](GatewayOptions& o) { o.control_timeout_s = 0; }).find("--control-timeout-s"),
            std::string::npos);
  EXPECT_NE(
      ErrorOf([](GatewayOptions& o) { o.max_closed_sessions = 0; }).find("--max-closed-sessions"),
      std::string::npos);
  EXPECT_EQ(ErrorOf([](GatewayOptions& o) {
              o.max_sessions = 10;
              o.max_retained_sessions = 11;
            }),
            "--max-retained-sessions must be in [0, --max-sessions = 10], got 11");
  EXPECT_NE(ErrorOf([](GatewayOptions& o) {
              o.max_retained_sessions = -1;
            }).find("--max-retained-sessions"),
            std::string::npos);
  GatewayOptions all_retained = Valid();
  all_retained.max_sessions = 10;
  all_retained.max_retained_sessions = 10;
  EXPECT_TRUE(all_retained.Validate().ok()) << "as many retained as --max-sessions is allowed";
  EXPECT_NE(
      ErrorOf([](GatewayOptions& o) { o.default_max_tokens = -1; }).find("--default-max-tokens"),
      std::string::npos);
  EXPECT_NE(ErrorOf([](GatewayOptions& o) { o.bearer_token = "a b"; }).find("--bearer-token"),
            std::string::npos);
  EXPECT_NE(ErrorOf([](GatewayOptions& o) {
              o.pause_priority.human_turn = -1;
            }).find("--agentic-pause-priority"),
            std::string::npos);
  // Both would set the request's one `priority`.
  EXPECT_NE(ErrorOf([](GatewayOptions& o) {
              o.program_fcfs = true;
              o.pause_priority.tool_call = 10;
            }).find("--agentic-program-fcfs and --agentic-pause-priority are exclusive"),
            std::string::npos);
  // The seed's options are validated with their own flag names.
  EXPECT_NE(ErrorOf([](GatewayOptions& o) {
              o.agentic.agentic_program_admission = true;
              o.agentic.agentic_admission_headroom = 1.5;
            }).find("--agentic-admission-headroom"),
            std::string::npos);
}

TEST(GatewayOptionsTest, LoopbackHostsAreRecognisedByAddress) {
  for (std::string_view host :
       {"127.0.0.1", "127.8.9.10", "::1", "localhost", "::ffff:127.0.0.1"}) {
    EXPECT_TRUE(IsLoopbackHost(host)) << host;
  }
  for (std::string_view host : {"0.0.0.0", "::", "10.0.0.1", "128.0.0.1", "192.168.1.1",
                                "::ffff:10.0.0.1", "fe80::1", "example.com", "", "127.0.0.1 "}) {
    EXPECT_FALSE(IsLoopbackHost(host)) << host;
  }
}

// An open door: with the session lifecycle on, no token and no tenant keys, anyone who can
// reach a non-loopback port could close (and abort) anyone's session.
TEST(GatewayOptionsTest, AnOpenDoorIsRefusedUnlessExplicitlyAllowed) {
  GatewayOptions open = Valid();
  open.agentic.agentic_session_lifecycle = true;
  open.http.address = "0.0.0.0";
  EXPECT_TRUE(open.OpenDoor());
  const Status refused = open.Validate();
  ASSERT_EQ(refused.code(), StatusCode::kInvalidArgument);
  for (std::string_view part : {"--agentic-session-lifecycle", "--host 0.0.0.0", "--bearer-token",
                                "--tenant-keys-file", "--allow-unauthenticated"}) {
    EXPECT_NE(refused.message().find(part), std::string::npos) << part << ": " << refused;
  }
  for (const std::function<void(GatewayOptions&)>& way_out :
       std::initializer_list<std::function<void(GatewayOptions&)>>{
           [](GatewayOptions& o) { o.allow_unauthenticated = true; },
           [](GatewayOptions& o) { o.bearer_token = "admin-token"; },
           [](GatewayOptions& o) {
             o.tenant_keys = {{"acme", "0123456789abcdef"}};
           },
           [](GatewayOptions& o) { o.http.address = "127.0.0.1"; },
           [](GatewayOptions& o) { o.http.address = "::1"; },
           [](GatewayOptions& o) { o.agentic.agentic_session_lifecycle = false; }}) {
    GatewayOptions options = open;
    way_out(options);
    EXPECT_TRUE(options.Validate().ok()) << options.Validate();
  }
  GatewayOptions allowed = open;
  allowed.allow_unauthenticated = true;
  EXPECT_TRUE(allowed.OpenDoor()) << "allowed, still open (the gateway logs a warning)";
}

TEST(GatewayOptionsTest, TenantKeysAndTheNewSessionRateAreChecked) {
  EXPECT_EQ(Valid().max_new_sessions_per_s, 100.0);
  EXPECT_EQ(Valid().new_sessions_burst, 1000);
  EXPECT_EQ(ErrorOf([](GatewayOptions& o) {
              o.tenant_keys = {{"acme", "short"}};
            }),
            "--tenant-keys-file: the key of tenant acme is shorter than 16 bytes");
  EXPECT_EQ(ErrorOf([](GatewayOptions& o) {
              o.bearer_token = "0123456789abcdef";
              o.tenant_keys = {{"acme", "0123456789abcdef"}};
            }),
            "--tenant-keys-file: the key of tenant acme is the --bearer-token (the admin's): give "
            "it its own key");
  EXPECT_EQ(ErrorOf([](GatewayOptions& o) { o.max_new_sessions_per_s = -1; }),
            "--max-new-sessions-per-s must be finite and in [0, 1000000], got -1");
  EXPECT_NE(ErrorOf([](GatewayOptions& o) {
              o.max_new_sessions_per_s = std::numeric_limits<double>::infinity();
            }).find("--max-new-sessions-per-s"),
            std::string::npos);
  EXPECT_EQ(ErrorOf([](GatewayOptions& o) { o.new_sessions_burst = 0; }),
            "--new-sessions-burst must be in [1, 4294967296], got 0");
  GatewayOptions off = Valid();
  off.max_new_sessions_per_s = 0;
  EXPECT_TRUE(off.Validate().ok());
}

TEST(GatewayOptionsTest, PrerequisitePolicyParsesExactly) {
  EXPECT_EQ(*ParsePrerequisitePolicy("refuse"), PrerequisitePolicy::kRefuse);
  EXPECT_EQ(*ParsePrerequisitePolicy("disable"), PrerequisitePolicy::kDisable);
  EXPECT_NE(ParsePrerequisitePolicy("Refuse").status().message().find("--prerequisite-policy"),
            std::string::npos);
  EXPECT_EQ(PrerequisitePolicyName(PrerequisitePolicy::kDisable), "disable");
}

}  // namespace
}  // namespace agentkv::service
