// Invariants: every key of kKeys is applied by exactly one branch of Apply; a value reaches
// CostModelOptions only after it parsed completely as a finite number (or a boolean), and the
// result is returned only after CostModelOptions::Validate accepted it.
#include "tools/agentkv/cost_model_file.h"

#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <array>
#include <charconv>
#include <cmath>
#include <exception>
#include <optional>
#include <set>
#include <vector>

namespace agentkv::tools {
namespace {

constexpr std::string_view kSection = "cost-model";

constexpr std::array<CostModelFileKey, 9> kKeys = {{
    {"mfu", "share of peak FLOP/s reached by prefill, (0, 1]"},
    {"decode_mfu", "share of peak FLOP/s reached by decode, (0, 1]"},
    {"mbu", "share of peak HBM bandwidth reached, (0, 1]"},
    {"host_link_efficiency", "share of the host link reached by KV loads, (0, 1]"},
    {"overlap_host_load", "host loads overlap compute layer by layer, true or false"},
    {"step_overhead_us", "fixed cost of every step, microseconds, [0, 1e6]"},
    {"allreduce_latency_us", "one tensor-parallel all-reduce, microseconds, [0, 1000]"},
    {"memory_fraction", "share of GPU memory for weights and KV (mem_fraction_static), (0, 1]"},
    {"activation_reserve_gib", "memory held back per GPU for activations, GiB, [0, 1024]"},
}};

std::optional<double> ParseNumber(std::string_view text) {
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || ptr != end || !std::isfinite(value)) return std::nullopt;
  return value;
}

std::optional<bool> ParseBool(std::string_view text) {
  if (text == "true" || text == "1") return true;
  if (text == "false" || text == "0") return false;
  return std::nullopt;
}

Status BadValue(const std::string& path, std::string_view key, std::string_view value,
                std::string_view expected) {
  return InvalidArgumentError(
      fmt::format("cost model file {}: {} = \"{}\" is not {}", path, key, value, expected));
}

Status Apply(const std::string& path, std::string_view key, const std::string& value,
             engine::CostModelOptions& options) {
  bool known = false;
  std::string names;
  for (const CostModelFileKey& k : kKeys) {
    known = known || k.name == key;
    names += fmt::format(" {}", k.name);
  }
  if (!known) {
    return InvalidArgumentError(
        fmt::format("cost model file {}: unknown key \"{}\"; known:{}", path, key, names));
  }
  if (key == "overlap_host_load") {
    const std::optional<bool> flag = ParseBool(value);
    if (!flag) return BadValue(path, key, value, "true or false");
    options.overlap_host_load = *flag;
    return Status::Ok();
  }
  const std::optional<double> number = ParseNumber(value);
  if (!number) return BadValue(path, key, value, "a number");
  const double v = *number;
  if (key == "mfu") {
    options.mfu = v;
  } else if (key == "decode_mfu") {
    options.decode_mfu = v;
  } else if (key == "mbu") {
    options.mbu = v;
  } else if (key == "host_link_efficiency") {
    options.host_link_efficiency = v;
  } else if (key == "memory_fraction") {
    options.memory_fraction = v;
  } else if (key == "step_overhead_us" || key == "allreduce_latency_us" ||
             key == "activation_reserve_gib") {
    // Checked here, with the ranges Validate applies, so that the error names the file's key
    // and unit and the conversion to integer nanoseconds or bytes cannot overflow.
    const double limit =
        key == "step_overhead_us" ? 1e6 : (key == "allreduce_latency_us" ? 1e3 : 1024.0);
    if (v < 0 || v > limit) {
      return InvalidArgumentError(fmt::format(
          "cost model file {}: {} = {} is out of range [0, {:g}]", path, key, value, limit));
    }
    if (key == "step_overhead_us") {
      options.step_overhead = TimeNs(static_cast<int64_t>(std::llround(v * 1e3)));
    } else if (key == "allreduce_latency_us") {
      options.allreduce_latency = TimeNs(static_cast<int64_t>(std::llround(v * 1e3)));
    } else {
      options.activation_reserve_bytes_per_gpu =
          static_cast<int64_t>(std::llround(v * static_cast<double>(int64_t{1} << 30)));
    }
  } else {
    // Every key of kKeys has a branch above (the invariant at the top of this file).
    return InternalError(fmt::format("cost model file key \"{}\" has no field", key));
  }
  return Status::Ok();
}

}  // namespace

std::span<const CostModelFileKey> CostModelFileKeys() { return kKeys; }

StatusOr<engine::CostModelOptions> ReadCostModelFile(const std::string& path,
                                                     const engine::CostModelOptions& base) {
  std::vector<CLI::ConfigItem> items;
  try {
    items = CLI::ConfigTOML().from_file(path);
  } catch (const std::exception& e) {
    return InvalidArgumentError(fmt::format("cost model file {}: {}", path, e.what()));
  }
  engine::CostModelOptions options = base;
  std::set<std::string> seen;
  for (const CLI::ConfigItem& item : items) {
    // CLI11 marks entering and leaving a section with items named "++" and "--".
    if (item.name == "++" || item.name == "--") continue;
    const bool in_section = item.parents.size() == 1 && item.parents.front() == kSection;
    if (!item.parents.empty() && !in_section) {
      std::string section;
      for (const std::string& parent : item.parents) {
        section += (section.empty() ? "" : ".") + parent;
      }
      return InvalidArgumentError(fmt::format(
          "cost model file {}: unknown section [{}] (key \"{}\"); use [{}] or no section", path,
          section, item.name, kSection));
    }
    if (!seen.insert(item.name).second) {
      return InvalidArgumentError(
          fmt::format("cost model file {}: key \"{}\" is given twice", path, item.name));
    }
    if (item.inputs.size() != 1) {
      std::string joined;
      for (const std::string& input : item.inputs) joined += (joined.empty() ? "" : ", ") + input;
      return BadValue(path, item.name, joined, "one value");
    }
    AGENTKV_RETURN_IF_ERROR(Apply(path, item.name, item.inputs.front(), options));
  }
  if (const Status valid = options.Validate(); !valid.ok()) {
    return InvalidArgumentError(fmt::format("cost model file {}: {}", path, valid.message()));
  }
  return options;
}

}  // namespace agentkv::tools
