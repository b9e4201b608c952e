// Word wrapping for the reports' terminal text (the replay table's arm legend, the replay's and
// the capacity run's verdicts), so that no line runs past the table it explains. Pure; thread-safe.
#ifndef AGENTKV_REPORT_INTERNAL_TEXT_WRAP_H_
#define AGENTKV_REPORT_INTERNAL_TEXT_WRAP_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace agentkv::report::internal {

// `text` broken at spaces into lines of at most `width` bytes (columns, for ASCII text): the
// first line starts with `first`, every other with `rest`. A word longer than the room stands
// alone on its line (the only way a line may exceed `width`). Runs of spaces collapse; trailing
// spaces are dropped. One line (`first` alone, trimmed) for empty text.
std::vector<std::string> WrapText(std::string_view text, size_t width, std::string_view first,
                                  std::string_view rest);

// The longest of `lines`, in bytes (0 for none).
size_t WidestLine(const std::vector<std::string>& lines);

// `title`, then one entry per (label, text) pair: "  " and the label padded to the longest,
// "  ", and the text wrapped to `width` columns under itself, with at least `min_text` columns
// of text beside the labels however narrow `width` is (the arm legend and the verdicts).
std::vector<std::string> LabelledLines(
    const std::string& title, const std::vector<std::pair<std::string, std::string>>& items,
    size_t width, size_t min_text = 40);

}  // namespace agentkv::report::internal

#endif  // AGENTKV_REPORT_INTERNAL_TEXT_WRAP_H_
