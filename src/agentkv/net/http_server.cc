// HttpServer: option validation, start-up (bind, listen, threads) and the shutdown sequence.
// The per-connection protocol lives in server_connection.cc.
//
// Invariants: after Shutdown the core is stopped (writers post nothing, no request reaches the
// handler) and the acceptor is closed; with the server's own loops, they are joined, every socket
// is closed and no work is queued on them.
#include "agentkv/net/http_server.h"

#include <algorithm>
#include <boost/asio/ip/address.hpp>
#include <cstdio>
#include <exception>

#include "agentkv/base/check.h"
#include "agentkv/net/server_connection.h"
#include "agentkv/net/server_core.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::net {
namespace {

namespace asio = boost::asio;
using boost::system::error_code;

// After the shutdown deadline, how long force-closed connections get to run their close on
// their strands before the I/O threads are stopped anyway.
constexpr std::chrono::milliseconds kForceCloseGrace{1'000};

std::string AddressForUrl(const std::string& address) {
  if (address.find(':') != std::string::npos) return "[" + address + "]";
  return address;
}

}  // namespace

Status HttpServerOptions::Validate() const {
  error_code error;
  asio::ip::make_address(address, error);
  if (error) {
    return InvalidArgumentError("HttpServerOptions.address \"" + address +
                                "\" is not a numeric IP address");
  }
  if (threads < 1 || threads > 256) {
    return InvalidArgumentError("HttpServerOptions.threads must be in [1, 256], got " +
                                std::to_string(threads));
  }
  if (max_header_bytes < 256 || max_header_bytes > (size_t{1} << 30)) {
    return InvalidArgumentError("HttpServerOptions.max_header_bytes must be in [256, 2^30], got " +
                                std::to_string(max_header_bytes));
  }
  if (max_body_bytes > (size_t{1} << 62)) {
    return InvalidArgumentError("HttpServerOptions.max_body_bytes must be at most 2^62");
  }
  AGENTKV_RETURN_IF_ERROR(
      CheckTimeoutsPositive("HttpServerOptions", {{"header_timeout", header_timeout},
                                                  {"body_timeout", body_timeout},
                                                  {"idle_timeout", idle_timeout},
                                                  {"write_timeout", write_timeout}}));
  if (max_inflight_bytes > (size_t{1} << 62)) {
    return InvalidArgumentError("HttpServerOptions.max_inflight_bytes must be at most 2^62, got " +
                                std::to_string(max_inflight_bytes));
  }
  if (max_stream_buffer_bytes == 0) {
    return InvalidArgumentError("HttpServerOptions.max_stream_buffer_bytes must be positive");
  }
  if (backlog < 1) {
    return InvalidArgumentError("HttpServerOptions.backlog must be positive, got " +
                                std::to_string(backlog));
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                        Handler handler,
                                                        std::shared_ptr<IoLoops> loops) {
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  if (!handler) return InvalidArgumentError("HttpServer::Start: the handler is empty");
  auto core = std::make_shared<internal::ServerCore>(options, std::move(handler), std::move(loops));
  const asio::ip::tcp::endpoint endpoint(asio::ip::make_address(options.address), options.port);
  const std::string where = AddressForUrl(options.address) + ":" + std::to_string(options.port);
  auto& acceptor = core->acceptor();
  error_code error;
  acceptor.open(endpoint.protocol(), error);
  if (error) return UnavailableError("cannot open a socket for " + where + ": " + error.message());
  acceptor.set_option(asio::socket_base::reuse_address(true), error);
  if (error)
    return UnavailableError("cannot set SO_REUSEADDR on " + where + ": " + error.message());
  acceptor.bind(endpoint, error);
  if (error) return UnavailableError("cannot bind " + where + ": " + error.message());
  acceptor.listen(options.backlog, error);
  if (error) return UnavailableError("cannot listen on " + where + ": " + error.message());
  const uint16_t port = acceptor.local_endpoint().port();
  core->StartAccepting();
  return std::unique_ptr<HttpServer>(new HttpServer(core, port));
}

HttpServer::HttpServer(std::shared_ptr<internal::ServerCore> core, uint16_t port)
    : core_(std::move(core)), port_(port) {}

HttpServer::~HttpServer() { Shutdown(std::chrono::milliseconds(0)); }

uint16_t HttpServer::port() const { return port_; }

std::string HttpServer::base_url() const {
  return "http://" + AddressForUrl(core_->options().address) + ":" + std::to_string(port_);
}

void HttpServer::Shutdown(std::chrono::milliseconds deadline) {
  sync::MutexLock lock(&shutdown_mu_);
  if (shut_down_) return;
  AGENTKV_CHECK(!core_->loops().RunningInThisThread())
      << "HttpServer::Shutdown called from one of the server's I/O threads";
  shut_down_ = true;
  const auto until =
      std::chrono::steady_clock::now() + std::max(deadline, std::chrono::milliseconds(0));
  for (const auto& connection : core_->BeginDrain()) connection->BeginDrain();
  // Meanwhile the listener stays open: a connection accepted now is answered 503 by the server
  // (a load balancer's /health reads "shutting down" instead of a refused connect).
  core_->WaitForConnections(until, /*include_late=*/false);
  core_->StopAccepting(std::chrono::steady_clock::now() + kForceCloseGrace);
  const auto rest = core_->OpenConnections();
  if (!rest.empty()) {
    for (const auto& connection : rest) connection->ForceClose();
    core_->WaitForConnections(std::chrono::steady_clock::now() + kForceCloseGrace);
  }
  // Handlers' own timers on executor() may still be pending: stop rather than wait for them.
  if (core_->owns_loops()) core_->loops().Join(IoLoops::JoinMode::kStopNow);
  core_->MarkStopped();
  core_->FinishStop();
}

int64_t HttpServer::open_connections() const { return core_->open_connections(); }

int64_t HttpServer::requests_served() const { return core_->requests_served(); }

int64_t HttpServer::inflight_bytes() const { return core_->inflight_bytes(); }

int64_t HttpServer::TakeInflightPeak() { return core_->TakeInflightPeak(); }

int64_t HttpServer::inflight_refused() const { return core_->inflight_refused(); }

boost::asio::any_io_executor HttpServer::executor() {
  IoLoops& loops = core_->loops();
  return loops.context(loops.CurrentIndex().value_or(loops.NextIndex())).get_executor();
}

}  // namespace agentkv::net
