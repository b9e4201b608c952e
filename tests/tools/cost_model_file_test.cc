// Tests of ReadCostModelFile, the `--cost-model FILE` reader: each key lands in its
// CostModelOptions field (with its unit), keys left out keep the base's values, and every
// malformed file is one InvalidArgument naming the file, the key and the value.
#include "tools/agentkv/cost_model_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace agentkv::tools {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

class CostModelFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("cost_model_file_" + std::string(info->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& text) const {
    const std::filesystem::path path = dir_ / "cost.toml";
    std::ofstream(path) << text;
    return path.string();
  }

  std::filesystem::path dir_;
};

TEST_F(CostModelFileTest, EveryKeyLandsInItsFieldWithItsUnit) {
  const std::string path = Write(
      "[cost-model]\n"
      "mfu = 0.6\n"
      "decode_mfu = 0.3\n"
      "mbu = 0.7\n"
      "host_link_efficiency = 0.5\n"
      "overlap_host_load = false\n"
      "step_overhead_us = 750\n"
      "allreduce_latency_us = 8.5\n"
      "memory_fraction = 0.88\n"
      "activation_reserve_gib = 1.5\n");
  const StatusOr<engine::CostModelOptions> options = ReadCostModelFile(path, {});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_DOUBLE_EQ(options->mfu, 0.6);
  EXPECT_DOUBLE_EQ(options->decode_mfu, 0.3);
  EXPECT_DOUBLE_EQ(options->mbu, 0.7);
  EXPECT_DOUBLE_EQ(options->host_link_efficiency, 0.5);
  EXPECT_FALSE(options->overlap_host_load);
  EXPECT_EQ(options->step_overhead, TimeNs(750'000));
  EXPECT_EQ(options->allreduce_latency, TimeNs(8'500));
  EXPECT_DOUBLE_EQ(options->memory_fraction, 0.88);
  EXPECT_EQ(options->activation_reserve_bytes_per_gpu, int64_t{3} << 29);
  // Every documented key was exercised.
  EXPECT_EQ(CostModelFileKeys().size(), 9U);
}

TEST_F(CostModelFileTest, KeysLeftOutKeepTheBaseValues) {
  engine::CostModelOptions base;
  base.mbu = 0.55;
  base.overlap_host_load = false;
  const StatusOr<engine::CostModelOptions> options = ReadCostModelFile(Write("mfu = 0.4\n"), base);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_DOUBLE_EQ(options->mfu, 0.4);
  EXPECT_DOUBLE_EQ(options->mbu, 0.55);
  EXPECT_FALSE(options->overlap_host_load);
  EXPECT_DOUBLE_EQ(options->decode_mfu, base.decode_mfu);
  // An empty file is the base itself.
  const StatusOr<engine::CostModelOptions> empty = ReadCostModelFile(Write(""), base);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_DOUBLE_EQ(empty->mbu, 0.55);
}

TEST_F(CostModelFileTest, MalformedFilesNameFileKeyAndValue) {
  struct Case {
    std::string text;
    std::string expect;
  };
  for (const Case& c : {
           Case{"mfu = fast\n", "mfu = \"fast\" is not a number"},
           Case{"mfu = 0.5x\n", "mfu = \"0.5x\" is not a number"},
           Case{"mbu = 1.01\n", "mbu = 1.01 is out of range (0, 1]"},
           Case{"host_link_efficiency = 0\n", "host_link_efficiency = 0 is out of range"},
           Case{"overlap_host_load = yes\n", "overlap_host_load = \"yes\" is not true or false"},
           Case{"allreduce_latency_us = 2000\n",
                "allreduce_latency_us = 2000 is out of range [0, 1000]"},
           Case{"step_overhead_us = 1e9\n", "step_overhead_us = 1e9 is out of range"},
           Case{"activation_reserve_gib = -1\n", "activation_reserve_gib = -1 is out of range"},
           Case{"mfu = [0.5, 0.6]\n", "mfu = \"0.5, 0.6\" is not one value"},
           Case{"gpu = \"h100\"\n", "unknown key \"gpu\"; known: mfu decode_mfu"},
           Case{"[engine]\nmfu = 0.5\n", "unknown section [engine] (key \"mfu\")"},
           Case{"mfu = 0.5\n[cost-model]\nmfu = 0.6\n", "key \"mfu\" is given twice"},
       }) {
    const std::string path = Write(c.text);
    const StatusOr<engine::CostModelOptions> options = ReadCostModelFile(path, {});
    ASSERT_EQ(options.status().code(), StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(options.status().message(),
                AllOf(HasSubstr("cost model file " + path + ": "), HasSubstr(c.expect)))
        << c.text;
  }
  const StatusOr<engine::CostModelOptions> missing =
      ReadCostModelFile((dir_ / "absent.toml").string(), {});
  ASSERT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(), HasSubstr("absent.toml"));
}

}  // namespace
}  // namespace agentkv::tools
