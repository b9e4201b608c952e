#include "agentkv/protocol/server_info.h"

#include <gtest/gtest.h>

#include <string>

#include "protocol_test_support.h"

namespace agentkv::protocol {
namespace {

using testing_support::ExpectInputError;
using testing_support::ForEachMalformedVariant;
using testing_support::ReadTestdata;

TEST(ServerInfoTest, ReadsTheCheckedFieldsAndKeepsTheRestWithoutSecrets) {
  const std::string body = ReadTestdata("server_info.json");
  StatusOr<ServerInfo> info = ParseServerInfo(body);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->enable_metrics);
  EXPECT_TRUE(info->enable_session_radix_cache);
  EXPECT_EQ(info->radix_eviction_policy, "priority");
  EXPECT_EQ(info->max_total_num_tokens, 262144);
  EXPECT_EQ(info->max_req_input_len, 40960);
  EXPECT_EQ(info->status, "ready");
  EXPECT_EQ(info->version, "0.5.15.post1");
  EXPECT_EQ(info->model_path, "Qwen/Qwen3-8B");
  EXPECT_EQ(info->tp_size, 4);
  EXPECT_EQ(info->dp_size, 1);
  ASSERT_EQ(info->internal_states.size(), 1u);
  EXPECT_EQ(info->internal_states[0].as_object().at("dp_rank").as_int64(), 0);
  EXPECT_FALSE(info->extra.contains("api_key"));
  EXPECT_FALSE(info->extra.contains("admin_api_key"));
  EXPECT_FALSE(info->extra.contains("max_total_num_tokens"));
  EXPECT_EQ(info->extra.at("port").as_int64(), 30000);
  EXPECT_TRUE(info->extra.at("kv_events").is_null());
  EXPECT_EQ(info->extra.at("schedule_policy").as_string(), "lpm");

  const std::string serialized = SerializeServerInfo(*info);
  EXPECT_EQ(serialized.find("secret"), std::string::npos) << serialized;
  StatusOr<ServerInfo> again = ParseServerInfo(serialized);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *info);
}

TEST(ServerInfoTest, SerializesTheEmulatorShape) {
  ServerInfo info;
  info.enable_metrics = true;
  info.enable_session_radix_cache = true;
  info.radix_eviction_policy = "priority";
  info.max_total_num_tokens = 1024;
  info.max_req_input_len = 512;
  info.version = "agentkv-emulator";
  info.model_path = "fake";
  info.internal_states.emplace_back(boost::json::object{{"dp_rank", 0}});
  info.extra.emplace("api_key", "leak");
  info.extra.emplace("mem_fraction_static", 0.9);
  info.extra.emplace("status", "overridden-by-field");
  EXPECT_EQ(SerializeServerInfo(info),
            R"({"mem_fraction_static":0.9,"model_path":"fake","tp_size":1,"dp_size":1,)"
            R"("enable_metrics":true,"enable_session_radix_cache":true,)"
            R"("radix_eviction_policy":"priority","status":"ready","max_total_num_tokens":1024,)"
            R"("max_req_input_len":512,"internal_states":[{"dp_rank":0}],)"
            R"("version":"agentkv-emulator"})");
}

TEST(ServerInfoTest, EmptyInternalStatesGetOneDictPerDpRank) {
  ServerInfo info;
  info.dp_size = 2;
  const std::string body = SerializeServerInfo(info);
  EXPECT_NE(body.find(R"("internal_states":[{"dp_rank":0},{"dp_rank":1}])"), std::string::npos)
      << body;
}

TEST(ServerInfoTest, MissingFieldsKeepSglangDefaults) {
  StatusOr<ServerInfo> info = ParseServerInfo(R"({"unknown": [1, {"x": null}]})");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_FALSE(info->enable_metrics);
  EXPECT_FALSE(info->enable_session_radix_cache);
  EXPECT_EQ(info->radix_eviction_policy, "lru");
  EXPECT_EQ(info->max_total_num_tokens, 0);
  EXPECT_EQ(info->status, "ready");
  EXPECT_EQ(info->extra.size(), 1u);
}

TEST(ServerInfoTest, SecretsAreRecognised) {
  for (const std::string_view key :
       {"api_key", "admin_api_key", "ssl_keyfile_password", "client_secret", "hf_token"}) {
    EXPECT_TRUE(IsSecretServerArg(key)) << key;
  }
  for (const std::string_view key : {"max_total_num_tokens", "tokenizer_path", "api_key_name_x"}) {
    EXPECT_FALSE(IsSecretServerArg(key)) << key;
  }
}

TEST(ServerInfoTest, WrongTypesAreErrors) {
  EXPECT_EQ(ParseServerInfo(R"({"enable_metrics": "true"})").status(),
            InvalidArgumentError("enable_metrics: expected a boolean"));
  EXPECT_EQ(ParseServerInfo(R"({"max_total_num_tokens": -5})").status(),
            InvalidArgumentError("max_total_num_tokens: expected a non-negative integer"));
  EXPECT_EQ(ParseServerInfo(R"({"internal_states": {}})").status(),
            InvalidArgumentError("internal_states: expected a list"));
  EXPECT_EQ(ParseServerInfo("[]").status(),
            InvalidArgumentError("server_info: expected a JSON object"));
}

TEST(ServerInfoTest, MalformedBodiesNeverCrash) {
  ForEachMalformedVariant(ReadTestdata("server_info.json"), 19, [](const std::string& body) {
    const StatusOr<ServerInfo> info = ParseServerInfo(body);
    ExpectInputError(info.status());
    if (info.ok()) {
      for (const auto& member : info->extra) {
        EXPECT_FALSE(IsSecretServerArg(std::string_view(member.key().data(), member.key().size())));
      }
    }
  });
}

}  // namespace
}  // namespace agentkv::protocol
