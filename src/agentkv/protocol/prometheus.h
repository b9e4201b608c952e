// Prometheus text exposition format 0.0.4: a parser for engines' `/metrics` and a writer for
// the emulator's.
//
// SGLang exports each scheduler gauge once per TP rank with the same value (docs/PROTOCOL.md
// section 11.1), so per-engine gauges aggregate by max over lines, never by sum: MaxByName is that
// rule (section 11.4). The parser keeps labels (tp_rank, dp_rank, cache_source, ...) so that
// callers can make other choices explicitly, e.g. for counters. It never crashes on arbitrary
// bytes: every failure is a Status naming the 1-based line and what is wrong. Pure
// functions; value types are thread-compatible.
#ifndef AGENTKV_PROTOCOL_PROMETHEUS_H_
#define AGENTKV_PROTOCOL_PROMETHEUS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentkv/base/status.h"

namespace agentkv::protocol {

struct Label {
  std::string name;
  std::string value;  // Unescaped.

  friend bool operator==(const Label&, const Label&) = default;
};

// One sample line: `name{labels} value [timestamp_ms]`. Histogram and summary series
// (`_bucket` with `le`, `_sum`, `_count`) are ordinary samples.
struct Sample {
  std::string name;
  std::vector<Label> labels;  // In the order written.
  double value = 0;           // May be NaN or +/-infinity.
  std::optional<int64_t> timestamp_ms;

  // Exact equality, except that a NaN value equals a NaN value.
  friend bool operator==(const Sample& a, const Sample& b);
};

// Bounds on what the parser accepts; a breach is ResourceExhausted.
struct PrometheusLimits {
  size_t max_bytes = size_t{16} << 20;       // Default: 16 MiB of text.
  size_t max_line_bytes = size_t{64} << 10;  // Default: 64 KiB per line.
  size_t max_labels = 64;                    // Default: 64 labels per sample.
  size_t max_samples = 1'000'000;            // Default: one million sample lines.
};

// Parses every sample line of `text`. Lines end in "\n" or "\r\n"; blank lines and every line
// whose first non-blank byte is '#' (HELP, TYPE, other comments) are skipped. Label values
// take the escapes \\, \" and \n; a trailing comma in a label set is allowed; values are
// decimal or exponent floats, NaN, +Inf, -Inf (case-insensitive); an optional integer
// timestamp may follow. InvalidArgument: "line N: <what is wrong>"; ResourceExhausted over
// `limits`.
StatusOr<std::vector<Sample>> ParsePrometheusText(std::string_view text,
                                                  const PrometheusLimits& limits = {});

// A metric family as written: its HELP and TYPE lines and the samples that follow them.
struct MetricFamily {
  std::string name;
  std::string help;  // Unescaped; empty: no HELP line is written.
  std::string type;  // gauge|counter|histogram|summary|untyped; empty: no TYPE line.
  std::vector<Sample> samples;

  friend bool operator==(const MetricFamily&, const MetricFamily&) = default;
};

// Parses `text` into families: a `# HELP` or `# TYPE` line opens the family it names (or
// continues the current one of that name); a sample joins the current family when its name is
// the family name or the family name plus _bucket, _sum, _count, _total or _created, and
// otherwise opens an untyped family of its own name. Unlike ParsePrometheusText, malformed
// HELP/TYPE lines and unknown types are InvalidArgument. Same limits and errors otherwise.
StatusOr<std::vector<MetricFamily>> ParsePrometheusFamilies(std::string_view text,
                                                            const PrometheusLimits& limits = {});

// Writes `families` as exposition text: `# HELP` (help escaped: \\ and \n) when help is set,
// `# TYPE` when type is set, then one line per sample (the family name when a sample's name is
// empty), label values escaped (\\, \", \n), values as the shortest text that parses back to
// the same double ("NaN", "+Inf", "-Inf" as Prometheus spells them), a space and the
// timestamp when set, each line ending in "\n". Precondition: names are valid metric and
// label names.
std::string WritePrometheusText(const std::vector<MetricFamily>& families);

// One value as WritePrometheusText prints it ("0.915", "262144.0", "+Inf", "NaN").
std::string FormatPrometheusValue(double value);

// Per metric name, the max value over all its lines, labels ignored; NaN lines are skipped
// (a name with only NaN lines is absent). The aggregation for TP-replicated gauges.
std::map<std::string, double> MaxByName(const std::vector<Sample>& samples);

// The value of label `name` of `sample`, or nullopt.
std::optional<std::string_view> FindLabel(const Sample& sample, std::string_view name);

}  // namespace agentkv::protocol

#endif  // AGENTKV_PROTOCOL_PROMETHEUS_H_
