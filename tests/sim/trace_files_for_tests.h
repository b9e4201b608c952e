// Trace files for tests of the trace readers: a fixture with a private scratch directory, and
// gzip compression (the readers read gzip files as they are): the bytes `gzip` would write for
// a text, and a file of them.
#ifndef AGENTKV_TESTS_SIM_TRACE_FILES_FOR_TESTS_H_
#define AGENTKV_TESTS_SIM_TRACE_FILES_FOR_TESTS_H_

#include <gtest/gtest.h>

#include <boost/iostreams/device/back_inserter.hpp>
#include <boost/iostreams/filter/gzip.hpp>
#include <boost/iostreams/filtering_stream.hpp>
#include <filesystem>
#include <fstream>
#include <string>

namespace agentkv::sim::testing_support {

// `text` compressed as one gzip member (RFC 1952).
inline std::string Gzip(const std::string& text) {
  std::string out;
  {
    boost::iostreams::filtering_ostream gzip;
    gzip.push(boost::iostreams::gzip_compressor());
    gzip.push(boost::iostreams::back_inserter(out));
    gzip << text;
  }  // The member's footer is written when the stream is destroyed.
  return out;
}

// Writes `bytes` to `path` as they are.
inline void WriteBytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A test with its own empty directory, dir_, named after the suite and the test (so that tests
// may run in parallel), made before the test and removed after it.
class ScratchDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("agentkv_" + std::string(test->test_suite_name()) + "_" + test->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
};

}  // namespace agentkv::sim::testing_support

#endif  // AGENTKV_TESTS_SIM_TRACE_FILES_FOR_TESTS_H_
