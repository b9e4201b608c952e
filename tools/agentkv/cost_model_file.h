// ReadCostModelFile: measured cost-model constants from a TOML or INI file, in place of the
// built-in calibrated ones.
//
// A user who has measured their own fleet (prefill MFU, decode MFU, HBM and host-link
// efficiency, step overhead) writes the values in a small file, top level or under a
// [cost-model] section, one `key = value` line each:
//   [cost-model]
//   mfu = 0.62
//   decode_mfu = 0.25
//   host_link_efficiency = 0.6
//   overlap_host_load = false
// CLI11's TOML/INI reader (CLI::ConfigTOML) parses the file; this function maps each key onto
// engine::CostModelOptions, starting from `base`, so that a key the file leaves out keeps its
// value. The keys are listed by CostModelFileKeys(). Used by `agentkv cost-model` and
// `agentkv replay --cost-model FILE`. Reads the file; otherwise stateless.
#ifndef AGENTKV_TOOLS_AGENTKV_COST_MODEL_FILE_H_
#define AGENTKV_TOOLS_AGENTKV_COST_MODEL_FILE_H_

#include <span>
#include <string>
#include <string_view>

#include "agentkv/base/status.h"
#include "agentkv/engine/cost_model.h"

namespace agentkv::tools {

// The keys a cost-model file may set, with their meaning and unit, in the order `agentkv
// cost-model --help` lists them.
struct CostModelFileKey {
  std::string_view name;
  std::string_view meaning;
};
std::span<const CostModelFileKey> CostModelFileKeys();

// `base` with every key of the file at `path` applied, validated (CostModelOptions::Validate).
// InvalidArgument naming the file and the offending key and value for: a file that cannot be
// read or parsed; a section other than [cost-model]; an unknown key; a key given twice; a
// value that is not one number (or true/false for overlap_host_load); a value out of its
// range.
[[nodiscard]] StatusOr<engine::CostModelOptions> ReadCostModelFile(
    const std::string& path, const engine::CostModelOptions& base);

}  // namespace agentkv::tools

#endif  // AGENTKV_TOOLS_AGENTKV_COST_MODEL_FILE_H_
