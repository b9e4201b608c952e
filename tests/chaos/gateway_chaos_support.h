// Shared support for the gateway chaos tests (tests/chaos/gateway_*_chaos_test.cc): the error
// message of an answer and a coordinator over one recording engine. Builds on
// tests/integration/gateway_test_support.h.
#ifndef AGENTKV_TESTS_CHAOS_GATEWAY_CHAOS_SUPPORT_H_
#define AGENTKV_TESTS_CHAOS_GATEWAY_CHAOS_SUPPORT_H_

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <memory>
#include <string>

#include "../integration/gateway_test_support.h"
#include "agentkv/service/coordinator/coordinator_server.h"

namespace agentkv::service::gateway_testing {

// The answer's error message (SGLang's error shape or the coordinator's), or the body.
inline std::string ErrorMessage(const net::ClientResponse& r) {
  boost::system::error_code error;
  const json::value parsed = json::parse(r.body, error);
  if (error || !parsed.is_object()) return r.body;
  const json::value* message = parsed.as_object().if_contains("message");
  if (message == nullptr) {
    if (const json::value* nested = parsed.as_object().if_contains("error");
        nested != nullptr && nested->is_object()) {
      message = nested->as_object().if_contains("message");
    }
  }
  return message != nullptr && message->is_string() ? std::string(message->as_string()) : r.body;
}

// A coordinator whose ceiling is `engine`'s whole capacity, once it has a fresh snapshot.
inline std::unique_ptr<CoordinatorServer> StartCoordinatorOver(const FakeEngine& engine,
                                                               LogCapture& logs,
                                                               double instance_timeout_s = 10.0) {
  CoordinatorOptions options;
  options.instance_timeout_s = instance_timeout_s;
  options.engine_urls = {engine.base_url()};
  options.agentic.agentic_admission_headroom = 1.0;
  options.agentic.poll_interval_s = 0.1;
  options.agentic.staleness_s = 5.0;
  options.metrics_timeout_s = 0.5;
  options.log = logs.Sink();
  StatusOr<std::unique_ptr<CoordinatorServer>> started = CoordinatorServer::Start(options);
  EXPECT_TRUE(started.ok()) << started.status();
  if (!started.ok()) return nullptr;
  std::unique_ptr<CoordinatorServer> coordinator = *std::move(started);
  EXPECT_TRUE(WaitFor([&] { return !coordinator->admission().degraded(); }));
  return coordinator;
}

}  // namespace agentkv::service::gateway_testing

#endif  // AGENTKV_TESTS_CHAOS_GATEWAY_CHAOS_SUPPORT_H_
