// HttpClient: option validation, argument checks, thread start-up and shutdown. One request's
// protocol lives in client_call.cc, the per-upstream pool in connection_pool.cc.
//
// Invariants: `threads_` run the core's io_context from construction until the destructor
// joined them; a call is started only through Launch, which gives it exactly one strand.
#include "agentkv/net/http_client.h"

#include <cstdio>
#include <exception>
#include <future>

#include "agentkv/base/check.h"
#include "agentkv/net/client_call.h"
#include "agentkv/net/io_thread.h"

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
std::shared_ptr<internal::ClientCall> Launch(internal::ClientCore& core, http::verb method,
                                             const std::string& base_url, std::string target,
                                             HeaderList headers, std::string body, bool streaming,
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
  auto call = std::make_shared<internal::ClientCall>(core, std::move(spec), streaming,
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

HttpClient::HttpClient(HttpClientOptions options) {
  const Status valid = options.Validate();
  AGENTKV_CHECK(valid.ok()) << valid.ToString();
  core_ = std::make_unique<internal::ClientCore>(options);
  core_->StartSweeper();
  threads_.reserve(static_cast<size_t>(options.threads));
  for (int i = 0; i < options.threads; ++i) {
    threads_.emplace_back([core = core_.get()] {
      internal::RunIoThread(core->io_context(), "an HttpClient callback");
    });
  }
}

HttpClient::~HttpClient() {
  AGENTKV_CHECK(!core_->io_context().get_executor().running_in_this_thread())
      << "HttpClient destroyed on one of its own I/O threads";
  for (const auto& call : core_->BeginShutdown()) {
    call->Cancel(UnavailableError("HttpClient destroyed while the request was in flight"));
  }
  core_->StopSweeper();
  core_->ReleaseWorkGuard();
  for (auto& thread : threads_) thread.join();
  core_->pool().CloseAll();
}

std::shared_ptr<HttpClient::StreamHandle> HttpClient::AsyncRequest(
    http::verb method, const std::string& base_url, std::string target, HeaderList headers,
    std::string body, std::function<void(StatusOr<ClientResponse>)> done) {
  internal::ClientCall::Callbacks callbacks;
  callbacks.on_response = std::move(done);
  auto call = Launch(*core_, method, base_url, std::move(target), std::move(headers),
                     std::move(body), /*streaming=*/false, std::move(callbacks));
  return std::shared_ptr<StreamHandle>(new StreamHandle(call));
}

StatusOr<ClientResponse> HttpClient::Request(http::verb method, const std::string& base_url,
                                             const std::string& target, const HeaderList& headers,
                                             const std::string& body) {
  AGENTKV_CHECK(!core_->io_context().get_executor().running_in_this_thread())
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
  auto call = Launch(*core_, method, base_url, std::move(target), std::move(headers),
                     std::move(body), /*streaming=*/true, std::move(callbacks));
  return std::shared_ptr<StreamHandle>(new StreamHandle(call));
}

int64_t HttpClient::pooled_connections() const { return core_->pool().idle_connections(); }

int64_t HttpClient::connections_opened() const { return core_->connections_opened(); }

}  // namespace agentkv::net
