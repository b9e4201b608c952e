#include "agentkv/net/io_thread.h"

#include <cstdio>
#include <exception>

namespace agentkv::net::internal {

void RunIoThread(boost::asio::io_context& io_context, const char* what) {
  for (;;) {
    try {
      io_context.run();
      return;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "agentkv::net: exception escaped %s: %s\n", what, e.what());
    } catch (...) {
      std::fprintf(stderr, "agentkv::net: exception escaped %s\n", what);
    }
  }
}

}  // namespace agentkv::net::internal
