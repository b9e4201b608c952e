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

// Reads each row's stream at once and in pieces of 1 and 7 bytes.
void Check(const std::vector<Row>& table) {
  for (const Row& row : table) {
    for (size_t piece : {row.stream.size(), size_t{1}, size_t{7}}) {
      EXPECT_EQ(Read(row.stream, row.limits, piece), row.expected)
          << row.name << ", pieces of " << piece;
    }
  }
}

TEST(RequestReaderTest, ReadsAndRefusesAlikeAtOnceAndInPieces) {
  const RequestLimits small{256, 16};
  const std::string long_target = "/" + std::string(200, 'a');
  const std::vector<Row> table = {
      {"one request", "GET /health HTTP/1.1\r\nHost: a\r\n\r\n", {}, {"GET /health 0"}},
      {"pipelined",
       "POST /b HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc"
       "GET /c HTTP/1.1\r\nHost: a\r\n\r\nGET /d HTTP/1.1\r\n",
       {},
       {"POST /b 3", "GET /c 0", "waiting"}},
      {"chunked",
       "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
       {},
       {"POST /x 3"}},
      {"header at the limit",
       "GET / HTTP/1.1\r\nHost: a\r\n" + Fields(26) + "\r\n",
       small,
       {"GET / 0"}},
      // Start line and fields each under the limit, together over it: Beast alone accepts it.
      {"start line plus fields over the limit",
       "GET " + long_target + " HTTP/1.1\r\nHost: a\r\n" + Fields(8) + "\r\n",
       small,
       {"reject 431"}},
      {"many fields over the limit",
       "GET / HTTP/1.1\r\nHost: a\r\n" + Fields(40) + "\r\n",
       small,
       {"reject 431"}},
      {"body over the limit",
       "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 17\r\n\r\n",
       small,
       {"reject 413"}},
      {"chunked body over the limit",
       "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n11\r\n" +
           std::string(17, 'b') + "\r\n0\r\n\r\n",
       small,
       {"reject 413"}},
      {"chunk size past int64",
       "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
       "10000000000000000\r\nabc\r\n",
       {},
       {"reject 400"}},
      {"negative content length",
       "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n",
       {},
       {"reject 400"}},
  };
  Check(table);
}

// Framing that Beast 1.81 reads as a body-less request (so the body's bytes would be the next
// request), the Host rules, lines ended by a bare LF (on which Beast waits for a CRLF) and
// trailer fields (which Beast merges into the header): each is refused once its header, line
// or trailer is there, and no request is read.
// Long: one flat table of framing cases, one row each; split, rows that differ by one byte
// would sit apart.
TEST(RequestReaderTest, RefusesAmbiguousFramingAndBadHosts) {
  // A second request hidden in the body; a refusal never reads it.
  const std::string hidden = "GET /agentic_kv?reset=1 HTTP/1.1\r\nHost: a\r\n\r\n";
  const auto post = [](const std::string& fields, const std::string& body) {
    return "POST /close HTTP/1.1\r\nHost: a\r\n" + fields + "\r\n" + body;
  };
  const std::string te = "Transfer-Encoding: ";
  const std::string chunked = "3\r\nabc\r\n0\r\n\r\n";
  const std::vector<Row> table = {
      {"chunked", post(te + "chunked\r\n", chunked), {}, {"POST /close 3"}},
      {"chunked among empty elements",
       post(te + ", chunked ,\r\n", chunked),
       {},
       {"POST /close 3"}},
      {"gzip", post(te + "gzip\r\n", hidden), {}, {"reject 501"}},
      {"xchunked", post(te + "xchunked\r\n", hidden), {}, {"reject 501"}},
      {"gzip then chunked", post(te + "gzip, chunked\r\n", chunked), {}, {"reject 501"}},
      {"gzip and chunked fields",
       post(te + "gzip\r\n" + te + "chunked\r\n", chunked),
       {},
       {"reject 501"}},
      {"chunked twice", post(te + "chunked, chunked\r\n", hidden), {}, {"reject 400"}},
      {"chunked in two fields",
       post(te + "chunked\r\n" + te + "chunked\r\n", chunked),
       {},
       {"reject 400"}},
      {"chunked not last", post(te + "chunked, gzip\r\n", hidden), {}, {"reject 400"}},
      {"no coding", post(te + "\r\n", hidden), {}, {"reject 400"}},
      {"gzip with Content-Length",
       post(te + "gzip\r\nContent-Length: " + std::to_string(hidden.size()) + "\r\n", hidden),
       {},
       {"reject 400"}},
      {"Content-Length then chunked",
       post("Content-Length: 5\r\n" + te + "chunked\r\n", chunked),
       {},
       {"reject 400"}},
      {"chunked then Content-Length",
       post(te + "chunked\r\nContent-Length: 5\r\n", chunked),
       {},
       {"reject 400"}},
      {"chunked on HTTP/1.0",
       "POST /close HTTP/1.0\r\n" + te + "chunked\r\n\r\n" + chunked,
       {},
       {"reject 400"}},
      {"no Host on HTTP/1.1", "GET /a HTTP/1.1\r\n\r\n" + hidden, {}, {"reject 400"}},
      {"two Hosts", "GET /a HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", {}, {"reject 400"}},
      {"two Hosts on HTTP/1.0",
       "GET /a HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n",
       {},
       {"reject 400"}},
      {"a list as Host", "GET /a HTTP/1.1\r\nHost: a, b\r\n\r\n", {}, {"reject 400"}},
      {"user info in Host", "GET /a HTTP/1.1\r\nHost: u@a\r\n\r\n", {}, {"reject 400"}},
      {"IPv6 Host with a port", "GET /a HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n", {}, {"GET /a 0"}},
      {"empty Host", "GET /a HTTP/1.1\r\nHost:\r\n\r\n", {}, {"GET /a 0"}},
      {"no Host on HTTP/1.0", "GET /a HTTP/1.0\r\n\r\n", {}, {"GET /a 0"}},
      {"chunk size line ended by LF", post(te + "chunked\r\n", "3\n"), {}, {"reject 400"}},
      {"chunk data followed by LF", post(te + "chunked\r\n", "3\r\nabc\n"), {}, {"reject 400"}},
      {"last chunk ended by LF", post(te + "chunked\r\n", "3\r\nabc\r\n0\n\n"), {}, {"reject 400"}},
      {"trailer ended by LF",
       post(te + "chunked\r\n", "3\r\nabc\r\n0\r\nX: a\n"),
       {},
       {"reject 400"}},
      {"chunk extension holding a LF",
       post(te + "chunked\r\n", "3;a=\"x\ny\"\r\nabc\r\n0\r\n\r\n"),
       {},
       {"reject 400"}},
      {"a trailer field",
       post(te + "chunked\r\n", "3\r\nabc\r\n0\r\nX-T: 1\r\n\r\n"),
       {},
       {"reject 400"}},
      {"a second Host in the trailer",
       post(te + "chunked\r\n", "3\r\nabc\r\n0\r\nHost: b\r\n\r\n" + hidden),
       {},
       {"reject 400"}},
      {"header line ended by LF", "GET /a HTTP/1.1\r\nHost: a\n", {}, {"reject 400"}},
      {"LF in chunk data",
       post(te + "chunked\r\n", "3\r\na\nb\r\n0\r\n\r\n"),
       {},
       {"POST /close 3"}},
  };
  Check(table);
}

}  // namespace
}  // namespace agentkv::net::internal
