#include "agentkv/base/check.h"

#include <cstdio>
#include <cstdlib>

namespace agentkv::internal {

CheckFailure::CheckFailure(const char* file, int line, const char* condition) {
  stream_ << file << ":" << line << ": CHECK failed: " << condition << " ";
}

CheckFailure::~CheckFailure() {
  // Writing to stderr on the way to abort() is the one output the pure core performs: the
  // process is ending on a programmer error and the message is all that is left.
  std::fprintf(stderr, "%s\n", stream_.str().c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace agentkv::internal
