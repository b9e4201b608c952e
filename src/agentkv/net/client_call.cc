// Invariants of a ClientCall (state touched only on its strand):
//  - `leased_` exactly while the call holds a pool slot; every slot goes back exactly once,
//    through ConnectionPool::Release (healthy keep-alive socket) or Discard (anything else).
//  - The timer is armed for the current phase: queue wait (kWaiting), connect (kConnecting),
//    request write plus response headers (kHeader), or the silence between body reads (kBody).
//  - A deadline or a cancellation closes the socket; the pending operation then completes and
//    Interrupted() turns it into the call's final status.
//  - The user's callback for the end (on_response / on_done) runs exactly once, in Finish, and
//    no callback runs after it.
//  - The socket is bound to the io_context, every handler of an operation on it to the call's
//    strand (OnStrand). A reusable connection goes back as a parked socket (ClientCore::Park,
//    still registered with epoll) before its descriptor goes back to the pool, so that the call
//    that leases the descriptor next finds it (Unpark).
//  - `paused_` (the read gate closed) only in kBody, with no operation pending, no timer armed
//    and `paused_self_` owning the call; a resume of the current pause generation, a
//    cancellation or the client's destruction ends the pause.
#include "agentkv/net/client_call.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <exception>
#include <thread>

#include "agentkv/sync/mutex.h"

namespace agentkv::net::internal {
namespace {

namespace asio = boost::asio;
using boost::system::error_code;
using tcp = asio::ip::tcp;

// Attempts per request when reused keep-alive connections turn out to be closed.
constexpr int kMaxAttempts = 3;

std::string Millis(std::chrono::milliseconds value) {
  return std::to_string(value.count()) + " ms";
}

HeaderList CollectHeaders(const http::response_parser<http::string_body>::value_type& message) {
  HeaderList headers;
  for (const auto& field : message) {
    headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  return headers;
}

// The peer closed or reset a connection, as seen by a read or a write.
bool IsConnectionLoss(const error_code& error) {
  return error == http::error::end_of_stream || error == asio::error::eof ||
         error == asio::error::connection_reset || error == asio::error::broken_pipe ||
         error == asio::error::connection_aborted;
}

// The `resume` a read gate is handed: resumes the pause it was made for once, when called or
// when its last copy is dropped uncalled (a gate that loses it must not stall the call).
class ResumeOnce {
 public:
  ResumeOnce(std::weak_ptr<ClientCall> call, uint64_t generation)
      : call_(std::move(call)), generation_(generation) {}
  ResumeOnce(const ResumeOnce&) = delete;
  ResumeOnce& operator=(const ResumeOnce&) = delete;
  ~ResumeOnce() {
    // A destructor must not throw. Resuming only posts to the call's executor; should even that
    // fail (allocation), the call stays paused until its cancel or its body timeout ends it.
    try {
      Fire();
    } catch (...) {
    }
  }

  void Fire() {
    if (fired_.exchange(true)) return;
    if (std::shared_ptr<ClientCall> call = call_.lock()) call->Resume(generation_);
  }
  // The gate let the read start: nothing to resume.
  void Disarm() { fired_.store(true); }

 private:
  const std::weak_ptr<ClientCall> call_;
  const uint64_t generation_;
  std::atomic<bool> fired_{false};
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// ClientCore

ClientCore::ClientCore(const HttpClientOptions& options, asio::io_context& io_context)
    : options_(options),
      io_context_(io_context),
      pool_(ConnectionPool::Options{options.max_connections_per_host, options.max_idle_per_host,
                                    options.idle_timeout, [this](int fd) { CloseParked(fd); }}),
      sweep_strand_(asio::make_strand(io_context_)),
      sweep_timer_(sweep_strand_) {}

void ClientCore::Park(int fd, tcp::socket socket) {
  auto parked = std::make_unique<tcp::socket>(std::move(socket));
  sync::MutexLock lock(&parked_mu_);
  parked_[fd] = std::move(parked);
}

std::unique_ptr<tcp::socket> ClientCore::Unpark(int fd) {
  sync::MutexLock lock(&parked_mu_);
  auto it = parked_.find(fd);
  if (it == parked_.end()) return nullptr;
  std::unique_ptr<tcp::socket> socket = std::move(it->second);
  parked_.erase(it);
  return socket;
}

void ClientCore::CloseParked(int fd) {
  std::unique_ptr<tcp::socket> socket = Unpark(fd);
  if (socket == nullptr) {
    ::close(fd);
    return;
  }
  error_code ignored;
  socket->close(ignored);  // Deregisters it and closes `fd`.
}

bool ClientCore::Register(const std::shared_ptr<ClientCall>& call, uint64_t id) {
  sync::MutexLock lock(&registry_mu_);
  if (shutting_down_) return false;
  registry_.emplace(id, call);
  return true;
}

void ClientCore::Unregister(uint64_t id) {
  sync::MutexLock lock(&registry_mu_);
  registry_.erase(id);
}

std::vector<std::shared_ptr<ClientCall>> ClientCore::BeginShutdown() {
  std::vector<std::shared_ptr<ClientCall>> calls;
  sync::MutexLock lock(&registry_mu_);
  shutting_down_ = true;
  for (const auto& [id, weak] : registry_) {
    if (auto call = weak.lock()) calls.push_back(std::move(call));
  }
  return calls;
}

void ClientCore::CallBuilt() { calls_unfinished_.fetch_add(1, std::memory_order_relaxed); }

void ClientCore::CallFinished() { calls_unfinished_.fetch_sub(1, std::memory_order_release); }

void ClientCore::WaitForCalls(const std::function<bool()>& gave_up) {
  // Polled: only a destructor waits, and the calls' own path takes no lock for the count.
  constexpr std::chrono::milliseconds kRecheck{1};
  while (calls_unfinished_.load(std::memory_order_acquire) != 0 && !gave_up()) {
    std::this_thread::sleep_for(kRecheck);
  }
}

void ClientCore::StartSweeper() {
  asio::post(sweep_strand_, [self = shared_from_this()] {
    self->sweeping_ = true;
    self->ArmSweep();
  });
}

void ClientCore::StopSweeper() {
  asio::post(sweep_strand_, [self = shared_from_this()] {
    self->sweeping_ = false;
    self->sweep_timer_.cancel();
  });
}

void ClientCore::ArmSweep() {
  const auto period = std::clamp<std::chrono::milliseconds>(
      options_.idle_timeout / 2, std::chrono::milliseconds(10), std::chrono::milliseconds(1'000));
  sweep_timer_.expires_after(period);
  sweep_timer_.async_wait([self = shared_from_this()](const error_code& error) {
    if (error || !self->sweeping_) return;
    self->pool_.CloseExpired(ConnectionPool::Clock::now());
    self->ArmSweep();
  });
}

// ---------------------------------------------------------------------------------------------
// ClientCall: entry points

ClientCall::ClientCall(std::shared_ptr<ClientCore> core, Spec spec, bool streaming,
                       Callbacks callbacks, Status initial)
    : core_(std::move(core)),
      id_(core_->NextCallId()),
      streaming_(streaming),
      spec_(std::move(spec)),
      key_(spec_.endpoint.PoolKey()),
      callbacks_(std::move(callbacks)),
      initial_(std::move(initial)),
      strand_(asio::make_strand(core_->io_context())),
      socket_(core_->io_context()),
      timer_(strand_) {
  core_->CallBuilt();
  chunk_body_callback_ = [this](uint64_t, boost::beast::string_view body, error_code& error) {
    return EmitChunk(std::string_view(body.data(), body.size()), error);
  };
}

void ClientCall::Start() {
  asio::post(strand_, [self = shared_from_this()] { self->DoStart(); });
}

void ClientCall::Cancel(Status reason) {
  asio::post(strand_, [self = shared_from_this(), reason = std::move(reason)]() mutable {
    self->DoCancel(std::move(reason));
  });
}

void ClientCall::Resume(uint64_t generation) {
  asio::post(strand_, [self = shared_from_this(), generation] { self->DoResume(generation); });
}

void ClientCall::DoResume(uint64_t generation) {
  if (!paused_ || finished_ || generation != pause_generation_) return;
  paused_ = false;
  const std::shared_ptr<ClientCall> keep = std::move(paused_self_);
  if (Interrupted()) return;
  ReadBody();
}

void ClientCall::DoStart() {
  if (!initial_.ok()) {
    Finish(initial_);
    return;
  }
  if (!core_->Register(shared_from_this(), id_)) {
    Finish(UnavailableError("HttpClient is shutting down"));
    return;
  }
  registered_ = true;
  if (cancelled_) {
    Finish(cancel_status_);
    return;
  }
  BuildRequest();
  Acquire();
}

void ClientCall::DoCancel(Status reason) {
  if (finished_ || cancelled_) return;
  cancelled_ = true;
  cancel_status_ = std::move(reason);
  switch (phase_) {
    case Phase::kNew:
      return;  // DoStart sees cancelled_.
    case Phase::kWaiting:
      // If the pool already passed a lease on, OnLease sees cancelled_ and returns it.
      if (core_->pool().CancelWait(key_, id_)) Finish(cancel_status_);
      return;
    case Phase::kConnecting:
    case Phase::kHeader:
    case Phase::kBody:
      if (paused_) {
        Finish(cancel_status_);  // No operation is pending to report it.
        return;
      }
      if (resolver_) resolver_->cancel();
      CloseSocket();  // The pending operation completes; Interrupted() finishes the call.
      return;
    case Phase::kDone:
      return;
  }
}

void ClientCall::BuildRequest() {
  request_.method(spec_.method);
  request_.target(spec_.endpoint.path_prefix + spec_.target);
  request_.version(11);
  bool has_host = false;
  for (const auto& [name, value] : spec_.headers) {
    if (boost::beast::iequals(name, "host")) has_host = true;
    request_.insert(name, value);
  }
  if (!has_host) request_.set(http::field::host, spec_.endpoint.host_header);
  request_.body() = std::move(spec_.body);
  request_.keep_alive(true);
  request_.prepare_payload();
}

// ---------------------------------------------------------------------------------------------
// ClientCall: connection

void ClientCall::Acquire() {
  ++attempts_;
  phase_ = Phase::kWaiting;
  auto self = shared_from_this();
  std::optional<ConnectionPool::Lease> lease = core_->pool().Acquire(
      key_, id_,
      [self](ConnectionPool::Lease granted) {
        asio::post(self->strand_, [self, granted] { self->OnLease(granted); });
      },
      ConnectionPool::Clock::now());
  if (lease) {
    OnLease(*lease);
    return;
  }
  ArmTimer(core_->options().queue_timeout);
}

void ClientCall::OnLease(ConnectionPool::Lease lease) {
  CancelTimer();
  if (cancelled_ || finished_) {
    // Hand the slot straight back: an idle connection stays healthy, a connect permission
    // frees its slot.
    if (lease.reused()) {
      core_->pool().Release(key_, lease.fd, lease.family, ConnectionPool::Clock::now());
    } else {
      core_->pool().Discard(key_);
    }
    Finish(cancel_status_);
    return;
  }
  leased_ = true;
  if (lease.reused()) {
    if (std::unique_ptr<tcp::socket> parked = core_->Unpark(lease.fd)) {
      socket_ = std::move(*parked);
      family_ = lease.family;
      reused_ = true;
      SendRequest();
      return;
    }
    // Not parked by this client (cannot happen): adopt the descriptor as it is.
    error_code error;
    socket_.assign(lease.family == AF_INET6 ? tcp::v6() : tcp::v4(), lease.fd, error);
    if (!error) {
      family_ = lease.family;
      reused_ = true;
      SendRequest();
      return;
    }
    ::close(lease.fd);  // Keep the slot and open a fresh connection instead.
  }
  reused_ = false;
  Connect();
}

void ClientCall::Connect() {
  phase_ = Phase::kConnecting;
  ArmTimer(core_->options().connect_timeout);
  error_code error;
  const auto address = asio::ip::make_address(spec_.endpoint.host, error);
  if (!error) {
    family_ = address.is_v6() ? AF_INET6 : AF_INET;
    socket_.async_connect(tcp::endpoint(address, spec_.endpoint.port),
                          OnStrand([self = shared_from_this()](const error_code& connect_error) {
                            self->OnConnected(connect_error);
                          }));
    return;
  }
  // A name: the resolver's background thread runs getaddrinfo (numeric hosts never get here).
  resolver_.emplace(strand_);
  resolver_->async_resolve(spec_.endpoint.host, std::to_string(spec_.endpoint.port),
                           [self = shared_from_this()](const error_code& resolve_error,
                                                       const tcp::resolver::results_type& results) {
                             self->OnResolved(resolve_error, results);
                           });
}

void ClientCall::OnResolved(const error_code& error, const tcp::resolver::results_type& results) {
  if (Interrupted()) return;
  if (error) {
    Finish(UnavailableError("cannot resolve \"" + spec_.endpoint.host + "\": " + error.message()));
    return;
  }
  asio::async_connect(socket_, results,
                      OnStrand([self = shared_from_this()](const error_code& connect_error,
                                                           const tcp::endpoint& endpoint) {
                        if (!connect_error) self->family_ = endpoint.protocol().family();
                        self->OnConnected(connect_error);
                      }));
}

void ClientCall::OnConnected(const error_code& error) {
  if (Interrupted()) return;
  if (error) {
    Finish(UnavailableError("cannot connect to " + key_ + ": " + error.message()));
    return;
  }
  core_->CountConnectionOpened();
  error_code ignored;
  socket_.set_option(tcp::no_delay(true), ignored);
  SendRequest();
}

// ---------------------------------------------------------------------------------------------
// ClientCall: request and response

void ClientCall::SendRequest() {
  phase_ = Phase::kHeader;
  write_error_ = {};
  buffer_.clear();
  parser_.reset();
  ArmTimer(core_->options().header_timeout);
  http::async_write(socket_, request_,
                    OnStrand([self = shared_from_this()](const error_code& error, size_t) {
                      self->OnWritten(error);
                    }));
}

void ClientCall::OnWritten(const error_code& error) {
  if (Interrupted()) return;
  // On a write error the server may still have answered (e.g. 413 before it read the body,
  // then closed): read what it sent; FailRead reports the write error if nothing came.
  write_error_ = error;
  ReadHeader();
}

void ClientCall::ReadHeader() {
  parser_.emplace();
  parser_->header_limit(
      static_cast<uint32_t>(std::min<size_t>(core_->options().max_header_bytes, size_t{1} << 30)));
  if (streaming_) {
    parser_->body_limit(boost::none);
    parser_->on_chunk_body(chunk_body_callback_);
  } else {
    parser_->body_limit(static_cast<uint64_t>(core_->options().max_response_bytes));
  }
  if (spec_.method == http::verb::head) parser_->skip(true);
  http::async_read_header(socket_, buffer_, *parser_,
                          OnStrand([self = shared_from_this()](const error_code& error, size_t) {
                            self->OnHeader(error);
                          }));
}

void ClientCall::OnHeader(const error_code& error) {
  if (Interrupted()) return;
  if (error) {
    FailRead(error, "response headers");
    return;
  }
  const int status = static_cast<int>(parser_->get().result_int());
  if (status >= 100 && status < 200 && status != 101) {
    ReadHeader();  // An interim response (100 Continue): the real one follows.
    return;
  }
  if (streaming_) {
    headers_delivered_ = true;
    if (callbacks_.on_headers) callbacks_.on_headers(status, CollectHeaders(parser_->get()));
  }
  ReadBody();
}

void ClientCall::ReadBody() {
  if (parser_->is_done()) {
    Complete();
    return;
  }
  phase_ = Phase::kBody;
  if (!GateOpen()) return;
  ArmTimer(core_->options().body_timeout);
  http::async_read_some(socket_, buffer_, *parser_,
                        OnStrand([self = shared_from_this()](const error_code& error, size_t) {
                          self->OnBody(error);
                        }));
}

void ClientCall::OnBody(const error_code& error) {
  if (streaming_ && !cancelled_) FlushStreamBody();
  if (Interrupted()) return;
  if (error) {
    FailRead(error, "response body");
    return;
  }
  ReadBody();
}

bool ClientCall::GateOpen() {
  if (!streaming_ || !callbacks_.read_gate) return true;
  const uint64_t generation = ++pause_generation_;
  auto resume = std::make_shared<ResumeOnce>(weak_from_this(), generation);
  if (callbacks_.read_gate([resume] { resume->Fire(); })) {
    resume->Disarm();
    return true;
  }
  // The body timeout measures the upstream's silence; while paused, the silence is ours.
  CancelTimer();
  paused_ = true;
  paused_self_ = shared_from_this();
  return false;
}

void ClientCall::FlushStreamBody() {
  // A chunked body goes through EmitChunk during parsing; a Content-Length or EOF-delimited
  // body accumulates in the message and is passed on after each read.
  std::string& body = parser_->get().body();
  if (body.empty()) return;
  error_code ignored;
  EmitChunk(body, ignored);
  body.clear();
}

size_t ClientCall::EmitChunk(std::string_view piece, error_code& error) {
  if (cancelled_ || finished_) {
    error = asio::error::operation_aborted;
    return 0;
  }
  if (!piece.empty() && callbacks_.on_chunk) callbacks_.on_chunk(piece);
  return piece.size();
}

void ClientCall::FailRead(const error_code& error, std::string_view what) {
  const auto& options = core_->options();
  if (error == http::error::header_limit) {
    Finish(ResourceExhaustedError(std::string(what) + " from " + key_ +
                                  " exceed max_header_bytes (" +
                                  std::to_string(options.max_header_bytes) + ")"));
    return;
  }
  if (error == http::error::body_limit) {
    Finish(ResourceExhaustedError(std::string(what) + " from " + key_ +
                                  " exceeds max_response_bytes (" +
                                  std::to_string(options.max_response_bytes) + ")"));
    return;
  }
  const bool nothing_received =
      !headers_delivered_ && buffer_.size() == 0 && !(parser_ && parser_->got_some());
  if (nothing_received && reused_ && attempts_ < kMaxAttempts &&
      (IsConnectionLoss(error) || IsConnectionLoss(write_error_))) {
    Retry();  // The upstream closed the idle connection as we reused it.
    return;
  }
  if (nothing_received && write_error_) {
    Finish(
        UnavailableError("sending the request to " + key_ + " failed: " + write_error_.message()));
    return;
  }
  Finish(UnavailableError(std::string(what) + " from " + key_ + ": " + error.message()));
}

void ClientCall::Retry() {
  CancelTimer();
  CloseSocket();
  leased_ = false;
  reused_ = false;
  core_->pool().Discard(key_);
  Acquire();
}

void ClientCall::Complete() {
  CancelTimer();
  auto& message = parser_->get();
  const bool reusable =
      !write_error_ && parser_->keep_alive() && !parser_->need_eof() && buffer_.size() == 0;
  if (!streaming_) {
    response_.status = static_cast<int>(message.result_int());
    response_.headers = CollectHeaders(message);
    response_.body = std::move(message.body());
  }
  ReleaseConnection(reusable);
  Finish(Status::Ok());
}

bool ClientCall::Interrupted() {
  if (finished_) return true;
  if (cancelled_) {
    Finish(cancel_status_);
    return true;
  }
  if (timed_out_) {
    Finish(DeadlineExceededError(TimeoutMessage()));
    return true;
  }
  return false;
}

void ClientCall::Finish(Status status) {
  if (finished_) return;
  finished_ = true;
  paused_ = false;
  // Released when Finish returns (the caller's handler, if any, still holds the call).
  const std::shared_ptr<ClientCall> keep = std::move(paused_self_);
  phase_ = Phase::kDone;
  CancelTimer();
  if (resolver_) resolver_->cancel();
  if (leased_) ReleaseConnection(/*reusable=*/false);
  CloseSocket();
  if (registered_) core_->Unregister(id_);
  {
    Callbacks callbacks = std::move(callbacks_);
    callbacks_ = {};
    if (streaming_) {
      if (callbacks.on_done) callbacks.on_done(std::move(status));
    } else if (callbacks.on_response) {
      if (status.ok()) {
        callbacks.on_response(std::move(response_));
      } else {
        callbacks.on_response(std::move(status));
      }
    }
  }  // The callbacks, and what they hold, are gone before the call counts as finished.
  core_->CallFinished();
}

void ClientCall::ReleaseConnection(bool reusable) {
  if (!leased_) return;
  leased_ = false;
  if (reusable && socket_.is_open() && family_ != 0) {
    // Parked first: the call that leases `fd` next may run as soon as the pool has it.
    const int fd = socket_.native_handle();
    core_->Park(fd, std::move(socket_));
    core_->pool().Release(key_, fd, family_, ConnectionPool::Clock::now());
    return;
  }
  CloseSocket();
  core_->pool().Discard(key_);
}

void ClientCall::CloseSocket() {
  error_code ignored;
  if (socket_.is_open()) socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
}

// ---------------------------------------------------------------------------------------------
// ClientCall: deadlines

void ClientCall::ArmTimer(std::chrono::milliseconds timeout) {
  const uint64_t generation = ++timer_generation_;
  timer_.expires_after(timeout);
  timer_.async_wait([self = shared_from_this(), generation](const error_code& error) {
    if (error || generation != self->timer_generation_) return;
    self->OnTimeout();
  });
}

void ClientCall::CancelTimer() {
  ++timer_generation_;
  timer_.cancel();
}

void ClientCall::OnTimeout() {
  if (finished_) return;
  if (phase_ == Phase::kWaiting) {
    // If the pool already passed a lease on, it is on its way and the call proceeds.
    if (core_->pool().CancelWait(key_, id_)) Finish(DeadlineExceededError(TimeoutMessage()));
    return;
  }
  timed_out_ = true;
  if (resolver_) resolver_->cancel();
  CloseSocket();  // The pending operation completes; Interrupted() finishes the call.
}

std::string ClientCall::TimeoutMessage() const {
  const auto& options = core_->options();
  switch (phase_) {
    case Phase::kWaiting:
      return "waiting for a connection to " + key_ + " (max_connections_per_host " +
             std::to_string(options.max_connections_per_host) + ") timed out after " +
             Millis(options.queue_timeout);
    case Phase::kConnecting:
      return "connect to " + key_ + " timed out after " + Millis(options.connect_timeout);
    case Phase::kHeader:
      return "response headers from " + key_ + " not received within " +
             Millis(options.header_timeout);
    case Phase::kBody:
      return "response body from " + key_ + " stalled for " + Millis(options.body_timeout);
    case Phase::kNew:
    case Phase::kDone:
      break;
  }
  return "request to " + key_ + " timed out";
}

}  // namespace agentkv::net::internal
