// HttpClient: option validation, argument checks, thread start-up and shutdown. One request's
// protocol lives in client_call.cc, the per-upstream pool in connection_pool.cc.
//
// Invariants: `cores_` has one core per loop (cores_[i] on loops_->context(i)), each built with
// the same options; the loops run from construction until the destructor (own loops) or their
// owner joins them; a call is started only through Launch, which gives it exactly one strand.
#include "agentkv/net/http_client.h"

#include <cstdio>
#include <exception>
#include <future>

#include "agentkv/base/check.h"
#include "agentkv/net/client_call.h"

namespace agentkv::net {
namespace {

Status CheckArguments(const std::string& target, const HeaderList& headers) {
  if (target.empty() || target.front() != '/') {
    return InvalidArgumentError("request target \"" + target + "\" must start with '/'");
  }
  if (target.find_first_of(" \r\n") != std::string::npos) {
    return InvalidArgumentError("request target \"" + target + "\" contains a space or line break");
  }
  for (const auto& [name, value] : headers) {
    if (name.empty() || name.find_first_of(" :\r\n") != std::string::npos ||
        value.find_first_of("\r\n") != std::string::npos) {
      return InvalidArgumentError("invalid request header \"" + name + "\"");
    }
  }
  return Status::Ok();
}

// Builds and starts a call; argument errors become the call's (asynchronous) result.
std::shared_ptr<internal::ClientCall> Launch(std::shared_ptr<internal::ClientCore> core,
                                             http::verb method, const std::string& base_url,
                                             std::string target, HeaderList headers,
                                             std::string body, bool streaming,
                                             internal::ClientCall::Callbacks callbacks) {
  internal::ClientCall::Spec spec;
  spec.method = method;
  Status initial = CheckArguments(target, headers);
  if (initial.ok()) {
    StatusOr<HttpEndpoint> endpoint = ParseBaseUrl(base_url);
    if (endpoint.ok()) {
      spec.endpoint = std::move(endpoint).value();
    } else {
      initial = endpoint.status();
    }
  }
  spec.target = std::move(target);
  spec.headers = std::move(headers);
  spec.body = std::move(body);
  auto call = std::make_shared<internal::ClientCall>(std::move(core), std::move(spec), streaming,
                                                     std::move(callbacks), std::move(initial));
  call->Start();
  return call;
}

}  // namespace

Status HttpClientOptions::Validate() const {
  AGENTKV_RETURN_IF_ERROR(
      CheckTimeoutsPositive("HttpClientOptions", {{"connect_timeout", connect_timeout},
                                                  {"header_timeout", header_timeout},
                                                  {"body_timeout", body_timeout},
                                                  {"idle_timeout", idle_timeout},
                                                  {"queue_timeout", queue_timeout}}));
  if (max_connections_per_host == 0) {
    return InvalidArgumentError("HttpClientOptions.max_connections_per_host must be positive");
  }
  if (max_header_bytes < 256 || max_header_bytes > (size_t{1} << 30)) {
    return InvalidArgumentError("HttpClientOptions.max_header_bytes must be in [256, 2^30], got " +
                                std::to_string(max_header_bytes));
  }
  if (threads < 1 || threads > 256) {
    return InvalidArgumentError("HttpClientOptions.threads must be in [1, 256], got " +
                                std::to_string(threads));
  }
  return Status::Ok();
}

void HttpClient::StreamHandle::Cancel() {
  if (auto call = call_.lock()) call->Cancel(UnavailableError("cancelled by the caller"));
}

namespace {

size_t CeilDiv(size_t a, size_t b) { return a / b + (a % b != 0 ? 1 : 0); }

std::shared_ptr<IoLoops> OwnLoops(const HttpClientOptions& options) {
  const Status valid = options.Validate();
  AGENTKV_CHECK(valid.ok()) << valid.ToString();
  return std::make_shared<IoLoops>(options.threads, IoLoops::Shape::kShared,
                                   "an HttpClient callback", "http-client");
}

}  // namespace

HttpClient::HttpClient(HttpClientOptions options)
    : HttpClient(options, OwnLoops(options), /*owns_loops=*/true) {}

HttpClient::HttpClient(HttpClientOptions options, std::shared_ptr<IoLoops> loops)
    : HttpClient(std::move(options), std::move(loops), /*owns_loops=*/false) {}

HttpClient::HttpClient(HttpClientOptions options, std::shared_ptr<IoLoops> loops, bool owns_loops)
    : loops_(std::move(loops)), owns_loops_(owns_loops) {
  AGENTKV_CHECK(loops_ != nullptr) << "HttpClient given no loops";
  const Status valid = options.Validate();
  AGENTKV_CHECK(valid.ok()) << valid.ToString();
  const size_t count = loops_->size();
  HttpClientOptions per_loop = options;
  per_loop.max_connections_per_host = CeilDiv(options.max_connections_per_host, count);
  per_loop.max_idle_per_host = CeilDiv(options.max_idle_per_host, count);
  cores_.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    cores_.push_back(std::make_shared<internal::ClientCore>(per_loop, loops_->context(i)));
    cores_.back()->StartSweeper();
  }
}

HttpClient::~HttpClient() {
  AGENTKV_CHECK(!loops_->RunningInThisThread())
      << "HttpClient destroyed on one of its own I/O threads";
  for (const auto& core : cores_) {
    for (const auto& call : core->BeginShutdown()) {
      call->Cancel(UnavailableError("HttpClient destroyed while the request was in flight"));
    }
    core->StopSweeper();
  }
  if (owns_loops_) {
    loops_->Join(IoLoops::JoinMode::kFinishWork);
  } else {
    // The owner's loops keep running: wait for every call's callback to have run on them (a
    // call whose loop stopped meanwhile never runs it).
    for (const auto& core : cores_) core->WaitForCalls([this] { return loops_->joining(); });
  }
  for (const auto& core : cores_) core->pool().CloseAll();
  if (owns_loops_) loops_->DestroyPendingWork();
}

const std::shared_ptr<internal::ClientCore>& HttpClient::CoreForCall() {
  if (cores_.size() == 1) return cores_.front();
  return cores_[loops_->CurrentIndex().value_or(loops_->NextIndex())];
}

std::shared_ptr<HttpClient::StreamHandle> HttpClient::AsyncRequest(
    http::verb method, const std::string& base_url, std::string target, HeaderList headers,
    std::string body, std::function<void(StatusOr<ClientResponse>)> done) {
  internal::ClientCall::Callbacks callbacks;
  callbacks.on_response = std::move(done);
  auto call = Launch(CoreForCall(), method, base_url, std::move(target), std::move(headers),
                     std::move(body), /*streaming=*/false, std::move(callbacks));
  return std::shared_ptr<StreamHandle>(new StreamHandle(call));
}

StatusOr<ClientResponse> HttpClient::Request(http::verb method, const std::string& base_url,
                                             const std::string& target, const HeaderList& headers,
                                             const std::string& body) {
  AGENTKV_CHECK(!loops_->RunningInThisThread())
      << "HttpClient::Request would block one of the client's own I/O threads";
  auto promise = std::make_shared<std::promise<StatusOr<ClientResponse>>>();
  auto result = promise->get_future();
  AsyncRequest(
      method, base_url, target, headers, body,
      [promise](StatusOr<ClientResponse> response) { promise->set_value(std::move(response)); });
  return result.get();
}

std::shared_ptr<HttpClient::StreamHandle> HttpClient::AsyncStream(
    http::verb method, const std::string& base_url, std::string target, HeaderList headers,
    std::string body, std::function<void(int status, const HeaderList& headers)> on_headers,
    std::function<void(std::string_view chunk)> on_chunk, std::function<void(Status)> done,
    ReadGate read_gate) {
  internal::ClientCall::Callbacks callbacks;
  callbacks.on_headers = std::move(on_headers);
  callbacks.on_chunk = std::move(on_chunk);
  callbacks.on_done = std::move(done);
  callbacks.read_gate = std::move(read_gate);
  auto call = Launch(CoreForCall(), method, base_url, std::move(target), std::move(headers),
                     std::move(body), /*streaming=*/true, std::move(callbacks));
  return std::shared_ptr<StreamHandle>(new StreamHandle(call));
}

int64_t HttpClient::pooled_connections() const {
  int64_t total = 0;
  for (const auto& core : cores_) total += core->pool().idle_connections();
  return total;
}

int64_t HttpClient::connections_opened() const {
  int64_t total = 0;
  for (const auto& core : cores_) total += core->connections_opened();
  return total;
}

}  // namespace agentkv::net
