// Helpers shared by the protocol tests: fixture files and the malformed-input sweep.
#ifndef AGENTKV_TESTS_PROTOCOL_PROTOCOL_TEST_SUPPORT_H_
#define AGENTKV_TESTS_PROTOCOL_PROTOCOL_TEST_SUPPORT_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <string_view>

#include "agentkv/base/rng.h"
#include "agentkv/base/status.h"

namespace agentkv::protocol::testing_support {

// The bytes of tests/protocol/testdata/<name>; fails the test when the file is missing.
inline std::string ReadTestdata(std::string_view name) {
  // Appended, not `+` on temporaries: GCC 12 at -O1 warns falsely (-Warray-bounds) on that.
  std::string path = AGENTKV_PROTOCOL_TESTDATA;
  path += '/';
  path += name;
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing fixture " << path;
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// A failure status must carry one of the codes parsers use for bad input and say what is
// wrong.
inline void ExpectInputError(const Status& status) {
  if (status.ok()) return;
  EXPECT_TRUE(status.code() == StatusCode::kInvalidArgument ||
              status.code() == StatusCode::kResourceExhausted)
      << status;
  EXPECT_FALSE(status.message().empty());
}

// Calls `check` on every truncation of `text` and on seeded random single-byte edits
// (replace, delete, insert) at every position; `check` asserts on the parser's result. The
// seed is in the trace of any failure.
inline void ForEachMalformedVariant(std::string_view text, uint64_t seed,
                                    const std::function<void(const std::string&)>& check) {
  static constexpr char kByteTable[] = "\"{}[],:\\\0\xff\xc3\x80 0-+e.n\r\n#=tfu@";
  constexpr std::string_view kBytes(kByteTable, sizeof(kByteTable) - 1);
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  for (size_t i = 0; i <= text.size(); ++i) {
    check(std::string(text.substr(0, i)));
    if (i == text.size()) break;
    const char byte =
        kBytes[static_cast<size_t>(rng.Uniform(0, static_cast<int64_t>(kBytes.size()) - 1))];
    std::string replaced(text);
    replaced[i] = byte;
    check(replaced);
    std::string deleted(text);
    deleted.erase(i, 1);
    check(deleted);
    std::string inserted(text);
    inserted.insert(i, 1, byte);
    check(inserted);
  }
}

}  // namespace agentkv::protocol::testing_support

#endif  // AGENTKV_TESTS_PROTOCOL_PROTOCOL_TEST_SUPPORT_H_
