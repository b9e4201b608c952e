// Invariants: a connection is in `registry_` from Register until its Close() unregisters it
// (or FinishStop clears the registry); a connection registered once `draining_` is set is late
// (never in a drain snapshot, and never handed to the handler), and Register fails once
// `accepting_` is false, so StopAccepting plus OpenConnections never misses a connection;
// `in_flight_` counts the entries that are not late; `open_connections_` mirrors the
// registry's size; after MarkStopped no work is posted through PostIfRunning.
#include "agentkv/net/server_core.h"

#include <cerrno>
#include <string>

#include "agentkv/net/http_types.h"
#include "agentkv/net/server_connection.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::net::internal {
namespace {

namespace asio = boost::asio;
using boost::system::error_code;
using tcp = asio::ip::tcp;

// The server's own answer to a request on a connection accepted while it drains: 503 and
// Connection: close; GET or HEAD /health gets the body the services' /health answers while they
// shut down.
Response DrainAnswer(const Request& request) {
  constexpr std::string_view kHealthPath = "/health";
  const std::string_view target(request.target().data(), request.target().size());
  const bool health =
      (request.method() == http::verb::get || request.method() == http::verb::head) &&
      target.substr(0, target.find('?')) == kHealthPath;
  Response response = health ? MakeResponse(request, http::status::service_unavailable,
                                            R"({"status":"shutting_down"})")
                             : MakeErrorResponse(request, http::status::service_unavailable,
                                                 "the server is shutting down");
  response.keep_alive(false);
  return response;
}

}  // namespace

ServerCore::ServerCore(const HttpServerOptions& options, Handler handler,
                       std::shared_ptr<IoLoops> loops)
    : owns_loops_(loops == nullptr),
      loops_(loops != nullptr ? std::move(loops)
                              : std::make_shared<IoLoops>(options.threads, IoLoops::Shape::kShared,
                                                          "an HttpServer handler", "http-server")),
      options_(options),
      accept_strand_(asio::make_strand(loops_->context(0))),
      acceptor_(accept_strand_),
      accept_retry_timer_(accept_strand_),
      handler_(std::make_shared<const Handler>(std::move(handler))) {}

void ServerCore::Handle(uint64_t connection_id, Request request,
                        std::shared_ptr<ResponseWriter> writer) {
  std::shared_ptr<const Handler> handler;
  {
    sync::ReaderMutexLock lock(&stop_mu_);
    if (!stopped_) handler = handler_;
  }
  if (handler == nullptr) return;
  if (draining()) {
    bool late = false;
    {
      sync::MutexLock lock(&registry_mu_);
      const auto it = registry_.find(connection_id);
      late = it != registry_.end() && it->second.late;
    }
    if (late) return writer->Reply(DrainAnswer(request));
  }
  (*handler)(std::move(request), std::move(writer));
}

void ServerCore::StartAccepting() { AcceptNext(); }

void ServerCore::AcceptNext() {
  acceptor_.async_accept(asio::make_strand(loops_->context(loops_->NextIndex())),
                         [self = shared_from_this()](const error_code& error, tcp::socket socket) {
                           self->OnAccept(error, std::move(socket));
                         });
}

void ServerCore::OnAccept(const error_code& error, tcp::socket socket) {
  if (!acceptor_.is_open()) return;
  if (error) {
    if (error == asio::error::operation_aborted) return;
    const int code = error.value();
    if (code == EMFILE || code == ENFILE || code == ENOBUFS || code == ENOMEM) {
      // Out of descriptors or memory: back off instead of spinning on the failing accept.
      accept_retry_timer_.expires_after(std::chrono::milliseconds(50));
      accept_retry_timer_.async_wait([self = shared_from_this()](const error_code& timer_error) {
        if (!timer_error && self->acceptor_.is_open()) self->AcceptNext();
      });
      return;
    }
    AcceptNext();
    return;
  }
  error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  const uint64_t id = ++next_connection_id_;
  auto connection = std::make_shared<ServerConnection>(shared_from_this(), std::move(socket), id);
  if (Register(connection, id)) connection->Start();
  AcceptNext();
}

bool ServerCore::Register(const std::shared_ptr<ServerConnection>& connection, uint64_t id) {
  sync::MutexLock lock(&registry_mu_);
  if (!accepting_) return false;
  const bool late = draining_.load(std::memory_order_acquire);
  registry_.emplace(id, Registered{connection, late});
  if (!late) ++in_flight_;
  open_connections_.store(static_cast<int64_t>(registry_.size()), std::memory_order_relaxed);
  return true;
}

void ServerCore::Unregister(uint64_t id) {
  sync::MutexLock lock(&registry_mu_);
  const auto it = registry_.find(id);
  if (it == registry_.end()) return;
  if (!it->second.late) --in_flight_;
  registry_.erase(it);
  open_connections_.store(static_cast<int64_t>(registry_.size()), std::memory_order_relaxed);
  if (in_flight_ == 0) registry_cv_.SignalAll();
}

std::vector<std::shared_ptr<ServerConnection>> ServerCore::BeginDrain() {
  {
    sync::MutexLock lock(&registry_mu_);
    draining_.store(true, std::memory_order_release);
  }
  return OpenConnections();
}

void ServerCore::StopAccepting(std::chrono::steady_clock::time_point deadline) {
  {
    sync::MutexLock lock(&registry_mu_);
    accepting_ = false;
  }
  struct Closed {
    sync::Mutex mu;
    sync::CondVar cv;
    bool done AGENTKV_GUARDED_BY(mu) = false;
  };
  auto closed = std::make_shared<Closed>();
  // Holds the core only while it closes, and signals after letting go: the waiter may then drop
  // the last reference, which must not happen on one of the core's own loop threads.
  asio::post(accept_strand_, [weak = weak_from_this(), closed] {
    if (const std::shared_ptr<ServerCore> self = weak.lock()) {
      error_code ignored;
      self->acceptor_.close(ignored);
      self->accept_retry_timer_.cancel();
    }
    sync::MutexLock lock(&closed->mu);
    closed->done = true;
    closed->cv.SignalAll();
  });
  sync::MutexLock lock(&closed->mu);
  while (!closed->done) {
    if (closed->cv.WaitWithDeadline(&closed->mu, deadline)) break;
  }
}

std::vector<std::shared_ptr<ServerConnection>> ServerCore::OpenConnections() {
  std::vector<std::shared_ptr<ServerConnection>> open;
  sync::MutexLock lock(&registry_mu_);
  open.reserve(registry_.size());
  for (const auto& [id, entry] : registry_) {
    if (auto connection = entry.connection.lock()) open.push_back(std::move(connection));
  }
  return open;
}

bool ServerCore::WaitForConnections(std::chrono::steady_clock::time_point deadline,
                                    bool include_late) {
  sync::MutexLock lock(&registry_mu_);
  while ((include_late ? registry_.size() : in_flight_) != 0) {
    if (registry_cv_.WaitWithDeadline(&registry_mu_, deadline)) break;
  }
  return (include_late ? registry_.size() : in_flight_) == 0;
}

void ServerCore::MarkStopped() {
  sync::WriterMutexLock lock(&stop_mu_);
  stopped_ = true;
}

void ServerCore::FinishStop() {
  if (owns_loops_) {
    // The I/O threads are joined: nothing else touches the acceptor or the connections' sockets.
    error_code ignored;
    acceptor_.close(ignored);
    for (const auto& connection : OpenConnections()) connection->CloseAfterStop();
  }
  {
    sync::MutexLock lock(&registry_mu_);
    registry_.clear();
    in_flight_ = 0;
    open_connections_.store(0, std::memory_order_relaxed);
  }
  if (owns_loops_) loops_->DestroyPendingWork();
  std::shared_ptr<const Handler> handler;
  {
    sync::WriterMutexLock lock(&stop_mu_);
    handler = std::move(handler_);
  }
  // `handler`, and what it captured, is released here, outside the lock.
}

}  // namespace agentkv::net::internal
