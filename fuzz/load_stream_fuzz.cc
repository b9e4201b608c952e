// Fuzzes `agentkv load`'s reading of a streamed answer (load::StreamReader), the bytes a live
// server, or anything listening on the port, sends back: /generate's SGLang events and the
// OpenAI routes' chunks, cut into pieces anywhere.
//
// Input: one byte choosing the API and a split stride, then the stream. Invariants: the
// outcome does not depend on where the stream was cut (one piece against pieces of the
// stride); an error's code is in [0, 999]; output events never exceed the events fed.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "agentkv/load/live_request.h"
#include "fuzz_check.h"

namespace {

using agentkv::load::LoadApi;
using agentkv::load::StreamOutcome;
using agentkv::load::StreamReader;

bool SameOutcome(const StreamOutcome& a, const StreamOutcome& b) {
  return a.saw_output == b.saw_output && a.prompt_tokens == b.prompt_tokens &&
         a.completion_tokens == b.completion_tokens && a.cached_tokens == b.cached_tokens &&
         a.cached_device_tokens == b.cached_device_tokens &&
         a.cached_host_tokens == b.cached_host_tokens && a.output_ids == b.output_ids &&
         a.output_events == b.output_events && a.error == b.error && a.error_code == b.error_code;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const LoadApi api = static_cast<LoadApi>(data[0] % 3);
  const size_t stride = 1 + (data[0] >> 2);
  const std::string_view stream(reinterpret_cast<const char*>(data + 1), size - 1);

  StreamReader whole(api);
  whole.Feed(stream);
  StreamReader pieces(api);
  for (size_t at = 0; at < stream.size(); at += stride) pieces.Feed(stream.substr(at, stride));

  FUZZ_CHECK(whole.status().ok() == pieces.status().ok());
  FUZZ_CHECK(whole.done() == pieces.done());
  if (whole.status().ok()) FUZZ_CHECK(SameOutcome(whole.outcome(), pieces.outcome()));
  for (const StreamReader* reader : {&whole, &pieces}) {
    const StreamOutcome& outcome = reader->outcome();
    if (outcome.error_code.has_value()) {
      FUZZ_CHECK(*outcome.error_code >= 0 && *outcome.error_code <= 999);
    }
    FUZZ_CHECK(outcome.output_events >= 0);
    FUZZ_CHECK(static_cast<size_t>(outcome.output_events) <= stream.size());
  }
  return 0;
}
