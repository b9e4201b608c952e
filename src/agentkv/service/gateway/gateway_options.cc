#include "agentkv/service/gateway/gateway_options.h"

#include <algorithm>
#include <boost/asio/ip/address.hpp>
#include <cmath>
#include <iterator>
#include <sstream>
#include <string>

#include "agentkv/base/bounds.h"
#include "agentkv/net/http_types.h"
#include "agentkv/protocol/workers.h"

namespace agentkv::service {
namespace {

std::string Number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

Status CheckSeconds(std::string_view flag, double value, bool allow_zero) {
  const bool ok = std::isfinite(value) && (allow_zero ? value >= 0 : value > 0);
  if (!ok) {
    return InvalidArgumentError(std::string(flag) + " must be finite and " +
                                (allow_zero ? ">= 0" : "> 0") + ", got " + Number(value));
  }
  if (value * 1e9 > static_cast<double>(kMaxTimeNs)) {
    return InvalidArgumentError(std::string(flag) + " must be at most 31536000 (a year), got " +
                                Number(value));
  }
  return Status::Ok();
}

// RFC 9110 token characters.
bool IsHeaderName(std::string_view name) {
  if (name.empty()) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
  });
}

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::min(seconds, 1e9) * 1000.0));
}

// Validate's parts, in its order: the request priorities; the upstreams; the timeouts and
// bounds; who may use the gateway.
Status CheckPriorities(const GatewayOptions& o) {
  for (const std::optional<int32_t>& p :
       {o.pause_priority.tool_call, o.pause_priority.subagent_wait, o.pause_priority.human_turn,
        o.pause_priority.session_end}) {
    if (p.has_value() && (*p < 0 || *p > 1'000'000)) {
      return InvalidArgumentError("--agentic-pause-priority values must be in [0, 1000000], got " +
                                  std::to_string(*p));
    }
  }
  if (o.program_fcfs && !o.pause_priority.empty()) {
    return InvalidArgumentError(
        "--agentic-program-fcfs and --agentic-pause-priority are exclusive: both set the "
        "request's one SGLang `priority` (queue order and eviction order alike)");
  }
  return Status::Ok();
}

Status CheckUpstreams(const GatewayOptions& o) {
  if (o.router_url.empty() == o.engine_urls.empty()) {
    return InvalidArgumentError(o.router_url.empty()
                                    ? "one of --router-url and --engine-urls is required"
                                    : "--router-url and --engine-urls are exclusive");
  }
  if (!o.router_url.empty()) {
    if (StatusOr<net::HttpEndpoint> parsed = net::ParseBaseUrl(o.router_url); !parsed.ok()) {
      return InvalidArgumentError("--router-url: " + parsed.status().message());
    }
  }
  for (const std::string& url : o.engine_urls) {
    // A DP-aware "url@rank" entry names the engine at `url`.
    if (StatusOr<net::HttpEndpoint> parsed = net::ParseBaseUrl(protocol::StripRankSuffix(url));
        !parsed.ok()) {
      return InvalidArgumentError("--engine-urls: " + parsed.status().message());
    }
  }
  if (SglRouterPolicyName(o.router_policy) == "invalid") {
    return InvalidArgumentError("--router-policy: not a policy (" +
                                std::to_string(static_cast<int>(o.router_policy)) + ")");
  }
  if (!IsHeaderName(o.session_header)) {
    return InvalidArgumentError("--session-header: \"" + o.session_header +
                                "\" is not a valid header name");
  }
  return Status::Ok();
}

Status CheckLimits(const GatewayOptions& o) {
  AGENTKV_RETURN_IF_ERROR(CheckSeconds("--close-timeout-s", o.close_timeout_s, false));
  AGENTKV_RETURN_IF_ERROR(CheckSeconds("--session-idle-timeout-s", o.session_idle_timeout_s, true));
  AGENTKV_RETURN_IF_ERROR(
      CheckSeconds("--session-drain-timeout-s", o.session_drain_timeout_s, false));
  AGENTKV_RETURN_IF_ERROR(CheckSeconds("--control-timeout-s", o.control_timeout_s, false));
  AGENTKV_RETURN_IF_ERROR(CheckSeconds("--metrics-timeout-s", o.metrics_timeout_s, false));
  AGENTKV_RETURN_IF_ERROR(
      control::CheckPollTiming(o.agentic, "--metrics-timeout-s", o.metrics_timeout_s));
  if (o.context_length.has_value() && (*o.context_length < 1 || *o.context_length > kMaxTokens)) {
    return InvalidArgumentError("--context-length must be in [1, " + std::to_string(kMaxTokens) +
                                "], got " + std::to_string(*o.context_length));
  }
  if (o.max_sessions < 1 || o.max_sessions > kMaxCount) {
    return InvalidArgumentError("--max-sessions must be in [1, " + std::to_string(kMaxCount) +
                                "], got " + std::to_string(o.max_sessions));
  }
  if (o.max_retained_sessions.has_value() &&
      (*o.max_retained_sessions < 0 || *o.max_retained_sessions > o.max_sessions)) {
    return InvalidArgumentError("--max-retained-sessions must be in [0, --max-sessions = " +
                                std::to_string(o.max_sessions) + "], got " +
                                std::to_string(*o.max_retained_sessions));
  }
  if (o.max_closed_sessions < 1 || o.max_closed_sessions > kMaxCount) {
    return InvalidArgumentError("--max-closed-sessions must be in [1, " +
                                std::to_string(kMaxCount) + "], got " +
                                std::to_string(o.max_closed_sessions));
  }
  if (o.default_max_tokens < 0 || o.default_max_tokens > kMaxTokens) {
    return InvalidArgumentError("--default-max-tokens must be in [0, " +
                                std::to_string(kMaxTokens) + "], got " +
                                std::to_string(o.default_max_tokens));
  }
  return Status::Ok();
}

Status CheckAccess(const GatewayOptions& o) {
  if (o.bearer_token.find_first_of(" \t\r\n") != std::string::npos) {
    return InvalidArgumentError("--bearer-token must not contain whitespace");
  }
  AGENTKV_RETURN_IF_ERROR(CheckTenantKeys(o.tenant_keys));
  for (const TenantKey& entry : o.tenant_keys) {
    if (!o.bearer_token.empty() && entry.key == o.bearer_token) {
      return InvalidArgumentError("--tenant-keys-file: the key of tenant " + entry.tenant +
                                  " is the --bearer-token (the admin's): give it its own key");
    }
  }
  if (!std::isfinite(o.max_new_sessions_per_s) || o.max_new_sessions_per_s < 0 ||
      o.max_new_sessions_per_s > 1e6) {
    return InvalidArgumentError(
        "--max-new-sessions-per-s must be finite and in [0, 1000000], got " +
        Number(o.max_new_sessions_per_s));
  }
  if (o.new_sessions_burst < 1 || o.new_sessions_burst > kMaxCount) {
    return InvalidArgumentError("--new-sessions-burst must be in [1, " + std::to_string(kMaxCount) +
                                "], got " + std::to_string(o.new_sessions_burst));
  }
  if (o.OpenDoor() && !o.allow_unauthenticated) {
    return InvalidArgumentError(
        "--agentic-session-lifecycle on --host " + o.http.address +
        " (not loopback) without --bearer-token or --tenant-keys-file would let anyone who "
        "reaches the port close anyone's session: set --tenant-keys-file (per-tenant keys), "
        "--bearer-token (one admin token), or --allow-unauthenticated (accept the risk)");
  }
  return Status::Ok();
}

}  // namespace

std::string_view PrerequisitePolicyName(PrerequisitePolicy policy) {
  return policy == PrerequisitePolicy::kRefuse ? "refuse" : "disable";
}

StatusOr<PrerequisitePolicy> ParsePrerequisitePolicy(std::string_view text) {
  if (text == "refuse") return PrerequisitePolicy::kRefuse;
  if (text == "disable") return PrerequisitePolicy::kDisable;
  return InvalidArgumentError("--prerequisite-policy must be refuse or disable, got \"" +
                              std::string(text) + "\"");
}

std::string_view SglRouterPolicyName(SglRouterPolicy policy) {
  const auto index = static_cast<size_t>(policy);
  return index < std::size(kSglRouterPolicyNames) ? kSglRouterPolicyNames[index] : "invalid";
}

StatusOr<SglRouterPolicy> ParseSglRouterPolicy(std::string_view text) {
  std::string valid;
  for (size_t i = 0; i < std::size(kSglRouterPolicyNames); ++i) {
    if (text == kSglRouterPolicyNames[i]) return static_cast<SglRouterPolicy>(i);
    if (i > 0) valid += ", ";
    valid += kSglRouterPolicyNames[i];
  }
  return InvalidArgumentError("--router-policy must be one of " + valid + ", got \"" +
                              std::string(text) + "\"");
}

bool IsLoopbackHost(std::string_view host) {
  if (host == "localhost") return true;
  boost::system::error_code error;
  const boost::asio::ip::address address = boost::asio::ip::make_address(host, error);
  if (error) return false;
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    return boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, address.to_v6())
        .is_loopback();
  }
  return address.is_loopback();
}

bool GatewayOptions::OpenDoor() const {
  return agentic.agentic_session_lifecycle && bearer_token.empty() && tenant_keys.empty() &&
         !IsLoopbackHost(http.address);
}

net::HttpServerOptions GatewayOptions::DefaultServerOptions() {
  net::HttpServerOptions options;
  options.max_inflight_bytes = kDefaultMaxInflightBytes;
  return options;
}

net::HttpClientOptions GatewayOptions::DefaultUpstreamClientOptions() {
  net::HttpClientOptions options;
  options.header_timeout = std::chrono::hours(1);
  options.body_timeout = std::chrono::minutes(10);
  options.max_connections_per_host = 4096;
  // As many idle as open: with fewer, a burst above the idle cap closes connections as its
  // requests finish and the next ones connect again (measured at concurrency 1024 in
  // docs/PERFORMANCE.md, "Gateway overhead").
  options.max_idle_per_host = options.max_connections_per_host;
  return options;
}

std::chrono::milliseconds GatewayOptions::close_timeout() const { return Millis(close_timeout_s); }
std::chrono::milliseconds GatewayOptions::control_timeout() const {
  return Millis(control_timeout_s);
}
std::chrono::milliseconds GatewayOptions::metrics_timeout() const {
  return Millis(metrics_timeout_s);
}

Status GatewayOptions::Validate() const {
  AGENTKV_RETURN_IF_ERROR(http.Validate());
  AGENTKV_RETURN_IF_ERROR(upstream.Validate());
  AGENTKV_RETURN_IF_ERROR(agentic.Validate());
  if (working_set.has_value()) AGENTKV_RETURN_IF_ERROR(working_set->Validate());
  AGENTKV_RETURN_IF_ERROR(CheckPriorities(*this));
  AGENTKV_RETURN_IF_ERROR(CheckUpstreams(*this));
  AGENTKV_RETURN_IF_ERROR(CheckLimits(*this));
  AGENTKV_RETURN_IF_ERROR(CheckAccess(*this));
  if (!log) return InvalidArgumentError("log sink must be set");
  return Status::Ok();
}

}  // namespace agentkv::service
