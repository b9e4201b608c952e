// Invariants of a CostModel built by Create: the presets and options were validated; tp is 1,
// 2, 4 or 8 and divides the model's KV heads; kv_bytes_per_token_ > 0; weight_bytes_ > 0;
// kv_capacity_tokens_ >= 1. Estimate never returns a negative time and is non-decreasing in
// every StepShape field except num_requests. Formulas are documented in docs/COST_MODEL.md.
#include "agentkv/engine/cost_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <sstream>
#include <string>
#include <utility>

#include "agentkv/base/check.h"

namespace agentkv::engine {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

// Public configurations (Hugging Face config.json); parameter counts are the published totals.
constexpr std::array<ModelPreset, 3> kModelPresets = {{
    {.name = "llama-3.1-8b",
     .num_layers = 32,
     .hidden_size = 4096,
     .num_query_heads = 32,
     .num_kv_heads = 8,
     .head_dim = 128,
     .num_params = 8.03e9,
     .dtype_bytes = 2},
    {.name = "qwen2.5-32b",
     .num_layers = 64,
     .hidden_size = 5120,
     .num_query_heads = 40,
     .num_kv_heads = 8,
     .head_dim = 128,
     .num_params = 32.8e9,
     .dtype_bytes = 2},
    {.name = "llama-3.1-70b",
     .num_layers = 80,
     .hidden_size = 8192,
     .num_query_heads = 64,
     .num_kv_heads = 8,
     .head_dim = 128,
     .num_params = 70.6e9,
     .dtype_bytes = 2},
}};

// NVIDIA datasheet figures: dense bf16 (no sparsity), HBM bandwidth, memory.
constexpr std::array<GpuPreset, 2> kGpuPresets = {{
    // PCIe Gen5 x16: 64 GB/s per direction.
    {.name = "h100",
     .peak_flops = 989e12,
     .hbm_bytes_per_s = 3.35e12,
     .memory_bytes = 80 * kGiB,
     .host_link_bytes_per_s = 64e9},
    {.name = "h200",
     .peak_flops = 989e12,
     .hbm_bytes_per_s = 4.8e12,
     .memory_bytes = 141 * kGiB,
     .host_link_bytes_per_s = 64e9},
}};

template <typename Preset>
StatusOr<size_t> IndexOfPreset(std::span<const Preset> presets, std::string_view kind,
                               std::string_view name) {
  for (size_t i = 0; i < presets.size(); ++i) {
    if (presets[i].name == name) return i;
  }
  std::ostringstream msg;
  msg << "unknown " << kind << " preset \"" << name << "\"; known:";
  for (const Preset& preset : presets) msg << " " << preset.name;
  return NotFoundError(msg.str());
}

template <typename Preset>
StatusOr<Preset> FindPreset(std::span<const Preset> presets, std::string_view kind,
                            std::string_view name) {
  AGENTKV_ASSIGN_OR_RETURN(const size_t index, IndexOfPreset(presets, kind, name));
  return presets[index];
}

Status OutOfRange(std::string_view field, double value, std::string_view range) {
  std::ostringstream msg;
  msg << field << " = " << value << " is out of range " << range;
  return InvalidArgumentError(msg.str());
}

Status ValidateModel(const ModelPreset& m) {
  const std::array<std::pair<std::string_view, int32_t>, 6> ints = {{
      {"model.num_layers", m.num_layers},
      {"model.hidden_size", m.hidden_size},
      {"model.num_query_heads", m.num_query_heads},
      {"model.num_kv_heads", m.num_kv_heads},
      {"model.head_dim", m.head_dim},
      {"model.dtype_bytes", m.dtype_bytes},
  }};
  for (const auto& [field, value] : ints) {
    if (value <= 0) return OutOfRange(field, value, "(0, inf)");
  }
  if (!(m.num_params > 0) || !std::isfinite(m.num_params)) {
    return OutOfRange("model.num_params", m.num_params, "(0, inf)");
  }
  if (m.num_query_heads % m.num_kv_heads != 0) {
    return InvalidArgumentError(
        "model.num_kv_heads = " + std::to_string(m.num_kv_heads) +
        " does not divide model.num_query_heads = " + std::to_string(m.num_query_heads));
  }
  return Status::Ok();
}

Status ValidateGpu(const GpuPreset& g) {
  if (!(g.peak_flops > 0) || !std::isfinite(g.peak_flops)) {
    return OutOfRange("gpu.peak_flops", g.peak_flops, "(0, inf)");
  }
  if (!(g.hbm_bytes_per_s > 0) || !std::isfinite(g.hbm_bytes_per_s)) {
    return OutOfRange("gpu.hbm_bytes_per_s", g.hbm_bytes_per_s, "(0, inf)");
  }
  if (g.memory_bytes <= 0) {
    return OutOfRange("gpu.memory_bytes", static_cast<double>(g.memory_bytes), "(0, inf)");
  }
  if (!(g.host_link_bytes_per_s > 0) || !std::isfinite(g.host_link_bytes_per_s)) {
    return OutOfRange("gpu.host_link_bytes_per_s", g.host_link_bytes_per_s, "(0, inf)");
  }
  return Status::Ok();
}

bool InUnitInterval(double v) { return v > 0 && v <= 1; }

// Seconds to nanoseconds, rounded up so a non-zero amount of work never costs 0 ns.
TimeNs CeilNs(double seconds) { return TimeNs(static_cast<int64_t>(std::ceil(seconds * 1e9))); }

}  // namespace

std::span<const ModelPreset> ModelPresets() { return kModelPresets; }
std::span<const GpuPreset> GpuPresets() { return kGpuPresets; }

StatusOr<ModelPreset> FindModelPreset(std::string_view name) {
  return FindPreset(ModelPresets(), "model", name);
}

StatusOr<GpuPreset> FindGpuPreset(std::string_view name) {
  return FindPreset(GpuPresets(), "gpu", name);
}

const ModelPreset& PresetOf(ModelPresetId id) {
  const auto index = static_cast<size_t>(id);
  AGENTKV_CHECK(index < kModelPresets.size()) << "model preset id " << index;
  return kModelPresets[index];
}

const GpuPreset& PresetOf(GpuPresetId id) {
  const auto index = static_cast<size_t>(id);
  AGENTKV_CHECK(index < kGpuPresets.size()) << "gpu preset id " << index;
  return kGpuPresets[index];
}

std::string_view PresetName(ModelPresetId id) { return PresetOf(id).name; }
std::string_view PresetName(GpuPresetId id) { return PresetOf(id).name; }

StatusOr<ModelPresetId> ParseModelPreset(std::string_view name) {
  AGENTKV_ASSIGN_OR_RETURN(const size_t index, IndexOfPreset(ModelPresets(), "model", name));
  return static_cast<ModelPresetId>(index);
}

StatusOr<GpuPresetId> ParseGpuPreset(std::string_view name) {
  AGENTKV_ASSIGN_OR_RETURN(const size_t index, IndexOfPreset(GpuPresets(), "gpu", name));
  return static_cast<GpuPresetId>(index);
}

Status CostModelOptions::Validate() const {
  if (!InUnitInterval(memory_fraction)) {
    return OutOfRange("memory_fraction", memory_fraction, "(0, 1]");
  }
  if (activation_reserve_bytes_per_gpu < 0 || activation_reserve_bytes_per_gpu > 1024 * kGiB) {
    return OutOfRange("activation_reserve_bytes_per_gpu",
                      static_cast<double>(activation_reserve_bytes_per_gpu), "[0, 1 TiB]");
  }
  if (!InUnitInterval(mfu)) return OutOfRange("mfu", mfu, "(0, 1]");
  if (!InUnitInterval(decode_mfu)) return OutOfRange("decode_mfu", decode_mfu, "(0, 1]");
  if (!InUnitInterval(mbu)) return OutOfRange("mbu", mbu, "(0, 1]");
  if (!InUnitInterval(host_link_efficiency)) {
    return OutOfRange("host_link_efficiency", host_link_efficiency, "(0, 1]");
  }
  if (step_overhead < TimeNs(0) || step_overhead > TimeNs::Seconds(1)) {
    return OutOfRange("step_overhead (ns)", static_cast<double>(step_overhead.ns()), "[0, 1 s]");
  }
  if (allreduce_latency < TimeNs(0) || allreduce_latency > TimeNs::Millis(1)) {
    return OutOfRange("allreduce_latency (ns)", static_cast<double>(allreduce_latency.ns()),
                      "[0, 1 ms]");
  }
  return Status::Ok();
}

CostModel::CostModel(const ModelPreset& model, const GpuPreset& gpu, int32_t tp,
                     const CostModelOptions& options)
    : model_(model), gpu_(gpu), tp_(tp), options_(options) {
  kv_bytes_per_token_ =
      int64_t{2} * model.num_layers * model.num_kv_heads * model.head_dim * model.dtype_bytes;
  weight_bytes_ = model.num_params * model.dtype_bytes;
}

StatusOr<CostModel> CostModel::Create(const ModelPreset& model, const GpuPreset& gpu, int32_t tp,
                                      const CostModelOptions& options) {
  AGENTKV_RETURN_IF_ERROR(ValidateModel(model));
  AGENTKV_RETURN_IF_ERROR(ValidateGpu(gpu));
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  if (tp != 1 && tp != 2 && tp != 4 && tp != 8) {
    return InvalidArgumentError("tp = " + std::to_string(tp) + " is not one of 1, 2, 4, 8");
  }
  if (model.num_kv_heads % tp != 0) {
    return InvalidArgumentError("tp = " + std::to_string(tp) + " does not divide " +
                                std::string(model.name) +
                                "'s num_kv_heads = " + std::to_string(model.num_kv_heads));
  }
  CostModel cost(model, gpu, tp, options);
  const double usable = static_cast<double>(gpu.memory_bytes) * tp * options.memory_fraction;
  const double reserve = static_cast<double>(options.activation_reserve_bytes_per_gpu) * tp;
  const double kv_bytes = usable - cost.weight_bytes_ - reserve;
  const double tokens = std::floor(kv_bytes / static_cast<double>(cost.kv_bytes_per_token_));
  if (!(tokens >= 1)) {
    std::ostringstream msg;
    msg << "model " << model.name << " does not fit on gpu " << gpu.name << " at tp " << tp
        << ": usable " << usable << " B (memory_fraction " << options.memory_fraction
        << ") - weights " << cost.weight_bytes_ << " B - activation reserve " << reserve
        << " B leaves " << kv_bytes << " B, under one KV token (" << cost.kv_bytes_per_token_
        << " B)";
    return InvalidArgumentError(msg.str());
  }
  cost.kv_capacity_tokens_ = static_cast<int64_t>(tokens);
  return cost;
}

StatusOr<CostModel> CostModel::CreateByName(std::string_view model, std::string_view gpu,
                                            int32_t tp, const CostModelOptions& options) {
  AGENTKV_ASSIGN_OR_RETURN(const ModelPreset model_preset, FindModelPreset(model));
  AGENTKV_ASSIGN_OR_RETURN(const GpuPreset gpu_preset, FindGpuPreset(gpu));
  return Create(model_preset, gpu_preset, tp, options);
}

StatusOr<CostModel> CostModel::Create(ModelPresetId model, GpuPresetId gpu, int32_t tp,
                                      const CostModelOptions& options) {
  return Create(PresetOf(model), PresetOf(gpu), tp, options);
}

TimeNs CostModel::HostTransferTime(int64_t tokens) const {
  AGENTKV_CHECK_GE(tokens, 0);
  return CeilNs(static_cast<double>(tokens) * static_cast<double>(kv_bytes_per_token_) /
                (tp_ * host_link_bytes_per_s()));
}

StepCost CostModel::Breakdown(const StepShape& shape) const {
  AGENTKV_CHECK(shape.prefill_tokens >= 0 && shape.decode_tokens >= 0 &&
                shape.context_tokens >= 0 && shape.num_requests >= 0 && shape.host_load_tokens >= 0)
      << "negative StepShape field: prefill " << shape.prefill_tokens << " decode "
      << shape.decode_tokens << " context " << shape.context_tokens << " requests "
      << shape.num_requests;
  StepCost cost;
  const double new_tokens = static_cast<double>(shape.prefill_tokens + shape.decode_tokens);
  if (new_tokens == 0) return cost;
  AGENTKV_CHECK(shape.num_requests >= 1)
      << "a step computing " << new_tokens << " tokens needs num_requests >= 1";

  const double requests = static_cast<double>(shape.num_requests);
  const double prefill = static_cast<double>(shape.prefill_tokens);
  const double decode = static_cast<double>(shape.decode_tokens);
  const double context = static_cast<double>(shape.context_tokens);
  // Query-key pairs attention scores: every new token sees the mean cached context per
  // request, and prefill tokens also see the earlier tokens of their own chunk (causal, half
  // of a square per request). Exact for a pure-decode batch and for a single request.
  const double mean_context = context / requests;
  const double prefill_pairs = prefill * mean_context + prefill * prefill / (2 * requests);
  const double decode_pairs = decode * mean_context;
  // QK^T and PV each cost 2 * head_dim FLOPs per pair, per query head, per layer.
  const double flops_per_pair = 4.0 * model_.num_layers * model_.num_query_heads * model_.head_dim;
  const double prefill_flops = 2.0 * model_.num_params * prefill + flops_per_pair * prefill_pairs;
  cost.decode_flops = 2.0 * model_.num_params * decode + flops_per_pair * decode_pairs;
  cost.flops = prefill_flops + cost.decode_flops;

  const double kv_token = static_cast<double>(kv_bytes_per_token_);
  cost.memory_bytes = weight_bytes_ + context * kv_token + new_tokens * kv_token;

  const double peak = tp_ * gpu_.peak_flops;
  cost.compute_time = CeilNs(prefill_flops / (peak * options_.mfu) +
                             cost.decode_flops / (peak * options_.decode_mfu));
  cost.memory_time = CeilNs(cost.memory_bytes / (tp_ * gpu_.hbm_bytes_per_s * options_.mbu));
  if (tp_ > 1) {
    cost.communication_time =
        TimeNs(2 * int64_t{model_.num_layers} * options_.allreduce_latency.ns());
  }
  cost.overhead = options_.step_overhead;
  cost.host_load_time = HostTransferTime(shape.host_load_tokens);
  const TimeNs busy = std::max(cost.compute_time, cost.memory_time);
  if (options_.overlap_host_load) {
    // A two-stage pipeline over the layers: layer i's KV loads while layer i - 1 computes. It
    // takes max(load, busy) + min(load, busy) / layers, so the load adds that minus busy.
    const TimeNs longer = std::max(cost.host_load_time, busy);
    const TimeNs shorter = std::min(cost.host_load_time, busy);
    const TimeNs pipeline =
        longer + TimeNs((shorter.ns() + model_.num_layers - 1) / model_.num_layers);
    cost.exposed_host_load_time = cost.host_load_time.ns() == 0 ? TimeNs(0) : pipeline - busy;
  } else {
    cost.exposed_host_load_time = cost.host_load_time;
  }
  cost.total = busy + cost.communication_time + cost.overhead + cost.exposed_host_load_time;
  return cost;
}

}  // namespace agentkv::engine
