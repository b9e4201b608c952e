// Tests of LocatedConfig, the `--config FILE` reader: known keys apply as flags would, and an
// unknown section, an unknown key or a key that cannot be set from a file is one
// CLI::ConfigError naming the file and the line, before any item is applied.
#include "tools/agentkv/config_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace agentkv::tools {
namespace {

using ::testing::ElementsAre;

// An App shaped like agentkv's: --config at the top, a [replay] command with a few flags and an
// [emulate] command with an [emulate.engine] subcommand.
struct Cli {
  CLI::App app{"test", "agentkv"};
  int64_t sessions = 0;
  std::vector<std::string> arms;
  bool quiet = false;
  int64_t port = 0;
  CLI::App* replay = nullptr;

  Cli() {
    app.set_config("--config", "", "config file");
    UseLocatedConfig(app);
    app.fallthrough();
    replay = app.add_subcommand("replay", "");
    replay->add_option("--sessions", sessions);
    replay->add_option("--arms", arms)->delimiter(',');
    replay->add_flag("--quiet", quiet);
    replay->add_option("--secret", port)->configurable(false);
    CLI::App* emulate = app.add_subcommand("emulate", "");
    emulate->add_subcommand("engine", "")->add_option("--port", port);
  }

  // Parses `args` and returns "" or the parse error's message.
  std::string Parse(std::vector<std::string> args) {
    args.insert(args.begin(), "agentkv");
    std::vector<const char*> argv;
    for (const std::string& a : args) argv.push_back(a.c_str());
    try {
      app.parse(static_cast<int>(argv.size()), argv.data());
    } catch (const CLI::ParseError& e) {
      return e.what();
    }
    return "";
  }
};

class ConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    path_ = std::filesystem::path(::testing::TempDir()) / ("agentkv_config_file_" + test + ".toml");
  }
  void TearDown() override { std::filesystem::remove(path_); }

  // Writes `text` as the config file and parses `replay --config FILE` (or `command`).
  std::string ParseWith(const std::string& text, Cli& cli,
                        std::vector<std::string> command = {"replay"}) {
    std::ofstream(path_) << text;
    command.push_back("--config");
    command.push_back(path_.string());
    return cli.Parse(command);
  }

  std::string Error(const std::string& text, std::vector<std::string> command = {"replay"}) {
    Cli cli;
    return ParseWith(text, cli, std::move(command));
  }

  std::string At(int line) const {
    return "config file " + path_.string() + ":" + std::to_string(line);
  }

  std::filesystem::path path_;
};

TEST_F(ConfigFileTest, KnownKeysApplyAndTheCommandLineWins) {
  Cli cli;
  ASSERT_EQ(ParseWith("# comment\n[replay]\nsessions = 3\narms = [\"a\", \"b\"]\nquiet\n\n"
                      "[emulate.engine]\nport = 9\n",
                      cli),
            "");
  EXPECT_EQ(cli.sessions, 3);
  EXPECT_THAT(cli.arms, ElementsAre("a", "b"));
  EXPECT_TRUE(cli.quiet);
  EXPECT_EQ(cli.port, 9);
  Cli wins;
  ASSERT_EQ(ParseWith("[replay]\nsessions = 3\n", wins, {"replay", "--sessions", "5"}), "");
  EXPECT_EQ(wins.sessions, 5);
}

TEST_F(ConfigFileTest, UnknownKeysNameFileLineAndSection) {
  EXPECT_EQ(Error("# run\n[replay]\nsessionz = 8\n"),
            At(3) + ": unknown option \"sessionz\" in [replay]");
  EXPECT_EQ(Error("[replay]\nsessions = 1\n[replay]\n\nsessionz = 8\n"),
            At(5) + ": unknown option \"sessionz\" in [replay]");
  EXPECT_EQ(Error("replay.sessionz = 8\n"), At(1) + ": unknown option \"sessionz\" in [replay]");
  EXPECT_EQ(Error("[emulate.engine]\nport = 1\nportz = 2\n", {"emulate", "engine"}),
            At(3) + ": unknown option \"portz\" in [emulate.engine]");
  EXPECT_EQ(Error("sessions = 8\n"),
            At(1) +
                ": unknown option \"sessions\" outside any section (a command's flags go "
                "under its section, e.g. [replay])");
  // A key that looks like a known one inside an array value does not hide the real line.
  EXPECT_EQ(Error("[replay]\narms = [\"a\",\n \"sessionz = 1\",\n \"b\"]\nsessionz = 1\n"),
            At(5) + ": unknown option \"sessionz\" in [replay]");
}

TEST_F(ConfigFileTest, UnknownSectionsNameTheirHeader) {
  EXPECT_EQ(Error("[replay]\nsessions = 2\n\n[replayy]\nsessions = 1\n"),
            At(4) + ": unknown section [replayy]");
  EXPECT_EQ(Error("[replay]\nsessions = 2\n[foo]\n[emulate]\n"), At(3) + ": unknown section [foo]");
  EXPECT_EQ(
      Error("[emulate.engine]\nport = 1\n\n[emulate.engin]\nport = 1\n", {"emulate", "engine"}),
      At(4) + ": unknown section [emulate.engin]");
  EXPECT_EQ(Error("[replay]\n[emulat.engine]\nport = 1\n", {"emulate", "engine"}),
            At(2) + ": unknown section [emulat]");
}

TEST_F(ConfigFileTest, OptionsThatAreNotConfigurableAreRefused) {
  EXPECT_EQ(Error("[replay]\nsecret = 1\n"),
            At(2) + ": option \"secret\" in [replay] cannot be set in a config file");
  // --config itself belongs to the top level and cannot be set from a file either.
  EXPECT_EQ(Error("config = \"other.toml\"\n"),
            At(1) +
                ": option \"config\" outside any section (a command's flags go under its "
                "section, e.g. [replay]) cannot be set in a config file");
}

// Nothing of a refused file is applied: the check runs before CLI11 applies the first item.
TEST_F(ConfigFileTest, ARefusedFileAppliesNothing) {
  Cli cli;
  EXPECT_NE(ParseWith("[replay]\nsessions = 3\nsessionz = 4\n", cli), "");
  EXPECT_EQ(cli.sessions, 0);
}

TEST_F(ConfigFileTest, ValuesAreLeftToTheFlags) {
  // A bad value reaches the option and fails as it would on the command line.
  Cli from_file;
  const std::string file_error = ParseWith("[replay]\nsessions = \"abc\"\n", from_file);
  Cli from_flags;
  EXPECT_EQ(file_error, from_flags.Parse({"replay", "--sessions", "abc"}));
  EXPECT_NE(file_error, "");
}

}  // namespace
}  // namespace agentkv::tools
