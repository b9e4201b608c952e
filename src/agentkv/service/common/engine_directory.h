// EngineDirectory: the engine base URLs of the fleet, for the gateway's control plane (abort
// and close fan-out, /metrics scrapes, startup checks) and, without a router, its data path.
//
// With a router, the list comes from the router's GET /workers (healthy entries), falling back
// to GET /list_workers, each URL without its DP `@rank` suffix and de-duplicated
// (protocol::EngineBaseUrls, Relax's router_worker_base_urls); Refresh() rediscovers and, when
// discovery fails, keeps the last known list so that closes still reach the engines. Without a
// router the list is the fixed --engine-urls. Thread-safe; the client must outlive it.
#ifndef AGENTKV_SERVICE_COMMON_ENGINE_DIRECTORY_H_
#define AGENTKV_SERVICE_COMMON_ENGINE_DIRECTORY_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/net/http_client.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::service {

// One GET against the router, by path.
using RouterGet = std::function<StatusOr<net::ClientResponse>(std::string_view path)>;

// Engine base URLs from the router: GET /workers (healthy, non-empty urls); when that fails,
// answers non-2xx, does not parse or lists no engine, GET /list_workers. Unavailable, naming
// both failures, when neither yields an engine.
StatusOr<std::vector<std::string>> DiscoverEngineUrls(const RouterGet& get);

// GET `base_url` + `target` that gives up at `deadline` whatever the client's own timeouts (a
// peer that trickles its answer byte by byte cannot hold it longer): DeadlineExceeded then,
// and the call is cancelled. Blocking; never call it from the client's I/O threads.
StatusOr<net::ClientResponse> GetBefore(net::HttpClient& client, const std::string& base_url,
                                        const std::string& target,
                                        std::chrono::steady_clock::time_point deadline);

class EngineDirectory {
 public:
  // `router_url` empty: the fixed `engine_urls` (rank suffixes stripped, de-duplicated).
  // `client` may be null for a fixed list.
  EngineDirectory(std::string router_url, std::vector<std::string> engine_urls,
                  net::HttpClient* client);
  EngineDirectory(const EngineDirectory&) = delete;
  EngineDirectory& operator=(const EngineDirectory&) = delete;

  // With a router: rediscovers (blocking; never call it from the client's I/O threads), giving
  // up at `deadline` when set, and on success replaces the list; on failure returns the error
  // and keeps the last list. Without a router: the fixed list.
  StatusOr<std::vector<std::string>> Refresh(
      std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);

  // The last known list (empty before the first successful discovery).
  std::vector<std::string> urls() const;
  bool uses_router() const { return !router_url_.empty(); }
  const std::string& router_url() const { return router_url_; }
  // Round robin over the list, for the data path without a router; nullopt when empty.
  std::optional<std::string> NextEngine();

 private:
  const std::string router_url_;
  net::HttpClient* const client_;
  mutable sync::Mutex mu_;
  std::vector<std::string> urls_ AGENTKV_GUARDED_BY(mu_);
  std::atomic<uint64_t> next_{0};
};

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_COMMON_ENGINE_DIRECTORY_H_
