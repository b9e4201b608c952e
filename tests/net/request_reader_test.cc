// Tests of RequestReader: the server's request reading without a socket. A table of byte
// streams, each delivered at once and in small pieces, and the events they must produce;
// including the header limit counted over the whole header (Beast alone lets a header reach
// twice the limit).
#include "agentkv/net/request_reader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <string>
#include <vector>

namespace agentkv::net::internal {
namespace {

// What a connection saw: "GET /a 0" per request read (method, target, body size), then
// "reject 431" or "waiting" at the end.
std::vector<std::string> Read(const std::string& stream, RequestLimits limits, size_t piece) {
  std::vector<std::string> seen;
  boost::beast::flat_buffer buffer;
  RequestReader reader(limits);
  reader.Begin();
  for (size_t offset = 0; offset < stream.size();) {
    const size_t n = std::min(piece, stream.size() - offset);
    buffer.commit(boost::asio::buffer_copy(buffer.prepare(n),
                                           boost::asio::buffer(stream.data() + offset, n)));
    offset += n;
    for (;;) {
      const RequestReader::Event event = reader.Parse(buffer);
      if (event.kind == RequestReader::Event::Kind::kNeedMore) break;
      if (event.kind == RequestReader::Event::Kind::kHeaderDone) continue;
      if (event.kind == RequestReader::Event::Kind::kReject) {
        seen.push_back("reject " + std::to_string(static_cast<int>(event.status)));
        return seen;
      }
      const Request request = reader.TakeRequest();
      seen.push_back(std::string(request.method_string()) + " " + std::string(request.target()) +
                     " " + std::to_string(request.body().size()));
      reader.Begin();
    }
  }
  if (reader.got_some()) seen.push_back("waiting");
  return seen;
}

std::string Fields(int n) {
  std::string fields;
  for (int i = 0; i < n; ++i) fields += "X-" + std::to_string(i) + ": v\r\n";
  return fields;
}

struct Row {
  std::string name;
  std::string stream;
  RequestLimits limits;
  std::vector<std::string> expected;
};

TEST(RequestReaderTest, ReadsAndRefusesAlikeAtOnceAndInPieces) {
  const RequestLimits small{256, 16};
  const std::string long_target = "/" + std::string(200, 'a');
  const std::vector<Row> table = {
      {"one request", "GET /health HTTP/1.1\r\nHost: a\r\n\r\n", {}, {"GET /health 0"}},
      {"pipelined",
       "POST /b HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET /c HTTP/1.1\r\n\r\nGET /d HTTP/1.1\r\n",
       {},
       {"POST /b 3", "GET /c 0", "waiting"}},
      {"chunked",
       "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
       {},
       {"POST /x 3"}},
      {"header at the limit", "GET / HTTP/1.1\r\n" + Fields(27) + "\r\n", small, {"GET / 0"}},
      // Start line and fields each under the limit, together over it: Beast alone accepts it.
      {"start line plus fields over the limit",
       "GET " + long_target + " HTTP/1.1\r\n" + Fields(8) + "\r\n",
       small,
       {"reject 431"}},
      {"many fields over the limit",
       "GET / HTTP/1.1\r\n" + Fields(40) + "\r\n",
       small,
       {"reject 431"}},
      {"body over the limit",
       "POST /x HTTP/1.1\r\nContent-Length: 17\r\n\r\n",
       small,
       {"reject 413"}},
      {"chunked body over the limit",
       "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n11\r\n" + std::string(17, 'b') +
           "\r\n0\r\n\r\n",
       small,
       {"reject 413"}},
      {"chunk size past int64",
       "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
       "10000000000000000\r\nabc\r\n",
       {},
       {"reject 400"}},
      {"negative content length",
       "POST /x HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
       {},
       {"reject 400"}},
  };
  for (const Row& row : table) {
    for (size_t piece : {row.stream.size(), size_t{1}, size_t{7}}) {
      EXPECT_EQ(Read(row.stream, row.limits, piece), row.expected)
          << row.name << ", pieces of " << piece;
    }
  }
}

}  // namespace
}  // namespace agentkv::net::internal
