// The loop of every I/O thread of the net module (the server's and the client's): runs an
// io_context until it stops. Handlers and callbacks do not throw by contract; should one, the
// exception is reported on stderr and the thread keeps serving, so one faulty callback never
// takes a server or a client down. Internal to the net module. Thread-safe (each thread runs its
// own call).
#ifndef AGENTKV_NET_IO_THREAD_H_
#define AGENTKV_NET_IO_THREAD_H_

#include <boost/asio/io_context.hpp>

namespace agentkv::net::internal {

// Runs `io_context` until it returns. `what` names the code an escaped exception came from in
// the message, e.g. "an HttpServer handler".
void RunIoThread(boost::asio::io_context& io_context, const char* what);

}  // namespace agentkv::net::internal

#endif  // AGENTKV_NET_IO_THREAD_H_
