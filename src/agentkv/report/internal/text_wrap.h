// Word wrapping for the reports' terminal text (the replay table's arm legend and verdict), so
// that no line runs past the table it explains. Pure; thread-safe.
#ifndef AGENTKV_REPORT_INTERNAL_TEXT_WRAP_H_
#define AGENTKV_REPORT_INTERNAL_TEXT_WRAP_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace agentkv::report::internal {

// `text` broken at spaces into lines of at most `width` bytes (columns, for ASCII text): the
// first line starts with `first`, every other with `rest`. A word longer than the room stands
// alone on its line (the only way a line may exceed `width`). Runs of spaces collapse; trailing
// spaces are dropped. One line (`first` alone, trimmed) for empty text.
std::vector<std::string> WrapText(std::string_view text, size_t width, std::string_view first,
                                  std::string_view rest);

}  // namespace agentkv::report::internal

#endif  // AGENTKV_REPORT_INTERNAL_TEXT_WRAP_H_
