// Client compatibility, an agent's calls: the OpenAI calls an agent framework makes beyond a
// plain completion, as the SDK sends them, against an emulated engine directly and against the
// gateway in front of an emulated router and engine: models.retrieve (GET /v1/models/{model}),
// batch completions (a `prompt` of several strings or token lists, one choice each, whole and
// streamed), a tool-calling loop (`tools` and `tool_choice` answered with `tool_calls`, whole
// and streamed, then the tool's result answered with text), ids no two engines or runs repeat,
// and SGLang's context-length message on every generation route.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "gateway_test_support.h"
#include "sdk_client.h"

namespace agentkv::service {
namespace {

using namespace gateway_testing;  // NOLINT(google-build-using-namespace): test support.
using namespace sdk_client;       // NOLINT(google-build-using-namespace): test support.
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Two function tools, as an agent framework declares them.
constexpr const char* kTools =
    R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather now",)"
    R"( "parameters": {"type": "object", "properties": {"city": {"type": "string"},)"
    R"( "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},)"
    R"( "days": {"type": "integer", "minimum": 1, "maximum": 7}}, "required": ["city"]}}},)"
    R"( {"type": "function", "function": {"name": "search", "parameters": {"type": "object",)"
    R"( "properties": {"query": {"type": "string"}, "top_k": {"type": "integer"}}}}}])";

std::string ToolChat(const json::array& messages, const std::string& extra = "") {
  return R"({"model": "llama-3.1-8b", "max_tokens": 6, "tools": )" + std::string(kTools) +
         R"(, "messages": )" + json::serialize(messages) + extra + "}";
}

json::array UserAsks(const std::string& content) {
  return json::array{json::object{{"role", "system"}, {"content", "You are an agent with tools."}},
                     json::object{{"role", "user"}, {"content", content}}};
}

// The names of a tool's declared properties.
std::set<std::string> PropertiesOf(const std::string& tool) {
  const json::value tools = json::parse(kTools);
  for (const json::value& t : tools.as_array()) {
    const json::object& f = t.at("function").as_object();
    if (f.at("name").as_string() != tool) continue;
    std::set<std::string> names;
    for (const auto& [name, unused] : f.at("parameters").at("properties").as_object()) {
      names.insert(std::string(name));
    }
    return names;
  }
  return {};
}

// A call the SDK reads: it must name a declared tool and carry JSON-object arguments holding
// exactly the tool's declared properties, each of its declared type.
void ExpectWellFormedCall(const json::value& call) {
  EXPECT_THAT(std::string(call.at("id").as_string()), StartsWith("call_"));
  EXPECT_EQ(call.at("type").as_string(), "function");
  const std::string name(call.at("function").at("name").as_string());
  const json::value arguments = json::parse(call.at("function").at("arguments").as_string());
  ASSERT_TRUE(arguments.is_object()) << arguments;
  std::set<std::string> keys;
  for (const auto& [key, value] : arguments.as_object()) keys.insert(std::string(key));
  EXPECT_EQ(keys, PropertiesOf(name)) << arguments;
  if (name == "get_weather") {
    const std::string unit(arguments.at("unit").as_string());
    EXPECT_TRUE(unit == "celsius" || unit == "fahrenheit") << unit;
    EXPECT_TRUE(arguments.at("city").is_string());
    const int64_t days = arguments.at("days").as_int64();
    EXPECT_TRUE(days >= 1 && days <= 7) << days;
  } else {
    EXPECT_TRUE(arguments.at("query").is_string());
    EXPECT_TRUE(arguments.at("top_k").is_int64());
  }
}

class OpenAiAgentTest : public EngineOrGatewayTest {
 protected:
  void SetUp() override {
    EngineEmulatorOptions engine_options = EngineOptions();
    engine_options.runtime.context_length = 2048;
    StartServers(engine_options);
  }

  json::value Post(const std::string& path, const std::string& body, int status = 200) {
    const net::ClientResponse r = SdkCall(client_, http::verb::post, base_, path, body);
    EXPECT_EQ(r.status, status) << r.body;
    return r.body.empty() ? json::value() : json::parse(r.body);
  }
};

TEST_P(OpenAiAgentTest, ModelsRetrieveAnswersTheServedModelsCardAndA404ForAnother) {
  const net::ClientResponse card =
      SdkCall(client_, http::verb::get, base_, "/v1/models/llama-3.1-8b");
  ASSERT_EQ(card.status, 200) << card.body;
  const json::value c = json::parse(card.body);
  EXPECT_EQ(c.at("id").as_string(), "llama-3.1-8b");
  EXPECT_EQ(c.at("object").as_string(), "model");
  EXPECT_EQ(c.at("owned_by").as_string(), "sglang");
  EXPECT_EQ(c.at("max_model_len").as_int64(), 2048);

  const net::ClientResponse other = SdkCall(client_, http::verb::get, base_, "/v1/models/gpt-4o");
  EXPECT_EQ(other.status, 404) << other.body;
  const json::value e = json::parse(other.body);
  EXPECT_EQ(e.at("error").at("code").as_string(), "model_not_found");
  EXPECT_EQ(SdkErrorMessage(e), "The model 'gpt-4o' does not exist");
}

TEST_P(OpenAiAgentTest, ABatchCompletionAnswersOneChoicePerPromptWithTheUsageSummed) {
  const std::vector<std::string> prompts = {"def main():", "import os\\nimport sys", "x"};
  int64_t prompt_tokens = 0;
  for (const std::string& p : prompts) {
    prompt_tokens += Post("/v1/completions", R"({"prompt": ")" + p + R"(", "max_tokens": 1})")
                         .at("usage")
                         .at("prompt_tokens")
                         .as_int64();
  }
  const json::value batch =
      Post("/v1/completions", R"({"model": "llama-3.1-8b", "prompt": ["def main():", )"
                              R"("import os\nimport sys", "x"], "max_tokens": 3})");
  const json::array& choices = batch.at("choices").as_array();
  ASSERT_EQ(choices.size(), 3u) << batch;
  for (size_t i = 0; i < choices.size(); ++i) {
    EXPECT_EQ(choices[i].at("index").as_int64(), static_cast<int64_t>(i));
    EXPECT_EQ(choices[i].at("finish_reason").as_string(), "length");
    EXPECT_FALSE(choices[i].at("text").as_string().empty());
  }
  EXPECT_EQ(batch.at("usage").at("prompt_tokens").as_int64(), prompt_tokens);
  EXPECT_EQ(batch.at("usage").at("completion_tokens").as_int64(), 9);

  const json::value tokens =
      Post("/v1/completions", R"({"prompt": [[1, 2, 3, 4], [5, 6]], "max_tokens": 2})");
  ASSERT_EQ(tokens.at("choices").as_array().size(), 2u) << tokens;
  EXPECT_EQ(tokens.at("usage").at("prompt_tokens").as_int64(), 6);
  EXPECT_EQ(tokens.at("usage").at("completion_tokens").as_int64(), 4);
}

TEST_P(OpenAiAgentTest, AStreamedBatchFinishesEveryIndexThenSumsTheUsage) {
  const Stream stream = SdkStream(client_, base_, "/v1/completions",
                                  R"({"prompt": ["a prompt", "another prompt"], "max_tokens": 3,)"
                                  R"( "stream": true, "stream_options": {"include_usage": true}})");
  EXPECT_EQ(stream.status, 200);
  EXPECT_TRUE(stream.done);
  std::map<int64_t, std::string> text;
  std::map<int64_t, std::string> finish;
  for (const json::value& event : stream.events) {
    EXPECT_EQ(event.at("object").as_string(), "text_completion");
    EXPECT_EQ(event.at("id"), stream.events.front().at("id"));
    for (const json::value& choice : event.at("choices").as_array()) {
      const int64_t index = choice.at("index").as_int64();
      text[index] += std::string(choice.at("text").as_string());
      if (!choice.at("finish_reason").is_null()) {
        EXPECT_FALSE(finish.contains(index)) << "index " << index << " finished twice";
        finish[index] = std::string(choice.at("finish_reason").as_string());
      }
    }
  }
  EXPECT_EQ(finish, (std::map<int64_t, std::string>{{0, "length"}, {1, "length"}}));
  EXPECT_EQ(text.size(), 2u);
  ASSERT_FALSE(stream.events.empty());
  EXPECT_EQ(stream.events.back().at("usage").at("completion_tokens").as_int64(), 6);
}

TEST_P(OpenAiAgentTest, AToolCallingLoopCallsAToolThenAnswersItsResult) {
  json::array messages = UserAsks("What is the weather in Paris?");
  const json::value first = Post("/v1/chat/completions", ToolChat(messages));
  const json::value& choice = first.at("choices").as_array().at(0);
  EXPECT_EQ(choice.at("finish_reason").as_string(), "tool_calls") << first;
  const json::value& message = choice.at("message");
  EXPECT_EQ(message.at("role").as_string(), "assistant");
  EXPECT_TRUE(message.at("content").is_null());
  ASSERT_EQ(message.at("tool_calls").as_array().size(), 1u) << first;
  const json::value call = message.at("tool_calls").as_array().at(0);
  ExpectWellFormedCall(call);

  // The agent runs the tool and sends its result: the answer is text, and the conversation's
  // prefix is served from the cache.
  messages.push_back(message);
  messages.push_back(json::object{
      {"role", "tool"}, {"tool_call_id", call.at("id")}, {"content", "18 C, light rain"}});
  const json::value second = Post("/v1/chat/completions", ToolChat(messages));
  const json::value& answer = second.at("choices").as_array().at(0);
  EXPECT_EQ(answer.at("finish_reason").as_string(), "length") << second;
  EXPECT_TRUE(answer.at("message").at("content").is_string());
  EXPECT_FALSE(answer.at("message").as_object().contains("tool_calls"));
  EXPECT_GT(second.at("usage").at("prompt_tokens_details").at("cached_tokens").as_int64(), 0);
  EXPECT_GT(second.at("usage").at("prompt_tokens").as_int64(),
            first.at("usage").at("prompt_tokens").as_int64());
}

TEST_P(OpenAiAgentTest, ToolChoiceIsHonouredAndTheSameRequestGetsTheSameCall) {
  const json::array messages = UserAsks("Find the weather.");
  const auto called = [&](const std::string& extra) -> std::string {
    const json::value r = Post("/v1/chat/completions", ToolChat(messages, extra));
    const json::value& message = r.at("choices").as_array().at(0).at("message");
    if (!message.as_object().contains("tool_calls")) return "";
    ExpectWellFormedCall(message.at("tool_calls").as_array().at(0));
    return std::string(
        message.at("tool_calls").as_array().at(0).at("function").at("name").as_string());
  };
  EXPECT_EQ(called(R"(, "tool_choice": {"type": "function", "function": {"name": "search"}})"),
            "search");
  EXPECT_EQ(called(R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}})"),
            "get_weather");
  EXPECT_EQ(called(R"(, "tool_choice": "none")"), "");
  EXPECT_NE(called(R"(, "tool_choice": "required")"), "");
  // Deterministic: the same seed, the same call; across seeds both tools are chosen.
  std::set<std::string> chosen;
  for (int seed = 0; seed < 16; ++seed) {
    const std::string extra = R"(, "seed": )" + std::to_string(seed);
    const json::value a = Post("/v1/chat/completions", ToolChat(messages, extra));
    const json::value b = Post("/v1/chat/completions", ToolChat(messages, extra));
    const json::value& call_a = a.at("choices").as_array().at(0).at("message").at("tool_calls");
    const json::value& call_b = b.at("choices").as_array().at(0).at("message").at("tool_calls");
    EXPECT_EQ(call_a.as_array().at(0).at("function"), call_b.as_array().at(0).at("function"));
    EXPECT_NE(call_a.as_array().at(0).at("id"), call_b.as_array().at(0).at("id"));
    chosen.insert(std::string(call_a.as_array().at(0).at("function").at("name").as_string()));
  }
  EXPECT_EQ(chosen, (std::set<std::string>{"get_weather", "search"}));
  // Refused, naming the field.
  EXPECT_THAT(
      SdkErrorMessage(
          Post("/v1/chat/completions",
               ToolChat(messages,
                        R"(, "tool_choice": {"type": "function", "function": {"name": "nope"}})"),
               400)),
      HasSubstr("Tool 'nope' not found"));
  EXPECT_THAT(SdkErrorMessage(Post("/v1/chat/completions",
                                   ToolChat(messages, R"(, "tool_choice": "sometimes")"), 400)),
              HasSubstr("tool_choice"));
  EXPECT_THAT(
      SdkErrorMessage(Post("/v1/chat/completions",
                           R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": )"
                           R"("function", "function": {"description": "no name"}}]})",
                           400)),
      HasSubstr("tools[].function.name"));
}

TEST_P(OpenAiAgentTest, AStreamedToolCallAssemblesToTheCallAWholeAnswerGives) {
  const json::array messages = UserAsks("Search for KV caches.");
  const json::value whole = Post("/v1/chat/completions", ToolChat(messages, R"(, "seed": 7)"));
  const json::value& expected =
      whole.at("choices").as_array().at(0).at("message").at("tool_calls").as_array().at(0);
  const Stream stream = SdkStream(client_, base_, "/v1/chat/completions",
                                  ToolChat(messages, R"(, "seed": 7, "stream": true)"));
  EXPECT_EQ(stream.status, 200);
  EXPECT_TRUE(stream.done);
  // The SDK's accumulation: the first delta of an index opens the call, the next ones append to
  // its arguments.
  std::string id;
  std::string name;
  std::string arguments;
  std::string content;
  std::string finish;
  for (const json::value& event : stream.events) {
    EXPECT_EQ(event.at("object").as_string(), "chat.completion.chunk");
    for (const json::value& choice : event.at("choices").as_array()) {
      const json::object& delta = choice.at("delta").as_object();
      if (const json::value* c = delta.if_contains("content")) content += c->as_string();
      if (const json::value* calls = delta.if_contains("tool_calls")) {
        for (const json::value& call : calls->as_array()) {
          EXPECT_EQ(call.at("index").as_int64(), 0);
          if (const json::value* i = call.as_object().if_contains("id")) {
            EXPECT_TRUE(id.empty()) << "the call was opened twice";
            id = std::string(i->as_string());
            name = std::string(call.at("function").at("name").as_string());
          }
          arguments += std::string(call.at("function").at("arguments").as_string());
        }
      }
      if (!choice.at("finish_reason").is_null()) {
        finish = std::string(choice.at("finish_reason").as_string());
      }
    }
  }
  EXPECT_EQ(content, "");
  EXPECT_EQ(finish, "tool_calls");
  EXPECT_THAT(id, StartsWith("call_"));
  EXPECT_EQ(name, expected.at("function").at("name").as_string());
  EXPECT_EQ(arguments, expected.at("function").at("arguments").as_string());
}

// SGLang's message for an input longer than the model's context, on every generation route, as
// the engine gives it and through the gateway alike.
TEST_P(OpenAiAgentTest, AnOverLongRequestGetsSglangsContextLengthMessageOnEveryRoute) {
  const std::string long_text(4 * 3000, 'a');
  const std::string chat =
      R"({"messages": [{"role": "user", "content": ")" + long_text + R"("}], "max_tokens": 8})";
  const std::string completion = R"({"prompt": ")" + long_text + R"(", "max_tokens": 8})";
  const std::string batch = R"({"prompt": ["short", ")" + long_text + R"("], "max_tokens": 8})";
  const std::string generate =
      R"({"text": ")" + long_text + R"(", "sampling_params": {"max_new_tokens": 8}})";
  const std::string ids =
      R"({"input_ids": )" + InputIds(1, 3000) + R"(, "sampling_params": {"max_new_tokens": 8}})";
  for (const auto& [path, body] :
       std::vector<std::pair<std::string, std::string>>{{"/v1/chat/completions", chat},
                                                        {"/v1/completions", completion},
                                                        {"/v1/completions", batch},
                                                        {"/generate", generate},
                                                        {"/generate", ids}}) {
    const json::value e = Post(path, body, 400);
    EXPECT_THAT(SdkErrorMessage(e),
                HasSubstr("is longer than the model's context length (2048 tokens)"))
        << path << " " << e;
  }
  // Within the context, the output may not push the total past it.
  const std::string near(4 * 2000, 'b');
  for (const auto& [path, body] : std::vector<std::pair<std::string, std::string>>{
           {"/v1/chat/completions",
            R"({"messages": [{"role": "user", "content": ")" + near + R"("}], "max_tokens": 100})"},
           {"/v1/completions", R"({"prompt": )" + InputIds(1, 2000) + R"(, "max_tokens": 100})"},
           {"/v1/completions", R"({"prompt": ")" + near + R"(", "max_tokens": 100})"},
           {"/generate",
            R"({"text": ")" + near + R"(", "sampling_params": {"max_new_tokens": 100}})"}}) {
    const json::value e = Post(path, body, 400);
    EXPECT_THAT(SdkErrorMessage(e),
                HasSubstr("Requested token count exceeds the model's maximum context length of "
                          "2048 tokens."))
        << path << " " << e;
  }
}

INSTANTIATE_TEST_SUITE_P(EngineAndGateway, OpenAiAgentTest, ::testing::Bool(), EngineOrGatewayName);

TEST(OpenAiIdsTest, NoTwoEnginesOrRunsRepeatAnId) {
  net::HttpClient client(ClientOptions());
  std::set<std::string> ids;
  int64_t answers = 0;
  for (int run = 0; run < 2; ++run) {
    std::vector<std::unique_ptr<EngineEmulator>> engines;
    for (int i = 0; i < 2; ++i) {
      StatusOr<std::unique_ptr<EngineEmulator>> engine = EngineEmulator::Start(EngineOptions());
      ASSERT_TRUE(engine.ok()) << engine.status();
      engines.push_back(*std::move(engine));
    }
    for (const auto& engine : engines) {
      for (const char* path : {"/v1/chat/completions", "/v1/completions", "/generate"}) {
        const std::string body =
            std::string(path) == "/v1/chat/completions"
                ? R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1})"
            : std::string(path) == "/v1/completions"
                ? R"({"prompt": "hi", "max_tokens": 1})"
                : R"({"text": "hi", "sampling_params": {"max_new_tokens": 1}})";
        const net::ClientResponse r =
            SdkCall(client, http::verb::post, engine->base_url(), path, body);
        ASSERT_EQ(r.status, 200) << r.body;
        const json::value v = json::parse(r.body);
        const json::value& id =
            v.as_object().contains("id") ? v.at("id") : v.at("meta_info").at("id");
        ids.insert(std::string(id.as_string()));
        ++answers;
      }
    }
    for (const auto& engine : engines) engine->Shutdown(std::chrono::milliseconds(500));
  }
  EXPECT_EQ(static_cast<int64_t>(ids.size()), answers);
  for (const std::string& id : ids) EXPECT_THAT(id, ::testing::ContainsRegex("[0-9a-f]{32}$"));
}

TEST(OpenAiModelsTest, AModelNameWithASlashIsRetrievedRawOrPercentEncoded) {
  EngineEmulatorOptions options = EngineOptions();
  options.served_model_name = "meta-llama/Llama-3.1-8B-Instruct";
  StatusOr<std::unique_ptr<EngineEmulator>> engine = EngineEmulator::Start(options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  net::HttpClient client(ClientOptions());
  for (const char* path : {"/v1/models/meta-llama/Llama-3.1-8B-Instruct",
                           "/v1/models/meta-llama%2FLlama-3.1-8B-Instruct"}) {
    const net::ClientResponse r = SdkCall(client, http::verb::get, (*engine)->base_url(), path);
    ASSERT_EQ(r.status, 200) << path << " " << r.body;
    EXPECT_EQ(json::parse(r.body).at("id").as_string(), "meta-llama/Llama-3.1-8B-Instruct");
  }
  EXPECT_EQ(
      SdkCall(client, http::verb::get, (*engine)->base_url(), "/v1/models/Llama-3.1-8B-Instruct")
          .status,
      404);
}

}  // namespace
}  // namespace agentkv::service
