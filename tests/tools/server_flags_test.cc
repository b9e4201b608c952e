// Tests of ServerFlags, the one declaration of --host, --port, --threads, --shutdown-grace-s
// and --access-log for the commands that serve HTTP.
#include "tools/agentkv/server_flags.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace agentkv::tools {
namespace {

// Parses `args` (after the program name) into an app holding `flags`; false on a parse error.
bool Parse(ServerFlags& flags, std::vector<std::string> args) {
  CLI::App app;
  flags.Add(app, FlagSource::kCommandLine);
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError&) {
    return false;
  }
  return true;
}

TEST(ServerFlagsTest, DefaultsComeFromTheCommand) {
  ServerFlags flags(/*port=*/7000, /*shutdown_grace_s=*/5.0);
  ASSERT_TRUE(Parse(flags, {}));
  ASSERT_TRUE(flags.Check().ok());
  net::HttpServerOptions http;
  http.address = "0.0.0.0";
  flags.ApplyTo(http);
  EXPECT_EQ(http.address, "127.0.0.1");
  EXPECT_EQ(http.port, 7000);
  EXPECT_EQ(http.threads, 2);
  EXPECT_EQ(flags.port(), 7000);
  EXPECT_EQ(flags.shutdown_grace(), std::chrono::milliseconds(5000));
}

TEST(ServerFlagsTest, ReadsEveryFlagAndLeavesTheOtherOptions) {
  ServerFlags flags(8080, 30.0);
  ASSERT_TRUE(Parse(
      flags, {"--host", "::1", "--port", "0", "--threads", "8", "--shutdown-grace-s", "0.25"}));
  ASSERT_TRUE(flags.Check().ok());
  net::HttpServerOptions http;
  http.backlog = 7;
  flags.ApplyTo(http);
  EXPECT_EQ(http.address, "::1");
  EXPECT_EQ(http.port, 0);
  EXPECT_EQ(http.threads, 8);
  EXPECT_EQ(http.backlog, 7);
  EXPECT_EQ(flags.shutdown_grace(), std::chrono::milliseconds(250));
}

TEST(ServerFlagsTest, AccessLogIsOffByDefaultAndTheFlagSetsTheHook) {
  ServerFlags off(7000, 5.0);
  ASSERT_TRUE(Parse(off, {}));
  net::HttpServerOptions http;
  off.ApplyTo(http);
  EXPECT_FALSE(off.access_log());
  EXPECT_FALSE(static_cast<bool>(http.access_log)) << "off: the server records nothing";

  ServerFlags on(7000, 5.0);
  ASSERT_TRUE(Parse(on, {"--access-log"}));
  on.ApplyTo(http);
  EXPECT_TRUE(on.access_log());
  EXPECT_TRUE(static_cast<bool>(http.access_log));
}

TEST(ServerFlagsTest, AccessLogToStderrWritesOneJsonLine) {
  net::AccessLogEntry entry;
  entry.method = "GET";
  entry.target = "/health";
  entry.status = 200;
  entry.remote = "127.0.0.1:5";
  entry.completed = true;
  ::testing::internal::CaptureStderr();
  AccessLogToStderr()(entry);
  const std::string written = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(written, net::AccessLogJson(entry) + "\n");
}

TEST(ServerFlagsTest, CheckNamesTheFlagAndTheValue) {
  const struct {
    std::vector<std::string> args;
    std::string message;
  } cases[] = {
      {{"--port", "70000"}, "--port must be in [0, 65535], got 70000"},
      {{"--port", "-1"}, "--port must be in [0, 65535], got -1"},
      {{"--threads", "0"}, "--threads must be in [1, 256], got 0"},
      {{"--shutdown-grace-s", "3601"}, "--shutdown-grace-s must be in [0, 3600], got 3601"},
  };
  for (const auto& c : cases) {
    ServerFlags flags(1, 1.0);
    ASSERT_TRUE(Parse(flags, c.args));
    EXPECT_EQ(flags.Check(), InvalidArgumentError(c.message));
  }
}

}  // namespace
}  // namespace agentkv::tools
