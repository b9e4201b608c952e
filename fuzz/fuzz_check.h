// FUZZ_CHECK: an invariant of a fuzz target. A violation prints the condition and aborts,
// which libFuzzer reports as a finding and saves the input as a crash-* file.
#ifndef AGENTKV_FUZZ_FUZZ_CHECK_H_
#define AGENTKV_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(condition)                                                                 \
  do {                                                                                        \
    if (!(condition)) {                                                                       \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                           \
    }                                                                                         \
  } while (false)

#endif  // AGENTKV_FUZZ_FUZZ_CHECK_H_
