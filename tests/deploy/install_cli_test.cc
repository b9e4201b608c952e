// `cmake --install` of the build tree into a fresh prefix: the binary runs from there, and the
// documentation and the deployment examples land where docs/OPERATIONS.md says, unchanged.
// Each test installs into its own temporary prefix (CliTest's directory).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_test_support.h"

#if !defined(AGENTKV_CMAKE_COMMAND) || !defined(AGENTKV_BUILD_DIR) || \
    !defined(AGENTKV_SOURCE_DIR) || !defined(AGENTKV_VERSION)
#error "tests/deploy/CMakeLists.txt defines the cmake command, the build and source dirs"
#endif

namespace agentkv {
namespace {

namespace fs = std::filesystem;
using cli_testing::ReadFile;

class InstallTest : public cli_testing::CliTest {
 protected:
  // Installs the build tree into dir_/prefix; returns cmake's exit code.
  int Install() {
    prefix_ = dir_ / "prefix";
    const std::string command = std::string("'") + AGENTKV_CMAKE_COMMAND + "' --install '" +
                                AGENTKV_BUILD_DIR + "' --prefix '" + prefix_.string() + "' >'" +
                                (dir_ / "install.log").string() + "' 2>&1";
    const int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  // Every regular file under `root`, as paths relative to it, sorted.
  static std::vector<std::string> FilesUnder(const fs::path& root) {
    std::vector<std::string> files;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
      if (entry.is_regular_file()) files.push_back(fs::relative(entry.path(), root).string());
    }
    std::sort(files.begin(), files.end());
    return files;
  }

  fs::path prefix_;
};

TEST_F(InstallTest, InstalledBinaryRunsFromThePrefix) {
  ASSERT_EQ(Install(), 0) << ReadFile(dir_ / "install.log");
  const fs::path binary = prefix_ / "bin" / "agentkv";
  ASSERT_TRUE(fs::is_regular_file(binary));
  const std::string out = (dir_ / "version.txt").string();
  const int status = std::system(("'" + binary.string() + "' --version >'" + out + "'").c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(ReadFile(out), std::string("agentkv ") + AGENTKV_VERSION + "\n");
}

TEST_F(InstallTest, InstallsReadmeLicenseAndEveryDocsPage) {
  ASSERT_EQ(Install(), 0) << ReadFile(dir_ / "install.log");
  const fs::path doc = prefix_ / "share" / "doc" / "agentkv";
  const fs::path source = AGENTKV_SOURCE_DIR;
  EXPECT_EQ(ReadFile(doc / "README.md"), ReadFile(source / "README.md"));
  EXPECT_EQ(ReadFile(doc / "LICENSE"), ReadFile(source / "LICENSE"));
  EXPECT_THAT(ReadFile(doc / "LICENSE"), ::testing::HasSubstr("Apache License"));
  // README.md links docs/*.md relatively: the pages sit beside it as in the repository.
  std::vector<std::string> pages;
  for (const std::string& file : FilesUnder(source / "docs")) {
    if (file.ends_with(".md")) pages.push_back(file);
  }
  EXPECT_THAT(pages, ::testing::Contains("OPERATIONS.md"));
  EXPECT_EQ(FilesUnder(doc / "docs"), pages);
  for (const std::string& page : pages) {
    EXPECT_EQ(ReadFile(doc / "docs" / page), ReadFile(source / "docs" / page)) << page;
  }
}

TEST_F(InstallTest, InstallsTheDeployDirectoryAsExamples) {
  ASSERT_EQ(Install(), 0) << ReadFile(dir_ / "install.log");
  const fs::path examples = prefix_ / "share" / "agentkv" / "examples";
  const fs::path source = fs::path(AGENTKV_SOURCE_DIR) / "deploy";
  const std::vector<std::string> files = FilesUnder(source);
  EXPECT_THAT(files, ::testing::IsSupersetOf(
                         {"Dockerfile", "compose.yaml", "prometheus/prometheus.yml",
                          "systemd/agentkv-gateway.service", "grafana/dashboards/agentkv.json"}));
  EXPECT_EQ(FilesUnder(examples), files);
  for (const std::string& file : files) {
    EXPECT_EQ(ReadFile(examples / file), ReadFile(source / file)) << file;
  }
  // The health check keeps its executable bit.
  struct stat info {};
  ASSERT_EQ(stat((examples / "healthcheck.sh").c_str(), &info), 0);
  EXPECT_NE(info.st_mode & S_IXUSR, 0u);
}

}  // namespace
}  // namespace agentkv
