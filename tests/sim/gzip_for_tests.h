// Gzip compression for tests of the trace readers, which read gzip files as they are: the
// bytes `gzip` would write for a text, and a file of them in a test's directory.
#ifndef AGENTKV_TESTS_SIM_GZIP_FOR_TESTS_H_
#define AGENTKV_TESTS_SIM_GZIP_FOR_TESTS_H_

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

}  // namespace agentkv::sim::testing_support

#endif  // AGENTKV_TESTS_SIM_GZIP_FOR_TESTS_H_
