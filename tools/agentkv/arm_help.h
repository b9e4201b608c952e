// The "Arms" section of a command's --help, built from the command's own list of default arms
// (sim::DefaultArmNames, sim::AgenticCurveArmNames), so that the help names exactly the arms
// the command runs when --arms is not given, in the order it runs them. Each arm is explained
// by the command's table of help lines, or, for a default arm the table lacks, by its
// ArmSpec::Description(); the table's other entries follow as arms that run only when named.
// Pure functions; thread-safe.
#ifndef AGENTKV_TOOLS_AGENTKV_ARM_HELP_H_
#define AGENTKV_TOOLS_AGENTKV_ARM_HELP_H_

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace agentkv::tools {

// One arm (or arm feature) and what it does. `help` may span lines ('\n'); --help indents
// every line under the first.
struct ArmHelp {
  std::string_view name;
  std::string_view help;
};

// The section: `heading` and a colon on the first line, then one entry per default arm in
// order, then `others_heading` and a colon and the entries of `explained` whose name is not a
// default (none: no such heading). An entry is two spaces, the name padded to 18 columns and
// the help, the help's later lines indented to its first; a longer name puts the help on the
// next line. Ends with a newline.
std::string FormatArmsHelp(std::string_view heading, const std::vector<std::string>& defaults,
                           std::span<const ArmHelp> explained, std::string_view others_heading);

}  // namespace agentkv::tools

#endif  // AGENTKV_TOOLS_AGENTKV_ARM_HELP_H_
