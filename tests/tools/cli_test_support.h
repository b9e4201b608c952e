// Shared support for the end-to-end tests of the `agentkv` binary (agentkv_cli_test.cc and
// agentic_curve_cli_test.cc).
//
// CliTest gives each test a private temporary directory, created in SetUp and removed in
// TearDown and named after the suite and the test, so that tests (and the two executables) may
// run in parallel. WriteTrace puts trace files in its `traces/` subdirectory; Run spawns the
// built binary (AGENTKV_BINARY, defined by the test target) through the shell with stdout and
// stderr captured in files there. ExpectOneErrorLine asserts the failure contract every
// subcommand shares.
#ifndef AGENTKV_TESTS_TOOLS_CLI_TEST_SUPPORT_H_
#define AGENTKV_TESTS_TOOLS_CLI_TEST_SUPPORT_H_

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#ifndef AGENTKV_BINARY
#error "AGENTKV_BINARY must name the agentkv binary (see tests/tools/CMakeLists.txt)"
#endif

namespace agentkv::cli_testing {

// What one run of the binary produced.
struct RunResult {
  int exit_code = -1;  // -1 when the process did not exit normally.
  std::string out;
  std::string err;
};

// The whole content of `path`, "" when it cannot be read.
inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Asserts the failure contract: exit code 2 and exactly one line on stderr, starting with
// `prefix` (e.g. "agentkv cache-curve: error: ").
inline void ExpectOneErrorLine(const RunResult& r, std::string_view prefix) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_THAT(r.err, ::testing::StartsWith(std::string(prefix)));
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("agentkv_cli_" + std::string(info->test_suite_name()) + "_" + info->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ / "traces");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Writes `text` as traces/<name> and returns its path.
  std::string WriteTrace(const std::string& name, const std::string& text) const {
    const std::filesystem::path path = dir_ / "traces" / name;
    std::ofstream(path) << text;
    return path.string();
  }

  // Runs `agentkv <args>` (args are passed through the shell as written), for at most 300 s.
  RunResult Run(const std::string& args) const {
    const std::filesystem::path out = dir_ / "stdout.txt";
    const std::filesystem::path err = dir_ / "stderr.txt";
    // A run that should have failed fast but started a server instead ends after 300 s (exit
    // code 124) rather than hanging the suite.
    const std::string command = std::string("timeout 300 '") + AGENTKV_BINARY + "' " + args +
                                " >'" + out.string() + "' 2>'" + err.string() + "'";
    const int status = std::system(command.c_str());
    RunResult result;
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    result.out = ReadFile(out);
    result.err = ReadFile(err);
    return result;
  }

  // The test's private directory; removed with everything in it after the test.
  std::filesystem::path dir_;
};

// The arm names of an "Arms" section of --help (tools/agentkv/arm_help.h): the entries (lines
// of two spaces and a name) after the first line starting with `heading`, up to the line
// `until` or the first empty line. Empty when the heading is absent.
inline std::vector<std::string> HelpArmEntries(const std::string& help, std::string_view heading,
                                               std::string_view until) {
  std::vector<std::string> names;
  std::istringstream in(help);
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (!inside) {
      inside = line.rfind(heading, 0) == 0;
      continue;
    }
    if (line == until || line.empty()) break;
    if (line.size() > 2 && line.rfind("  ", 0) == 0 && line[2] != ' ') {
      names.push_back(line.substr(2, line.find(' ', 2) - 2));
    }
  }
  return names;
}

}  // namespace agentkv::cli_testing

#endif  // AGENTKV_TESTS_TOOLS_CLI_TEST_SUPPORT_H_
