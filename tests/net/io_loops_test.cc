// IoLoops: its two shapes, which thread runs which loop, joining (finishing or dropping queued
// work), and an HttpServer with an HttpClient on the same per-thread loops (a request and its
// upstream call on the thread that read the request; shutdown in the gateway's order).
#include "agentkv/net/io_loops.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <boost/asio/post.hpp>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agentkv/net/http_client.h"
#include "agentkv/net/http_server.h"
#include "tests/net/net_test_util.h"

namespace agentkv::net {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using testing::RawClient;
using testing::StartServer;
using testing::WaitFor;

struct Ran {
  std::thread::id thread;
  std::optional<size_t> index;
  std::string name;
};

// Runs `work` on loop `index` and returns where it ran.
Ran RunOn(IoLoops& loops, size_t index) {
  std::promise<Ran> ran;
  boost::asio::post(loops.context(index), [&] {
    char name[16] = {};
    pthread_getname_np(pthread_self(), name, sizeof(name));
    ran.set_value(Ran{std::this_thread::get_id(), loops.CurrentIndex(), name});
  });
  return ran.get_future().get();
}

TEST(IoLoopsTest, PerThreadRunsOneLoopOnEachNamedThread) {
  IoLoops loops(3, IoLoops::Shape::kPerThread, "a test", "a-very-long-thread-name");
  ASSERT_EQ(loops.size(), 3U);
  EXPECT_EQ(loops.CurrentIndex(), std::nullopt);
  std::set<std::thread::id> threads;
  for (size_t i = 0; i < loops.size(); ++i) {
    const Ran first = RunOn(loops, i);
    const Ran second = RunOn(loops, i);
    EXPECT_EQ(first.index, i);
    EXPECT_EQ(first.thread, second.thread) << "a per-thread loop is run by one thread";
    EXPECT_EQ(first.name, "a-very-long-thr");  // Linux keeps 15 characters.
    threads.insert(first.thread);
  }
  EXPECT_EQ(threads.size(), 3U);
}

TEST(IoLoopsTest, SharedRunsOneLoopOnEveryThread) {
  IoLoops loops(2, IoLoops::Shape::kShared, "a test", "test-io");
  ASSERT_EQ(loops.size(), 1U);
  // Two handlers that wait for each other can only finish if two threads run the one loop.
  std::promise<void> first_in;
  std::promise<void> second_in;
  std::promise<std::thread::id> first_thread;
  std::promise<std::thread::id> second_thread;
  boost::asio::post(loops.context(0), [&] {
    first_in.set_value();
    second_in.get_future().wait();
    first_thread.set_value(std::this_thread::get_id());
  });
  boost::asio::post(loops.context(0), [&] {
    first_in.get_future().wait();
    second_in.set_value();
    second_thread.set_value(std::this_thread::get_id());
  });
  EXPECT_NE(first_thread.get_future().get(), second_thread.get_future().get());
  EXPECT_EQ(loops.NextIndex(), 0U);
}

TEST(IoLoopsTest, NextIndexTakesTheLoopsInTurn) {
  IoLoops loops(3, IoLoops::Shape::kPerThread, "a test", "test-io");
  std::vector<size_t> order;
  for (int i = 0; i < 7; ++i) order.push_back(loops.NextIndex());
  EXPECT_THAT(order, ::testing::ElementsAre(0, 1, 2, 0, 1, 2, 0));
}

TEST(IoLoopsTest, PostFromALoopsOwnThreadRunsOnThatThread) {
  IoLoops loops(2, IoLoops::Shape::kPerThread, "a test", "test-io");
  for (size_t i = 0; i < loops.size(); ++i) {
    std::promise<std::pair<std::thread::id, std::thread::id>> threads;
    boost::asio::post(loops.context(i), [&] {
      const std::thread::id poster = std::this_thread::get_id();
      boost::asio::post(loops.context(*loops.CurrentIndex()), [&, poster] {
        threads.set_value({poster, std::this_thread::get_id()});
      });
    });
    const auto [poster, runner] = threads.get_future().get();
    EXPECT_EQ(poster, runner);
  }
}

TEST(IoLoopsTest, JoinFinishingWorkRunsWhatIsQueued) {
  IoLoops loops(2, IoLoops::Shape::kPerThread, "a test", "test-io");
  std::atomic<int> ran{0};
  for (int i = 0; i < 100; ++i) {
    boost::asio::post(loops.context(loops.NextIndex()), [&] { ran.fetch_add(1); });
  }
  loops.Join(IoLoops::JoinMode::kFinishWork);
  EXPECT_EQ(ran.load(), 100);
  EXPECT_TRUE(loops.joining());
  loops.Join(IoLoops::JoinMode::kStopNow);  // Idempotent.
}

TEST(IoLoopsTest, JoinStoppingNowDropsQueuedWorkWhichIsThenDestroyed) {
  IoLoops loops(1, IoLoops::Shape::kPerThread, "a test", "test-io");
  std::promise<void> entered;
  std::promise<void> release;
  boost::asio::post(loops.context(0), [&] {
    entered.set_value();
    release.get_future().wait();
  });
  entered.get_future().wait();
  auto held = std::make_shared<int>(7);
  std::weak_ptr<int> watch = held;
  bool ran = false;
  boost::asio::post(loops.context(0), [&ran, held = std::move(held)] { ran = true; });
  std::thread joiner([&] { loops.Join(IoLoops::JoinMode::kStopNow); });
  ASSERT_TRUE(WaitFor([&] { return loops.joining(); }));
  release.set_value();
  joiner.join();
  EXPECT_FALSE(ran);
  EXPECT_FALSE(watch.expired()) << "queued work is kept until DestroyPendingWork";
  loops.DestroyPendingWork();
  EXPECT_TRUE(watch.expired());
  EXPECT_FALSE(ran);
}

TEST(IoLoopsDeathTest, JoinFromOneOfItsThreadsAborts) {
  EXPECT_DEATH(
      {
        IoLoops loops(1, IoLoops::Shape::kPerThread, "a test", "test-io");
        std::promise<void> never;
        boost::asio::post(loops.context(0), [&] { loops.Join(IoLoops::JoinMode::kStopNow); });
        never.get_future().wait();
      },
      "joined from one of its own threads");
}

// A proxy in the gateway's shape: a server and a client on the same per-thread loops; the
// handler forwards to `upstream` and records on which loop it and the client's callback ran.
class SharedLoopsProxy {
 public:
  SharedLoopsProxy(int threads, const std::string& upstream)
      : loops_(std::make_shared<IoLoops>(threads, IoLoops::Shape::kPerThread, "a test proxy",
                                         "proxy-io")),
        client_(std::make_unique<HttpClient>(HttpClientOptions{}, loops_)) {
    auto server = HttpServer::Start(
        HttpServerOptions{},
        [this, upstream](Request request, std::shared_ptr<ResponseWriter> writer) {
          const std::optional<size_t> handler_loop = loops_->CurrentIndex();
          const std::thread::id handler_thread = std::this_thread::get_id();
          client_->AsyncRequest(http::verb::get, upstream, std::string(request.target()), {}, "",
                                [this, writer, handler_loop, handler_thread,
                                 version = request.version()](StatusOr<ClientResponse> response) {
                                  {
                                    std::lock_guard lock(mu_);
                                    ++calls_;
                                    if (loops_->CurrentIndex() != handler_loop ||
                                        std::this_thread::get_id() != handler_thread) {
                                      ++moved_;
                                    }
                                    if (handler_loop) ++per_loop_[*handler_loop];
                                  }
                                  Response answer{http::status::ok, version};
                                  answer.body() =
                                      response.ok() ? response->body : response.status().ToString();
                                  answer.prepare_payload();
                                  writer->Reply(std::move(answer));
                                });
        },
        loops_);
    EXPECT_TRUE(server.ok()) << server.status();
    if (server.ok()) server_ = std::move(server).value();
  }

  // In the gateway's order: the server, then the client, then the loops.
  ~SharedLoopsProxy() {
    server_->Shutdown(milliseconds(1'000));
    client_.reset();
    loops_->Join(IoLoops::JoinMode::kStopNow);
    loops_->DestroyPendingWork();
  }

  HttpServer& server() { return *server_; }
  HttpClient& client() { return *client_; }
  IoLoops& loops() { return *loops_; }
  int calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }
  int moved() {
    std::lock_guard lock(mu_);
    return moved_;
  }
  std::map<size_t, int> per_loop() {
    std::lock_guard lock(mu_);
    return per_loop_;
  }

 private:
  std::shared_ptr<IoLoops> loops_;
  std::unique_ptr<HttpClient> client_;
  std::unique_ptr<HttpServer> server_;
  std::mutex mu_;
  int calls_ = 0;
  int moved_ = 0;
  std::map<size_t, int> per_loop_;
};

Handler EchoTarget() {
  return [](Request request, std::shared_ptr<ResponseWriter> writer) {
    writer->Reply(
        MakeResponse(request, http::status::ok, std::string(request.target()), "text/plain"));
  };
}

TEST(SharedLoopsTest, ARequestAndItsUpstreamCallStayOnTheThreadThatReadIt) {
  auto upstream = StartServer({}, EchoTarget());
  ASSERT_NE(upstream, nullptr);
  SharedLoopsProxy proxy(2, upstream->base_url());
  // Four keep-alive connections, each with several requests: the connections go to the loops
  // in turn, and every upstream callback runs where its request was read.
  std::vector<std::unique_ptr<HttpClient>> clients;
  for (int c = 0; c < 4; ++c) {
    HttpClientOptions options;
    options.max_connections_per_host = 1;
    clients.push_back(std::make_unique<HttpClient>(options));
  }
  for (int round = 0; round < 5; ++round) {
    for (int c = 0; c < 4; ++c) {
      const std::string target = "/c" + std::to_string(c) + "/r" + std::to_string(round);
      auto response = clients[c]->Request(http::verb::get, proxy.server().base_url(), target);
      ASSERT_TRUE(response.ok()) << response.status();
      EXPECT_EQ(response->body, target);
    }
  }
  EXPECT_EQ(proxy.calls(), 20);
  EXPECT_EQ(proxy.moved(), 0);
  const std::map<size_t, int> per_loop = proxy.per_loop();
  EXPECT_EQ(per_loop.size(), 2U) << "the connections were spread over both loops";
  // Each loop pools its own upstream connections (one per proxy connection at most).
  EXPECT_LE(proxy.client().connections_opened(), 4);
}

TEST(SharedLoopsTest, ShutdownStopsServingWhileTheLoopsRunOn) {
  auto upstream = StartServer({}, EchoTarget());
  ASSERT_NE(upstream, nullptr);
  SharedLoopsProxy proxy(2, upstream->base_url());
  const uint16_t port = proxy.server().port();
  {
    HttpClient client;
    auto response = client.Request(http::verb::get, proxy.server().base_url(), "/before");
    ASSERT_TRUE(response.ok()) << response.status();
  }
  proxy.server().Shutdown(milliseconds(1'000));
  RawClient late(port);
  EXPECT_FALSE(late.connected()) << "the listener is closed when Shutdown returns";
  EXPECT_EQ(proxy.server().open_connections(), 0);
  // The loops still run the client's work (the gateway destroys its clients after the server).
  auto response = proxy.client().Request(http::verb::get, upstream->base_url(), "/after");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->body, "/after");
}

TEST(SharedLoopsTest, AClientOnLoopsItDoesNotOwnFailsItsCallsBeforeItsDestructorReturns) {
  std::mutex mu;
  std::vector<std::shared_ptr<ResponseWriter>> held;
  auto upstream = StartServer({}, [&](Request, std::shared_ptr<ResponseWriter> writer) {
    std::lock_guard lock(mu);
    held.push_back(std::move(writer));  // Never answered.
  });
  ASSERT_NE(upstream, nullptr);
  auto loops = std::make_shared<IoLoops>(2, IoLoops::Shape::kPerThread, "a test", "test-io");
  auto client = std::make_unique<HttpClient>(HttpClientOptions{}, loops);
  std::atomic<int> failed{0};
  for (int i = 0; i < 6; ++i) {
    client->AsyncRequest(http::verb::get, upstream->base_url(), "/", {}, "",
                         [&](StatusOr<ClientResponse> response) {
                           if (response.status().code() == StatusCode::kUnavailable &&
                               response.status().message().find("destroyed") != std::string::npos) {
                             failed.fetch_add(1);
                           }
                         });
  }
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard lock(mu);
    return held.size() == 6;
  }));
  client.reset();
  EXPECT_EQ(failed.load(), 6) << "every callback ran, with Unavailable, before the destructor "
                                 "returned";
  loops->Join(IoLoops::JoinMode::kStopNow);
  loops->DestroyPendingWork();
}

TEST(SharedLoopsTest, EachLoopPoolsItsShareOfTheConnectionLimit) {
  std::mutex mu;
  std::vector<std::shared_ptr<ResponseWriter>> held;
  auto upstream = StartServer({}, [&](Request, std::shared_ptr<ResponseWriter> writer) {
    std::lock_guard lock(mu);
    held.push_back(std::move(writer));
  });
  ASSERT_NE(upstream, nullptr);
  auto loops = std::make_shared<IoLoops>(2, IoLoops::Shape::kPerThread, "a test", "test-io");
  HttpClientOptions options;
  options.max_connections_per_host = 3;  // 2 per loop (rounded up).
  options.queue_timeout = milliseconds(60'000);
  auto client = std::make_unique<HttpClient>(options, loops);
  std::atomic<int> done{0};
  for (int i = 0; i < 6; ++i) {
    client->AsyncRequest(http::verb::get, upstream->base_url(), "/", {}, "",
                         [&](StatusOr<ClientResponse>) { done.fetch_add(1); });
  }
  // Calls made off the loops go to them in turn: 3 each, of which 2 may connect.
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard lock(mu);
    return held.size() == 4;
  }));
  std::this_thread::sleep_for(milliseconds(50));
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(held.size(), 4U);
    for (const auto& writer : held) {
      writer->Reply(MakeResponse(Request{http::verb::get, "/", 11}, http::status::ok, "ok"));
    }
  }
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard lock(mu);
    return held.size() == 6;
  })) << "the queued call of each loop got its loop's freed connection";
  {
    std::lock_guard lock(mu);
    for (size_t i = 4; i < held.size(); ++i) {
      held[i]->Reply(MakeResponse(Request{http::verb::get, "/", 11}, http::status::ok, "ok"));
    }
  }
  ASSERT_TRUE(WaitFor([&] { return done.load() == 6; }));
  EXPECT_EQ(client->connections_opened(), 4);
  client.reset();
  loops->Join(IoLoops::JoinMode::kStopNow);
  loops->DestroyPendingWork();
}

TEST(SharedLoopsDeathTest, ABlockingRequestOnTheLoopsAborts) {
  EXPECT_DEATH(
      {
        auto loops = std::make_shared<IoLoops>(1, IoLoops::Shape::kPerThread, "a test", "t");
        HttpClient client(HttpClientOptions{}, loops);
        std::promise<void> never;
        boost::asio::post(loops->context(0), [&] {
          (void)client.Request(http::verb::get, "http://127.0.0.1:1", "/");
        });
        never.get_future().wait();
      },
      "would block one of the client's own I/O threads");
}

}  // namespace
}  // namespace agentkv::net
