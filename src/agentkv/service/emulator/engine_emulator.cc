#include "agentkv/service/emulator/engine_emulator.h"

#include <boost/asio/steady_timer.hpp>
#include <boost/json.hpp>
#include <chrono>

#include "agentkv/base/bounds.h"
#include "agentkv/base/hash.h"
#include "agentkv/net/error_body.h"
#include "agentkv/net/http_status.h"
#include "agentkv/net/router.h"
#include "agentkv/protocol/endpoints.h"
#include "agentkv/protocol/generate.h"
#include "agentkv/protocol/prometheus.h"
#include "agentkv/protocol/server_info.h"
#include "agentkv/protocol/sessions.h"
#include "agentkv/service/emulator/engine_metrics.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::service {
namespace {

namespace http = net::http;
constexpr uint64_t kTextSeed = 0x74657874ULL;  // "text"
constexpr double kPseudoLogprob = -0.125;

// The HTTP status SGLang answers a failed request with: net::HttpStatusFor, except that
// SGLang raises a duplicate rid as a ValueError ("Duplicate request ID detected"), which its
// HTTP server answers 400 like every validation error (docs/EMULATORS.md).
http::status StatusFor(const Status& status) {
  if (status.code() == StatusCode::kAlreadyExists) return http::status::bad_request;
  return net::HttpStatusFor(status.code());
}

void ReplyError(const net::Request& request, net::ResponseWriter& writer, const Status& status) {
  const http::status code = StatusFor(status);
  writer.Reply(net::MakeErrorResponse(request, code, status.message()));
}

// The finish reason of a request that ended: an abort carries SGLang's status_code and
// err_type when the engine refused it ("BadRequestError" for 400).
protocol::FinishReason FinishReasonOf(const GenerateResult& result, int64_t output_tokens) {
  if (!result.aborted) return protocol::FinishReason::Length(output_tokens);
  if (result.abort_status_code == 0) {
    return protocol::FinishReason::Abort(result.abort_message, std::nullopt, std::nullopt);
  }
  return protocol::FinishReason::Abort(result.abort_message, result.abort_status_code,
                                       std::string("BadRequestError"));
}

// The response body (or stream chunk) for a request at this point.
protocol::GenerateResponse ResponseFor(const std::string& rid, const protocol::GenerateRequest& req,
                                       const std::vector<int64_t>& output_ids,
                                       const GenerateResult* result, int64_t prompt_tokens) {
  protocol::GenerateResponse response;
  response.text = PseudoText(output_ids);
  response.output_ids = output_ids;
  protocol::MetaInfo& meta = response.meta_info;
  meta.id = rid;
  meta.prompt_tokens = prompt_tokens;
  meta.completion_tokens = static_cast<int64_t>(output_ids.size());
  if (req.return_logprob) {
    std::vector<protocol::OutputTokenLogprob> logprobs;
    for (int64_t t : output_ids)
      logprobs.push_back(protocol::OutputTokenLogprob{kPseudoLogprob, t, std::nullopt});
    meta.output_token_logprobs = std::move(logprobs);
  }
  if (result != nullptr) {
    meta.cached_tokens = result->cached_tokens;
    meta.cached_tokens_details = protocol::CachedTokensDetails{
        result->cached_device_tokens, result->cached_host_tokens, std::nullopt};
    meta.e2e_latency = result->e2e_latency_s;
    meta.queue_time = result->queue_time_s;
    meta.finish_reason = FinishReasonOf(*result, static_cast<int64_t>(output_ids.size()));
  }
  return response;
}

}  // namespace

std::string PseudoText(std::span<const int64_t> tokens) {
  std::string text;
  for (int64_t t : tokens) text += " t" + std::to_string(t);
  return text;
}

std::vector<int64_t> PseudoTokenize(std::string_view text) {
  std::vector<int64_t> tokens;
  tokens.reserve((text.size() + 3) / 4);
  for (size_t i = 0; i < text.size(); i += 4) {
    const uint64_t h = Hash64(text.substr(i, 4), kTextSeed);
    tokens.push_back(1000 + static_cast<int64_t>(h % 31'000));
  }
  return tokens;
}

namespace {

// SGLang's API key middleware: OPTIONS, /health* and /metrics* pass; every other request needs
// `Authorization: Bearer <key>`.
net::Handler RequireApiKey(const std::string& key, net::Handler next) {
  return [expected = "Bearer " + key, next = std::move(next)](
             net::Request request, std::shared_ptr<net::ResponseWriter> writer) {
    const std::string_view target(request.target().data(), request.target().size());
    const auto given = request[http::field::authorization];
    const bool open = request.method() == http::verb::options || target.starts_with("/health") ||
                      target.starts_with("/metrics");
    if (open || std::string_view(given.data(), given.size()) == expected) {
      return next(std::move(request), std::move(writer));
    }
    writer->Reply(
        net::MakeResponse(request, http::status::unauthorized, R"({"error":"Unauthorized"})"));
  };
}

}  // namespace

Status EngineEmulatorOptions::Validate() const {
  AGENTKV_RETURN_IF_ERROR(runtime.Validate());
  AGENTKV_RETURN_IF_ERROR(http.Validate());
  if (metrics_tp_ranks < 0 || metrics_tp_ranks > 64) {
    return InvalidArgumentError("--metrics-tp-ranks must be in [0, 64], got " +
                                std::to_string(metrics_tp_ranks));
  }
  if (max_recorded_requests < 0 || max_recorded_requests > (int64_t{1} << 24)) {
    return InvalidArgumentError("--max-recorded-requests must be in [0, 2^24], got " +
                                std::to_string(max_recorded_requests));
  }
  return Status::Ok();
}

EngineEmulator::EngineEmulator(const EngineEmulatorOptions& options)
    : options_(options), recorded_(static_cast<size_t>(options.max_recorded_requests)) {
  if (options_.served_model_name.empty()) {
    options_.served_model_name = std::string(engine::PresetName(options_.runtime.engine.model));
  }
  if (options_.metrics_tp_ranks == 0) options_.metrics_tp_ranks = options_.runtime.engine.tp;
}

StatusOr<std::unique_ptr<EngineEmulator>> EngineEmulator::Start(
    const EngineEmulatorOptions& options) {
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<EngineEmulator> emulator(new EngineEmulator(options));
  AGENTKV_ASSIGN_OR_RETURN(emulator->runtime_, EngineRuntime::Start(options.runtime));
  EngineEmulator* e = emulator.get();
  net::Router router;
  e->AddServingRoutes(router);
  e->AddInfoRoutes(router);
  e->AddRlRoutes(router);
  router.Add(http::verb::get, "/agentkv/requests",
             [e](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
               e->HandleRecordedRequests(std::move(r), std::move(w));
             });
  net::Handler handler = router.AsHandler();
  if (!options.api_key.empty()) handler = RequireApiKey(options.api_key, std::move(handler));
  AGENTKV_ASSIGN_OR_RETURN(emulator->server_, net::HttpServer::Start(options.http, handler));
  return emulator;
}

void EngineEmulator::AddServingRoutes(net::Router& router) {
  EngineEmulator* e = this;
  for (http::verb verb : {http::verb::post, http::verb::put}) {
    router.Add(verb, "/generate", [e](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
      e->HandleGenerate(std::move(r), std::move(w));
    });
  }
  router.Add(http::verb::post, "/v1/chat/completions",
             [e](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
               e->HandleOpenAi(std::move(r), std::move(w), /*chat=*/true);
             });
  router.Add(http::verb::post, "/v1/completions",
             [e](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
               e->HandleOpenAi(std::move(r), std::move(w), /*chat=*/false);
             });
  router.Add(http::verb::post, "/abort_request",
             [e](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
               e->HandleAbort(std::move(r), std::move(w));
             });
  for (http::verb verb : {http::verb::get, http::verb::post}) {
    router.Add(verb, "/open_session", [e](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
      e->HandleOpenSession(std::move(r), std::move(w));
    });
    router.Add(verb, "/close_session", [e](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
      e->HandleCloseSession(std::move(r), std::move(w));
    });
    router.Add(verb, std::string(protocol::kDemoteFinishedSubagentsPath),
               [e](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
                 e->HandleDemoteFinishedSubagents(std::move(r), std::move(w));
               });
    router.Add(verb, "/flush_cache", [e](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
      e->HandleFlushCache(std::move(r), std::move(w));
    });
    router.Add(verb, "/agentkv/faults",
               [e](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
                 e->HandleFaults(std::move(r), std::move(w));
               });
  }
}

void EngineEmulator::AddInfoRoutes(net::Router& router) {
  EngineEmulator* e = this;
  for (const char* path : {"/server_info", "/get_server_info"}) {
    router.Add(http::verb::get, path, [e](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
      w->Reply(net::MakeResponse(r, http::status::ok, e->ServerInfoJson()));
    });
  }
  router.Add(http::verb::get, "/v1/models",
             [e](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
               w->Reply(net::MakeResponse(r, http::status::ok, e->ModelListJson()));
             });
  router.AddPrefix(http::verb::get, "/v1/models/",
                   [e](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
                     e->HandleRetrieveModel(std::move(r), std::move(w));
                   });
  for (const char* path : {"/model_info", "/get_model_info"}) {
    router.Add(http::verb::get, path, [e](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
      w->Reply(net::MakeResponse(r, http::status::ok, e->ModelInfoJson()));
    });
  }
  router.Add(http::verb::get, "/health",
             [e](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
               e->HandleHealth(std::move(r), std::move(w), /*generate=*/false);
             });
  router.Add(http::verb::get, "/health_generate",
             [e](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
               e->HandleHealth(std::move(r), std::move(w), /*generate=*/true);
             });
  if (options_.enable_metrics) {
    router.Add(http::verb::get, "/metrics",
               [e](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
                 e->HandleMetrics(std::move(r), std::move(w));
               });
  }
}

void EngineEmulator::HandleRecordedRequests(net::Request request,
                                            std::shared_ptr<net::ResponseWriter> writer) {
  boost::json::array list;
  int64_t dropped = 0;
  {
    sync::MutexLock lock(&mu_);
    for (const auto& [path, body] : recorded_.entries()) {
      list.push_back(boost::json::object{{"path", path}, {"body", body}});
    }
    dropped = recorded_.dropped();
  }
  net::Response response =
      net::MakeResponse(request, http::status::ok, boost::json::serialize(list));
  response.set("X-Agentkv-Requests-Dropped", std::to_string(dropped));
  writer->Reply(std::move(response));
}

EngineEmulator::~EngineEmulator() { Shutdown(std::chrono::milliseconds(0)); }

uint16_t EngineEmulator::port() const { return server_->port(); }
std::string EngineEmulator::base_url() const { return server_->base_url(); }

void EngineEmulator::Shutdown(std::chrono::milliseconds deadline) {
  if (shutting_down_.exchange(true)) return;
  // Aborting first answers every in-flight /generate, so the server can drain.
  if (runtime_ != nullptr) runtime_->Shutdown();
  if (server_ != nullptr) server_->Shutdown(deadline);
}

void EngineEmulator::Record(const net::Request& request) {
  sync::MutexLock lock(&mu_);
  recorded_.Append({std::string(request.target()), request.body()});
}

int64_t EngineEmulator::recorded_requests() const {
  sync::MutexLock lock(&mu_);
  return static_cast<int64_t>(recorded_.size());
}

int64_t EngineEmulator::recorded_requests_dropped() const {
  sync::MutexLock lock(&mu_);
  return recorded_.dropped();
}

int64_t EngineEmulator::open_sessions() const {
  sync::MutexLock lock(&mu_);
  return static_cast<int64_t>(open_sessions_.size());
}

int64_t EngineEmulator::open_sessions_evicted() const {
  sync::MutexLock lock(&mu_);
  return open_sessions_evicted_;
}

EngineEmulator::Faults EngineEmulator::faults() const {
  sync::MutexLock lock(&mu_);
  return faults_;
}

void EngineEmulator::HandleGenerate(net::Request request,
                                    std::shared_ptr<net::ResponseWriter> writer) {
  StatusOr<protocol::GenerateRequest> parsed = protocol::ParseGenerateRequest(request.body());
  if (!parsed.ok()) return ReplyError(request, *writer, parsed.status());
  auto req = std::make_shared<protocol::GenerateRequest>(*std::move(parsed));
  const std::string rid = req->rid.value_or(ids_.Next());
  GenerateInput input;
  input.rid = rid;
  input.input_ids = req->input_ids.has_value() ? *req->input_ids : PseudoTokenize(*req->text);
  input.max_new_tokens = req->sampling_params.max_new_tokens;
  input.session_id = req->session_id;
  input.priority = req->priority;
  input.parent_session = req->parent_session;
  input.cache_namespace = req->cache_namespace;
  StatusOr<PauseKind> pause =
      protocol::ParsePauseHint(protocol::kPauseField, req->pause.value_or(""));
  if (!pause.ok()) return ReplyError(request, *writer, pause.status());
  input.pause = *pause;
  const int64_t prompt_tokens = static_cast<int64_t>(input.input_ids.size());

  GenerateCallbacks callbacks;
  if (req->stream) {
    auto output = std::make_shared<std::vector<int64_t>>();
    callbacks.on_tokens = [writer, req, rid, output, prompt_tokens](std::span<const int64_t> t) {
      output->insert(output->end(), t.begin(), t.end());
      writer->WriteChunk(protocol::SseEvent(protocol::SerializeGenerateResponse(
          ResponseFor(rid, *req, *output, nullptr, prompt_tokens))));
    };
    callbacks.on_finish = [writer, req, rid, prompt_tokens](const GenerateResult& result) {
      writer->WriteChunk(protocol::SseEvent(protocol::SerializeGenerateResponse(
          ResponseFor(rid, *req, result.output_ids, &result, prompt_tokens))));
      writer->WriteChunk(std::string(protocol::kSseDone));
      writer->EndStream();
    };
  } else {
    callbacks.on_finish = [writer, req, rid, prompt_tokens,
                           request = std::make_shared<net::Request>(request)](
                              const GenerateResult& result) {
      if (result.abort_status_code != 0) {
        // SGLang raises the scheduler's 400 abort as a ValueError: HTTP 400.
        return writer->Reply(net::MakeErrorResponse(
            *request, static_cast<http::status>(result.abort_status_code), result.abort_message));
      }
      writer->Reply(net::MakeResponse(*request, http::status::ok,
                                      protocol::SerializeGenerateResponse(ResponseFor(
                                          rid, *req, result.output_ids, &result, prompt_tokens))));
    };
  }
  if (req->stream) {
    writer->StartStream(http::status::ok,
                        {{"Content-Type", "text/event-stream"}, {"Cache-Control", "no-cache"}});
  }
  if (Status s = runtime_->Submit(std::move(input), std::move(callbacks)); !s.ok()) {
    if (req->stream) {
      // Headers are out: SGLang's stream turns the ValueError into an error event, then
      // [DONE].
      writer->WriteChunk(
          protocol::SseEvent(net::SglangErrorBody(s.message(), static_cast<int>(StatusFor(s)))));
      writer->WriteChunk(std::string(protocol::kSseDone));
      writer->EndStream();
      return;
    }
    return ReplyError(request, *writer, s);
  }
  EngineRuntime* runtime = runtime_.get();
  writer->OnClientGone([runtime, rid] { runtime->Abort(rid); });
}

void EngineEmulator::HandleAbort(net::Request request,
                                 std::shared_ptr<net::ResponseWriter> writer) {
  Record(request);
  StatusOr<protocol::AbortRequest> abort = protocol::ParseAbortRequest(request.body());
  if (!abort.ok()) return ReplyError(request, *writer, abort.status());
  runtime_->Abort(abort->rid, abort->abort_all);
  writer->Reply(net::MakeResponse(request, http::status::ok, "", "text/plain"));
}

void EngineEmulator::HandleOpenSession(net::Request request,
                                       std::shared_ptr<net::ResponseWriter> writer) {
  Record(request);
  StatusOr<protocol::OpenSessionRequest> open = protocol::ParseOpenSessionRequest(request.body());
  if (!open.ok()) return ReplyError(request, *writer, open.status());
  const std::string id = open->session_id.value_or(ids_.Next());
  {
    sync::MutexLock lock(&mu_);
    if (open_sessions_.Find(id) != nullptr) {
      return ReplyError(request, *writer,
                        InvalidArgumentError("Session id " + id +
                                             " already exists. Check if a session with the same "
                                             "id is still open."));
    }
    open_sessions_.Touch(id, [] { return true; });
    // Sessions opened and never closed are forgotten, oldest first, past max_sessions.
    while (static_cast<int64_t>(open_sessions_.size()) > options_.runtime.max_sessions &&
           open_sessions_.EvictOldest([](const std::string&, bool) { return true; })) {
      ++open_sessions_evicted_;
    }
  }
  writer->Reply(
      net::MakeResponse(request, http::status::ok, boost::json::serialize(boost::json::value(id))));
}

void EngineEmulator::HandleCloseSession(net::Request request,
                                        std::shared_ptr<net::ResponseWriter> writer) {
  Record(request);
  if (const int status = faults().close_session_status; status != 0) {
    return writer->Reply(
        net::MakeErrorResponse(request, static_cast<http::status>(status), "injected fault"));
  }
  StatusOr<protocol::CloseSessionRequest> close =
      protocol::ParseCloseSessionRequest(request.body());
  if (!close.ok()) return ReplyError(request, *writer, close.status());
  {
    sync::MutexLock lock(&mu_);
    open_sessions_.Erase(close->session_id);
  }
  if (options_.runtime.enable_session_radix_cache) runtime_->CloseSession(close->session_id);
  writer->Reply(net::MakeResponse(request, http::status::ok, "", "text/plain"));
}

void EngineEmulator::HandleDemoteFinishedSubagents(net::Request request,
                                                   std::shared_ptr<net::ResponseWriter> writer) {
  Record(request);
  StatusOr<protocol::DemoteFinishedSubagentsRequest> demote =
      protocol::ParseDemoteFinishedSubagentsRequest(request.body());
  if (!demote.ok()) return ReplyError(request, *writer, demote.status());
  const int64_t demoted = runtime_->DemoteFinishedSubagents(demote->parent_session_id);
  writer->Reply(net::MakeResponse(request, http::status::ok,
                                  "{\"demoted_children\":" + std::to_string(demoted) + "}"));
}

void EngineEmulator::HandleFlushCache(net::Request request,
                                      std::shared_ptr<net::ResponseWriter> writer) {
  Record(request);
  runtime_->FlushCache();
  // SGLang answers 200 with the same text whether or not it flushed.
  writer->Reply(net::MakeResponse(request, http::status::ok,
                                  std::string(protocol::kFlushCacheResponse), "text/plain"));
}

void EngineEmulator::HandleHealth(net::Request request, std::shared_ptr<net::ResponseWriter> writer,
                                  bool generate) {
  const int status = faults().health_status;
  if (shutting_down_.load() || status != 0) {
    return writer->Reply(net::MakeResponse(
        request,
        status != 0 ? static_cast<http::status>(status) : http::status::service_unavailable, "",
        "text/plain"));
  }
  const RuntimeSnapshot snapshot = runtime_->Snapshot();
  if (!generate || snapshot.gauges.num_running_reqs + snapshot.gauges.num_queue_reqs > 0) {
    return writer->Reply(net::MakeResponse(request, http::status::ok, "", "text/plain"));
  }
  GenerateInput probe;
  probe.rid = std::string(protocol::kHealthCheckRidPrefix) + ids_.Next();
  probe.input_ids = {1};
  probe.max_new_tokens = 1;
  GenerateCallbacks callbacks;
  auto shared_request = std::make_shared<net::Request>(request);
  callbacks.on_finish = [writer, shared_request](const GenerateResult& result) {
    writer->Reply(net::MakeResponse(
        *shared_request, result.aborted ? http::status::service_unavailable : http::status::ok, "",
        "text/plain"));
  };
  if (!runtime_->Submit(std::move(probe), std::move(callbacks)).ok()) {
    writer->Reply(net::MakeResponse(request, http::status::service_unavailable, "", "text/plain"));
  }
}

std::string EngineEmulator::MetricsText() const {
  std::vector<protocol::MetricFamily> families = EngineMetricFamilies(
      runtime_->Snapshot(), options_.served_model_name, options_.metrics_tp_ranks,
      options_.runtime.engine.kv_pool.tokens_per_block);
  // The HTTP layer's own bounds, next to the runtime's.
  auto counter = [&families](const char* name, const char* help, int64_t value) {
    families.push_back(protocol::MetricFamily{
        name, help, "counter", {protocol::Sample{name, {}, static_cast<double>(value), {}}}});
  };
  counter("agentkv:emulator_recorded_requests_dropped_total",
          "Control requests dropped from GET /agentkv/requests (--max-recorded-requests).",
          recorded_requests_dropped());
  counter("agentkv:emulator_open_sessions_evicted_total",
          "/open_session ids forgotten because --max-sessions was reached.",
          open_sessions_evicted());
  return protocol::WritePrometheusText(families);
}

void EngineEmulator::HandleMetrics(net::Request request,
                                   std::shared_ptr<net::ResponseWriter> writer) {
  const Faults f = faults();
  if (f.metrics_delay_ms > 0) {
    // A stalled scrape: the scraper's timeout is what is being tested. The answer waits on a
    // timer of the server's executor, so no thread is held.
    auto timer = std::make_shared<boost::asio::steady_timer>(
        server_->executor(), std::chrono::milliseconds(f.metrics_delay_ms));
    auto shared_request = std::make_shared<net::Request>(std::move(request));
    timer->async_wait([this, timer, writer, shared_request](const boost::system::error_code&) {
      writer->Reply(net::MakeResponse(*shared_request, http::status::ok, MetricsText(),
                                      "text/plain; version=0.0.4"));
    });
    return;
  }
  if (f.metrics_status != 0) {
    return writer->Reply(net::MakeResponse(request, static_cast<http::status>(f.metrics_status),
                                           "injected fault", "text/plain"));
  }
  writer->Reply(
      net::MakeResponse(request, http::status::ok, MetricsText(), "text/plain; version=0.0.4"));
}

void EngineEmulator::HandleFaults(net::Request request,
                                  std::shared_ptr<net::ResponseWriter> writer) {
  if (request.method() == http::verb::post) {
    boost::system::error_code error;
    const boost::json::value body = boost::json::parse(request.body(), error);
    if (error || !body.is_object()) {
      return ReplyError(request, *writer, InvalidArgumentError("faults: expected a JSON object"));
    }
    Faults f;
    const boost::json::object& o = body.as_object();
    // A status is 0 (no fault) or an HTTP status code; a delay is a time (base/bounds.h).
    auto read = [&o](const char* key, auto& field, bool is_status) -> Status {
      const boost::json::value* v = o.if_contains(key);
      if (v == nullptr) return Status::Ok();
      const std::string name = std::string("faults.") + key;
      if (!v->is_int64() || v->as_int64() < 0) {
        return InvalidArgumentError(name + ": expected a non-negative integer");
      }
      const int64_t value = v->as_int64();
      if (is_status && value != 0 && (value < 100 || value > 599)) {
        return InvalidArgumentError(name + ": " + std::to_string(value) +
                                    " is neither 0 nor an HTTP status in [100, 599]");
      }
      if (!is_status) {
        AGENTKV_RETURN_IF_ERROR(TimeFromMillis(name, static_cast<double>(value)).status());
      }
      field = static_cast<std::remove_reference_t<decltype(field)>>(value);
      return Status::Ok();
    };
    for (Status s : {read("metrics_status", f.metrics_status, true),
                     read("health_status", f.health_status, true),
                     read("close_session_status", f.close_session_status, true),
                     read("metrics_delay_ms", f.metrics_delay_ms, false)}) {
      if (!s.ok()) return ReplyError(request, *writer, s);
    }
    sync::MutexLock lock(&mu_);
    faults_ = f;
  }
  const Faults f = faults();
  writer->Reply(net::MakeResponse(
      request, http::status::ok,
      boost::json::serialize(boost::json::object{{"metrics_status", f.metrics_status},
                                                 {"health_status", f.health_status},
                                                 {"close_session_status", f.close_session_status},
                                                 {"metrics_delay_ms", f.metrics_delay_ms}})));
}

}  // namespace agentkv::service
