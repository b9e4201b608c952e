// Invariants: a connection is in `registry_` from Register until its Close() unregisters it
// (or FinishStop clears the registry); Register fails once `draining_` is set, so a drain
// snapshot plus later registrations never miss a connection; `open_connections_` mirrors the
// registry's size; after MarkStopped no work is posted through PostIfRunning.
#include "agentkv/net/server_core.h"

#include <cerrno>

#include "agentkv/net/server_connection.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::net::internal {
namespace {

namespace asio = boost::asio;
using boost::system::error_code;
using tcp = asio::ip::tcp;

}  // namespace

ServerCore::ServerCore(const HttpServerOptions& options, Handler handler)
    : options_(options),
      handler_(std::move(handler)),
      io_context_(options.threads),
      work_guard_(io_context_.get_executor()),
      accept_strand_(asio::make_strand(io_context_)),
      acceptor_(accept_strand_),
      accept_retry_timer_(accept_strand_) {}

void ServerCore::Handle(Request request, std::shared_ptr<ResponseWriter> writer) {
  if (handler_) handler_(std::move(request), std::move(writer));
}

void ServerCore::StartAccepting() { AcceptNext(); }

void ServerCore::AcceptNext() {
  acceptor_.async_accept(asio::make_strand(io_context_),
                         [self = shared_from_this()](const error_code& error, tcp::socket socket) {
                           self->OnAccept(error, std::move(socket));
                         });
}

void ServerCore::OnAccept(const error_code& error, tcp::socket socket) {
  if (!acceptor_.is_open() || draining()) return;
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
  if (draining_.load(std::memory_order_acquire)) return false;
  registry_.emplace(id, connection);
  open_connections_.store(static_cast<int64_t>(registry_.size()), std::memory_order_relaxed);
  return true;
}

void ServerCore::Unregister(uint64_t id) {
  sync::MutexLock lock(&registry_mu_);
  registry_.erase(id);
  open_connections_.store(static_cast<int64_t>(registry_.size()), std::memory_order_relaxed);
  if (registry_.empty()) registry_cv_.SignalAll();
}

std::vector<std::shared_ptr<ServerConnection>> ServerCore::BeginDrain() {
  {
    sync::MutexLock lock(&registry_mu_);
    draining_.store(true, std::memory_order_release);
  }
  asio::post(accept_strand_, [self = shared_from_this()] {
    error_code ignored;
    self->acceptor_.close(ignored);
    self->accept_retry_timer_.cancel();
  });
  return OpenConnections();
}

std::vector<std::shared_ptr<ServerConnection>> ServerCore::OpenConnections() {
  std::vector<std::shared_ptr<ServerConnection>> open;
  sync::MutexLock lock(&registry_mu_);
  open.reserve(registry_.size());
  for (const auto& [id, weak] : registry_) {
    if (auto connection = weak.lock()) open.push_back(std::move(connection));
  }
  return open;
}

bool ServerCore::WaitForConnections(std::chrono::steady_clock::time_point deadline) {
  sync::MutexLock lock(&registry_mu_);
  while (!registry_.empty()) {
    if (registry_cv_.WaitWithDeadline(&registry_mu_, deadline)) break;
  }
  return registry_.empty();
}

void ServerCore::MarkStopped() {
  sync::WriterMutexLock lock(&stop_mu_);
  stopped_ = true;
}

void ServerCore::FinishStop() {
  // The I/O threads are joined: nothing else touches the acceptor or the connections' sockets.
  error_code ignored;
  acceptor_.close(ignored);
  for (const auto& connection : OpenConnections()) connection->CloseAfterStop();
  {
    sync::MutexLock lock(&registry_mu_);
    registry_.clear();
    open_connections_.store(0, std::memory_order_relaxed);
  }
  io_context_.DestroyPendingWork();
  handler_ = nullptr;
}

}  // namespace agentkv::net::internal
