// What the engine emulator says about itself, in SGLang's shapes: GET /server_info
// (/get_server_info), /model_info (/get_model_info), /v1/models and /v1/models/{model}.
//
// /server_info is SGLang's `{**asdict(server_args), **scheduler_info, "internal_states": [...],
// "version": ...}`: the emulator writes the ServerArgs fields clients read (model and
// tokenizer, memory and scheduling, parallelism, cache, HiCache, metrics and logging), each
// with the value of the emulator's own flag where it has one and SGLang's default otherwise,
// then the scheduler info and one internal state per DP rank. The emulator's own settings
// (cost model presets, speed, pacing) are under the extra key `agentkv_emulator`.
#include <boost/json.hpp>
#include <boost/url.hpp>
#include <chrono>
#include <string_view>

#include "agentkv/engine/cost_model.h"
#include "agentkv/protocol/server_info.h"
#include "agentkv/service/emulator/engine_emulator.h"

namespace agentkv::service {

namespace http = net::http;
namespace json = boost::json;

namespace {

// SGLang's ServerArgs as the emulator fills them, in SGLang's order, in parts: the model,
// tokenizer and server; memory, scheduling and parallelism; the hierarchical cache, metrics and
// logging, then the emulator's own settings.
json::object ModelArgs(const EngineEmulatorOptions& o, int64_t context_length,
                       std::string weight_version, int64_t port) {
  return json::object{
      // Model and tokenizer.
      {"tokenizer_path", o.served_model_name},
      {"tokenizer_mode", "auto"},
      {"skip_tokenizer_init", false},
      {"load_format", "auto"},
      {"trust_remote_code", false},
      {"context_length", context_length},
      {"is_embedding", false},
      {"revision", nullptr},
      {"dtype", "auto"},
      {"kv_cache_dtype", "auto"},
      {"quantization", nullptr},
      {"served_model_name", o.served_model_name},
      {"weight_version", std::move(weight_version)},
      {"chat_template", nullptr},
      {"completion_template", nullptr},
      // Server.
      {"host", o.http.address},
      {"port", port},
      {"fastapi_root_path", ""},
      {"skip_server_warmup", false},
      {"warmups", nullptr},
  };
}

json::object SchedulingArgs(const engine::EngineConfig& engine) {
  const engine::KvPoolOptions& pool = engine.kv_pool;
  auto or_null = [](int64_t value) {
    return value > 0 ? json::value(value) : json::value(nullptr);
  };
  return json::object{
      // Memory and scheduling.
      {"mem_fraction_static", engine.cost.memory_fraction},
      {"max_running_requests", engine.scheduler.max_running_requests},
      {"max_queued_requests", nullptr},
      {"max_total_tokens", or_null(pool.max_total_tokens)},
      {"chunked_prefill_size", engine.scheduler.chunked_prefill_size},
      {"max_prefill_tokens", engine.scheduler.max_prefill_tokens},
      {"schedule_policy", SchedulePolicyName(engine.scheduler.program_fcfs)},
      {"enable_priority_scheduling", false},
      {"schedule_conservativeness", 1.0},
      {"page_size", static_cast<int64_t>(pool.tokens_per_block)},
      {"disable_radix_cache", false},
      {"stream_interval", 1},
      {"allow_auto_truncate", false},
      // Parallelism and devices.
      {"device", "cuda"},
      {"pp_size", 1},
      {"ep_size", 1},
      {"load_balance_method", "round_robin"},
      {"nnodes", 1},
      {"node_rank", 0},
      {"dist_init_addr", nullptr},
      {"base_gpu_id", 0},
      {"enable_dp_attention", false},
      {"disable_overlap_schedule", false},
      {"enable_mixed_chunk", false},
      {"disable_cuda_graph", false},
      {"enable_torch_compile", false},
      {"enable_memory_saver", false},
      {"speculative_algorithm", nullptr},
      {"enable_lora", nullptr},
      {"max_loras_per_batch", 8},
      {"disaggregation_mode", "null"},
  };
}

json::object CacheAndLoggingArgs(const EngineEmulatorOptions& o, const RuntimeSnapshot& snapshot) {
  const engine::EngineConfig& engine = o.runtime.engine;
  const engine::KvPoolOptions& pool = engine.kv_pool;
  const bool hicache = pool.hicache_tokens > 0;
  return json::object{
      // Hierarchical cache: the emulator's host tier is sized in tokens.
      {"enable_hierarchical_cache", hicache},
      {"hicache_ratio", hicache ? 0.0 : 2.0},
      {"hicache_size", 0},
      {"hicache_write_policy", "write_through"},
      {"hicache_storage_backend", nullptr},
      // Metrics and logging.
      {"enable_cache_report", true},
      {"log_level", "info"},
      {"log_requests", false},
      {"watchdog_timeout", 300},
      {"decode_log_interval", 40},
      {"collect_tokens_histogram", false},
      {"bucket_time_to_first_token", nullptr},
      {"bucket_inter_token_latency", nullptr},
      {"bucket_e2e_request_latency", nullptr},
      {"enable_trace", false},
      // agentkv's own settings.
      {"agentkv_emulator", json::object{{"model", engine::PresetName(engine.model)},
                                        {"gpu", engine::PresetName(engine.gpu)},
                                        {"speed", o.runtime.speed},
                                        {"paced", o.runtime.paced},
                                        {"hicache_tokens", pool.hicache_tokens},
                                        {"generation_paused", snapshot.generation_paused},
                                        {"memory_released", snapshot.memory_released}}},
  };
}

// Appends `from`'s members to `to`, in order.
void Append(json::object& to, const json::object& from) {
  for (const auto& member : from) to.emplace(member.key(), member.value());
}

}  // namespace

std::string EngineEmulator::ServerInfoJson() const {
  const engine::EngineConfig& engine = options_.runtime.engine;
  const RuntimeSnapshot snapshot = runtime_->Snapshot();
  protocol::ServerInfo info;
  info.extra = ModelArgs(options_, runtime_->limits().context_length(), weight_version(),
                         static_cast<int64_t>(port()));
  Append(info.extra, SchedulingArgs(engine));
  Append(info.extra, CacheAndLoggingArgs(options_, snapshot));
  info.enable_metrics = options_.enable_metrics;
  info.enable_session_radix_cache = options_.runtime.enable_session_radix_cache;
  info.radix_eviction_policy =
      std::string(RadixEvictionPolicyName(options_.runtime.radix_eviction_policy));
  info.max_total_num_tokens = runtime_->max_total_num_tokens();
  info.max_req_input_len = runtime_->limits().max_req_input_len();
  info.status = "ready";
  info.version = options_.version;
  info.model_path = options_.served_model_name;
  info.tp_size = engine.tp;
  info.internal_states = json::array{json::object{
      {"dp_rank", 0},
      {"last_gen_throughput", snapshot.gen_throughput},
      {"memory_usage", json::object{{"token_capacity", runtime_->max_total_num_tokens()}}},
      {"effective_max_running_requests_per_dp", engine.scheduler.max_running_requests}}};
  return protocol::SerializeServerInfo(info);
}

namespace {

// SGLang's ModelCard (entrypoints/openai/protocol.py): id and root are the served model name,
// max_model_len the context length, created the time of the answer.
json::object ModelCard(const std::string& name, int64_t context_length) {
  const int64_t created = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
  return json::object{{"id", name},
                      {"object", "model"},
                      {"created", created},
                      {"owned_by", "sglang"},
                      {"root", name},
                      {"parent", nullptr},
                      {"max_model_len", context_length}};
}

}  // namespace

std::string EngineEmulator::ModelListJson() const {
  // SGLang's ModelList of one ModelCard.
  return json::serialize(json::object{
      {"object", "list"},
      {"data",
       json::array{ModelCard(options_.served_model_name, runtime_->limits().context_length())}}});
}

void EngineEmulator::HandleRetrieveModel(net::Request request,
                                         std::shared_ptr<net::ResponseWriter> writer) {
  // The name is the path's tail, percent-decoded; it may hold slashes ("org/model"), as
  // SGLang's /v1/models/{model:path}.
  constexpr std::string_view kPrefix = "/v1/models/";
  const std::string_view target(request.target().data(), request.target().size());
  boost::system::result<boost::urls::url_view> url = boost::urls::parse_origin_form(target);
  std::string name = url.has_value() ? std::string(url->path()) : std::string(target);
  name = name.starts_with(kPrefix) ? name.substr(kPrefix.size()) : std::string();
  if (name == options_.served_model_name) {
    return writer->Reply(
        net::MakeResponse(request, http::status::ok,
                          json::serialize(ModelCard(name, runtime_->limits().context_length()))));
  }
  // SGLang's answer for another name: 404 with OpenAI's nested error object.
  writer->Reply(net::MakeResponse(
      request, http::status::not_found,
      json::serialize(json::object{
          {"error", json::object{{"message", "The model '" + name + "' does not exist"},
                                 {"type", "invalid_request_error"},
                                 {"param", "model"},
                                 {"code", "model_not_found"}}}})));
}

std::string EngineEmulator::ModelInfoJson() const {
  return json::serialize(json::object{{"model_path", options_.served_model_name},
                                      {"tokenizer_path", options_.served_model_name},
                                      {"is_generation", true},
                                      {"preferred_sampling_params", nullptr},
                                      {"weight_version", weight_version()}});
}

}  // namespace agentkv::service
