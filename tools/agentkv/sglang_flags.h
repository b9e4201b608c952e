// SGLang's `python -m sglang.launch_server` and sgl-router's `python -m
// sglang_router.launch_router` flags, as `agentkv emulate` takes them, so that a CI script
// written for SGLang starts the emulators unchanged. The lists are those of SGLang's
// ServerArgs and sgl-router's RouterArgs (docs/EMULATORS.md names the versions read); every
// flag is one of three kinds:
//  - mapped: a flag that changes what the emulator does is an option of `agentkv emulate` under
//    its SGLang name (emulate_command.cc), and is not in these lists;
//  - ignored: a flag that cannot matter to an emulator (kernels, attention and sampling
//    backends, CUDA graphs, quantization, logging, tokenizer and weight loading, ...) is
//    accepted with its values, and named in one startup line;
//  - refused: a flag that would change what the engine or router does in a way the emulator
//    does not model (speculative decoding, LoRA, disaggregation, credentials, ...) is an error
//    naming the flag and why, unless it is given the value that keeps SGLang's default
//    behaviour (`--pp-size 1`, `--backend sglang`).
// A flag in neither SGLang's lists nor the emulator's options is refused by the command line
// parser, naming it.
#ifndef AGENTKV_TOOLS_AGENTKV_SGLANG_FLAGS_H_
#define AGENTKV_TOOLS_AGENTKV_SGLANG_FLAGS_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "agentkv/base/status.h"

namespace agentkv::tools {

// The values a flag takes: none (store_true), one, or one or more (nargs "+").
enum class FlagArity : uint8_t { kNone, kOne, kMany };

struct ForeignFlag {
  // Its names, comma-separated, SGLang's primary name first ("--tp-size,--tensor-parallel-size").
  std::string_view names;
  FlagArity arity = FlagArity::kNone;
  // Why the emulator refuses it; empty for an ignored flag.
  std::string_view refusal;
  // For a refused flag of one value: the value that keeps SGLang's default behaviour, accepted
  // (and ignored); empty when there is none.
  std::string_view accepted_value;
};

// SGLang's launch_server flags that `emulate engine` and `emulate fleet` do not map.
std::span<const ForeignFlag> LaunchServerFlags();
// sgl-router's launch_router flags that `emulate router` (and, prefixed with "--router-",
// `emulate fleet`, as sglang_router.launch_server takes them) do not map.
std::span<const ForeignFlag> LaunchRouterFlags();

// The foreign flags of one command line: registered with CLI11, recorded as they are parsed.
// Not copyable (CLI11 holds callbacks into it).
class ForeignFlags {
 public:
  ForeignFlags() = default;
  ForeignFlags(const ForeignFlags&) = delete;
  ForeignFlags& operator=(const ForeignFlags&) = delete;

  // Adds each of `flags` to `app`, hidden from --help, every name with "--" replaced by
  // `prefix` ("--router-"), and each name `app` already has left out (the emulator's own
  // option of that name wins).
  void Add(CLI::App& app, std::span<const ForeignFlag> flags, std::string_view prefix = "--");

  // The ignored flags given, each as on the command line ("--trust-remote-code",
  // "--attention-backend flashinfer"), but a credential's value (a flag named *key*,
  // *password*, *secret*, a database or Redis URL) shown as "***".
  const std::vector<std::string>& ignored() const { return ignored_; }
  // OK, or InvalidArgument naming the first refused flag given, its value (a credential's as
  // "***") and why.
  [[nodiscard]] Status Check() const;

 private:
  void Seen(const ForeignFlag& flag, const std::string& name,
            const std::vector<std::string>& values);

  std::vector<std::string> ignored_;
  std::vector<std::string> refused_;
};

}  // namespace agentkv::tools

#endif  // AGENTKV_TOOLS_AGENTKV_SGLANG_FLAGS_H_
