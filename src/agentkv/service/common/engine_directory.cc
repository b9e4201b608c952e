#include "agentkv/service/common/engine_directory.h"

#include <future>

#include "agentkv/protocol/endpoints.h"
#include "agentkv/protocol/workers.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::service {
namespace {

// The response body when `response` is a 2xx answer; else the reason it is not.
StatusOr<std::string> OkBody(const StatusOr<net::ClientResponse>& response) {
  if (!response.ok()) return response.status();
  if (response->status < 200 || response->status >= 300) {
    return UnavailableError("HTTP " + std::to_string(response->status));
  }
  return response->body;
}

}  // namespace

StatusOr<net::ClientResponse> GetBefore(net::HttpClient& client, const std::string& base_url,
                                        const std::string& target,
                                        std::chrono::steady_clock::time_point deadline) {
  auto promise = std::make_shared<std::promise<StatusOr<net::ClientResponse>>>();
  std::future<StatusOr<net::ClientResponse>> result = promise->get_future();
  std::shared_ptr<net::HttpClient::StreamHandle> call =
      client.AsyncRequest(net::http::verb::get, base_url, target, {}, "",
                          [promise](StatusOr<net::ClientResponse> response) {
                            promise->set_value(std::move(response));
                          });
  if (result.wait_until(deadline) == std::future_status::ready) return result.get();
  call->Cancel();  // Its callback still runs, into the abandoned promise.
  return DeadlineExceededError("GET " + target + ": no answer within the poll's deadline");
}

StatusOr<std::vector<std::string>> DiscoverEngineUrls(const RouterGet& get) {
  std::string workers_error;
  if (StatusOr<std::string> body = OkBody(get(protocol::kWorkersPath)); !body.ok()) {
    workers_error = body.status().message();
  } else if (StatusOr<std::vector<protocol::WorkerInfo>> workers = protocol::ParseWorkers(*body);
             !workers.ok()) {
    workers_error = workers.status().message();
  } else if (std::vector<std::string> urls = protocol::EngineBaseUrls(*workers); !urls.empty()) {
    return urls;
  } else {
    workers_error = "no healthy worker";
  }
  std::string list_error;
  if (StatusOr<std::string> body = OkBody(get(protocol::kListWorkersPath)); !body.ok()) {
    list_error = body.status().message();
  } else if (StatusOr<std::vector<std::string>> listed = protocol::ParseListWorkers(*body);
             !listed.ok()) {
    list_error = listed.status().message();
  } else if (std::vector<std::string> urls = protocol::EngineBaseUrls(*listed); !urls.empty()) {
    return urls;
  } else {
    list_error = "no worker";
  }
  return UnavailableError("engine discovery failed: /workers: " + workers_error +
                          "; /list_workers: " + list_error);
}

EngineDirectory::EngineDirectory(std::string router_url, std::vector<std::string> engine_urls,
                                 net::HttpClient* client)
    : router_url_(std::move(router_url)), client_(client) {
  if (router_url_.empty()) urls_ = protocol::EngineBaseUrls(engine_urls);
}

StatusOr<std::vector<std::string>> EngineDirectory::Refresh(
    std::optional<std::chrono::steady_clock::time_point> deadline) {
  if (router_url_.empty()) return urls();
  StatusOr<std::vector<std::string>> urls =
      DiscoverEngineUrls([this, deadline](std::string_view path) {
        if (deadline.has_value())
          return GetBefore(*client_, router_url_, std::string(path), *deadline);
        return client_->Request(net::http::verb::get, router_url_, std::string(path));
      });
  if (urls.ok()) {
    sync::MutexLock lock(&mu_);
    urls_ = *urls;
  }
  return urls;
}

std::vector<std::string> EngineDirectory::urls() const {
  sync::MutexLock lock(&mu_);
  return urls_;
}

std::optional<std::string> EngineDirectory::NextEngine() {
  sync::MutexLock lock(&mu_);
  if (urls_.empty()) return std::nullopt;
  return urls_[next_.fetch_add(1) % urls_.size()];
}

}  // namespace agentkv::service
