// LocatedConfig: the reader of `agentkv --config FILE` that refuses what it cannot apply.
//
// CLI11 parses the file (its TOML/INI reader, CLI::ConfigTOML) and applies each item to the
// command of its section; on its own it ignores keys that name no flag, so a typo such as
// `sessionz = 8` under [replay] silently did nothing. This wrapper reads the file with a bound
// (kMaxInputBytes), lets CLI11's own parser turn it into items, finds the line of each item
// by parsing the file's lines one at a time with the same parser, and checks every item
// against the App before CLI11 applies any: an unknown section, an unknown key or a key that
// cannot be set from a file throws CLI::ConfigError naming the file and line, e.g.
//   config file run.toml:3: unknown option "sessionz" in [replay]
// which the command line prints as its one `error:` line (exit code 2). Values are not checked
// here: they reach the same options, conversions and range checks as the command line, so a
// bad value gives the same error naming the flag. Used from main's thread only; holds a
// pointer to the App, which must outlive it.
#ifndef AGENTKV_TOOLS_AGENTKV_CONFIG_FILE_H_
#define AGENTKV_TOOLS_AGENTKV_CONFIG_FILE_H_

#include <CLI/CLI.hpp>
#include <istream>
#include <memory>
#include <vector>

namespace agentkv::tools {

class LocatedConfig : public CLI::ConfigTOML {
 public:
  // `app` is the top-level App whose --config option (App::set_config) names the file.
  explicit LocatedConfig(const CLI::App* app) : app_(app) {}

  // The items of the file read from `input`, as CLI::ConfigTOML parses them. Throws
  // CLI::ConfigError for a file over kMaxInputBytes and for the first item that names no
  // section or no option of its section, or an option that is not configurable.
  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override;

 private:
  const CLI::App* app_;
};

// Makes `app` read --config files through LocatedConfig and reject extras (also CLI11's own
// check, a second line of defence). Call before adding subcommands, which copy both settings.
void UseLocatedConfig(CLI::App& app);

}  // namespace agentkv::tools

#endif  // AGENTKV_TOOLS_AGENTKV_CONFIG_FILE_H_
