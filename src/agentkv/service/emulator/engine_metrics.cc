#include "agentkv/service/emulator/engine_metrics.h"

#include <string>
#include <utility>

namespace agentkv::service {
namespace {

std::vector<protocol::Label> Labels(const std::string& model_name, int32_t tp_rank) {
  return {{"model_name", model_name},
          {"engine_type", "unified"},
          {"tp_rank", std::to_string(tp_rank)},
          {"pp_rank", "0"},
          {"moe_ep_rank", "0"}};
}

class FamilyBuilder {
 public:
  FamilyBuilder(const std::string& model_name, int32_t tp_ranks)
      : model_name_(model_name), tp_ranks_(tp_ranks) {}

  // A scheduler gauge: one line per TP rank, equal values.
  void Gauge(const std::string& name, const std::string& help, double value) {
    protocol::MetricFamily family{name, help, "gauge", {}};
    for (int32_t rank = 0; rank < tp_ranks_; ++rank) {
      family.samples.push_back(protocol::Sample{name, Labels(model_name_, rank), value, {}});
    }
    families_.push_back(std::move(family));
  }

  // A counter (tp_rank 0 only), optionally split by one extra label.
  void Counter(const std::string& name, const std::string& help,
               const std::vector<std::pair<std::vector<protocol::Label>, double>>& series) {
    protocol::MetricFamily family{name, help, "counter", {}};
    for (const auto& [extra, value] : series) {
      std::vector<protocol::Label> labels = Labels(model_name_, 0);
      labels.insert(labels.end(), extra.begin(), extra.end());
      family.samples.push_back(protocol::Sample{name, std::move(labels), value, {}});
    }
    families_.push_back(std::move(family));
  }

  void Histogram(const std::string& name, const std::string& help, const LatencyHistogram& h) {
    protocol::MetricFamily family{name, help, "histogram", {}};
    int64_t cumulative = 0;
    for (size_t i = 0; i < h.upper_bounds.size(); ++i) {
      cumulative += h.counts[i];
      std::vector<protocol::Label> labels = Labels(model_name_, 0);
      labels.push_back({"le", protocol::FormatPrometheusValue(h.upper_bounds[i])});
      family.samples.push_back(protocol::Sample{
          name + "_bucket", std::move(labels), static_cast<double>(cumulative), {}});
    }
    std::vector<protocol::Label> inf = Labels(model_name_, 0);
    inf.push_back({"le", "+Inf"});
    family.samples.push_back(
        protocol::Sample{name + "_bucket", std::move(inf), static_cast<double>(h.count), {}});
    family.samples.push_back(protocol::Sample{name + "_sum", Labels(model_name_, 0), h.sum, {}});
    family.samples.push_back(protocol::Sample{
        name + "_count", Labels(model_name_, 0), static_cast<double>(h.count), {}});
    families_.push_back(std::move(family));
  }

  std::vector<protocol::MetricFamily> Take() { return std::move(families_); }

 private:
  const std::string& model_name_;
  int32_t tp_ranks_;
  std::vector<protocol::MetricFamily> families_;
};

double D(int64_t v) { return static_cast<double>(v); }

}  // namespace

std::vector<protocol::MetricFamily> EngineMetricFamilies(const RuntimeSnapshot& s,
                                                         const std::string& model_name,
                                                         int32_t tp_ranks, int32_t page_size) {
  FamilyBuilder b(model_name, tp_ranks < 1 ? 1 : tp_ranks);
  const engine::SchedulerGauges& g = s.gauges;
  b.Gauge("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV pool.",
          D(s.max_total_num_tokens));
  b.Gauge("sglang:token_usage", "The token usage (evictable cached KV does not count).",
          g.token_usage);
  b.Gauge("sglang:full_token_usage", "The token usage of the full-attention pool.", g.token_usage);
  b.Gauge("sglang:num_used_tokens", "The number of used tokens.", D(g.num_used_tokens));
  b.Gauge("sglang:kv_available_tokens", "Free KV slots.", D(g.available_tokens));
  b.Gauge("sglang:kv_evictable_tokens", "Radix-cached KV slots that can be evicted.",
          D(g.evictable_tokens));
  b.Gauge("sglang:kv_used_tokens", "KV slots locked by running requests.", D(g.num_used_tokens));
  b.Gauge("sglang:num_running_reqs", "The number of running requests.", D(g.num_running_reqs));
  b.Gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.",
          D(g.num_queue_reqs));
  b.Gauge("sglang:num_grammar_queue_reqs", "The number of requests in the grammar queue.", 0);
  b.Gauge("sglang:num_retracted_reqs", "Requests retracted (preempted) since start.",
          D(g.num_preemptions));
  b.Gauge("sglang:gen_throughput", "The generation throughput (token/s).", s.gen_throughput);
  b.Gauge("sglang:cache_hit_rate", "The prefix cache hit rate over the last interval.",
          s.cache_hit_rate);
  b.Counter("sglang:cached_tokens_total", "Prompt tokens served from the prefix cache.",
            {{{{"cache_source", "device"}}, D(s.cached_tokens_device_total)},
             {{{"cache_source", "host"}}, D(s.cached_tokens_host_total)}});
  b.Counter("sglang:prompt_tokens_total", "Prompt tokens processed.",
            {{{}, D(s.prompt_tokens_total)}});
  b.Counter("sglang:generation_tokens_total", "Generation tokens produced.",
            {{{}, D(s.generation_tokens_total)}});
  b.Counter("sglang:num_requests_total", "Requests received.", {{{}, D(s.num_requests_total)}});
  b.Counter("sglang:num_aborted_requests_total", "Requests aborted.",
            {{{}, D(s.num_aborted_requests_total)}});
  b.Counter("sglang:evicted_tokens_total", "The number of tokens evicted from GPU to CPU.",
            {{{}, D(s.evicted_tokens_total)}});
  // agentkv's own bounds (not SGLang series): session ids the emulator remembers, and the
  // idle sessions it closed to stay within --max-sessions.
  b.Gauge("agentkv:emulator_sessions", "Session ids the emulated engine remembers.", D(s.sessions));
  b.Counter("agentkv:emulator_sessions_evicted_total",
            "Idle sessions closed because --max-sessions was reached.",
            {{{}, D(s.sessions_evicted_total)}});
  b.Histogram("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
              s.time_to_first_token);
  b.Histogram("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
              s.inter_token_latency);
  b.Histogram("sglang:e2e_request_latency_seconds",
              "Histogram of End-to-end request latency in seconds", s.e2e_request_latency);
  b.Histogram("sglang:queue_time_seconds", "Histogram of queueing time in seconds.", s.queue_time);
  // The host (HiCache) tier's series, as SGLang exports them only with
  // --enable-hierarchical-cache.
  if (s.cache.host.capacity > 0) {
    b.Gauge("sglang:hicache_host_used_tokens",
            "Number of tokens currently used in the host KV cache.",
            D((s.cache.host.capacity - s.cache.host.free) * page_size));
    b.Gauge("sglang:hicache_host_total_tokens", "Total capacity of the host KV cache in tokens.",
            D(s.cache.host.capacity * page_size));
    b.Counter("sglang:load_back_tokens_total", "The number of tokens loaded from CPU to GPU.",
              {{{}, D(s.load_back_tokens_total)}});
    b.Histogram("sglang:eviction_duration_seconds",
                "Time taken to evict memory from GPU to CPU in seconds.", s.eviction_duration);
    b.Histogram("sglang:load_back_duration_seconds",
                "Time taken to load memory from CPU to GPU in seconds.", s.load_back_duration);
  }
  return b.Take();
}

}  // namespace agentkv::service
