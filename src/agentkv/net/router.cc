#include "agentkv/net/router.h"

#include <algorithm>

#include "agentkv/base/check.h"

namespace agentkv::net {

void Router::AddTo(Route& route, http::verb method, const std::string& path, Handler handler) {
  AGENTKV_CHECK(!path.empty() && path.front() == '/') << "route path must start with '/': " << path;
  AGENTKV_CHECK(handler != nullptr) << "empty handler for " << path;
  for (const auto& [existing, unused] : route.by_method) {
    AGENTKV_CHECK(existing != method)
        << "duplicate route " << std::string(http::to_string(method)) << " " << path;
  }
  route.by_method.emplace_back(method, std::move(handler));
}

void Router::Add(http::verb method, std::string path, Handler handler) {
  const auto [it, unused] = table_.routes.try_emplace(std::move(path));
  AddTo(it->second, method, it->first, std::move(handler));
}

void Router::AddPrefix(http::verb method, std::string prefix, Handler handler) {
  AGENTKV_CHECK(!prefix.empty() && prefix.back() == '/') << "prefix must end with '/': " << prefix;
  const auto [it, unused] = table_.prefixes.try_emplace(std::move(prefix));
  AddTo(it->second, method, it->first, std::move(handler));
}

void Router::AddAny(std::string path, Handler handler) {
  AGENTKV_CHECK(!path.empty() && path.front() == '/') << "route path must start with '/': " << path;
  AGENTKV_CHECK(handler != nullptr) << "empty handler for " << path;
  Route& route = table_.routes[path];
  AGENTKV_CHECK(route.any == nullptr) << "duplicate AddAny route " << path;
  route.any = std::move(handler);
}

void Router::SetFallback(Handler handler) { table_.fallback = std::move(handler); }

Handler Router::AsHandler() const {
  auto table = std::make_shared<const Table>(table_);
  return [table](Request request, std::shared_ptr<ResponseWriter> writer) {
    Dispatch(*table, std::move(request), std::move(writer));
  };
}

const Router::Route* Router::Find(const Table& table, std::string_view path) {
  if (auto it = table.routes.find(path); it != table.routes.end()) return &it->second;
  // Longest first: a longer prefix sorts before the shorter ones it extends.
  for (const auto& [prefix, route] : table.prefixes) {
    if (path.size() > prefix.size() && path.starts_with(prefix)) return &route;
  }
  return nullptr;
}

void Router::Dispatch(const Table& table, Request request, std::shared_ptr<ResponseWriter> writer) {
  StatusOr<std::string> path =
      TargetPath(std::string_view(request.target().data(), request.target().size()));
  if (!path.ok()) {
    writer->Reply(MakeErrorResponse(request, http::status::bad_request, path.status().message()));
    return;
  }
  const Route* found = Find(table, *path);
  if (found == nullptr) {
    if (table.fallback) {
      table.fallback(std::move(request), std::move(writer));
      return;
    }
    writer->Reply(
        MakeErrorResponse(request, http::status::not_found,
                          "no route for " + std::string(request.method_string()) + " " + *path));
    return;
  }
  const Route& route = *found;
  const Handler* chosen = nullptr;
  const Handler* get_handler = nullptr;
  for (const auto& [method, handler] : route.by_method) {
    if (method == request.method()) chosen = &handler;
    if (method == http::verb::get) get_handler = &handler;
  }
  if (chosen == nullptr && route.any) chosen = &route.any;
  if (chosen == nullptr && request.method() == http::verb::head) chosen = get_handler;
  if (chosen != nullptr) {
    (*chosen)(std::move(request), std::move(writer));
    return;
  }
  std::string allow;
  for (const auto& [method, unused] : route.by_method) {
    if (!allow.empty()) allow += ", ";
    allow += std::string(http::to_string(method));
    if (method == http::verb::get &&
        std::none_of(route.by_method.begin(), route.by_method.end(),
                     [](const auto& entry) { return entry.first == http::verb::head; })) {
      allow += ", HEAD";
    }
  }
  Response response = MakeErrorResponse(
      request, http::status::method_not_allowed,
      "method " + std::string(request.method_string()) + " not allowed for " + *path);
  response.set(http::field::allow, allow);
  writer->Reply(std::move(response));
}

}  // namespace agentkv::net
