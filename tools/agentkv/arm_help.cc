#include "tools/agentkv/arm_help.h"

#include <algorithm>

#include "agentkv/base/status.h"
#include "agentkv/sim/replay/replay_arms.h"

namespace agentkv::tools {
namespace {

// Two spaces, the name in 18 columns, a space: where every help line starts.
constexpr size_t kNameWidth = 18;
constexpr size_t kHelpColumn = 2 + kNameWidth + 1;

void AppendEntry(std::string_view name, std::string_view help, std::string& out) {
  out += "  ";
  out += name;
  if (name.size() <= kNameWidth) {
    out.append(kNameWidth + 1 - name.size(), ' ');
  } else {
    out += '\n';
    out.append(kHelpColumn, ' ');
  }
  for (size_t start = 0;;) {
    const size_t end = help.find('\n', start);
    out += help.substr(start, end - start);
    out += '\n';
    if (end == std::string_view::npos) break;
    start = end + 1;
    out.append(kHelpColumn, ' ');
  }
}

}  // namespace

std::string FormatArmsHelp(std::string_view heading, const std::vector<std::string>& defaults,
                           std::span<const ArmHelp> explained, std::string_view others_heading) {
  std::string out = std::string(heading) + ":\n";
  for (const std::string& name : defaults) {
    const auto it = std::find_if(explained.begin(), explained.end(),
                                 [&name](const ArmHelp& e) { return e.name == name; });
    if (it != explained.end()) {
      AppendEntry(name, it->help, out);
      continue;
    }
    StatusOr<sim::ArmSpec> arm = sim::ParseArm(name);
    AGENTKV_CHECK(arm.ok()) << "default arm " << name << ": " << arm.status();
    AppendEntry(name, arm->Description(), out);
  }
  bool others = false;
  for (const ArmHelp& entry : explained) {
    if (std::find(defaults.begin(), defaults.end(), entry.name) != defaults.end()) continue;
    if (!others) out += std::string(others_heading) + ":\n";
    others = true;
    AppendEntry(entry.name, entry.help, out);
  }
  return out;
}

}  // namespace agentkv::tools
