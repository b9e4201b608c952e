// Router: dispatches requests to handlers by method and path: an exact path, else the longest
// registered prefix of it (a route with a variable tail, such as GET /v1/models/{model}).
//
// The path is the request target without its query, still percent-encoded, compared exactly
// ("/generate" does not match "/generate/"); handlers read the query (and a prefix route's tail)
// themselves from `request.target()`. A route registered for a specific method wins over one
// registered with AddAny for the same path; a HEAD request is served by the GET handler when no
// HEAD handler exists (the server drops the body). An unknown path goes to the fallback handler, or
// is answered 404 {"error": ...}; a known path with another method is answered 405 with an
// Allow header; a target that does not parse is answered 400.
//
// Thread-compatible: build the table on one thread, then call AsHandler(), whose result is an
// immutable snapshot safe to call from any number of threads (later Add calls do not change it).
#ifndef AGENTKV_NET_ROUTER_H_
#define AGENTKV_NET_ROUTER_H_

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentkv/net/http_types.h"
#include "agentkv/net/response_writer.h"

namespace agentkv::net {

class Router {
 public:
  Router() = default;

  // Routes `method` requests for exactly `path` to `handler`.
  // Preconditions: `path` starts with '/', `handler` is non-empty and (method, path) is not yet
  // registered; a violation is a programmer error and aborts.
  void Add(http::verb method, std::string path, Handler handler);

  // Routes requests of any method for `path` to `handler` (methods registered with Add for the
  // same path still go to their own handlers). Same preconditions as Add; one AddAny per path.
  void AddAny(std::string path, Handler handler);

  // Routes `method` requests whose path is `prefix` followed by at least one character, and
  // matches no exact route, to `handler`; the longest such prefix wins. Preconditions as Add,
  // and `prefix` ends with '/'.
  void AddPrefix(http::verb method, std::string prefix, Handler handler);

  // Handles requests whose path matches no route, instead of the default 404.
  void SetFallback(Handler handler);

  // A handler that dispatches over a snapshot of the current table.
  Handler AsHandler() const;

 private:
  struct Route {
    std::vector<std::pair<http::verb, Handler>> by_method;
    Handler any;
  };
  struct Table {
    std::map<std::string, Route, std::less<>> routes;
    // By prefix; Dispatch tries the longest first.
    std::map<std::string, Route, std::greater<>> prefixes;
    Handler fallback;
  };

  static void Dispatch(const Table& table, Request request, std::shared_ptr<ResponseWriter> writer);
  // The route of `path`: its exact one, else its longest prefix route; nullptr when none.
  static const Route* Find(const Table& table, std::string_view path);
  static void AddTo(Route& route, http::verb method, const std::string& path, Handler handler);

  Table table_;
};

}  // namespace agentkv::net

#endif  // AGENTKV_NET_ROUTER_H_
