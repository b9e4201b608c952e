#include "agentkv/protocol/prometheus.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <system_error>
#include <utility>

#include "agentkv/protocol/json_util.h"

// Invariants: the parser reads every byte through bounds-checked accessors, so arbitrary
// input yields a Status, never a crash; WritePrometheusText output of families that each
// carry a TYPE or HELP line (and samples named after them) parses back with
// ParsePrometheusFamilies to equal families.

namespace agentkv::protocol {
namespace {

bool IsBlank(char c) { return c == ' ' || c == '\t'; }
bool IsNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}
bool IsNameChar(char c) { return IsNameStart(c) || (c >= '0' && c <= '9'); }
bool IsLabelNameStart(char c) { return IsNameStart(c) && c != ':'; }
bool IsLabelNameChar(char c) { return IsNameChar(c) && c != ':'; }

bool IsKnownType(std::string_view type) {
  for (const std::string_view known : {"counter", "gauge", "histogram", "summary", "untyped",
                                       "unknown", "info", "stateset", "gaugehistogram"}) {
    if (type == known) return true;
  }
  return false;
}

// Parses one float token: decimal or exponent form, NaN, Inf/Infinity with an optional sign.
std::optional<double> ParseValue(std::string_view token) {
  if (token.empty()) return std::nullopt;
  bool negate = false;
  if (token[0] == '+' || token[0] == '-') {
    negate = token[0] == '-';
    token.remove_prefix(1);
    if (token.empty() || token[0] == '+' || token[0] == '-') return std::nullopt;
  }
  double value = 0;
  const std::from_chars_result result =
      std::from_chars(token.data(), token.data() + token.size(), value);
  if (result.ec != std::errc() || result.ptr != token.data() + token.size()) {
    // Out-of-range literals such as 1e999 are valid Prometheus values: they mean +/-Inf or 0.
    if (result.ec == std::errc::result_out_of_range && result.ptr == token.data() + token.size()) {
      const size_t e = token.find_first_of("eE");
      const bool tiny = e != std::string_view::npos && e + 1 < token.size() && token[e + 1] == '-';
      value = tiny ? 0.0 : std::numeric_limits<double>::infinity();
    } else {
      return std::nullopt;
    }
  }
  return negate ? -value : value;
}

// Reads one line of exposition text.
class LineParser {
 public:
  LineParser(std::string_view line, size_t line_number, const PrometheusLimits& limits)
      : line_(line), line_number_(line_number), limits_(limits) {}

  Status Error(std::string_view what) const {
    return InvalidArgumentError("line " + std::to_string(line_number_) + ": " + std::string(what));
  }

  void SkipBlanks() {
    while (pos_ < line_.size() && IsBlank(line_[pos_])) ++pos_;
  }
  bool AtEnd() const { return pos_ >= line_.size(); }
  char Peek() const { return pos_ < line_.size() ? line_[pos_] : '\0'; }

  std::string_view ReadName() {
    const size_t begin = pos_;
    if (pos_ < line_.size() && IsNameStart(line_[pos_])) {
      ++pos_;
      while (pos_ < line_.size() && IsNameChar(line_[pos_])) ++pos_;
    }
    return line_.substr(begin, pos_ - begin);
  }

  std::string_view ReadToken() {
    const size_t begin = pos_;
    while (pos_ < line_.size() && !IsBlank(line_[pos_])) ++pos_;
    return line_.substr(begin, pos_ - begin);
  }

  std::string_view Rest() const { return line_.substr(std::min(pos_, line_.size())); }

  // `# HELP name text` or `# TYPE name type`; other comments leave `*keyword` empty.
  Status ParseComment(std::string* keyword, std::string* name, std::string* payload) {
    ++pos_;  // '#'
    SkipBlanks();
    const std::string_view word = ReadToken();
    if (word != "HELP" && word != "TYPE") return Status::Ok();
    if (!AtEnd() && !IsBlank(Peek())) return Status::Ok();
    SkipBlanks();
    const std::string_view metric = ReadName();
    if (metric.empty()) return Error("expected a metric name after # " + std::string(word));
    if (!AtEnd() && !IsBlank(Peek())) return Error("invalid metric name in # " + std::string(word));
    SkipBlanks();
    keyword->assign(word);
    name->assign(metric);
    if (word == "TYPE") {
      const std::string_view type = ReadToken();
      SkipBlanks();
      if (!AtEnd()) return Error("unexpected text after the metric type");
      if (!IsKnownType(type)) return Error("unknown metric type \"" + std::string(type) + "\"");
      payload->assign(type);
      return Status::Ok();
    }
    // HELP text: \\ and \n are escapes; any other backslash is kept as written.
    const std::string_view text = Rest();
    payload->clear();
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\\' && i + 1 < text.size() && (text[i + 1] == '\\' || text[i + 1] == 'n')) {
        *payload += text[i + 1] == 'n' ? '\n' : '\\';
        ++i;
      } else {
        *payload += text[i];
      }
    }
    return Status::Ok();
  }

  Status ParseLabels(std::vector<Label>* labels) {
    ++pos_;  // '{'
    while (true) {
      SkipBlanks();
      if (AtEnd()) return Error("unterminated label set");
      if (Peek() == '}') {
        ++pos_;
        return Status::Ok();
      }
      const size_t begin = pos_;
      if (!IsLabelNameStart(Peek())) return Error("expected a label name");
      while (pos_ < line_.size() && IsLabelNameChar(line_[pos_])) ++pos_;
      Label label;
      label.name.assign(line_.substr(begin, pos_ - begin));
      SkipBlanks();
      if (Peek() != '=') return Error("expected '=' after label name \"" + label.name + "\"");
      ++pos_;
      SkipBlanks();
      if (Peek() != '"')
        return Error("expected '\"' to open the value of label \"" + label.name + "\"");
      ++pos_;
      bool closed = false;
      while (pos_ < line_.size()) {
        const char c = line_[pos_++];
        if (c == '"') {
          closed = true;
          break;
        }
        if (c != '\\') {
          label.value += c;
          continue;
        }
        if (pos_ >= line_.size()) break;
        const char escaped = line_[pos_++];
        if (escaped == '\\' || escaped == '"') {
          label.value += escaped;
        } else if (escaped == 'n') {
          label.value += '\n';
        } else {
          return Error("invalid escape \\" + std::string(1, escaped) + " in label \"" + label.name +
                       "\"");
        }
      }
      if (!closed) return Error("unterminated value of label \"" + label.name + "\"");
      for (const Label& existing : *labels) {
        if (existing.name == label.name) return Error("duplicate label \"" + label.name + "\"");
      }
      if (labels->size() >= limits_.max_labels) {
        return ResourceExhaustedError("line " + std::to_string(line_number_) + ": more than " +
                                      std::to_string(limits_.max_labels) + " labels");
      }
      labels->push_back(std::move(label));
      SkipBlanks();
      if (AtEnd()) return Error("unterminated label set");
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      if (Peek() == '}') {
        ++pos_;
        return Status::Ok();
      }
      return Error("expected ',' or '}' after the value of label \"" + labels->back().name + "\"");
    }
  }

  Status ParseSample(Sample* sample) {
    const std::string_view name = ReadName();
    if (name.empty()) return Error("expected a metric name");
    sample->name.assign(name);
    bool had_labels = false;
    if (Peek() == '{') {
      AGENTKV_RETURN_IF_ERROR(ParseLabels(&sample->labels));
      had_labels = true;
    }
    if (!had_labels && !AtEnd() && !IsBlank(Peek())) {
      return Error("invalid character '" + std::string(1, Peek()) + "' in metric name");
    }
    SkipBlanks();
    if (AtEnd()) return Error("missing value for \"" + sample->name + "\"");
    const std::string_view value_token = ReadToken();
    const std::optional<double> value = ParseValue(value_token);
    if (!value) return Error("invalid value \"" + std::string(value_token) + "\"");
    sample->value = *value;
    SkipBlanks();
    if (AtEnd()) return Status::Ok();
    const std::string_view timestamp_token = ReadToken();
    int64_t timestamp = 0;
    const std::from_chars_result result = std::from_chars(
        timestamp_token.data(), timestamp_token.data() + timestamp_token.size(), timestamp);
    if (result.ec != std::errc() || result.ptr != timestamp_token.data() + timestamp_token.size()) {
      return Error("invalid timestamp \"" + std::string(timestamp_token) + "\"");
    }
    sample->timestamp_ms = timestamp;
    SkipBlanks();
    if (!AtEnd()) return Error("unexpected text after the timestamp");
    return Status::Ok();
  }

 private:
  std::string_view line_;
  size_t line_number_;
  const PrometheusLimits& limits_;
  size_t pos_ = 0;
};

bool SampleBelongsTo(std::string_view sample_name, std::string_view family) {
  if (sample_name == family) return true;
  if (sample_name.size() <= family.size() || sample_name.substr(0, family.size()) != family) {
    return false;
  }
  const std::string_view suffix = sample_name.substr(family.size());
  return suffix == "_bucket" || suffix == "_sum" || suffix == "_count" || suffix == "_total" ||
         suffix == "_created";
}

// Walks the lines of `text`. With `families` set, HELP/TYPE lines are checked and samples are
// grouped; otherwise comments are skipped unread and samples go to `samples`.
Status ParseLines(std::string_view text, const PrometheusLimits& limits,
                  std::vector<Sample>* samples, std::vector<MetricFamily>* families) {
  if (text.size() > limits.max_bytes) {
    return ResourceExhaustedError("metrics text is " + std::to_string(text.size()) +
                                  " bytes, over the limit of " + std::to_string(limits.max_bytes));
  }
  size_t sample_count = 0;
  size_t line_number = 0;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(begin, end - begin);
    begin = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.size() > limits.max_line_bytes) {
      return ResourceExhaustedError("line " + std::to_string(line_number) + ": longer than " +
                                    std::to_string(limits.max_line_bytes) + " bytes");
    }
    LineParser parser(line, line_number, limits);
    parser.SkipBlanks();
    if (parser.AtEnd()) continue;
    if (parser.Peek() == '#') {
      if (families == nullptr) continue;
      std::string keyword;
      std::string name;
      std::string payload;
      AGENTKV_RETURN_IF_ERROR(parser.ParseComment(&keyword, &name, &payload));
      if (keyword.empty()) continue;
      if (families->empty() || families->back().name != name) {
        families->push_back(MetricFamily{.name = name, .help = {}, .type = {}, .samples = {}});
      }
      if (keyword == "HELP") {
        families->back().help = std::move(payload);
      } else {
        families->back().type = std::move(payload);
      }
      continue;
    }
    if (++sample_count > limits.max_samples) {
      return ResourceExhaustedError("more than " + std::to_string(limits.max_samples) + " samples");
    }
    Sample sample;
    AGENTKV_RETURN_IF_ERROR(parser.ParseSample(&sample));
    if (families == nullptr) {
      samples->push_back(std::move(sample));
      continue;
    }
    if (families->empty() || !SampleBelongsTo(sample.name, families->back().name)) {
      families->push_back(MetricFamily{.name = sample.name, .help = {}, .type = {}, .samples = {}});
    }
    families->back().samples.push_back(std::move(sample));
  }
  return Status::Ok();
}

void AppendEscaped(std::string& out, std::string_view text, bool escape_quotes) {
  for (const char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && escape_quotes) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
}

}  // namespace

bool operator==(const Sample& a, const Sample& b) {
  const bool same_value = a.value == b.value || (std::isnan(a.value) && std::isnan(b.value));
  return same_value && a.name == b.name && a.labels == b.labels && a.timestamp_ms == b.timestamp_ms;
}

StatusOr<std::vector<Sample>> ParsePrometheusText(std::string_view text,
                                                  const PrometheusLimits& limits) {
  std::vector<Sample> samples;
  AGENTKV_RETURN_IF_ERROR(ParseLines(text, limits, &samples, nullptr));
  return samples;
}

StatusOr<std::vector<MetricFamily>> ParsePrometheusFamilies(std::string_view text,
                                                            const PrometheusLimits& limits) {
  std::vector<MetricFamily> families;
  AGENTKV_RETURN_IF_ERROR(ParseLines(text, limits, nullptr, &families));
  return families;
}

std::string FormatPrometheusValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  std::string text;
  AppendShortestDouble(text, value);
  return text;
}

std::string WritePrometheusText(const std::vector<MetricFamily>& families) {
  std::string out;
  for (const MetricFamily& family : families) {
    if (!family.help.empty()) {
      out += "# HELP ";
      out += family.name;
      out += ' ';
      AppendEscaped(out, family.help, /*escape_quotes=*/false);
      out += '\n';
    }
    if (!family.type.empty()) {
      out += "# TYPE ";
      out += family.name;
      out += ' ';
      out += family.type;
      out += '\n';
    }
    for (const Sample& sample : family.samples) {
      out += sample.name.empty() ? family.name : sample.name;
      if (!sample.labels.empty()) {
        out += '{';
        for (size_t i = 0; i < sample.labels.size(); ++i) {
          if (i > 0) out += ',';
          out += sample.labels[i].name;
          out += "=\"";
          AppendEscaped(out, sample.labels[i].value, /*escape_quotes=*/true);
          out += '"';
        }
        out += '}';
      }
      out += ' ';
      out += FormatPrometheusValue(sample.value);
      if (sample.timestamp_ms) {
        out += ' ';
        out += std::to_string(*sample.timestamp_ms);
      }
      out += '\n';
    }
  }
  return out;
}

std::map<std::string, double> MaxByName(const std::vector<Sample>& samples) {
  std::map<std::string, double> max_by_name;
  for (const Sample& sample : samples) {
    if (std::isnan(sample.value)) continue;
    const auto [it, inserted] = max_by_name.emplace(sample.name, sample.value);
    if (!inserted) it->second = std::max(it->second, sample.value);
  }
  return max_by_name;
}

std::optional<std::string_view> FindLabel(const Sample& sample, std::string_view name) {
  for (const Label& label : sample.labels) {
    if (label.name == name) return std::string_view(label.value);
  }
  return std::nullopt;
}

}  // namespace agentkv::protocol
