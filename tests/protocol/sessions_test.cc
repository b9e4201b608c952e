#include "agentkv/protocol/sessions.h"

#include <gtest/gtest.h>

#include <string>

#include "protocol_test_support.h"

namespace agentkv::protocol {
namespace {

using testing_support::ExpectInputError;
using testing_support::ForEachMalformedVariant;

TEST(SessionsTest, AbortRequestShapes) {
  EXPECT_EQ(SerializeAbortRequest({.rid = "req-17:0", .abort_all = false}),
            R"({"rid":"req-17:0","abort_all":false})");
  EXPECT_EQ(*ParseAbortRequest(R"({"rid": "req-17:0", "abort_all": false})"),
            (AbortRequest{.rid = "req-17:0", .abort_all = false}));
  // rid defaults to ""; internal fields and http_worker_ipc are tolerated.
  EXPECT_EQ(*ParseAbortRequest(R"({"abort_all": true, "finished_reason": null,
                                   "abort_message": "x", "http_worker_ipc": "ipc://a"})"),
            (AbortRequest{.rid = "", .abort_all = true}));
  EXPECT_EQ(*ParseAbortRequest("{}"), AbortRequest{});
  EXPECT_EQ(ParseAbortRequest(R"({"rid": 1})").status(),
            InvalidArgumentError("rid: expected a string"));
  EXPECT_EQ(ParseAbortRequest("[]").status(),
            InvalidArgumentError("abort request: expected a JSON object"));
}

TEST(SessionsTest, OpenSessionRequestShapes) {
  const OpenSessionRequest full{
      .capacity_of_str_len = 65536, .session_id = "s-1", .streaming = true, .timeout = 30.5};
  EXPECT_EQ(SerializeOpenSessionRequest(full),
            R"({"capacity_of_str_len":65536,"session_id":"s-1","streaming":true,"timeout":30.5})");
  EXPECT_EQ(*ParseOpenSessionRequest(SerializeOpenSessionRequest(full)), full);
  const OpenSessionRequest minimal{
      .capacity_of_str_len = 8, .session_id = {}, .streaming = {}, .timeout = {}};
  EXPECT_EQ(SerializeOpenSessionRequest(minimal), R"({"capacity_of_str_len":8})");
  EXPECT_EQ(*ParseOpenSessionRequest(R"({"capacity_of_str_len": 8, "session_id": null,
                                         "streaming": null, "timeout": null, "rid": "x"})"),
            minimal);
  EXPECT_EQ(ParseOpenSessionRequest(R"({"session_id": "s"})").status(),
            InvalidArgumentError("capacity_of_str_len: required"));
  EXPECT_EQ(ParseOpenSessionRequest(R"({"capacity_of_str_len": -1})").status(),
            InvalidArgumentError("capacity_of_str_len: expected a non-negative integer"));
  EXPECT_EQ(ParseOpenSessionRequest(R"({"capacity_of_str_len": 1, "timeout": "1s"})").status(),
            InvalidArgumentError("timeout: expected a number"));
}

TEST(SessionsTest, CloseSessionRequestShapes) {
  EXPECT_EQ(SerializeCloseSessionRequest({.session_id = "sess-abc"}),
            R"({"session_id":"sess-abc"})");
  EXPECT_EQ(*ParseCloseSessionRequest(R"({"session_id": "sess-abc", "rid": null,
                                          "http_worker_ipc": null})"),
            CloseSessionRequest{.session_id = "sess-abc"});
  EXPECT_EQ(ParseCloseSessionRequest("{}").status(), InvalidArgumentError("session_id: required"));
  EXPECT_EQ(ParseCloseSessionRequest(R"({"session_id": 3})").status(),
            InvalidArgumentError("session_id: expected a string"));
}

TEST(SessionsTest, DemoteFinishedSubagentsRequestShapes) {
  EXPECT_EQ(SerializeDemoteFinishedSubagentsRequest({.parent_session_id = "p-0"}),
            R"({"parent_session_id":"p-0"})");
  EXPECT_EQ(*ParseDemoteFinishedSubagentsRequest(R"({"parent_session_id": "p-0", "rid": null})"),
            DemoteFinishedSubagentsRequest{.parent_session_id = "p-0"});
  EXPECT_EQ(ParseDemoteFinishedSubagentsRequest("{}").status(),
            InvalidArgumentError("parent_session_id: required"));
  EXPECT_EQ(ParseDemoteFinishedSubagentsRequest(R"({"parent_session_id": 3})").status(),
            InvalidArgumentError("parent_session_id: expected a string"));
  EXPECT_EQ(kDemoteFinishedSubagentsPath, "/demote_finished_subagents");
}

TEST(SessionsTest, OpenSessionResponseIsAJsonString) {
  EXPECT_EQ(SerializeOpenSessionResponse("sess-\"1\""), R"("sess-\"1\"")");
  EXPECT_EQ(*ParseOpenSessionResponse(R"("sess-abc")"), "sess-abc");
  EXPECT_EQ(ParseOpenSessionResponse(R"({"error": {"message": "m"}})").status(),
            InvalidArgumentError("open_session response: expected a JSON string"));
}

TEST(SessionsTest, FixedRepliesMatchTheReference) {
  EXPECT_EQ(kFlushCacheResponse.substr(0, 15), "Cache flushed.\n");
  EXPECT_NE(kFlushCacheResponse.find(
                "(When there are running or waiting requests, the operation will not be "
                "performed.)"),
            std::string_view::npos);
  EXPECT_EQ(kFlushCacheStatus, 200);
  EXPECT_EQ(kHealthyStatus, 200);
  EXPECT_EQ(kUnhealthyStatus, 503);
  EXPECT_EQ(kCloseSessionPath, "/close_session");
}

TEST(SessionsTest, MalformedBodiesNeverCrash) {
  const std::string abort = SerializeAbortRequest({.rid = "r:1", .abort_all = true});
  const std::string open = SerializeOpenSessionRequest(
      {.capacity_of_str_len = 100, .session_id = "s", .streaming = false, .timeout = 1.5});
  const std::string close = SerializeCloseSessionRequest({.session_id = "s"});
  for (const std::string& body : {abort, open, close}) {
    ForEachMalformedVariant(body, 17, [](const std::string& text) {
      ExpectInputError(ParseAbortRequest(text).status());
      ExpectInputError(ParseOpenSessionRequest(text).status());
      ExpectInputError(ParseCloseSessionRequest(text).status());
      ExpectInputError(ParseOpenSessionResponse(text).status());
    });
  }
}

}  // namespace
}  // namespace agentkv::protocol
