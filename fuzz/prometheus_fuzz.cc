// Fuzzes the Prometheus text parser and writer.
//
// Invariants: failures are InvalidArgument/ResourceExhausted; the family parser accepts a
// subset of what the sample parser accepts and finds the same samples; writing parsed
// families and parsing the result gives back exactly the same samples (values round-trip
// bit for bit, NaN as NaN), hence the same MaxByName.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "agentkv/protocol/prometheus.h"
#include "fuzz_check.h"

namespace {

using agentkv::StatusCode;
using namespace agentkv::protocol;

bool IsInputError(const agentkv::Status& status) {
  return status.code() == StatusCode::kInvalidArgument ||
         status.code() == StatusCode::kResourceExhausted;
}

std::vector<Sample> Flatten(const std::vector<MetricFamily>& families) {
  std::vector<Sample> samples;
  for (const MetricFamily& family : families) {
    samples.insert(samples.end(), family.samples.begin(), family.samples.end());
  }
  return samples;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const agentkv::StatusOr<std::vector<Sample>> samples = ParsePrometheusText(text);
  FUZZ_CHECK(samples.ok() || IsInputError(samples.status()));
  const agentkv::StatusOr<std::vector<MetricFamily>> families = ParsePrometheusFamilies(text);
  FUZZ_CHECK(families.ok() || IsInputError(families.status()));
  if (samples.ok()) MaxByName(*samples);
  if (!families.ok()) return 0;
  FUZZ_CHECK(samples.ok());
  FUZZ_CHECK(Flatten(*families) == *samples);

  const std::string written = WritePrometheusText(*families);
  const agentkv::StatusOr<std::vector<MetricFamily>> again = ParsePrometheusFamilies(written);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(Flatten(*again) == *samples);
  const std::map<std::string, double> max = MaxByName(*samples);
  FUZZ_CHECK(MaxByName(Flatten(*again)) == max);
  for (const auto& [name, value] : max) FUZZ_CHECK(!std::isnan(value));
  return 0;
}
