// Two replay results side by side (compare_report.h). Numbers are formatted with snprintf in
// the "C" locale conventions, as in the replay's table. Boost.JSON throws only on allocation
// failure here: parsing goes through the error_code overload.
#include "agentkv/report/compare_report.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <utility>

#include "agentkv/report/internal/json_text.h"

namespace agentkv::report {
namespace {

// `value` through the printf conversion `spec` (one double).
std::string Printf(const char* spec, double value) {
  std::array<char, 64> buffer{};
  std::snprintf(buffer.data(), buffer.size(), spec, value);
  return buffer.data();
}

// `text` right-aligned (left-aligned when `left`) in `width` columns.
std::string Pad(std::string_view text, size_t width, bool left = false) {
  const std::string fill(width > text.size() ? width - text.size() : 0, ' ');
  return left ? std::string(text) + fill : fill + std::string(text);
}

// One table row: the label, then four right-aligned columns.
std::string Row(std::string_view label, std::string_view a, std::string_view b,
                std::string_view difference, std::string_view relative) {
  return "  " + Pad(label, 24, true) + "  " + Pad(a, 14) + "  " + Pad(b, 14) + "  " +
         Pad(difference, 14) + "  " + Pad(relative, 9) + "\n";
}

// An arm document's arms by name, in document order.
struct ArmIndex {
  std::vector<std::string> names;
  std::map<std::string, const boost::json::object*, std::less<>> by_name;
};

StatusOr<ArmIndex> IndexArms(const boost::json::value& doc, std::string_view name) {
  const boost::json::object* root = doc.if_object();
  const boost::json::value* arms = root == nullptr ? nullptr : root->if_contains("arms");
  if (arms == nullptr || !arms->is_array()) {
    return InvalidArgumentError(std::string(name) + ": not a replay result: no `arms` array");
  }
  ArmIndex index;
  const boost::json::array& list = arms->get_array();
  for (size_t i = 0; i < list.size(); ++i) {
    const boost::json::object* arm = list[i].if_object();
    if (arm == nullptr) {
      return InvalidArgumentError(std::string(name) + ": arms[" + std::to_string(i) +
                                  "] is not an object");
    }
    const boost::json::value* arm_name = arm->if_contains("arm");
    if (arm_name == nullptr || !arm_name->is_string()) {
      return InvalidArgumentError(std::string(name) + ": arms[" + std::to_string(i) +
                                  "].arm is not a string");
    }
    std::string key(arm_name->get_string());
    if (!index.by_name.emplace(key, arm).second) {
      return InvalidArgumentError(std::string(name) + ": arms[" + std::to_string(i) +
                                  "].arm: arm \"" + key + "\" appears twice");
    }
    index.names.push_back(std::move(key));
  }
  return index;
}

// The number at `path` (members separated by '.') in `arm`; unset when absent, null or not a
// number.
std::optional<double> NumberAt(const boost::json::object& arm, std::string_view path) {
  const boost::json::object* object = &arm;
  while (true) {
    const size_t dot = path.find('.');
    const boost::json::value* value = object->if_contains(path.substr(0, dot));
    if (value == nullptr) return std::nullopt;
    if (dot == std::string_view::npos) {
      if (!value->is_number()) return std::nullopt;
      return value->to_number<double>();
    }
    object = value->if_object();
    if (object == nullptr) return std::nullopt;
    path.remove_prefix(dot + 1);
  }
}

ArmComparison CompareArm(const std::string& name, const boost::json::object& a,
                         const boost::json::object& b) {
  ArmComparison arm{name, {}};
  for (const CompareMetricKey& key : CompareMetricKeys()) {
    MetricComparison m{std::string(key.path), std::string(key.label), NumberAt(a, key.path),
                       NumberAt(b, key.path), std::nullopt,           std::nullopt};
    if (m.a && m.b) {
      m.difference = *m.b - *m.a;
      if (*m.a != 0 && std::isfinite(*m.difference / *m.a)) m.relative = *m.difference / *m.a;
    }
    arm.metrics.push_back(std::move(m));
  }
  return arm;
}

std::string Cell(const std::optional<double>& value, bool sign) {
  if (!value) return "-";
  // Counts (tokens, requests) print whole, not as 4.8835e+07; fractions keep six digits.
  if (std::trunc(*value) == *value && std::fabs(*value) < 1e15) {
    return Printf(sign ? "%+.0f" : "%.0f", *value);
  }
  return Printf(sign ? "%+.6g" : "%.6g", *value);
}

boost::json::value JsonNumber(const std::optional<double>& value) {
  if (!value) return nullptr;
  return *value;
}

boost::json::array JsonNames(const std::vector<std::string>& names) {
  boost::json::array out;
  for (const std::string& n : names) out.emplace_back(n);
  return out;
}

}  // namespace

const std::vector<CompareMetricKey>& CompareMetricKeys() {
  static const std::vector<CompareMetricKey> keys = {
      {"requests_completed", "requests completed"},
      {"token_hit_ratio_device", "token hit ratio device"},
      {"token_hit_ratio_host", "token hit ratio host"},
      {"uncached_tokens", "uncached tokens"},
      {"ttft.p50_s", "TTFT p50 (s)"},
      {"ttft.p95_s", "TTFT p95 (s)"},
      {"ttft.p99_s", "TTFT p99 (s)"},
      {"server_time.mean_s", "server time mean (s)"},
      {"server_time.p50_s", "server time p50 (s)"},
      {"server_time.p95_s", "server time p95 (s)"},
      {"session_time.p50_s", "session time p50 (s)"},
      {"makespan_s", "makespan (s)"},
      {"output_tokens_per_s", "output tokens/s"},
  };
  return keys;
}

StatusOr<boost::json::value> ParseJsonDocument(std::string_view text, std::string_view name) {
  boost::json::error_code error;
  boost::json::value value = boost::json::parse(text, error);
  if (error) return InvalidArgumentError(std::string(name) + ": not JSON: " + error.message());
  return value;
}

StatusOr<Comparison> CompareReplayResults(const boost::json::value& a, std::string_view a_name,
                                          const boost::json::value& b, std::string_view b_name,
                                          const std::vector<std::string>& arms) {
  StatusOr<ArmIndex> in_a = IndexArms(a, a_name);
  if (!in_a.ok()) return in_a.status();
  StatusOr<ArmIndex> in_b = IndexArms(b, b_name);
  if (!in_b.ok()) return in_b.status();
  for (const std::string& arm : arms) {
    if (!in_a->by_name.contains(arm) && !in_b->by_name.contains(arm)) {
      return InvalidArgumentError("--arms: arm \"" + arm + "\" is in neither " +
                                  std::string(a_name) + " nor " + std::string(b_name));
    }
  }
  auto wanted = [&arms](const std::string& arm) {
    return arms.empty() || std::find(arms.begin(), arms.end(), arm) != arms.end();
  };
  Comparison out{std::string(a_name), std::string(b_name), {}, {}, {}};
  for (const std::string& arm : arms.empty() ? in_a->names : arms) {
    const auto ia = in_a->by_name.find(arm);
    const auto ib = in_b->by_name.find(arm);
    if (ia == in_a->by_name.end()) continue;
    if (ib == in_b->by_name.end()) {
      out.only_in_a.push_back(arm);
    } else {
      out.arms.push_back(CompareArm(arm, *ia->second, *ib->second));
    }
  }
  for (const std::string& arm : in_b->names) {
    if (wanted(arm) && !in_a->by_name.contains(arm)) out.only_in_b.push_back(arm);
  }
  return out;
}

std::string FormatComparison(const Comparison& c) {
  std::string out = "A: " + c.a_name + "\nB: " + c.b_name + "\n";
  for (const ArmComparison& arm : c.arms) {
    out += "\narm " + arm.arm + "\n";
    out += Row("metric", "A", "B", "B-A", "(B-A)/A");
    for (const MetricComparison& m : arm.metrics) {
      const std::string relative = m.relative ? Printf("%+.1f%%", *m.relative * 100) : "-";
      out += Row(m.label, Cell(m.a, false), Cell(m.b, false), Cell(m.difference, true), relative);
    }
  }
  if (c.arms.empty()) out += "\nno arm is in both results\n";
  auto list = [&out](std::string_view which, const std::string& name,
                     const std::vector<std::string>& arms) {
    if (arms.empty()) return;
    out += "\narms only in " + std::string(which) + " (" + name + "):";
    for (const std::string& arm : arms) out += " " + arm;
    out += "\n";
  };
  list("A", c.a_name, c.only_in_a);
  list("B", c.b_name, c.only_in_b);
  return out;
}

std::string ComparisonJson(const Comparison& c) {
  boost::json::object root;
  root["a"] = c.a_name;
  root["b"] = c.b_name;
  boost::json::array arms;
  for (const ArmComparison& arm : c.arms) {
    boost::json::array metrics;
    for (const MetricComparison& m : arm.metrics) {
      metrics.push_back(boost::json::object{{"metric", m.path},
                                            {"label", m.label},
                                            {"a", JsonNumber(m.a)},
                                            {"b", JsonNumber(m.b)},
                                            {"difference", JsonNumber(m.difference)},
                                            {"relative", JsonNumber(m.relative)}});
    }
    arms.push_back(boost::json::object{{"arm", arm.arm}, {"metrics", std::move(metrics)}});
  }
  root["arms"] = std::move(arms);
  root["only_in_a"] = JsonNames(c.only_in_a);
  root["only_in_b"] = JsonNames(c.only_in_b);
  return internal::JsonText(root);
}

}  // namespace agentkv::report
