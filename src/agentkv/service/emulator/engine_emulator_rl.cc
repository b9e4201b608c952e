// The SGLang routes that RL frameworks (slime, verl, AReaL, Relax) call on engines, with
// SGLang's request and response shapes (io_struct.py, http_server.py). The emulator has no
// weights, so each does to the KV cache and the scheduler what the real one does to them:
//
//   POST /pause_generation {"mode": "abort"|"in_place"|"retract"}  no step runs until
//       /continue_generation; "abort" (the default) first aborts every request
//       (EngineRuntime::PauseGeneration). -> {"message": "Generation paused successfully.",
//       "status": "ok"}
//   POST /continue_generation  -> {"message": "Generation continued successfully.", "status": "ok"}
//   GET|POST /release_memory_occupation {"tags": ["kv_cache", "weights"]}  with the kv_cache tag
//       (or no tags) empties the prefix cache and holds the KV pool until
//       /resume_memory_occupation (400 while requests are active); -> 200 null
//   GET|POST /resume_memory_occupation {"tags": [...]}  gives the pool back. -> 200 null
//   POST /update_weights_from_disk {"model_path", "abort_all_requests", "weight_version", ...}
//   POST /update_weights_from_distributed {"names", "dtypes", "shapes", "group_name",
//       "flush_cache", "abort_all_requests", "weight_version"}  after /init_weights_update_group
//       of that group: the prefix cache is emptied (stale KV), weight_version updated
//       (EngineRuntime::ApplyWeightUpdate). -> {"success": true, "message": ...}; a refused
//       update is 400 {"success": false, "message": ...}.
//   POST /init_weights_update_group, /destroy_weights_update_group  remember / forget the group.
//   POST /update_weight_version {"new_version", "abort_all_requests"}; GET /get_weight_version.
//   GET /get_load  -> [{"dp_rank": 0, "num_reqs", "num_waiting_reqs", "num_tokens"}]
//   POST /tokenize, /v1/tokenize {"prompt": str|[str]}  -> {"tokens", "count", "max_model_len"}
//   POST /detokenize, /v1/detokenize {"tokens": [int]|[[int]]}  -> {"text"}
// Pseudo tokens: one per 4 bytes of text (PseudoTokenize); a token is spelled " t<id>".
// Validation errors are 400 naming the field, in the route's error shape (net/error_body.h).
#include <boost/json.hpp>

#include "agentkv/base/status.h"
#include "agentkv/net/error_body.h"
#include "agentkv/net/router.h"
#include "agentkv/service/emulator/engine_emulator.h"

namespace agentkv::service {
namespace {

namespace http = net::http;
namespace json = boost::json;

using Handler = void (EngineEmulator::*)(net::Request, std::shared_ptr<net::ResponseWriter>);

// The body as a JSON object; an empty body is an empty object (SGLang's optional bodies).
StatusOr<json::object> BodyObject(const net::Request& request) {
  if (request.body().empty()) return json::object{};
  json::error_code error;
  json::value parsed = json::parse(request.body(), error);
  if (error || !parsed.is_object()) return InvalidArgumentError("the body is not a JSON object");
  return std::move(parsed.as_object());
}

// Reads an optional member of one JSON type into `out`; null counts as absent.
Status ReadBool(const json::object& body, const char* key, bool& out) {
  const json::value* v = body.if_contains(key);
  if (v == nullptr || v->is_null()) return Status::Ok();
  if (!v->is_bool()) return InvalidArgumentError(std::string(key) + ": expected true or false");
  out = v->as_bool();
  return Status::Ok();
}

Status ReadString(const json::object& body, const char* key, std::optional<std::string>& out) {
  const json::value* v = body.if_contains(key);
  if (v == nullptr || v->is_null()) return Status::Ok();
  if (!v->is_string()) return InvalidArgumentError(std::string(key) + ": expected a string");
  out = std::string(v->as_string());
  return Status::Ok();
}

Status RequireString(const json::object& body, const char* key, std::string& out) {
  std::optional<std::string> value;
  AGENTKV_RETURN_IF_ERROR(ReadString(body, key, value));
  if (!value.has_value()) return InvalidArgumentError(std::string(key) + ": required");
  out = *std::move(value);
  return Status::Ok();
}

// The length of the array `key` (each element checked by `element_ok`).
StatusOr<size_t> RequireArray(const json::object& body, const char* key, const char* what,
                              bool (*element_ok)(const json::value&)) {
  const json::value* v = body.if_contains(key);
  if (v == nullptr || !v->is_array()) {
    return InvalidArgumentError(std::string(key) + ": expected an array of " + what);
  }
  for (const json::value& element : v->as_array()) {
    if (!element_ok(element)) {
      return InvalidArgumentError(std::string(key) + ": expected an array of " + what);
    }
  }
  return v->as_array().size();
}

bool IsString(const json::value& v) { return v.is_string(); }
bool IsShape(const json::value& v) {
  if (!v.is_array()) return false;
  for (const json::value& d : v.as_array()) {
    if (!d.is_int64() || d.as_int64() < 0) return false;
  }
  return true;
}
bool IsTokenId(const json::value& v) { return v.is_int64(); }

void ReplyJson(const net::Request& request, net::ResponseWriter& writer, http::status status,
               const json::value& body) {
  writer.Reply(net::MakeResponse(request, status, json::serialize(body)));
}

void ReplyError(const net::Request& request, net::ResponseWriter& writer, const Status& status) {
  writer.Reply(net::MakeErrorResponse(request, http::status::bad_request, status.message()));
}

// {"success": ok, "message": message} with 200 or 400, as SGLang's weight routes answer.
void ReplySuccess(const net::Request& request, net::ResponseWriter& writer, bool ok,
                  std::string message, json::object extra = {}) {
  json::object body{{"success", ok}, {"message", std::move(message)}};
  for (auto& [key, value] : extra) body[key] = std::move(value);
  ReplyJson(request, writer, ok ? http::status::ok : http::status::bad_request, body);
}

// Whether `body`'s tags name the KV cache: no tags (null or absent) means every kind. Each tag
// must be one SGLang knows.
StatusOr<bool> TagsIncludeKvCache(const json::object& body) {
  const json::value* tags = body.if_contains("tags");
  if (tags == nullptr || tags->is_null()) return true;
  if (!tags->is_array()) return InvalidArgumentError("tags: expected an array of strings");
  bool kv_cache = false;
  for (const json::value& tag : tags->as_array()) {
    const json::string* name = tag.if_string();
    if (name == nullptr || (*name != "kv_cache" && *name != "weights" && *name != "cuda_graph")) {
      return InvalidArgumentError(
          "tags: expected \"kv_cache\", \"weights\" or \"cuda_graph\", got " +
          json::serialize(tag));
    }
    kv_cache = kv_cache || *name == "kv_cache";
  }
  return kv_cache;
}

}  // namespace

void EngineEmulator::AddRlRoutes(net::Router& router) {
  auto add = [this, &router](http::verb verb, const char* path, Handler handler) {
    router.Add(verb, path, [this, handler](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
      Record(r);
      (this->*handler)(std::move(r), std::move(w));
    });
  };
  add(http::verb::post, "/pause_generation", &EngineEmulator::HandlePauseGeneration);
  add(http::verb::post, "/continue_generation", &EngineEmulator::HandleContinueGeneration);
  for (http::verb verb : {http::verb::get, http::verb::post}) {
    add(verb, "/release_memory_occupation", &EngineEmulator::HandleReleaseMemoryOccupation);
    add(verb, "/resume_memory_occupation", &EngineEmulator::HandleResumeMemoryOccupation);
  }
  add(http::verb::post, "/update_weights_from_disk", &EngineEmulator::HandleUpdateWeightsFromDisk);
  add(http::verb::post, "/update_weights_from_distributed",
      &EngineEmulator::HandleUpdateWeightsFromDistributed);
  add(http::verb::post, "/init_weights_update_group",
      &EngineEmulator::HandleInitWeightsUpdateGroup);
  add(http::verb::post, "/destroy_weights_update_group",
      &EngineEmulator::HandleDestroyWeightsUpdateGroup);
  add(http::verb::post, "/update_weight_version", &EngineEmulator::HandleUpdateWeightVersion);
  router.Add(
      http::verb::get, "/get_weight_version",
      [this](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
        ReplyJson(r, *w, http::status::ok, json::object{{"weight_version", weight_version()}});
      });
  router.Add(http::verb::get, "/get_load",
             [this](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
               const RuntimeSnapshot s = runtime_->Snapshot();
               ReplyJson(r, *w, http::status::ok,
                         json::array{json::object{
                             {"dp_rank", 0},
                             {"num_reqs", s.gauges.num_running_reqs + s.gauges.num_queue_reqs},
                             {"num_waiting_reqs", s.gauges.num_queue_reqs},
                             {"num_tokens", s.gauges.num_used_tokens}}});
             });
  for (const char* path : {"/tokenize", "/v1/tokenize"}) {
    router.Add(http::verb::post, path,
               [this](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
                 HandleTokenize(std::move(r), std::move(w));
               });
  }
  for (const char* path : {"/detokenize", "/v1/detokenize"}) {
    router.Add(http::verb::post, path,
               [this](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
                 HandleDetokenize(std::move(r), std::move(w));
               });
  }
}

std::string EngineEmulator::weight_version() const {
  sync::MutexLock lock(&mu_);
  return weight_version_;
}

void EngineEmulator::HandlePauseGeneration(net::Request request,
                                           std::shared_ptr<net::ResponseWriter> writer) {
  StatusOr<json::object> body = BodyObject(request);
  if (!body.ok()) return ReplyError(request, *writer, body.status());
  std::optional<std::string> mode_name;
  if (Status s = ReadString(*body, "mode", mode_name); !s.ok()) {
    return ReplyError(request, *writer, s);
  }
  StatusOr<GenerationPauseMode> mode = ParseGenerationPauseMode(mode_name.value_or("abort"));
  if (!mode.ok()) return ReplyError(request, *writer, mode.status());
  runtime_->PauseGeneration(*mode);
  ReplyJson(request, *writer, http::status::ok,
            json::object{{"message", "Generation paused successfully."}, {"status", "ok"}});
}

void EngineEmulator::HandleContinueGeneration(net::Request request,
                                              std::shared_ptr<net::ResponseWriter> writer) {
  if (StatusOr<json::object> body = BodyObject(request); !body.ok()) {
    return ReplyError(request, *writer, body.status());
  }
  runtime_->ContinueGeneration();
  ReplyJson(request, *writer, http::status::ok,
            json::object{{"message", "Generation continued successfully."}, {"status", "ok"}});
}

void EngineEmulator::HandleReleaseMemoryOccupation(net::Request request,
                                                   std::shared_ptr<net::ResponseWriter> writer) {
  StatusOr<json::object> body = BodyObject(request);
  if (!body.ok()) return ReplyError(request, *writer, body.status());
  StatusOr<bool> kv_cache = TagsIncludeKvCache(*body);
  if (!kv_cache.ok()) return ReplyError(request, *writer, kv_cache.status());
  if (*kv_cache) {
    if (Status s = runtime_->ReleaseMemoryOccupation(); !s.ok()) {
      return ReplyError(request, *writer, s);
    }
  }
  writer->Reply(net::MakeResponse(request, http::status::ok, "null"));
}

void EngineEmulator::HandleResumeMemoryOccupation(net::Request request,
                                                  std::shared_ptr<net::ResponseWriter> writer) {
  StatusOr<json::object> body = BodyObject(request);
  if (!body.ok()) return ReplyError(request, *writer, body.status());
  StatusOr<bool> kv_cache = TagsIncludeKvCache(*body);
  if (!kv_cache.ok()) return ReplyError(request, *writer, kv_cache.status());
  if (*kv_cache) runtime_->ResumeMemoryOccupation();
  writer->Reply(net::MakeResponse(request, http::status::ok, "null"));
}

void EngineEmulator::ApplyWeightUpdate(const net::Request& request, net::ResponseWriter& writer,
                                       const WeightUpdate& update) {
  StatusOr<bool> flushed =
      runtime_->ApplyWeightUpdate(update.abort_all_requests, update.flush_cache);
  if (!flushed.ok()) {
    return ReplySuccess(request, writer, false, flushed.status().message(), update.extra);
  }
  std::string message = update.success_message;
  if (update.weight_version.has_value()) {
    sync::MutexLock lock(&mu_);
    weight_version_ = *update.weight_version;
    message += " Weight version updated to " + *update.weight_version + ".";
  }
  ReplySuccess(request, writer, true, std::move(message), update.extra);
}

void EngineEmulator::HandleUpdateWeightsFromDisk(net::Request request,
                                                 std::shared_ptr<net::ResponseWriter> writer) {
  StatusOr<json::object> body = BodyObject(request);
  if (!body.ok()) return ReplyError(request, *writer, body.status());
  WeightUpdate update;
  std::string model_path;
  Status s = RequireString(*body, "model_path", model_path);
  if (s.ok()) s = ReadBool(*body, "abort_all_requests", update.abort_all_requests);
  if (s.ok()) s = ReadString(*body, "weight_version", update.weight_version);
  if (!s.ok()) return ReplyError(request, *writer, s);
  // SGLang flushes the radix cache after loading weights from disk.
  update.flush_cache = true;
  update.success_message = "Succeeded to update model weights.";
  update.extra = json::object{{"num_paused_requests", 0}};
  ApplyWeightUpdate(request, *writer, update);
}

void EngineEmulator::HandleUpdateWeightsFromDistributed(
    net::Request request, std::shared_ptr<net::ResponseWriter> writer) {
  StatusOr<json::object> body = BodyObject(request);
  if (!body.ok()) return ReplyError(request, *writer, body.status());
  StatusOr<size_t> names = RequireArray(*body, "names", "strings", IsString);
  StatusOr<size_t> dtypes = RequireArray(*body, "dtypes", "strings", IsString);
  StatusOr<size_t> shapes = RequireArray(*body, "shapes", "shapes (arrays of sizes)", IsShape);
  for (const StatusOr<size_t>* field : {&names, &dtypes, &shapes}) {
    if (!field->ok()) return ReplyError(request, *writer, field->status());
  }
  if (*names != *dtypes || *names != *shapes) {
    return ReplyError(request, *writer,
                      InvalidArgumentError("names, dtypes and shapes: expected arrays of one "
                                           "length, got " +
                                           std::to_string(*names) + ", " + std::to_string(*dtypes) +
                                           " and " + std::to_string(*shapes)));
  }
  WeightUpdate update;
  std::optional<std::string> group;
  Status s = ReadString(*body, "group_name", group);
  if (s.ok()) s = ReadBool(*body, "flush_cache", update.flush_cache);
  if (s.ok()) s = ReadBool(*body, "abort_all_requests", update.abort_all_requests);
  if (s.ok()) s = ReadString(*body, "weight_version", update.weight_version);
  if (!s.ok()) return ReplyError(request, *writer, s);
  const std::string group_name = group.value_or("weight_update_group");
  bool known = false;
  {
    sync::MutexLock lock(&mu_);
    known = weight_update_groups_.contains(group_name);
  }
  if (!known) {
    return ReplySuccess(
        request, *writer, false,
        "no weights update group \"" + group_name + "\": call /init_weights_update_group first");
  }
  update.success_message = "Succeeded to update parameter online.";
  ApplyWeightUpdate(request, *writer, update);
}

void EngineEmulator::HandleInitWeightsUpdateGroup(net::Request request,
                                                  std::shared_ptr<net::ResponseWriter> writer) {
  StatusOr<json::object> body = BodyObject(request);
  if (!body.ok()) return ReplyError(request, *writer, body.status());
  std::string master_address;
  Status s = RequireString(*body, "master_address", master_address);
  for (const char* key : {"master_port", "rank_offset", "world_size"}) {
    const json::value* v = body->if_contains(key);
    if (s.ok() && (v == nullptr || !v->is_int64() || v->as_int64() < 0)) {
      s = InvalidArgumentError(std::string(key) + ": expected a non-negative integer");
    }
  }
  std::optional<std::string> group;
  std::optional<std::string> backend;
  if (s.ok()) s = ReadString(*body, "group_name", group);
  if (s.ok()) s = ReadString(*body, "backend", backend);
  if (!s.ok()) return ReplyError(request, *writer, s);
  bool added = false;
  {
    sync::MutexLock lock(&mu_);
    // A handful of groups at most in practice; the bound keeps a hostile client from growing it.
    if (weight_update_groups_.size() < kMaxWeightUpdateGroups) {
      weight_update_groups_.insert(group.value_or("weight_update_group"));
      added = true;
    }
  }
  ReplySuccess(
      request, *writer, added,
      added ? "Succeeded to initialize custom process group."
            : "too many weights update groups (" + std::to_string(kMaxWeightUpdateGroups) + ")");
}

void EngineEmulator::HandleDestroyWeightsUpdateGroup(net::Request request,
                                                     std::shared_ptr<net::ResponseWriter> writer) {
  StatusOr<json::object> body = BodyObject(request);
  if (!body.ok()) return ReplyError(request, *writer, body.status());
  std::optional<std::string> group;
  if (Status s = ReadString(*body, "group_name", group); !s.ok()) {
    return ReplyError(request, *writer, s);
  }
  bool erased = false;
  {
    sync::MutexLock lock(&mu_);
    erased = weight_update_groups_.erase(group.value_or("weight_update_group")) > 0;
  }
  ReplySuccess(request, *writer, erased,
               erased
                   ? "Succeeded to destroy custom process group."
                   : "no weights update group \"" + group.value_or("weight_update_group") + "\"");
}

void EngineEmulator::HandleUpdateWeightVersion(net::Request request,
                                               std::shared_ptr<net::ResponseWriter> writer) {
  StatusOr<json::object> body = BodyObject(request);
  if (!body.ok()) return ReplyError(request, *writer, body.status());
  std::string new_version;
  bool abort_all_requests = true;
  Status s = RequireString(*body, "new_version", new_version);
  if (s.ok()) s = ReadBool(*body, "abort_all_requests", abort_all_requests);
  if (!s.ok()) return ReplyError(request, *writer, s);
  if (abort_all_requests) runtime_->Abort("", /*abort_all=*/true);
  {
    sync::MutexLock lock(&mu_);
    weight_version_ = new_version;
  }
  ReplySuccess(request, *writer, true, "Weight version updated to " + new_version,
               json::object{{"new_version", new_version}});
}

void EngineEmulator::HandleTokenize(net::Request request,
                                    std::shared_ptr<net::ResponseWriter> writer) {
  if (Status s = net::CheckJsonContentType(request); !s.ok()) {
    return ReplyError(request, *writer, s);
  }
  StatusOr<json::object> body = BodyObject(request);
  if (!body.ok()) return ReplyError(request, *writer, body.status());
  const int64_t max_model_len = runtime_->limits().context_length();
  auto tokenize = [](std::string_view text) {
    json::array tokens;
    for (int64_t t : PseudoTokenize(text)) tokens.push_back(t);
    return tokens;
  };
  const json::value* prompt = body->if_contains("prompt");
  if (prompt != nullptr && prompt->is_string()) {
    json::array tokens = tokenize(prompt->as_string());
    const int64_t count = static_cast<int64_t>(tokens.size());
    return ReplyJson(
        request, *writer, http::status::ok,
        json::object{
            {"tokens", std::move(tokens)}, {"count", count}, {"max_model_len", max_model_len}});
  }
  if (prompt != nullptr && prompt->is_array()) {
    json::array all;
    json::array counts;
    for (const json::value& p : prompt->as_array()) {
      if (!p.is_string()) {
        return ReplyError(request, *writer,
                          InvalidArgumentError("prompt: expected a string or a list of strings"));
      }
      json::array tokens = tokenize(p.as_string());
      counts.push_back(static_cast<int64_t>(tokens.size()));
      all.push_back(std::move(tokens));
    }
    return ReplyJson(request, *writer, http::status::ok,
                     json::object{{"tokens", std::move(all)},
                                  {"count", std::move(counts)},
                                  {"max_model_len", max_model_len}});
  }
  ReplyError(request, *writer,
             InvalidArgumentError("prompt: expected a string or a list of strings"));
}

void EngineEmulator::HandleDetokenize(net::Request request,
                                      std::shared_ptr<net::ResponseWriter> writer) {
  if (Status s = net::CheckJsonContentType(request); !s.ok()) {
    return ReplyError(request, *writer, s);
  }
  StatusOr<json::object> body = BodyObject(request);
  if (!body.ok()) return ReplyError(request, *writer, body.status());
  auto text_of = [](const json::array& ids) -> std::optional<std::string> {
    std::vector<int64_t> tokens;
    for (const json::value& id : ids) {
      if (!IsTokenId(id)) return std::nullopt;
      tokens.push_back(id.as_int64());
    }
    return PseudoText(tokens);
  };
  const Status bad =
      InvalidArgumentError("tokens: expected a list of token ids or of lists of them");
  const json::value* tokens = body->if_contains("tokens");
  if (tokens == nullptr || !tokens->is_array()) return ReplyError(request, *writer, bad);
  const json::array& list = tokens->as_array();
  if (!list.empty() && list.front().is_array()) {
    json::array texts;
    for (const json::value& ids : list) {
      std::optional<std::string> text = ids.is_array() ? text_of(ids.as_array()) : std::nullopt;
      if (!text.has_value()) return ReplyError(request, *writer, bad);
      texts.push_back(json::string(*text));
    }
    return ReplyJson(request, *writer, http::status::ok, json::object{{"text", std::move(texts)}});
  }
  std::optional<std::string> text = text_of(list);
  if (!text.has_value()) return ReplyError(request, *writer, bad);
  ReplyJson(request, *writer, http::status::ok, json::object{{"text", *text}});
}

}  // namespace agentkv::service
