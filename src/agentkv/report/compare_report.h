// Two replay results side by side: `agentkv compare A.json B.json`.
//
// Both documents are the replay's JSON (ReplayResultJson, docs/REPLAY.md): an object with an
// `arms` array whose entries carry an `arm` name and the arm's metrics. A is typically the
// prediction (a replay) and B the measurement (later, `agentkv load` writes the same schema from
// a measured fleet); today any two replay results compare, e.g. two seeds or two versions.
//
// Arms are matched by name; an arm in one document only is listed as such. For each matched arm
// a fixed list of headline metrics (CompareMetricKeys) gets A, B, B - A and (B - A) / A; a value
// missing, null or not a number in either document is unset, and so are the differences that
// need it; the relative difference is unset where A is 0. All functions are pure (no I/O, no
// clocks) and thread-safe; equal inputs give byte-identical text.
#ifndef AGENTKV_REPORT_COMPARE_REPORT_H_
#define AGENTKV_REPORT_COMPARE_REPORT_H_

#include <boost/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentkv/base/status.h"

namespace agentkv::report {

// One headline metric: its path in an arm object ("ttft.p95_s": member p95_s of member ttft)
// and its label in the table.
struct CompareMetricKey {
  std::string_view path;
  std::string_view label;
};

// The compared metrics, in table order.
const std::vector<CompareMetricKey>& CompareMetricKeys();

// One metric of one arm in both documents. Unset values are written `-` (table) or null (JSON).
struct MetricComparison {
  std::string path;
  std::string label;
  std::optional<double> a;
  std::optional<double> b;
  std::optional<double> difference;  // B - A, when both are set.
  std::optional<double> relative;    // (B - A) / A, when both are set and A != 0.
};

struct ArmComparison {
  std::string arm;
  std::vector<MetricComparison> metrics;  // One per CompareMetricKeys(), in its order.
};

struct Comparison {
  std::string a_name;  // How the documents are named in the output (e.g. their paths).
  std::string b_name;
  std::vector<ArmComparison> arms;     // Matched arms, in A's order.
  std::vector<std::string> only_in_a;  // In A's order.
  std::vector<std::string> only_in_b;  // In B's order.
};

// `text` parsed as JSON. InvalidArgument "<name>: not JSON: <reason>" when it is not.
StatusOr<boost::json::value> ParseJsonDocument(std::string_view text, std::string_view name);

// The comparison of the arms of `a` against those of `b`, restricted to `arms` when it is not
// empty (in `arms`' order). InvalidArgument naming the document and the field when either is
// not a replay result ("<name>: not a replay result: no `arms` array", "<name>: arms[2].arm is
// not a string", a duplicate arm name), or when an arm of `arms` is in neither document.
StatusOr<Comparison> CompareReplayResults(const boost::json::value& a, std::string_view a_name,
                                          const boost::json::value& b, std::string_view b_name,
                                          const std::vector<std::string>& arms = {});

// The terminal text: the two names, one block per matched arm (metric, A, B, B-A, (B-A)/A),
// then the arms found in one document only. Ends with a newline.
std::string FormatComparison(const Comparison& comparison);

// The comparison as pretty-printed JSON: {"a", "b", "arms": [{"arm", "metrics": [{"metric"
// (the path), "label", "a", "b", "difference", "relative"}]}], "only_in_a", "only_in_b"}, unset
// values as null. Ends with a newline.
std::string ComparisonJson(const Comparison& comparison);

}  // namespace agentkv::report

#endif  // AGENTKV_REPORT_COMPARE_REPORT_H_
