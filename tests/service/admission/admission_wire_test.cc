// The coordinator API's JSON bodies: exact shapes, round trips, and malformed input that must
// be refused with a message naming the field.
#include "agentkv/service/admission/admission_wire.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "agentkv/base/bounds.h"

namespace agentkv::service {
namespace {

using control::AcquireRequest;
using control::AdmissionAction;
using control::AdmissionDecision;
using control::AdmissionReason;
using ::testing::HasSubstr;

AdmissionDecision Admit() {
  return AdmissionDecision{AdmissionAction::kAdmit,
                           AdmissionReason::kCapacityAvailable,
                           "request-1:0",
                           128,
                           std::string("1:request-1:0"),
                           1,
                           TimeNs::Millis(1500),
                           std::nullopt};
}

TEST(AdmissionWireTest, AcquireRequestHasTheDocumentedShapeAndRoundTrips) {
  const AcquireRequest request{"request-1:2", 128, true};
  EXPECT_EQ(SerializeAcquireRequest(request),
            R"({"ticket":"request-1:2","reservation_tokens":128,"protected":true})");
  StatusOr<AcquireRequest> parsed = ParseAcquireRequest(SerializeAcquireRequest(request));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->ticket, "request-1:2");
  EXPECT_EQ(parsed->reservation_tokens, 128);
  EXPECT_TRUE(parsed->is_protected);
}

// The fair-share holder travels when named, and only then (a seed body is unchanged).
TEST(AdmissionWireTest, AcquireRequestCarriesTheShareHolder) {
  AcquireRequest request{"t:0", 10, false};
  request.holder = control::ShareHolder{"tenant-a", "session-1"};
  EXPECT_EQ(SerializeAcquireRequest(request),
            R"({"ticket":"t:0","reservation_tokens":10,"protected":false,)"
            R"("session":"session-1","client":"tenant-a"})");
  StatusOr<AcquireRequest> parsed = ParseAcquireRequest(SerializeAcquireRequest(request));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->holder, request.holder);
  EXPECT_THAT(ParseAcquireRequest(R"({"ticket":"t","reservation_tokens":1,"session":""})")
                  .status()
                  .message(),
              HasSubstr("session"));
  EXPECT_THAT(
      ParseAcquireRequest(R"({"ticket":"t","reservation_tokens":1,"client":7})").status().message(),
      HasSubstr("client"));
}

TEST(AdmissionWireTest, AcquireRequestAcceptsRelaxTicketIdAndDefaultsProtectedToFalse) {
  StatusOr<AcquireRequest> parsed =
      ParseAcquireRequest(R"({"ticket_id": "r:0", "reservation_tokens": 7, "extra": [1]})");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->ticket, "r:0");
  EXPECT_EQ(parsed->reservation_tokens, 7);
  EXPECT_FALSE(parsed->is_protected);
}

TEST(AdmissionWireTest, MalformedAcquireRequestsNameTheField) {
  struct Case {
    std::string body;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"not json", "acquire request"},
      {"[1, 2]", "acquire request"},
      {R"({"reservation_tokens": 1})", "ticket"},
      {R"({"ticket": "", "reservation_tokens": 1})", "ticket"},
      {R"({"ticket": 5, "reservation_tokens": 1})", "ticket"},
      {R"({"ticket": "t"})", "reservation_tokens"},
      {R"({"ticket": "t", "reservation_tokens": -1})", "reservation_tokens"},
      {R"({"ticket": "t", "reservation_tokens": 1.5})", "reservation_tokens"},
      {R"({"ticket": "t", "reservation_tokens": "9"})", "reservation_tokens"},
      {R"({"ticket": "t", "reservation_tokens": 1, "protected": "yes"})", "protected"},
      // Past the token bound (base/bounds.h) or int64: refused, never reserved.
      {R"({"ticket": "t", "reservation_tokens": 1099511627777})", "reservation_tokens"},
      {R"({"ticket": "t", "reservation_tokens": 9223372036854775807})", "reservation_tokens"},
      {R"({"ticket": "t", "reservation_tokens": 18446744073709551615})", "reservation_tokens"},
      {R"({"ticket": "t", "reservation_tokens": 1e300})", "reservation_tokens"},
      {R"({"ticket": ")" + std::string(1025, 't') + R"(", "reservation_tokens": 1})", "ticket"},
  };
  for (const Case& c : cases) {
    StatusOr<AcquireRequest> parsed = ParseAcquireRequest(c.body);
    ASSERT_FALSE(parsed.ok()) << c.body;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << c.body;
    EXPECT_THAT(parsed.status().message(), HasSubstr(c.field)) << c.body;
  }
}

TEST(AdmissionWireTest, TheLargestValidReservationIsAccepted) {
  StatusOr<AcquireRequest> parsed =
      ParseAcquireRequest(R"({"ticket": "t", "reservation_tokens": 1099511627776})");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->reservation_tokens, kMaxTokens);
}

// A refusal carries the ceiling that refused it, and reads back exactly.
TEST(AdmissionWireTest, RefusalHasTheDocumentedShapeAndRoundTrips) {
  const AdmissionDecision refuse{AdmissionAction::kRefuse,
                                 AdmissionReason::kOversized,
                                 "t",
                                 5'000'000,
                                 std::nullopt,
                                 -1,
                                 TimeNs(),
                                 811'584};
  EXPECT_EQ(SerializeDecision(refuse),
            R"({"action":"refuse","reason":"oversized","ticket":"t","reservation_tokens":5000000,)"
            R"("lease_id":null,"owner_epoch":-1,"wait_s":0.0,"ceiling":811584})");
  StatusOr<AdmissionDecision> parsed = ParseDecision(SerializeDecision(refuse));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, refuse);
  const AdmissionDecision over{AdmissionAction::kRefuse,
                               AdmissionReason::kOverShare,
                               "t",
                               10,
                               std::nullopt,
                               -1,
                               TimeNs::Seconds(30),
                               500};
  StatusOr<AdmissionDecision> parsed_over = ParseDecision(SerializeDecision(over));
  ASSERT_TRUE(parsed_over.ok()) << parsed_over.status();
  EXPECT_EQ(*parsed_over, over);
  EXPECT_THAT(ParseDecision(R"({"action":"refuse","reason":"aged","ticket":"t",)"
                            R"("reservation_tokens":1,"owner_epoch":-1,"wait_s":0})")
                  .status()
                  .message(),
              HasSubstr("oversized"));
}

// A number too large for a double reads as infinity, which cannot be written back: refused
// (found by admission_wire_fuzz).
TEST(AdmissionWireTest, StepMetricsMustBeFinite) {
  EXPECT_THAT(ParseStepMetrics(R"({"agentic_kv/budget/ceiling": 1e642})").status().message(),
              HasSubstr("expected a finite number"));
  EXPECT_TRUE(ParseStepMetrics(R"({"agentic_kv/budget/ceiling": 1e300})").ok());
}

TEST(AdmissionWireTest, OversizedBodyIsResourceExhausted) {
  const std::string body = R"({"ticket": ")" + std::string(2 << 20, 'x') + R"(", "x": 1})";
  EXPECT_EQ(ParseAcquireRequest(body).status().code(), StatusCode::kResourceExhausted);
}

TEST(AdmissionWireTest, DecisionHasTheDocumentedShape) {
  EXPECT_EQ(SerializeDecision(Admit()),
            R"({"action":"admit","reason":"capacity_available","ticket":"request-1:0",)"
            R"("reservation_tokens":128,"lease_id":"1:request-1:0","owner_epoch":1,)"
            R"("wait_s":1.5})");
  const AdmissionDecision bypass{AdmissionAction::kBypass,
                                 AdmissionReason::kDegraded,
                                 "t",
                                 3,
                                 std::nullopt,
                                 -1,
                                 TimeNs(),
                                 std::nullopt};
  EXPECT_EQ(SerializeDecision(bypass),
            R"({"action":"bypass","reason":"degraded","ticket":"t","reservation_tokens":3,)"
            R"("lease_id":null,"owner_epoch":-1,"wait_s":0.0})");
}

TEST(AdmissionWireTest, EveryReasonAndOddWaitRoundTripExactly) {
  for (AdmissionReason reason :
       {AdmissionReason::kCapacityAvailable, AdmissionReason::kCapacityExhausted,
        AdmissionReason::kPressureGuard, AdmissionReason::kProtected, AdmissionReason::kAged,
        AdmissionReason::kDegraded, AdmissionReason::kCancelled, AdmissionReason::kOversized}) {
    for (int64_t wait_ns :
         {int64_t{0}, int64_t{1}, int64_t{1'234'567'891}, int64_t{30} * 1'000'000'000}) {
      AdmissionDecision d{
          AdmissionAction::kBypass, reason,      "ticket \"q\"\n", 42, std::nullopt, -1,
          TimeNs(wait_ns),          std::nullopt};
      StatusOr<AdmissionDecision> parsed = ParseDecision(SerializeDecision(d));
      ASSERT_TRUE(parsed.ok()) << parsed.status();
      EXPECT_EQ(*parsed, d) << control::AdmissionReasonName(reason) << " " << wait_ns;
    }
    StatusOr<AdmissionReason> r = ParseAdmissionReason(control::AdmissionReasonName(reason));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, reason);
  }
  StatusOr<AdmissionDecision> admit = ParseDecision(SerializeDecision(Admit()));
  ASSERT_TRUE(admit.ok()) << admit.status();
  EXPECT_EQ(*admit, Admit());
}

TEST(AdmissionWireTest, MalformedDecisionsNameTheField) {
  const std::string ok_tail =
      R"("ticket":"t","reservation_tokens":1,"lease_id":null,"owner_epoch":-1,"wait_s":0})";
  struct Case {
    std::string body;
    std::string field;
  };
  const std::vector<Case> cases = {
      {R"({"reason":"aged",)" + ok_tail, "action"},
      {R"({"action":"wait","reason":"aged",)" + ok_tail, "action"},
      {R"({"action":"bypass","reason":"sleepy",)" + ok_tail, "reason"},
      {R"({"action":"admit","reason":"capacity_available",)" + ok_tail, "lease_id"},
      {R"({"action":"bypass","reason":"aged","reservation_tokens":1,"wait_s":0})", "ticket"},
      {R"({"action":"bypass","reason":"aged","ticket":"t","reservation_tokens":1,)"
       R"("owner_epoch":"1","wait_s":0})",
       "owner_epoch"},
      {R"({"action":"bypass","reason":"aged","ticket":"t","reservation_tokens":1,"wait_s":-2})",
       "wait_s"},
      {R"({"action":"bypass","reason":"aged","ticket":"t","reservation_tokens":1,"lease_id":3})",
       "lease_id"},
  };
  for (const Case& c : cases) {
    StatusOr<AdmissionDecision> parsed = ParseDecision(c.body);
    ASSERT_FALSE(parsed.ok()) << c.body;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << c.body;
    EXPECT_THAT(parsed.status().message(), HasSubstr(c.field)) << c.body;
  }
}

TEST(AdmissionWireTest, ReleaseAndCancelRoundTripAndRefuseMissingFields) {
  EXPECT_EQ(SerializeReleaseRequest("1:r:0"), R"({"lease_id":"1:r:0"})");
  EXPECT_EQ(SerializeCancelRequest("r:0"), R"({"ticket":"r:0"})");
  StatusOr<std::string> lease = ParseReleaseRequest(SerializeReleaseRequest("1:r:0"));
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ(*lease, "1:r:0");
  StatusOr<std::string> ticket = ParseCancelRequest(R"({"ticket_id":"r:0"})");
  ASSERT_TRUE(ticket.ok());
  EXPECT_EQ(*ticket, "r:0");
  EXPECT_THAT(ParseReleaseRequest("{}").status().message(), HasSubstr("lease_id"));
  EXPECT_THAT(ParseReleaseRequest(R"({"lease_id":null})").status().message(),
              HasSubstr("lease_id"));
  EXPECT_THAT(ParseCancelRequest(R"({"ticket":[]})").status().message(), HasSubstr("ticket"));
  EXPECT_EQ(ParseCancelRequest("").status().code(), StatusCode::kInvalidArgument);
}

TEST(AdmissionWireTest, TheInstanceTravelsOnAcquireAndHeartbeat) {
  const AcquireRequest request{"gw/r:0", 5};
  EXPECT_EQ(SerializeAcquireRequest(request, "adm-1"),
            R"({"ticket":"gw/r:0","reservation_tokens":5,"protected":false,"instance":"adm-1"})");
  std::string instance = "stale";
  StatusOr<AcquireRequest> parsed =
      ParseAcquireRequest(SerializeAcquireRequest(request, "adm-1"), &instance);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(instance, "adm-1");
  ASSERT_TRUE(ParseAcquireRequest(SerializeAcquireRequest(request), &instance).ok());
  EXPECT_EQ(instance, "") << "an older client names no instance";
  EXPECT_THAT(ParseAcquireRequest(R"({"ticket":"t","reservation_tokens":1,"instance":""})")
                  .status()
                  .message(),
              HasSubstr("instance"));
  EXPECT_THAT(ParseAcquireRequest(R"({"ticket":"t","reservation_tokens":1,"instance":7})")
                  .status()
                  .message(),
              HasSubstr("instance"));

  EXPECT_EQ(SerializeHeartbeatRequest("adm-1"), R"({"instance":"adm-1"})");
  StatusOr<std::string> heartbeat = ParseHeartbeatRequest(SerializeHeartbeatRequest("adm-1"));
  ASSERT_TRUE(heartbeat.ok()) << heartbeat.status();
  EXPECT_EQ(*heartbeat, "adm-1");
  EXPECT_THAT(ParseHeartbeatRequest("{}").status().message(), HasSubstr("instance"));
  EXPECT_THAT(ParseHeartbeatRequest(R"({"instance":""})").status().message(),
              HasSubstr("instance"));
  EXPECT_THAT(ParseHeartbeatRequest(R"({"instance":")" +
                                    std::string(control::kMaxTicketBytes + 1, 'x') + R"("})")
                  .status()
                  .message(),
              HasSubstr("instance: longer than"));
}

TEST(AdmissionWireTest, StepMetricsRoundTripInOrderAndRefuseNonNumbers) {
  const std::vector<std::pair<std::string, double>> metrics = {
      {"agentic_kv/admission/waiting", 0.0},
      {"agentic_kv/budget/ceiling", 14745.0},
      {"agentic_kv/budget/reserved_utilization", 0.25}};
  EXPECT_EQ(SerializeStepMetrics(metrics),
            R"({"agentic_kv/admission/waiting":0.0,"agentic_kv/budget/ceiling":14745.0,)"
            R"("agentic_kv/budget/reserved_utilization":0.25})");
  StatusOr<std::vector<std::pair<std::string, double>>> parsed =
      ParseStepMetrics(SerializeStepMetrics(metrics));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, metrics);
  EXPECT_THAT(ParseStepMetrics(R"({"agentic_kv/budget/degraded":"yes"})").status().message(),
              HasSubstr("agentic_kv/budget/degraded"));
}

TEST(AdmissionWireTest, AdmissionV2FieldsTravelOnlyWhenSetAndRoundTrip) {
  // Every member named: GCC 12 under the sanitizers misreads assignments to the optionals of a
  // partly aggregate-initialized request as reads of uninitialized strings.
  const AcquireRequest request{.ticket = "r:0",
                               .reservation_tokens = 64,
                               .is_protected = false,
                               .engine = std::string("http://e1:30000"),
                               .continuing = true,
                               .prefix_key = std::string("group-7"),
                               .prefix_tokens = 900};
  const std::string body = SerializeAcquireRequest(request);
  EXPECT_EQ(body, R"({"ticket":"r:0","reservation_tokens":64,"protected":false,)"
                  R"("engine":"http://e1:30000","continuing":true,"prefix_key":"group-7",)"
                  R"("prefix_tokens":900})");
  StatusOr<AcquireRequest> parsed = ParseAcquireRequest(body);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->engine, request.engine);
  EXPECT_TRUE(parsed->continuing);
  EXPECT_EQ(parsed->prefix_key, request.prefix_key);
  EXPECT_EQ(parsed->prefix_tokens, 900);
  // A seed body parses to the seed shape.
  StatusOr<AcquireRequest> seed = ParseAcquireRequest(R"({"ticket":"t","reservation_tokens":1})");
  ASSERT_TRUE(seed.ok());
  EXPECT_FALSE(seed->engine.has_value() || seed->prefix_key.has_value() || seed->continuing);
  EXPECT_EQ(seed->prefix_tokens, 0);
  // Bad values name the field.
  EXPECT_THAT(ParseAcquireRequest(R"({"ticket":"t","reservation_tokens":1,"engine":""})")
                  .status()
                  .message(),
              HasSubstr("engine"));
  EXPECT_THAT(ParseAcquireRequest(R"({"ticket":"t","reservation_tokens":1,"prefix_tokens":-1})")
                  .status()
                  .message(),
              HasSubstr("prefix_tokens"));
  EXPECT_THAT(ParseAcquireRequest(R"({"ticket":"t","reservation_tokens":1,"continuing":1})")
                  .status()
                  .message(),
              HasSubstr("continuing"));
}

}  // namespace
}  // namespace agentkv::service
