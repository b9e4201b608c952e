// Invariants: every returned request has token counts in [0, kMaxTokens], times (t, think_time,
// api_time; a sub-agent's completion and duration) in [0, kMaxTimeNs], at most ceil(in /
// block_size) hash ids, and each agent's think times add up to at most kMaxTimeNs; requests and
// sub-agents keep file order; a file yields one conversation or the whole parse fails with the
// first error, which names the source, the line and the JSON path. No exception escapes: Boost.JSON
// is used only through its error_code and if_* interfaces, and the file system only through its
// error_code overloads.
#include "agentkv/sim/workload/weka_trace.h"

#include <algorithm>
#include <boost/json/value.hpp>
#include <filesystem>
#include <functional>
#include <optional>
#include <sstream>
#include <system_error>
#include <utility>

#include "agentkv/base/bounds.h"
#include "agentkv/sim/workload/trace_input.h"

namespace agentkv::sim {
namespace {

// Tighter than the token rule: a block is a unit of KV allocation, and no engine uses blocks
// of more than a few thousand tokens (WEKA uses 64).
constexpr int64_t kMaxBlockSize = int64_t{1} << 20;
constexpr std::string_view kSubagentType = "subagent";
constexpr std::string_view kCompleted = "completed";
constexpr std::string_view kAsyncLaunched = "async_launched";

// A WEKA file in a trace directory: "*.json", or "*.json.gz" compressed.
bool IsTraceFileName(std::string_view name) {
  return name.ends_with(".json") || name.ends_with(".json.gz");
}

std::string Index(std::string_view path, size_t i) {
  return std::string(path) + "[" + std::to_string(i) + "]";
}

// Every error of the walk below is InvalidArgument "<json path>: <what>" (ParseWekaTrace
// prefixes the source and the line it finds for the path); the path is "" for the top level
// and never holds ": ". TraceFields::AtPath names fields by that path.

StatusOr<WekaRequest> ReadRequest(const TraceFields& fields, int32_t block_size,
                                  WekaFallbacks& fallbacks) {
  WekaRequest request;
  AGENTKV_ASSIGN_OR_RETURN(request.t, fields.Seconds("t"));
  AGENTKV_ASSIGN_OR_RETURN(request.input_tokens, fields.Tokens("in"));
  AGENTKV_ASSIGN_OR_RETURN(request.output_tokens, fields.Tokens("out"));
  AGENTKV_ASSIGN_OR_RETURN(request.hash_ids, fields.HashIds("hash_ids"));
  AGENTKV_RETURN_IF_ERROR(CheckHashIdCount(fields.Name("hash_ids"), request.hash_ids.size(), "in",
                                           request.input_tokens, block_size));
  AGENTKV_ASSIGN_OR_RETURN(request.stop, fields.OptionalString("stop"));
  AGENTKV_ASSIGN_OR_RETURN(request.think_time, fields.OptionalSeconds("think_time"));
  AGENTKV_ASSIGN_OR_RETURN(request.api_time, fields.OptionalSeconds("api_time"));
  AGENTKV_ASSIGN_OR_RETURN(request.model, fields.OptionalString("model"));
  AGENTKV_ASSIGN_OR_RETURN(request.input_types, fields.OptionalStrings("input_types"));
  AGENTKV_ASSIGN_OR_RETURN(request.output_types, fields.OptionalStrings("output_types"));
  if (!fields.Has("think_time")) ++fallbacks.think_time;
  if (!fields.Has("api_time")) ++fallbacks.api_time;
  if (!fields.Has("stop")) ++fallbacks.stop;
  return request;
}

// Adds the think time of the request whose `fields` these are to `total`, the think times of one
// agent so far. An agent's timeline in the replay is at most its think times plus its last `t`, so
// the sum is held to the rule of one duration: [0, 365 days].
Status AddThinkTime(const WekaRequest& request, const TraceFields& fields, TimeNs& total) {
  const std::optional<int64_t> sum = CheckedAdd(total.ns(), request.think_time.ns());
  if (!sum.has_value() || *sum > kMaxTimeNs) {
    return fields.Error("think_time", "the think times of this agent add up to more than " +
                                          std::to_string(kMaxTimeNs / 1'000'000'000) +
                                          " s (365 days) here");
  }
  total = TimeNs(*sum);
  return Status::Ok();
}

// The fields of entry `i` of `array`, whose path is `path`.
StatusOr<TraceFields> Entry(const boost::json::array& array, size_t i, std::string_view path) {
  std::string entry_path = Index(path, i);
  const boost::json::object* obj = array[i].if_object();
  if (obj == nullptr) return MistypedError(entry_path, "expected a JSON object", array[i]);
  return TraceFields::AtPath(*obj, std::move(entry_path));
}

StatusOr<WekaSubagent> ReadSubagent(const TraceFields& fields, int32_t block_size,
                                    WekaFallbacks& fallbacks) {
  WekaSubagent subagent;
  AGENTKV_ASSIGN_OR_RETURN(subagent.agent_id, fields.String("agent_id"));
  AGENTKV_ASSIGN_OR_RETURN(subagent.subagent_type, fields.OptionalString("subagent_type"));
  AGENTKV_ASSIGN_OR_RETURN(subagent.completion, fields.Seconds("t"));
  AGENTKV_ASSIGN_OR_RETURN(subagent.duration, fields.OptionalMillis("duration_ms"));
  AGENTKV_ASSIGN_OR_RETURN(const std::string status, fields.OptionalString("status"));
  subagent.status = status == kCompleted       ? SubagentStatus::kCompleted
                    : status == kAsyncLaunched ? SubagentStatus::kAsyncLaunched
                                               : SubagentStatus::kUnknown;
  if (!fields.Has("duration_ms")) ++fallbacks.subagent_duration;
  if (subagent.status == SubagentStatus::kUnknown) ++fallbacks.subagent_status;
  AGENTKV_ASSIGN_OR_RETURN(subagent.models, fields.OptionalStrings("models"));
  AGENTKV_ASSIGN_OR_RETURN(const boost::json::array* requests, fields.Array("requests"));
  const std::string requests_path = fields.Name("requests");
  subagent.requests.reserve(requests->size());
  TimeNs think_times;
  for (size_t i = 0; i < requests->size(); ++i) {
    AGENTKV_ASSIGN_OR_RETURN(const TraceFields entry, Entry(*requests, i, requests_path));
    AGENTKV_ASSIGN_OR_RETURN(const std::string type, entry.OptionalString("type"));
    if (type == kSubagentType) return entry.Error("type", "nested sub-agents are not supported");
    AGENTKV_ASSIGN_OR_RETURN(WekaRequest request, ReadRequest(entry, block_size, fallbacks));
    AGENTKV_RETURN_IF_ERROR(AddThinkTime(request, entry, think_times));
    subagent.requests.push_back(std::move(request));
  }
  return subagent;
}

StatusOr<WekaConversation> ReadConversation(const boost::json::object& obj) {
  const TraceFields fields = TraceFields::AtPath(obj, "");
  WekaConversation conversation;
  AGENTKV_ASSIGN_OR_RETURN(conversation.id, fields.OptionalString("id"));
  if (fields.Has("block_size")) {
    const boost::json::value& v = *fields.Find("block_size");
    const int64_t* size = v.if_int64();
    if (size == nullptr || *size < 1 || *size > kMaxBlockSize) {
      return MistypedError(fields.Name("block_size"), "expected an integer in [1, 2^20]", v);
    }
    conversation.block_size = static_cast<int32_t>(*size);
  } else {
    ++conversation.fallbacks.block_size;
  }
  AGENTKV_ASSIGN_OR_RETURN(const boost::json::array* requests, fields.Array("requests"));
  conversation.requests.reserve(requests->size());
  TimeNs think_times;
  for (size_t i = 0; i < requests->size(); ++i) {
    AGENTKV_ASSIGN_OR_RETURN(const TraceFields entry, Entry(*requests, i, "requests"));
    AGENTKV_ASSIGN_OR_RETURN(const std::string type, entry.OptionalString("type"));
    if (type == kSubagentType) {
      AGENTKV_ASSIGN_OR_RETURN(WekaSubagent subagent, ReadSubagent(entry, conversation.block_size,
                                                                   conversation.fallbacks));
      conversation.subagents.push_back(std::move(subagent));
    } else {
      AGENTKV_ASSIGN_OR_RETURN(WekaRequest request,
                               ReadRequest(entry, conversation.block_size, conversation.fallbacks));
      AGENTKV_RETURN_IF_ERROR(AddThinkTime(request, entry, think_times));
      conversation.requests.push_back(std::move(request));
    }
  }
  return conversation;
}

// `status`, an error about the value at JSON `path`, located in the file: "<source>:<line>:
// <message>". The line is found by reading the file again from its start, which `reread`
// gives (nullptr: the stream cannot be read again, and the error names the source only).
Status Locate(const Status& status, std::string_view path,
              const std::function<std::istream*()>& reread, std::string_view source) {
  std::optional<int64_t> line;
  if (std::istream* in = reread(); in != nullptr) line = FindJsonPathLine(*in, path);
  const std::string where =
      line.has_value() ? std::string(source) + ":" + std::to_string(*line) : std::string(source);
  return Status(status.code(), where + ": " + status.message());
}

// ParseWekaTrace over `in`, which `reread` starts over to locate an error.
StatusOr<WekaConversation> Parse(std::istream& in, std::string_view source,
                                 const std::function<std::istream*()>& reread) {
  AGENTKV_ASSIGN_OR_RETURN(const boost::json::value root, ReadJsonDocument(in, source));
  const boost::json::object* obj = root.if_object();
  if (obj == nullptr) {
    return Locate(
        InvalidArgumentError("expected a JSON object at the top level, got " + Quote(root)), "",
        reread, source);
  }
  StatusOr<WekaConversation> conversation = ReadConversation(*obj);
  if (!conversation.ok()) {
    // The walk's errors start with the path of the value at fault.
    const std::string& message = conversation.status().message();
    return Locate(conversation.status(), std::string_view(message).substr(0, message.find(": ")),
                  reread, source);
  }
  if (conversation->TotalRequests() == 0) return EmptyTraceError(source);
  conversation->source = std::string(source);
  return conversation;
}

// Whether `models` (or, when empty, the `model` of `requests`) names a model of `main_models`.
bool UsesOneOf(const std::vector<std::string>& models, const std::vector<WekaRequest>& requests,
               const std::vector<std::string>& main_models) {
  const auto known = [&main_models](const std::string& m) {
    return std::find(main_models.begin(), main_models.end(), m) != main_models.end();
  };
  if (!models.empty()) return std::any_of(models.begin(), models.end(), known);
  return std::any_of(requests.begin(), requests.end(),
                     [&known](const WekaRequest& r) { return !r.model.empty() && known(r.model); });
}

}  // namespace

bool WekaFallbacks::none() const { return *this == WekaFallbacks(); }

WekaFallbacks& WekaFallbacks::operator+=(const WekaFallbacks& other) {
  block_size += other.block_size;
  think_time += other.think_time;
  api_time += other.api_time;
  stop += other.stop;
  subagent_duration += other.subagent_duration;
  subagent_status += other.subagent_status;
  return *this;
}

std::vector<std::string> WekaFallbacks::Describe() const {
  std::vector<std::string> lines;
  const auto add = [&lines](int64_t count, std::string_view one, std::string_view many,
                            std::string_view what) {
    if (count == 0) return;
    lines.push_back(std::to_string(count) + " " + std::string(count == 1 ? one : many) + " " +
                    std::string(what));
  };
  add(block_size, "file", "files", "without block_size: 64 tokens per hash id");
  add(think_time, "request", "requests",
      "without think_time: gap taken from t less the previous api_time");
  add(api_time, "request", "requests", "without api_time: server time not recorded, taken as 0");
  add(stop, "request", "requests", "without stop: pause classified by content types alone");
  add(subagent_duration, "sub-agent", "sub-agents",
      "without duration_ms: spawned at their recorded t");
  add(subagent_status, "sub-agent", "sub-agents",
      "without a known status: joined by the parent as completed");
  return lines;
}

WekaFallbacks TotalFallbacks(const std::vector<WekaConversation>& conversations) {
  WekaFallbacks total;
  for (const WekaConversation& c : conversations) total += c.fallbacks;
  return total;
}

std::string_view SubagentStatusName(SubagentStatus status) {
  switch (status) {
    case SubagentStatus::kCompleted:
      return kCompleted;
    case SubagentStatus::kAsyncLaunched:
      return kAsyncLaunched;
    case SubagentStatus::kUnknown:
      break;
  }
  return "unknown";
}

TimeNs WekaSubagent::spawn() const {
  return duration >= completion ? TimeNs(0) : completion - duration;
}

bool WekaConversation::SharesMainModel(const WekaSubagent& subagent) const {
  std::vector<std::string> main_models;
  for (const WekaRequest& r : requests) {
    if (!r.model.empty()) main_models.push_back(r.model);
  }
  const bool sub_has_model = !subagent.models.empty() ||
                             std::any_of(subagent.requests.begin(), subagent.requests.end(),
                                         [](const WekaRequest& r) { return !r.model.empty(); });
  if (main_models.empty() || !sub_has_model) return true;
  return UsesOneOf(subagent.models, subagent.requests, main_models);
}

std::string_view SubagentModelsName(SubagentModels mode) {
  return mode == SubagentModels::kShare ? "share" : "exclude";
}

std::optional<SubagentModels> ParseSubagentModels(std::string_view name) {
  if (name == "share") return SubagentModels::kShare;
  if (name == "exclude") return SubagentModels::kExclude;
  return std::nullopt;
}

bool IsReplayed(const WekaConversation& conversation, const WekaSubagent& subagent,
                SubagentModels mode) {
  return mode == SubagentModels::kShare || conversation.SharesMainModel(subagent);
}

int64_t ReplayedRequests(const WekaConversation& conversation, SubagentModels mode) {
  auto total = static_cast<int64_t>(conversation.requests.size());
  for (const WekaSubagent& s : conversation.subagents) {
    if (IsReplayed(conversation, s, mode)) total += static_cast<int64_t>(s.requests.size());
  }
  return total;
}

std::vector<WekaConversation> ApplySubagentModels(std::vector<WekaConversation> conversations,
                                                  SubagentModels mode) {
  if (mode == SubagentModels::kShare) return conversations;
  for (WekaConversation& c : conversations) {
    std::vector<WekaSubagent> kept;
    for (WekaSubagent& s : c.subagents) {
      if (IsReplayed(c, s, mode)) kept.push_back(std::move(s));
    }
    c.subagents = std::move(kept);
  }
  return conversations;
}

int64_t WekaConversation::TotalRequests() const {
  auto total = static_cast<int64_t>(requests.size());
  for (const WekaSubagent& s : subagents) total += static_cast<int64_t>(s.requests.size());
  return total;
}

StatusOr<WekaConversation> ParseWekaTrace(std::istream& in, std::string_view source) {
  const std::streampos start = in.tellg();
  return Parse(in, source, [&in, start]() -> std::istream* {
    if (start == std::streampos(-1)) return nullptr;
    in.clear();
    in.seekg(start);
    return in ? &in : nullptr;
  });
}

StatusOr<WekaConversation> ParseWekaTrace(std::string_view text, std::string_view source) {
  std::istringstream in{std::string(text)};
  return ParseWekaTrace(in, source);
}

StatusOr<WekaConversation> ReadWekaTrace(const std::string& path) {
  AGENTKV_ASSIGN_OR_RETURN(TraceFile file, TraceFile::Open(path));
  return Parse(file.stream(), path,
               [&file]() { return file.Rewind().ok() ? &file.stream() : nullptr; });
}

StatusOr<std::vector<std::string>> ExpandWekaTracePaths(const std::vector<std::string>& paths) {
  if (paths.empty()) return InvalidArgumentError("no trace paths given");
  std::vector<std::string> files;
  for (const std::string& path : paths) {
    std::error_code ec;
    if (!std::filesystem::is_directory(path, ec)) {
      files.push_back(path);
      continue;
    }
    std::vector<std::filesystem::path> found;
    std::filesystem::directory_iterator it(path, ec);
    for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
      std::error_code type_error;
      if (IsTraceFileName(it->path().filename().string()) && it->is_regular_file(type_error)) {
        found.push_back(it->path());
      }
    }
    if (ec) {
      return UnavailableError("cannot list trace directory \"" + path + "\": " + ec.message());
    }
    if (found.empty()) {
      return InvalidArgumentError("trace directory \"" + path +
                                  "\" holds no *.json or *.json.gz files");
    }
    std::sort(found.begin(), found.end(),
              [](const std::filesystem::path& a, const std::filesystem::path& b) {
                return a.filename() < b.filename();
              });
    for (const std::filesystem::path& p : found) files.push_back(p.string());
  }
  return files;
}

StatusOr<std::vector<WekaConversation>> ReadWekaTraces(const std::vector<std::string>& paths) {
  AGENTKV_ASSIGN_OR_RETURN(const std::vector<std::string> files, ExpandWekaTracePaths(paths));
  std::vector<WekaConversation> conversations;
  conversations.reserve(files.size());
  for (const std::string& file : files) {
    AGENTKV_ASSIGN_OR_RETURN(WekaConversation conversation, ReadWekaTrace(file));
    conversations.push_back(std::move(conversation));
  }
  return conversations;
}

}  // namespace agentkv::sim
