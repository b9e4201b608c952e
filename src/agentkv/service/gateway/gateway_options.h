// GatewayOptions: everything `agentkv gateway` is configured with, one field per flag.
//
// The seed's own options (--agentic-session-lifecycle, --agentic-program-admission and the
// --agentic-admission-* family) live unchanged in `agentic` (control::AgenticOptions); the
// fields here are the gateway's: where to forward, how sessions are identified and closed,
// startup checks, and security. Validate() names the first bad field by its flag. A plain
// value type; thread-compatible.
#ifndef AGENTKV_SERVICE_GATEWAY_GATEWAY_OPTIONS_H_
#define AGENTKV_SERVICE_GATEWAY_GATEWAY_OPTIONS_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/control/agentic_options.h"
#include "agentkv/control/working_set.h"
#include "agentkv/net/http_client.h"
#include "agentkv/net/http_server.h"
#include "agentkv/service/common/log_sink.h"
#include "agentkv/service/gateway/gateway_request.h"
#include "agentkv/service/gateway/tenant_keys.h"

namespace agentkv::service {

// What the gateway does when an engine lacks a flag a feature needs (checked once at startup
// through GET /server_info).
enum class PrerequisitePolicy : uint8_t {
  // Start fails with FailedPrecondition naming the engine and the flag.
  kRefuse,
  // The feature is turned off, with a logged warning; the gateway starts.
  kDisable,
};

// "refuse" or "disable".
std::string_view PrerequisitePolicyName(PrerequisitePolicy policy);
// Parses exactly "refuse" or "disable"; else InvalidArgument naming --prerequisite-policy.
StatusOr<PrerequisitePolicy> ParsePrerequisitePolicy(std::string_view text);

// The policy the fleet's sgl-router runs (its --policy), as --router-policy tells the gateway.
// The gateway routes nothing itself: it only adds X-SMG-Routing-Key for kConsistentHashing.
// The full sgl-router set, so that any router deployment can be described; routing::Router
// implements three of them for the simulator and the emulator (the gateway does not use it).
enum class SglRouterPolicy : uint8_t {
  kCacheAware,
  kRoundRobin,
  kRandom,
  kPowerOfTwo,
  kConsistentHashing,
  kManual,
  kPrefixHash,
  kBucket,
};

// The names as sgl-router's --policy spells them, in enum order.
inline constexpr std::string_view kSglRouterPolicyNames[] = {
    "cache_aware",        "round_robin", "random",      "power_of_two",
    "consistent_hashing", "manual",      "prefix_hash", "bucket"};

// The policy's sgl-router name; "invalid" for a value outside the enum.
std::string_view SglRouterPolicyName(SglRouterPolicy policy);
// Parses exactly one of kSglRouterPolicyNames; else InvalidArgument naming --router-policy
// and listing the valid names.
StatusOr<SglRouterPolicy> ParseSglRouterPolicy(std::string_view text);

// Whether `host` (a listen address) is reachable only from this machine: "localhost", an IPv4
// address in 127.0.0.0/8, ::1, or an IPv4-mapped 127.0.0.0/8 address (Boost.Asio's parsing).
// False for anything else, names and unparsable text included.
bool IsLoopbackHost(std::string_view host);

struct GatewayOptions {
  // --host / --port and the server limits. Default: 127.0.0.1, an ephemeral port, 2 threads,
  // and (see DefaultServerOptions) --max-body-bytes 64 MiB, --max-inflight-bytes 256 MiB.
  net::HttpServerOptions http = DefaultServerOptions();

  // The client towards the router or engines on the data path. Defaults (see
  // DefaultUpstreamClientOptions): response headers may take up to 1 h (a non-streamed
  // generate answers only when done), 4096 connections per upstream, every one of which may
  // stay idle for reuse (until the client's idle timeout, 30 s). The client runs on the
  // server's threads (one event loop each; `threads` here is not used), and each loop pools
  // its share of the connections.
  net::HttpClientOptions upstream = DefaultUpstreamClientOptions();

  // The seed's options, with their flag names (--agentic-*). Validated as a whole.
  control::AgenticOptions agentic;

  // --router-url: the sgl-router every generate goes to ("http://host:port"); engines are
  // discovered from its GET /workers (fallback GET /list_workers) every poll. Exactly one of
  // router_url and engine_urls is set. Default: empty.
  std::string router_url;
  // --engine-urls: a fixed engine list used without a router; generates go round robin and
  // control posts go to each. Default: empty.
  std::vector<std::string> engine_urls;
  // --router-policy: the router's routing policy. With kConsistentHashing and the session
  // lifecycle on, forwarded requests carry `X-SMG-Routing-Key: <session_id>`.
  // Default: kCacheAware (sgl-router's default).
  SglRouterPolicy router_policy = SglRouterPolicy::kCacheAware;

  // --session-header: the header that names a request's session when its body has no
  // top-level session_id. Default: "X-Session-Id". A valid header name (token characters).
  std::string session_header = "X-Session-Id";
  // --close-timeout-s: bound on one /close_session fan-out to every engine (Relax: 2 s).
  // Default: 2.0. Range: finite, > 0.
  double close_timeout_s = 2.0;
  // --session-idle-timeout-s: a session with no request in flight and none for this long is
  // ended and closed as if the client had closed it. 0 disables. Default: 900. Range: finite,
  // >= 0.
  double session_idle_timeout_s = 900.0;
  // --session-drain-timeout-s: how long a closing session waits for its aborted requests to
  // end before it closes anyway. Default: 30. Range: finite, > 0.
  double session_drain_timeout_s = 30.0;
  // --max-closed-sessions: closed sessions remembered so that a repeated close answers
  // without a second fan-out (oldest forgotten first). Default: 8192. Range: >= 1.
  int64_t max_closed_sessions = 8192;
  // --default-max-tokens: the decode tokens a reservation assumes for an OpenAI request that
  // sets neither max_tokens nor max_completion_tokens (/generate uses SGLang's default, 128).
  // Default: 4096. Range: >= 0.
  int64_t default_max_tokens = 4096;
  // --control-timeout-s: timeout of each abort, /close_session and /server_info request to the
  // fleet. Default: 5.0. Range: (0, 1 year].
  double control_timeout_s = 5.0;
  // --metrics-timeout-s: how long each fleet poll waits for the router's /workers, and then
  // for the engines' /metrics; an engine that has not answered by then counts as failed for
  // that poll. With admission on, poll interval + 2 x this must stay below the staleness
  // (control::CheckPollTiming), so one stalled engine never ages the whole snapshot.
  // Default: 1.5. Range: (0, 1 year].
  double metrics_timeout_s = 1.5;
  // --context-length: the model's context length. A request whose exact prompt tokens (token
  // ids or X-Prompt-Tokens) plus max tokens reach it is refused at once with SGLang's own 400.
  // Default: unset, then the largest `context_length` the engines' /server_info report at
  // startup (SGLang reports one only when started with --context-length); unset when none
  // does: not checked. Range: [1, kMaxTokens] when set.
  std::optional<int64_t> context_length;
  // --max-sessions: sessions accepting requests, at most. A request that opens one more ends
  // the longest-idle session first (as the idle timeout would, a few minutes early); when
  // every session has a request in flight, it is refused with 503. Default: 100000 (about
  // 80 MB). Range: [1, 2^32].
  int64_t max_sessions = 100'000;
  // --max-retained-sessions: sessions retained at once (X-Agentkv-Session-Retain: 1); they
  // count in --max-sessions, are never idled out nor evicted, and a mark past this bound is
  // refused with 429, so that retained sessions never fill the session cap. Default: unset,
  // max_sessions / 2. Range: [0, max_sessions] when set (0: retention refused).
  std::optional<int64_t> max_retained_sessions;

  // Scrape every engine's /metrics each poll interval and pass the snapshots to
  // AdmissionBackend::Reconcile (admission on). Set false with a remote backend: the
  // coordinator polls the fleet itself. Default: true.
  bool poll_fleet_metrics = true;

  // --check-prerequisites: read every engine's GET /server_info at startup and check the
  // flags the enabled features need. Default: true.
  bool check_prerequisites = true;
  // --prerequisite-policy. Default: kRefuse.
  PrerequisitePolicy prerequisite_policy = PrerequisitePolicy::kRefuse;

  // --bearer-token: the admin token. When set, POST /v1/sessions/{id}/close and
  // GET /agentic_kv?reset=1 require `Authorization: Bearer <token>` (else 401), or a tenant's
  // key for its own sessions' close; it is never forwarded upstream. Default: empty (no
  // authentication, unless tenant keys are set; then the admin routes are closed to all).
  std::string bearer_token;
  // --tenant-keys-file, read by the command line: the tenants and their keys (tenant_keys.h).
  // When non-empty, every data-path request and every session close must carry a tenant's key
  // or the bearer token (else 401); a tenant's session ids are namespaced by its name
  // ("<tenant>.<id>") and its key is never forwarded upstream. Default: empty. Range: as
  // CheckTenantKeys, and no key equal to bearer_token.
  std::vector<TenantKey> tenant_keys;
  // --allow-unauthenticated: start even with the session lifecycle on, no bearer token, no
  // tenant keys and a listen address that is not loopback (anyone who reaches the port could
  // then close anyone's session); a warning is logged. Without it, Validate refuses that.
  // Default: false.
  bool allow_unauthenticated = false;
  // --max-new-sessions-per-s: new sessions each client may open a second, refilling a bucket
  // of --new-sessions-burst (session_rate_limit.h); a request that would open one past it gets
  // 429 with Retry-After. A client is a tenant with tenant keys, else the admin (bearer token)
  // or, together, every unauthenticated caller. 0 disables. Default: 100. Range: finite,
  // [0, 1000000].
  double max_new_sessions_per_s = 100.0;
  // --new-sessions-burst: new sessions a client may open at once before the rate applies.
  // Default: 1000. Range: [1, 2^32].
  int64_t new_sessions_burst = 1000;
  // --agentic-pause-priority: the SGLang request `priority` each expected pause maps to
  // (gap-aware retention's served part); spliced into forwarded bodies that set no `priority`.
  // The pause is the X-Agentkv-Pause header's, else what a chat body's last message shows
  // (ClientRequest::pause). Takes effect on SGLang with --radix-eviction-policy priority (and
  // priority scheduling on, which also orders the waiting queue by it).
  // Default: empty (no priority added). Range: each P in [0, 1000000].
  protocol::PausePriorities pause_priority;
  // --agentic-program-fcfs: program-level FCFS on unmodified SGLang (Continuum). Every
  // forwarded request's body gets `priority` = ProgramFcfsPriority of its program's arrival
  // (its verified parent session's for a sub-agent whose parent is active here, else its own
  // session's incarnation; a request without a session is a program of its own), so that
  // SGLang's priority scheduling (--enable-priority-scheduling, higher values first) serves
  // older programs first. A `priority` in the body is kept only from a trusted caller (the
  // --bearer-token, TrustOf); anyone else's is replaced, so it cannot jump the queue.
  // Exclusive with --agentic-pause-priority (both set the one `priority`). Default: false.
  bool program_fcfs = false;
  // --agentic-forward-pause: forward a request's expected pause (when known) as the body member
  // `agentkv_pause`, which agentkv's engines (the emulator with --eviction-order gap_aware)
  // rank its KV by; stock SGLang ignores it. Default: false.
  bool forward_pause = false;
  // --parent-hint-key: the HMAC-SHA256 key of sub-agent parent hints; without it no hint is
  // honoured. Default: empty.
  std::string parent_hint_key;
  // --agentic-subagent-demotion: when a request of a session that verified hints named as a
  // parent arrives, POST {"parent_session_id"} to /demote_finished_subagents on every engine
  // (fire and forget, like an abort), so that each engine demotes the finished sub-agents of
  // that parent it holds, wherever the router placed them. agentkv's engines (the emulator)
  // serve it; an unmodified SGLang engine has no such call (it answers 404, logged, harmless).
  // The parents remembered are bounded by --max-sessions (oldest forgotten first).
  // Default: false.
  bool agentic_subagent_demotion = false;
  // --agentic-subagent-routing parent: with kConsistentHashing and the lifecycle on, a request
  // with a verified parent hint carries X-SMG-Routing-Key: <parent session> instead of its own
  // session, so a sub-agent lands on its parent's engine. Default: false ("own").
  bool route_subagents_by_parent = false;
  // --agentic-working-set: program-level working-set admission (GatewayWorkingSet) before
  // request-level admission, with the --agentic-working-set-* options. Default: unset (off).
  std::optional<control::WorkingSetOptions> working_set;

  // Where log lines go. Default: StderrLogSink.
  LogSink log = StderrLogSink;
  // Called once per session close fan-out with whether every engine succeeded, e.g. to feed
  // LocalAdmission::CountSessionClose. Called from any thread. Default: none.
  std::function<void(bool ok)> on_session_close;

  // OK, or InvalidArgument naming the first bad option by its flag, e.g.
  // "--close-timeout-s must be finite and > 0, got 0"; also when OpenDoor() holds without
  // allow_unauthenticated (the message names the flags and the ways out).
  Status Validate() const;
  // Whether anyone who can reach the listen address could close anyone's session: the session
  // lifecycle on, no bearer token, no tenant keys, and an address that is not loopback
  // (IsLoopbackHost).
  bool OpenDoor() const;

  static net::HttpClientOptions DefaultUpstreamClientOptions();
  // The server defaults, with the gateway's in-flight byte budget (--max-inflight-bytes,
  // kDefaultMaxInflightBytes) in force.
  static net::HttpServerOptions DefaultServerOptions();
  // 256 MiB: four of the largest bodies (--max-body-bytes, 64 MiB) at once, or a thousand
  // 256 KiB prompts.
  static constexpr size_t kDefaultMaxInflightBytes = size_t{256} << 20;

  std::chrono::milliseconds close_timeout() const;
  std::chrono::milliseconds control_timeout() const;
  std::chrono::milliseconds metrics_timeout() const;
};

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_GATEWAY_GATEWAY_OPTIONS_H_
