// `agentkv cost-model`: what the simulator's cost model predicts for one engine, to compare
// with measurements of a real fleet.
//
// The command is a thin shell over engine::CostModel and engine/cost_model_calibration.h: it
// builds the cost model of --model, --gpu and --tp (the replay's flags) with the built-in
// calibrated constants or those of --cost-model FILE (cost_model_file.h), and prints the KV
// capacity, TTFT at several prompt lengths, prefill throughput, decode ITL at several batch
// sizes and contexts, host-tier reload against recompute for 10K/30K/100K-token prefixes and,
// for the calibrated preset, the validation table. Owned by main; the CLI::App it registers on
// holds pointers into it, so it is neither copyable nor movable.
#ifndef AGENTKV_TOOLS_AGENTKV_COST_MODEL_COMMAND_H_
#define AGENTKV_TOOLS_AGENTKV_COST_MODEL_COMMAND_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace agentkv::tools {

class CostModelCommand {
 public:
  static constexpr const char* kName = "cost-model";

  // Adds the `cost-model` subcommand and its flags to `app`, which must outlive this object.
  explicit CostModelCommand(CLI::App& app);

  CostModelCommand(const CostModelCommand&) = delete;
  CostModelCommand& operator=(const CostModelCommand&) = delete;

  // Whether the command line selected this subcommand (valid after app.parse).
  bool selected() const { return command_->parsed(); }

  // Prints the tables on stdout and returns the process exit code: 0 on success, 2 for bad
  // flags or a bad cost-model file (one `agentkv cost-model: error:` line on stderr).
  int Run() const;

 private:
  CLI::App* command_ = nullptr;
  std::string model_ = "llama-3.1-8b";
  std::string gpu_ = "h100";
  int32_t tp_ = 1;
  std::string cost_model_path_;
  int64_t chunked_prefill_size_ = 8192;
};

}  // namespace agentkv::tools

#endif  // AGENTKV_TOOLS_AGENTKV_COST_MODEL_COMMAND_H_
