#include "tools/agentkv/sglang_flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace agentkv::tools {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> Names(const ForeignFlag& flag) {
  std::vector<std::string> names;
  std::string rest(flag.names);
  size_t at = 0;
  while (at <= rest.size()) {
    const size_t comma = rest.find(',', at);
    names.push_back(rest.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return names;
}

// Parses `args` (after the program name) on an app holding `flags`.
void Parse(CLI::App& app, std::vector<std::string> args) {
  std::vector<const char*> argv = {"emulate"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
}

TEST(SglangFlagsTest, EveryNameIsAFlagOnceAndNoneIsOneTheEmulatorMaps) {
  // The emulator's own options under SGLang's names (emulate_command.cc): never in the tables.
  const std::set<std::string> mapped_engine = {"--model-path",
                                               "--model",
                                               "--tp-size",
                                               "--tensor-parallel-size",
                                               "--dp-size",
                                               "--context-length",
                                               "--port",
                                               "--host",
                                               "--page-size",
                                               "--hicache-ratio",
                                               "--hicache-size",
                                               "--enable-hierarchical-cache",
                                               "--mem-fraction-static",
                                               "--max-total-tokens",
                                               "--served-model-name",
                                               "--config"};
  const std::set<std::string> mapped_router = {"--worker-urls",
                                               "--policy",
                                               "--host",
                                               "--port",
                                               "--prometheus-port",
                                               "--max-tree-size",
                                               "--request-timeout-secs"};
  for (const auto& [table, mapped] : {std::pair{LaunchServerFlags(), mapped_engine},
                                      std::pair{LaunchRouterFlags(), mapped_router}}) {
    std::set<std::string> seen;
    for (const ForeignFlag& flag : table) {
      for (const std::string& name : Names(flag)) {
        EXPECT_TRUE(name.starts_with("--") && name.size() > 2) << name;
        EXPECT_TRUE(seen.insert(name).second) << name << " twice";
        EXPECT_FALSE(mapped.contains(name)) << name << " is the emulator's own";
      }
      EXPECT_TRUE(flag.accepted_value.empty() || !flag.refusal.empty()) << flag.names;
    }
    EXPECT_GT(seen.size(), 50u);
  }
}

TEST(SglangFlagsTest, IgnoredFlagsAreNamedWithTheirValuesAndRefusedOnesStopTheStart) {
  CLI::App app;
  ForeignFlags foreign;
  foreign.Add(app, LaunchServerFlags());
  Parse(app, {"--trust-remote-code", "--attention-backend", "flashinfer", "--cuda-graph-bs", "1",
              "2", "4", "--pp-size", "1"});
  EXPECT_TRUE(foreign.Check().ok());
  EXPECT_THAT(foreign.ignored(), ::testing::UnorderedElementsAre(
                                     "--trust-remote-code", "--attention-backend flashinfer",
                                     "--cuda-graph-bs 1 2 4", "--pp-size 1"));

  CLI::App refusing;
  ForeignFlags refused;
  refused.Add(refusing, LaunchServerFlags());
  Parse(refusing, {"--pp-size", "2", "--enable-lora"});
  const Status s = refused.Check();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), ::testing::AnyOf(HasSubstr("--pp-size 2: pipeline parallelism"),
                                            HasSubstr("--enable-lora: LoRA")));
}

TEST(SglangFlagsTest, AnOptionTheAppHasWinsAndAPrefixRenamesTheRouterFlags) {
  CLI::App app;
  std::string policy;
  app.add_option("--policy,--router-policy", policy);
  ForeignFlags foreign;
  foreign.Add(app, LaunchRouterFlags(), "--router-");
  Parse(app, {"--router-policy", "round_robin", "--router-log-level", "debug",
              "--router-retry-max-retries", "3"});
  EXPECT_EQ(policy, "round_robin");
  EXPECT_THAT(foreign.ignored(), ::testing::UnorderedElementsAre("--router-log-level debug",
                                                                 "--router-retry-max-retries 3"));
  // Unprefixed, the router's flags are unknown to this app.
  CLI::App other;
  ForeignFlags prefixed;
  prefixed.Add(other, LaunchRouterFlags(), "--router-");
  EXPECT_THROW(Parse(other, {"--log-level", "debug"}), CLI::ParseError);
}

}  // namespace
}  // namespace agentkv::tools
