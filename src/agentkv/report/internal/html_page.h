// The page around the reports' inline SVG charts (the replay's and the capacity search's HTML):
// an XHTML-style HTML5 document with one inline stylesheet, readable offline and parseable as
// XML, and the figure that holds a chart with its caption. It loads nothing (no scripts, fonts,
// images or links). Pure functions; thread-safe.
#ifndef AGENTKV_REPORT_INTERNAL_HTML_PAGE_H_
#define AGENTKV_REPORT_INTERNAL_HTML_PAGE_H_

#include <string>

namespace agentkv::report::internal {

// The page up to and including its <h1>: doctype, head (charset, viewport, `title` escaped,
// the stylesheet: setup lists `dl.setup`, tables `table.arms`, `.swatch`, `.pair` for two
// charts side by side, `.multiples`, the verdict box `section.verdict` with `dl.verdict`, and
// `dl.glossary`) and the opening <body>.
std::string PageStart(const std::string& title);

// Closes what PageStart opened.
std::string PageEnd();

// A <figure> of `body` (a chart) captioned `caption` (escaped) and `note` (HTML, not escaped
// again; none when empty).
std::string Figure(const std::string& caption, const std::string& note, const std::string& body);

}  // namespace agentkv::report::internal

#endif  // AGENTKV_REPORT_INTERNAL_HTML_PAGE_H_
