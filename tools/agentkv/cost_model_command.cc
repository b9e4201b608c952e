#include "tools/agentkv/cost_model_command.h"

#include <fmt/core.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <string>

#include "agentkv/engine/cost_model.h"
#include "agentkv/engine/cost_model_calibration.h"
#include "tools/agentkv/cli_support.h"
#include "tools/agentkv/cost_model_file.h"

namespace agentkv::tools {
namespace {

constexpr const char* kDescription =
    "Print what the simulator's cost model predicts for one engine (TTFT, prefill throughput, "
    "decode ITL, host reload vs recompute), to compare with a real fleet";

constexpr std::array<int64_t, 5> kPromptTokens = {1'024, 4'096, 8'192, 32'768, 100'000};
constexpr std::array<int64_t, 5> kDecodeBatches = {1, 8, 32, 64, 128};
constexpr std::array<int64_t, 4> kDecodeContexts = {512, 4'096, 21'000, 65'536};
constexpr std::array<int64_t, 3> kReloadPrefixes = {10'000, 30'000, 100'000};

std::string Footer() {
  std::string footer =
      "Output: the constants in use, the KV capacity, then four tables (times in ms):\n"
      "  TTFT of one request alone, prefilled in --chunked-prefill-size chunks;\n"
      "  prefill throughput of one step of 128 x 128-token prompts;\n"
      "  decode ITL (one step) by batch size and cached context per request;\n"
      "  reload of a prefix from the host tier against recomputing it.\n"
      "For llama-3.1-8b on h100 at tp 1 it also prints the validation table: each published\n"
      "measurement the built-in constants are calibrated on, the model's value and the ratio\n"
      "(docs/COST_MODEL.md lists the sources).\n\n"
      "--cost-model FILE replaces the built-in constants with measured ones: a TOML or INI file,\n"
      "top level or under [cost-model], one `key = value` line each; keys left out keep their\n"
      "built-in value. Keys:\n";
  for (const CostModelFileKey& key : CostModelFileKeys()) {
    footer += fmt::format("  {:<24} {}\n", key.name, key.meaning);
  }
  footer +=
      "The same file works with `agentkv replay --cost-model FILE`.\n\n"
      "Exit codes: 0 success; 2 bad flags or file (one `agentkv cost-model: error:` line).";
  return footer;
}

double Ms(TimeNs t) { return t.seconds() * 1e3; }

// TTFT by prompt length, prefill throughput and decode ITL by batch and context.
std::string LatencyTables(const engine::CostModel& cost, int64_t chunk) {
  std::string out;
  out += fmt::format("Time to first token, one request alone, chunks of {}:\n",
                     chunk == 0 ? std::string("the whole prompt") : std::to_string(chunk));
  out += fmt::format("  {:>13}  {:>10}  {:>16}\n", "prompt tokens", "TTFT ms", "prefill tok/s");
  for (const int64_t prompt : kPromptTokens) {
    const TimeNs ttft = engine::TimeToFirstToken(cost, prompt, chunk);
    out += fmt::format("  {:>13}  {:>10.1f}  {:>16.0f}\n", prompt, Ms(ttft),
                       static_cast<double>(prompt) / ttft.seconds());
  }
  out += fmt::format("\nPrefill throughput, one step of 128 x 128-token prompts: {:.0f} tok/s\n\n",
                     engine::PrefillTokensPerSecond(cost, 128, 128));

  out += "Decode ITL ms (one step), by batch size and cached context per request:\n";
  out += fmt::format("  {:>7}", "batch");
  for (const int64_t context : kDecodeContexts) out += fmt::format("  {:>9}", context);
  out += "\n";
  for (const int64_t batch : kDecodeBatches) {
    out += fmt::format("  {:>7}", batch);
    for (const int64_t context : kDecodeContexts) {
      out += fmt::format("  {:>9.2f}", Ms(engine::DecodeStepTime(cost, batch, context)));
    }
    out += "\n";
  }
  return out;
}

// A prefix's host-tier reload against its recompute.
std::string ReloadTable(const engine::CostModel& cost, int64_t chunk) {
  std::string out;
  out += "\nHost-tier reload against recompute of a prefix (one request, nothing overlapped):\n";
  out += fmt::format("  {:>13}  {:>12}  {:>10}  {:>17}\n", "prefix tokens", "recompute ms",
                     "reload ms", "recompute/reload");
  for (const int64_t prefix : kReloadPrefixes) {
    out += fmt::format("  {:>13}  {:>12.1f}  {:>10.1f}  {:>17.1f}\n", prefix,
                       Ms(engine::TimeToFirstToken(cost, prefix, chunk)),
                       Ms(engine::HostReloadTime(cost, prefix)),
                       engine::RecomputeOverReload(cost, prefix, chunk));
  }
  return out;
}

// The model against the published measurements it was calibrated on.
std::string ValidationTable(const engine::CostModel& cost) {
  std::string out;
  out += "\nValidation against published measurements (llama-3.1-8b, one h100):\n";
  out +=
      fmt::format("  {:<66}  {:>12}  {:>12}  {:>6}\n", "quantity", "model", "published", "ratio");
  for (const engine::CalibrationPoint& point : engine::CalibrationPoints()) {
    const double value = engine::ModelValue(cost, point);
    out += fmt::format("  {:<66}  {:>12.6g}  {:>12.6g}  {:>6.2f}  {}\n", point.quantity, value,
                       point.published, value / point.published, point.unit);
  }
  return out;
}

}  // namespace

CostModelCommand::CostModelCommand(CLI::App& app) {
  command_ = app.add_subcommand(kName, kDescription);
  command_->footer(Footer());
  CLI::App& c = *command_;
  c.add_option("--model", model_, "Model preset: llama-3.1-8b, qwen2.5-32b, llama-3.1-70b")
      ->capture_default_str();
  c.add_option("--gpu", gpu_, "GPU preset: h100, h200")->capture_default_str();
  c.add_option("--tp", tp_, "Tensor parallelism per engine")->capture_default_str();
  c.add_option("--cost-model", cost_model_path_,
               "Measured cost-model constants (TOML/INI) instead of the built-in ones")
      ->type_name("FILE");
  c.add_option("--chunked-prefill-size", chunked_prefill_size_,
               "Most prefill tokens of one request per step in the TTFT table; 0 = no chunking")
      ->capture_default_str();
}

int CostModelCommand::Run() const {
  if (const Status s =
          CheckFlagRange("--chunked-prefill-size", chunked_prefill_size_, 0, int64_t{1} << 30);
      !s.ok()) {
    return ReportError(kName, s);
  }
  engine::CostModelOptions options;
  if (!cost_model_path_.empty()) {
    StatusOr<engine::CostModelOptions> from_file = ReadCostModelFile(cost_model_path_, options);
    if (!from_file.ok()) return ReportError(kName, from_file.status());
    options = *from_file;
  }
  StatusOr<engine::ModelPresetId> model = engine::ParseModelPreset(model_);
  if (!model.ok()) return ReportError(kName, model.status());
  StatusOr<engine::GpuPresetId> gpu = engine::ParseGpuPreset(gpu_);
  if (!gpu.ok()) return ReportError(kName, gpu.status());
  StatusOr<engine::CostModel> built = engine::CostModel::Create(*model, *gpu, tp_, options);
  if (!built.ok()) return ReportError(kName, built.status());
  const engine::CostModel& cost = *built;
  const int64_t chunk = chunked_prefill_size_;

  std::string out;
  out += fmt::format("cost model: {} on {}, tp {}; constants {}\n", model_, gpu_, tp_,
                     cost_model_path_.empty() ? "built in (calibrated, docs/COST_MODEL.md)"
                                              : "from " + cost_model_path_);
  out += fmt::format(
      "  mfu {:g}, decode_mfu {:g}, mbu {:g}, host link {:.1f} GB/s ({:g} x {:g} GB/s), "
      "overlap_host_load {}, step overhead {:g} us, all-reduce {:g} us\n",
      options.mfu, options.decode_mfu, options.mbu, cost.host_link_bytes_per_s() / 1e9,
      options.host_link_efficiency, cost.gpu().host_link_bytes_per_s / 1e9,
      options.overlap_host_load ? "true" : "false",
      static_cast<double>(options.step_overhead.ns()) / 1e3,
      static_cast<double>(options.allreduce_latency.ns()) / 1e3);
  out += fmt::format("  KV capacity {} tokens (memory_fraction {:g}), {} B per token\n\n",
                     cost.kv_capacity_tokens(), options.memory_fraction, cost.kv_bytes_per_token());

  out += LatencyTables(cost, chunk);
  out += ReloadTable(cost, chunk);

  if (*model == engine::ModelPresetId::kLlama31_8b && *gpu == engine::GpuPresetId::kH100 &&
      tp_ == 1) {
    out += ValidationTable(cost);
  }
  std::fputs(out.c_str(), stdout);
  return kExitOk;
}

}  // namespace agentkv::tools
