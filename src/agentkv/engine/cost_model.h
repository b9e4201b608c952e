// CostModel: an analytic roofline for one engine scheduler step, and the KV capacity left on
// the GPUs after the weights.
//
// An Engine (engine.h) asks `Estimate(shape)` how long a continuous-batching step takes
// (prefill chunks plus decode tokens), and SizeKvPool (kv_pool.h) sizes its KV cache from
// `kv_capacity_tokens()`. A model is built once from a model preset, a GPU preset, a tensor
// parallel degree and `CostModelOptions`; every formula is in docs/COST_MODEL.md. Pure: no
// clocks, no I/O, no global state beyond the constexpr preset tables. Immutable value type,
// thread-compatible (all methods are const and may run concurrently).
#ifndef AGENTKV_ENGINE_COST_MODEL_H_
#define AGENTKV_ENGINE_COST_MODEL_H_

#include <cstdint>
#include <span>
#include <string_view>

#include "agentkv/base/status.h"
#include "agentkv/base/time.h"

namespace agentkv::engine {

// A dense decoder-only transformer. All fields must be positive; `num_kv_heads` divides
// `num_query_heads`. `name` views storage that must outlive every copy (the built-in presets
// use string literals).
struct ModelPreset {
  std::string_view name;
  int32_t num_layers = 0;
  int32_t hidden_size = 0;
  int32_t num_query_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  // Total parameter count, embeddings included (all of them are read each step).
  double num_params = 0;
  // Bytes per weight and per KV element: 2 for bf16/fp16.
  int32_t dtype_bytes = 0;
};

// One GPU. All fields must be positive; `name` as in ModelPreset.
struct GpuPreset {
  std::string_view name;
  // Dense bf16 tensor-core peak, FLOP/s (no sparsity).
  double peak_flops = 0;
  // HBM bandwidth, bytes/s.
  double hbm_bytes_per_s = 0;
  // Device memory, bytes.
  int64_t memory_bytes = 0;
  // Host <-> device link per GPU (PCIe), bytes/s per direction: what loading KV from the host
  // tier costs.
  double host_link_bytes_per_s = 0;
};

// The built-in presets, in lookup order. Names are lower case.
std::span<const ModelPreset> ModelPresets();
std::span<const GpuPreset> GpuPresets();

// A built-in model preset, as library options name it; the command line parses the name once
// (ParseModelPreset). Values index ModelPresets().
enum class ModelPresetId : uint8_t { kLlama31_8b, kQwen25_32b, kLlama31_70b };
// A built-in GPU preset; values index GpuPresets().
enum class GpuPresetId : uint8_t { kH100, kH200 };

const ModelPreset& PresetOf(ModelPresetId id);
const GpuPreset& PresetOf(GpuPresetId id);
// The preset's user-facing name ("llama-3.1-8b", "h100").
std::string_view PresetName(ModelPresetId id);
std::string_view PresetName(GpuPresetId id);
// The preset named `name` (exact, lower case). NotFound listing every known name (the message
// FindModelPreset and FindGpuPreset give) when there is none.
[[nodiscard]] StatusOr<ModelPresetId> ParseModelPreset(std::string_view name);
[[nodiscard]] StatusOr<GpuPresetId> ParseGpuPreset(std::string_view name);

// Returns the preset named `name` (exact, lower case, e.g. "llama-3.1-8b").
// NotFound listing every known name when there is none.
[[nodiscard]] StatusOr<ModelPreset> FindModelPreset(std::string_view name);
// Returns the preset named `name` ("h100", "h200"). NotFound listing the known names.
[[nodiscard]] StatusOr<GpuPreset> FindGpuPreset(std::string_view name);

struct CostModelOptions {
  // Share of each GPU's memory the engine may use for weights, activations and KV (SGLang's
  // --mem-fraction-static). Default: 0.90. Range (0, 1].
  double memory_fraction = 0.90;
  // Memory held back on each GPU for activations, CUDA graphs and workspace, bytes.
  // Default: 2 GiB. Range [0, 1 TiB].
  int64_t activation_reserve_bytes_per_gpu = int64_t{2} << 30;
  // Model FLOP utilization of prefill: the share of peak FLOP/s reached by the FLOPs of prompt
  // tokens (dense matmuls and attention). Calibrated on Llama-3.1-8B on one H100 (TTFT at 8K and
  // 32K prompts, a 128 x 128-token prefill batch; docs/COST_MODEL.md). Default: 0.68.
  // Range (0, 1].
  double mfu = 0.68;
  // Model FLOP utilization of decode: the share of peak FLOP/s reached by the FLOPs of decode
  // tokens. Decode matmuls have one row per request, so they run far from peak; in the
  // roofline this makes a decode step memory bound at small batches and compute bound at
  // large ones (about 80 requests for the 8B on an H100), the batch dependence measured decode
  // latency shows. Calibrated on the ITL of a 128-request decode batch. Default: 0.23.
  // Range (0, 1].
  double decode_mfu = 0.23;
  // Memory bandwidth utilization: the share of peak HBM bandwidth. Calibrated on decode ITL at
  // batch 1 and 8. Default: 0.8. Range (0, 1].
  double mbu = 0.8;
  // Share of the GPU preset's host link bandwidth a KV load from the host tier reaches end to
  // end (page gathers, pinned-memory copies, synchronisation). Default: 0.69 (44 GB/s on PCIe
  // Gen5 x16). Range (0, 1].
  double host_link_efficiency = 0.69;
  // Whether a step's host-tier load overlaps its compute layer by layer (SGLang HiCache loads
  // layer i+1's KV while layer i computes): only the part of the load the compute cannot hide,
  // plus one layer's worth of the shorter of the two, is on the critical path. When false the
  // whole load precedes the step. Default: true.
  bool overlap_host_load = true;
  // Fixed cost of every non-empty step (scheduling, kernel launches, sampling).
  // Default: 1 ms. Range [0, 1 s].
  TimeNs step_overhead = TimeNs::Millis(1);
  // Latency of one tensor-parallel all-reduce; a step pays two per layer when tp > 1 (after
  // attention and after the MLP). Bandwidth of the all-reduce is ignored.
  // Default: 5 us. Range [0, 1 ms].
  TimeNs allreduce_latency = TimeNs(5'000);

  // OK, or InvalidArgument naming the first out-of-range field and its value.
  [[nodiscard]] Status Validate() const;
};

// What one scheduler step does. All fields are >= 0.
struct StepShape {
  // New prompt tokens computed this step (sum of every prefill chunk).
  int64_t prefill_tokens = 0;
  // Tokens generated this step (one per decoding request).
  int64_t decode_tokens = 0;
  // Sum over the step's requests of the tokens already in the KV cache that attention reads
  // (the cached prefix of a prefill request, the whole context of a decoding request). This
  // step's own new tokens are not counted here.
  int64_t context_tokens = 0;
  // Requests in the batch; at least 1 when any token is computed.
  int64_t num_requests = 0;
  // Tokens of KV loaded from the host tier before this step's prefill can run (onboarded
  // prefix blocks). Offloads to the host are asynchronous and not counted.
  int64_t host_load_tokens = 0;
};

// The parts of one estimate, for tests, reports and logging plans.
struct StepCost {
  double flops = 0;         // Whole step, summed over the tp GPUs.
  double memory_bytes = 0;  // Whole step, summed over the tp GPUs.
  double decode_flops = 0;  // The part of flops that decode tokens cost.
  // (flops - decode_flops) / (tp * peak_flops * mfu) + decode_flops / (... * decode_mfu).
  TimeNs compute_time;
  TimeNs memory_time;         // memory_bytes / (tp * hbm_bytes_per_s * mbu).
  TimeNs communication_time;  // 2 * layers * allreduce_latency when tp > 1, else 0.
  TimeNs overhead;            // options.step_overhead for a non-empty step, else 0.
  // host_load_tokens * kv_bytes_per_token / (tp * host_link_bytes_per_s * host_link_efficiency):
  // the whole transfer.
  TimeNs host_load_time;
  // The part of host_load_time on the critical path: all of it without overlap; with
  // overlap_host_load, max(0, load - busy) + min(load, busy) / layers, where busy is
  // max(compute, memory) (a layer-wise pipeline of two stages).
  TimeNs exposed_host_load_time;
  // max(compute, memory) + communication + overhead + exposed host load.
  TimeNs total;

  bool compute_bound() const { return compute_time > memory_time; }
};

class CostModel {
 public:
  // Tensor-parallel degrees accepted by Create.
  static constexpr int32_t kMaxTensorParallel = 8;

  // Validates and builds. InvalidArgument naming the field and value when: `tp` is not 1, 2, 4
  // or 8; `tp` does not divide the model's KV heads; a preset field is not positive; an option
  // is out of range; or the model does not fit (no KV token left), naming model, gpu and tp.
  [[nodiscard]] static StatusOr<CostModel> Create(const ModelPreset& model, const GpuPreset& gpu,
                                                  int32_t tp, const CostModelOptions& options = {});
  // As Create, for built-in presets.
  [[nodiscard]] static StatusOr<CostModel> Create(ModelPresetId model, GpuPresetId gpu, int32_t tp,
                                                  const CostModelOptions& options = {});
  // As Create, looking both presets up by name; NotFound for an unknown name.
  [[nodiscard]] static StatusOr<CostModel> CreateByName(std::string_view model,
                                                        std::string_view gpu, int32_t tp,
                                                        const CostModelOptions& options = {});

  // 2 (K and V) * layers * kv_heads * head_dim * dtype_bytes, over all tp GPUs together.
  int64_t kv_bytes_per_token() const { return kv_bytes_per_token_; }
  // num_params * dtype_bytes, over all tp GPUs together.
  double weight_bytes() const { return weight_bytes_; }
  // floor((memory * tp * memory_fraction - weight_bytes - reserve * tp) / kv_bytes_per_token);
  // always >= 1.
  int64_t kv_capacity_tokens() const { return kv_capacity_tokens_; }

  // The effective bandwidth of one GPU's host link for KV loads, bytes/s:
  // gpu.host_link_bytes_per_s * options.host_link_efficiency.
  double host_link_bytes_per_s() const {
    return gpu_.host_link_bytes_per_s * options_.host_link_efficiency;
  }

  // Wall time of moving `tokens` tokens of KV over the host link in one direction (a host-tier
  // load, a stall offload or a prefetch): tokens * kv_bytes_per_token / (tp *
  // host_link_bytes_per_s()), each tensor-parallel GPU moving its shard over its own link,
  // rounded up to whole nanoseconds. Precondition: tokens >= 0.
  TimeNs HostTransferTime(int64_t tokens) const;

  // Wall time of one step. An empty step (no prefill and no decode tokens) costs 0.
  // Precondition: every field of `shape` >= 0, and num_requests >= 1 when tokens > 0.
  TimeNs Estimate(const StepShape& shape) const { return Breakdown(shape).total; }
  // The same estimate with its parts. Same preconditions.
  StepCost Breakdown(const StepShape& shape) const;

  const ModelPreset& model() const { return model_; }
  const GpuPreset& gpu() const { return gpu_; }
  int32_t tp() const { return tp_; }
  const CostModelOptions& options() const { return options_; }

 private:
  CostModel(const ModelPreset& model, const GpuPreset& gpu, int32_t tp,
            const CostModelOptions& options);

  ModelPreset model_;
  GpuPreset gpu_;
  int32_t tp_ = 1;
  CostModelOptions options_;
  int64_t kv_bytes_per_token_ = 0;
  double weight_bytes_ = 0;
  int64_t kv_capacity_tokens_ = 0;
};

}  // namespace agentkv::engine

#endif  // AGENTKV_ENGINE_COST_MODEL_H_
