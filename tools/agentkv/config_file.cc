// Invariants: from_config returns exactly the items CLI::ConfigTOML makes of the file, or
// throws before CLI11 applies any of them; the file's text is never held beyond
// kMaxInputBytes. Lines are found only for an item that is refused, by parsing the file's
// lines one at a time with the same CLI11 parser (no second grammar of the format here).
#include "tools/agentkv/config_file.h"

#include <fmt/core.h>

#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "agentkv/base/bounds.h"

namespace agentkv::tools {
namespace {

constexpr size_t kChunkBytes = size_t{64} << 10;

// Why an item cannot be applied; `at_section` when the section, not the key, is at fault.
struct Problem {
  std::string what;
  bool at_section = false;
};

std::string Join(const std::vector<std::string>& parts, size_t count) {
  std::string joined;
  for (size_t i = 0; i < count && i < parts.size(); ++i) {
    if (i > 0) joined += '.';
    joined += parts[i];
  }
  return joined;
}

bool IsSectionMarker(const CLI::ConfigItem& item) { return item.name == "--" || item.name == "++"; }

const CLI::App* FindSubcommand(const CLI::App* app, const std::string& name) {
  try {
    return app->get_subcommand(name);
  } catch (const CLI::OptionNotFound&) {
    return nullptr;
  }
}

// The option CLI11 applies `name` to in `app`, looked up in CLI11's order.
const CLI::Option* FindOption(const CLI::App* app, const std::string& name) {
  const CLI::Option* option = app->get_option_no_throw("--" + name);
  if (option == nullptr && name.size() == 1) option = app->get_option_no_throw("-" + name);
  if (option == nullptr) option = app->get_option_no_throw(name);
  return option;
}

// What one line of the file is, as CLI11's parser sees the line alone.
struct LineKind {
  // The item name it starts ("" for none: blank, comment, header or continuation).
  std::string key;
  // For a section header, its section ("a.b" for [a.b]); "" otherwise.
  std::string section;
};

// The whole of `input`; a ConfigError naming `file` past kMaxInputBytes.
std::string ReadBounded(std::istream& input, const std::string& file) {
  std::string text;
  std::vector<char> chunk(kChunkBytes);
  while (input.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) ||
         input.gcount() > 0) {
    text.append(chunk.data(), static_cast<size_t>(input.gcount()));
    if (static_cast<int64_t>(text.size()) > kMaxInputBytes) {
      throw CLI::ConfigError(
          fmt::format("config file {}: larger than {} bytes", file, kMaxInputBytes));
    }
  }
  return text;
}

// Why `item` cannot be applied to `app`: an unknown section or option, or one that cannot be
// set in a config file; nullopt when it can.
std::optional<Problem> ProblemOf(const CLI::App* app, const CLI::ConfigItem& item) {
  const CLI::App* target = app;
  for (const std::string& parent : item.parents) {
    target = FindSubcommand(target, parent);
    if (target == nullptr) {
      return Problem{fmt::format("unknown section [{}]", Join(item.parents, item.parents.size())),
                     /*at_section=*/true};
    }
  }
  if (IsSectionMarker(item)) return std::nullopt;
  const CLI::Option* option = FindOption(target, item.name);
  const std::string where =
      item.parents.empty()
          ? "outside any section (a command's flags go under its section, e.g. [replay])"
          : fmt::format("in [{}]", Join(item.parents, item.parents.size()));
  if (option == nullptr) return Problem{fmt::format("unknown option \"{}\" {}", item.name, where)};
  if (!option->get_configurable()) {
    return Problem{
        fmt::format("option \"{}\" {} cannot be set in a config file", item.name, where)};
  }
  return std::nullopt;
}

// What each line of `text` is, parsed alone by `parser` (CLI11's own TOML reader).
std::vector<LineKind> LineKinds(const CLI::ConfigBase& parser, const std::string& text) {
  std::vector<LineKind> lines;
  std::istringstream all(text);
  for (std::string line; std::getline(all, line);) {
    std::istringstream one(line);
    LineKind kind;
    for (const CLI::ConfigItem& item : parser.CLI::ConfigBase::from_config(one)) {
      if (!IsSectionMarker(item)) {
        kind.key = item.name;
        break;
      }
      // A header [a.b] opens [a] and then [a.b]: the line is the deepest one's header.
      const std::string section = Join(item.parents, item.parents.size());
      if (section.size() > kind.section.size()) kind.section = section;
    }
    lines.push_back(std::move(kind));
  }
  return lines;
}

// The line (0-based) of item `k` of `parsed`, matching the items in order to `lines`; with
// `at_section`, the header of its section when it has one before the item.
std::optional<size_t> LineOf(const std::vector<CLI::ConfigItem>& parsed, size_t k,
                             const std::vector<LineKind>& lines, bool at_section) {
  size_t cursor = 0;         // The next line a key item may start on.
  size_t header_cursor = 0;  // The next line a section marker's header may be on.
  std::optional<size_t> found;
  for (size_t i = 0; i <= k; ++i) {
    const CLI::ConfigItem& item = parsed[i];
    const std::string section = Join(item.parents, item.parents.size());
    found.reset();
    if (IsSectionMarker(item)) {
      // Its header, or the header of a section nested in it ([a] is opened by [a.b]).
      for (size_t l = header_cursor; l < lines.size(); ++l) {
        if (lines[l].section == section) {
          found = l;
          header_cursor = l + 1;
          break;
        }
        if (lines[l].section.starts_with(section + ".")) {
          found = l;
          break;
        }
      }
      continue;
    }
    for (size_t l = cursor; l < lines.size(); ++l) {
      if (lines[l].key == item.name) {
        found = l;
        cursor = l + 1;
        break;
      }
    }
    if (i == k && at_section && found.has_value()) {
      // The header of the item's section, when it has one before the item.
      for (size_t l = *found + 1; l-- > 0;) {
        if (lines[l].section == section) {
          found = l;
          break;
        }
      }
    }
  }
  return found;
}

}  // namespace

std::vector<CLI::ConfigItem> LocatedConfig::from_config(std::istream& input) const {
  const CLI::Option* config = app_->get_config_ptr();
  const std::string file =
      config != nullptr && !config->results().empty() ? config->results().front() : "";
  const std::string text = ReadBounded(input, file);
  std::istringstream whole(text);
  std::vector<CLI::ConfigItem> parsed = CLI::ConfigBase::from_config(whole);
  for (size_t k = 0; k < parsed.size(); ++k) {
    const std::optional<Problem> problem = ProblemOf(app_, parsed[k]);
    if (!problem.has_value()) continue;
    const std::optional<size_t> found =
        LineOf(parsed, k, LineKinds(*this, text), problem->at_section);
    const std::string line = found.has_value() ? fmt::format(":{}", *found + 1) : "";
    throw CLI::ConfigError(fmt::format("config file {}{}: {}", file, line, problem->what));
  }
  return parsed;
}

void UseLocatedConfig(CLI::App& app) {
  app.config_formatter(std::make_shared<LocatedConfig>(&app));
  app.allow_config_extras(CLI::config_extras_mode::error);
}

}  // namespace agentkv::tools
