#include "agentkv/load/live_target.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>

#include "agentkv/base/bounds.h"
#include "agentkv/service/common/hmac_sha256.h"

namespace agentkv::load {
namespace {

// The longest error body kept from a failed answer.
constexpr size_t kMaxErrorBody = 4096;
constexpr int32_t kMaxRetries = 100;
constexpr int64_t kMaxOutputTokens = int64_t{1} << 20;

bool Success(int status) { return status >= 200 && status < 300; }

// The kind a failed attempt or close is counted under: "http 503" for an HTTP status, else the
// transport's status code in words ("unavailable", "deadline exceeded").
std::string ErrorKind(const Status& transport, int http_status) {
  if (transport.ok()) return "http " + std::to_string(http_status);
  std::string kind(StatusCodeName(transport.code()));
  std::transform(kind.begin(), kind.end(), kind.begin(), [](unsigned char c) {
    return c == '_' ? ' ' : static_cast<char>(std::tolower(c));
  });
  return kind;
}

}  // namespace

// One attempt's stream as its callbacks fill it (on the client's I/O thread), then queued.
struct LiveTarget::Outcome {
  size_t slot = 0;
  int32_t attempt = 0;
  int http_status = 0;
  Status transport;
  Status stream;
  bool stream_done = false;
  StreamOutcome answer;
  std::string error_body;
  WallClock::time_point first_output;
  WallClock::time_point last_output;
  WallClock::time_point finished;
};

struct LiveTarget::InFlight {
  WireRequest wire;
  std::vector<kv::BlockKey> output_keys;
  int64_t prompt_blocks = 0;
  SessionId session;
  int32_t attempt = 0;
  WallClock::time_point sent;
  std::shared_ptr<net::HttpClient::StreamHandle> handle;
};

Status LiveTargetOptions::Validate() const {
  if (url.empty()) return InvalidArgumentError("the target url is empty");
  if (tokens_per_block < 1) {
    return InvalidArgumentError("tokens_per_block must be >= 1, got " +
                                std::to_string(tokens_per_block));
  }
  if (retries < 0 || retries > kMaxRetries) {
    return InvalidArgumentError("retries must be in [0, " + std::to_string(kMaxRetries) +
                                "], got " + std::to_string(retries));
  }
  if (output_tokens.has_value() && (*output_tokens < 1 || *output_tokens > kMaxOutputTokens)) {
    return InvalidArgumentError("output_tokens must be in [1, " + std::to_string(kMaxOutputTokens) +
                                "], got " + std::to_string(*output_tokens));
  }
  if (connections < 1) return InvalidArgumentError("connections must be >= 1");
  if (timeout.count() <= 0) return InvalidArgumentError("the timeout must be > 0");
  return Status();
}

StatusOr<std::unique_ptr<LiveTarget>> LiveTarget::Create(const LiveTargetOptions& options,
                                                         LoopClock clock) {
  if (Status s = options.Validate(); !s.ok()) return s;
  StatusOr<PromptBook> book =
      PromptBook::Create(options.tokens_per_block, options.vocab_size, options.salt);
  if (!book.ok()) return book.status();
  return std::unique_ptr<LiveTarget>(
      new LiveTarget(options, std::move(clock), std::move(book).value()));
}

namespace {

net::HttpClientOptions ClientOptions(const LiveTargetOptions& options) {
  net::HttpClientOptions client;
  client.max_connections_per_host = options.connections;
  client.max_idle_per_host = options.connections;
  client.header_timeout = options.timeout;
  client.body_timeout = options.timeout;
  client.queue_timeout = options.timeout;
  return client;
}

}  // namespace

LiveTarget::LiveTarget(const LiveTargetOptions& options, LoopClock clock, PromptBook book)
    : options_(options),
      clock_(std::move(clock)),
      hasher_(options.salt),
      book_(std::move(book)),
      client_(ClientOptions(options)) {}

LiveTarget::~LiveTarget() = default;

std::string LiveTarget::SessionName(int64_t number) const {
  return options_.session_prefix + std::to_string(number);
}

Status LiveTarget::Submit(sim::GatewayRequest request) {
  if (stopped_) return FailedPreconditionError("the load run is stopping");
  const engine::SchedulerRequest& r = request.request;
  const size_t slot = static_cast<size_t>(r.id.value());
  if (measured_.size() <= slot) measured_.resize(slot + 1);
  InFlight call;
  call.session = request.session;
  const std::string session = SessionName(request.session.value());
  WireRequest& wire = call.wire;
  wire.api = options_.api;
  wire.model = options_.model;
  wire.prompt = book_.Prompt(r.prompt_keys, r.prompt_tokens, static_cast<uint64_t>(r.id.value()));
  wire.max_new_tokens = options_.output_tokens.value_or(r.max_new_tokens);
  if (options_.session_ids) wire.session = session;
  if (options_.routing_keys) {
    wire.routing_key = SessionName(static_cast<int64_t>(request.routing_key));
  }
  if (options_.pause_hints && request.next_pause != PauseKind::kUnknown) {
    wire.pause = request.next_pause;
  }
  if (options_.parent_hints && r.kv_options.parent_conversation.has_value()) {
    wire.parent_session = SessionName(r.kv_options.parent_conversation->value());
    if (!options_.parent_hint_key.empty()) {
      wire.parent_signature = service::HexDigest(
          service::HmacSha256(options_.parent_hint_key, session + "\n" + *wire.parent_session));
    }
  }
  wire.retain = request.retain.value_or(false);
  call.output_keys = r.output_keys;
  call.prompt_blocks = static_cast<int64_t>(r.prompt_keys.size());

  MeasuredRequest& m = measured_[slot];
  m.gateway.id = r.id;
  m.gateway.session = request.session;
  m.gateway.prompt_tokens = r.prompt_tokens;
  m.gateway.prompt_blocks = r.prompt_tokens / options_.tokens_per_block;
  m.engine.id = r.id;
  open_sessions_.emplace(request.session.value(), session);
  call.sent = WallClock::now();
  m.gateway.received = clock_(call.sent);
  m.engine.arrival = m.gateway.received;
  calls_.emplace(slot, std::move(call));
  ++in_flight_;
  SendAttempt(slot);
  return Status();
}

void LiveTarget::SendAttempt(size_t slot) {
  InFlight& call = calls_.at(slot);
  call.wire.rid =
      options_.session_prefix + "r" + std::to_string(slot) + ":" + std::to_string(call.attempt);
  HttpCall http = BuildCall(call.wire);
  {
    sync::MutexLock lock(&mu_);
    ++counters_.attempts;
  }
  auto outcome = std::make_shared<Outcome>();
  outcome->slot = slot;
  outcome->attempt = call.attempt;
  auto reader = std::make_shared<StreamReader>(options_.api);
  call.handle = client_.AsyncStream(
      net::http::verb::post, options_.url, std::move(http.target), std::move(http.headers),
      std::move(http.body),
      [outcome](int status, const net::HeaderList&) { outcome->http_status = status; },
      [outcome, reader](std::string_view chunk) {
        if (!Success(outcome->http_status)) {
          const size_t room = kMaxErrorBody - std::min(kMaxErrorBody, outcome->error_body.size());
          outcome->error_body.append(chunk.substr(0, room));
          return;
        }
        if (reader->Feed(chunk)) {
          const WallClock::time_point now = WallClock::now();
          if (outcome->first_output == WallClock::time_point{}) outcome->first_output = now;
          outcome->last_output = now;
        }
      },
      [this, outcome, reader](Status status) {
        outcome->finished = WallClock::now();
        outcome->transport = std::move(status);
        outcome->stream = reader->status();
        outcome->stream_done = reader->done();
        outcome->answer = reader->outcome();
        sync::MutexLock lock(&mu_);
        queue_.push_back(std::move(*outcome));
        ready_.Signal();
      });
}

bool LiveTarget::WaitForOutcome(WallClock::time_point deadline) {
  sync::MutexLock lock(&mu_);
  while (queue_.empty() && !woken_) {
    if (ready_.WaitWithDeadline(&mu_, deadline)) break;
  }
  woken_ = false;
  return !queue_.empty();
}

void LiveTarget::Wake() {
  sync::MutexLock lock(&mu_);
  woken_ = true;
  ready_.Signal();
}

int64_t LiveTarget::closes_pending() const {
  sync::MutexLock lock(&mu_);
  return closes_pending_;
}

LiveCounters LiveTarget::counters() const {
  sync::MutexLock lock(&mu_);
  return counters_;
}

int64_t LiveTarget::DeliverCompletions() {
  std::vector<Outcome> outcomes;
  {
    sync::MutexLock lock(&mu_);
    outcomes.swap(queue_);
  }
  int64_t completed = 0;
  for (Outcome& outcome : outcomes) {
    auto it = calls_.find(outcome.slot);
    if (it == calls_.end() || it->second.attempt != outcome.attempt) continue;
    const bool served = outcome.transport.ok() && Success(outcome.http_status) &&
                        outcome.stream.ok() && outcome.stream_done &&
                        !outcome.answer.error.has_value();
    // A 400, before the headers or as the code of the stream's error event.
    const bool refused = outcome.transport.ok() &&
                         (outcome.http_status == 400 ||
                          (Success(outcome.http_status) && outcome.answer.error_code == 400));
    if (stopped_ && !served) {
      measured_[outcome.slot].cancelled = true;
      calls_.erase(it);
      --in_flight_;
      continue;
    }
    if (!served && !refused) {
      const std::string kind = outcome.transport.ok() && Success(outcome.http_status)
                                   ? "stream error"
                                   : ErrorKind(outcome.transport, outcome.http_status);
      {
        sync::MutexLock lock(&mu_);
        ++counters_.errors[kind];
        if (it->second.attempt < options_.retries) ++counters_.retries;
      }
      if (it->second.attempt < options_.retries) {
        ++it->second.attempt;
        SendAttempt(outcome.slot);
        continue;
      }
      measured_[outcome.slot].failed = true;
    }
    Complete(outcome.slot, outcome, served);
    ++completed;
  }
  return completed;
}

void LiveTarget::Complete(size_t slot, const Outcome& outcome, bool served) {
  InFlight call = std::move(calls_.at(slot));
  calls_.erase(slot);
  --in_flight_;
  MeasuredRequest& m = measured_[slot];
  m.engine.finished = clock_(outcome.finished);
  if (served) {
    const StreamOutcome& a = outcome.answer;
    // The server's counts are input: bounded, so the summary's sums cannot overflow.
    const int64_t prompt = std::clamp<int64_t>(
        a.prompt_tokens.value_or(static_cast<int64_t>(call.wire.prompt.size())), 0, kMaxTokens);
    const int64_t cached = std::clamp<int64_t>(a.cached_tokens.value_or(0), 0, prompt);
    m.gateway.prompt_tokens = prompt;
    m.gateway.prompt_blocks = prompt / options_.tokens_per_block;
    m.gateway.dispatched = m.gateway.received;
    engine::RequestReport& report = m.engine.report;
    report.cached_host_tokens = std::clamp<int64_t>(a.cached_host_tokens.value_or(0), 0, cached);
    report.cached_device_tokens = a.cached_device_tokens.has_value()
                                      ? std::clamp<int64_t>(*a.cached_device_tokens, 0, cached)
                                      : cached - report.cached_host_tokens;
    report.uncached_tokens = prompt - report.cached_device_tokens - report.cached_host_tokens;
    report.output_tokens =
        std::clamp<int64_t>(a.completion_tokens.value_or(a.output_events), 0, kMaxTokens);
    // A live server does not say which uncached tokens it had computed before.
    m.engine.cold_tokens = report.uncached_tokens;
    if (a.saw_output) {
      m.engine.first_token = clock_(outcome.first_output);
      m.engine.first_scheduled = std::nullopt;
      if (a.output_events >= 2) {
        m.inter_token_s = (clock_(outcome.last_output) - clock_(outcome.first_output)).seconds() /
                          static_cast<double>(a.output_events - 1);
      }
    } else {
      m.engine.first_token = m.engine.finished;
    }
    if (!call.output_keys.empty() && !a.output_ids.empty()) {
      book_.RememberAnswer(call.output_keys, call.prompt_blocks, call.wire.prompt, a.output_ids,
                           call.session);
    }
  } else {
    m.engine.report.rejected = true;
  }
  // Copies: the callback may submit, which grows measured_.
  const sim::GatewayRecord gateway = m.gateway;
  const sim::EngineRequestRecord engine = m.engine;
  if (on_complete_) on_complete_(gateway, &engine);
}

std::vector<int64_t> LiveTarget::EndSession(SessionId session) {
  book_.Forget(session);
  auto it = open_sessions_.find(session.value());
  if (it == open_sessions_.end()) return {};
  if (options_.close_sessions) CloseSession(it->second);
  open_sessions_.erase(it);
  return {};
}

void LiveTarget::CloseSession(const std::string& name) {
  {
    sync::MutexLock lock(&mu_);
    ++closes_pending_;
  }
  client_.AsyncRequest(
      net::http::verb::post, options_.url, SessionCloseTarget(name),
      {{"Content-Type", "application/json"}}, "{}", [this](StatusOr<net::ClientResponse> response) {
        sync::MutexLock lock(&mu_);
        --closes_pending_;
        if (response.ok() && Success(response->status)) {
          ++counters_.sessions_closed;
        } else {
          ++counters_.close_errors[response.ok() ? ErrorKind(Status(), response->status)
                                                 : ErrorKind(response.status(), 0)];
        }
        ready_.Signal();
      });
}

void LiveTarget::Stop() {
  if (stopped_) return;
  stopped_ = true;
  for (auto& [slot, call] : calls_) {
    if (call.handle) call.handle->Cancel();
  }
  if (options_.close_sessions) {
    for (const auto& [number, name] : open_sessions_) CloseSession(name);
  }
  open_sessions_.clear();
}

}  // namespace agentkv::load
