#include "agentkv/report/internal/html_page.h"

#include "agentkv/report/internal/svg_chart.h"

namespace agentkv::report::internal {
namespace {

constexpr const char* kStyle = R"(
body { font-family: system-ui, sans-serif; font-size: 14px; margin: 1.2em auto; padding: 0 16px;
  max-width: 1560px; color: #222; }
h1 { font-size: 1.45em; margin: 0 0 0.4em; }
h2 { font-size: 1.15em; margin: 1.5em 0 0.5em; border-bottom: 1px solid #ddd; }
dl.setup { display: flex; flex-wrap: wrap; gap: 2px 28px; margin: 0; }
dl.setup div { display: flex; gap: 0.5em; } dl.setup dt { color: #666; } dl.setup dd { margin: 0; }
.table-box { overflow-x: auto; max-width: 100%; }
table.arms { border-collapse: separate; border-spacing: 0; font-size: 12px; line-height: 1.25; }
table.arms th, table.arms td { padding: 2px 3px; }
table.arms thead th { vertical-align: bottom; text-align: right; font-weight: normal;
  border-bottom: 2px solid #999; }
table.arms thead th.metric { text-align: left; }
table.arms th[scope=row] { text-align: left; font-weight: normal; min-width: 9em;
  vertical-align: top; }
table.arms td { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap;
  vertical-align: top; }
table.arms td .d { display: block; font-size: 10.5px; }
table.arms td.over { font-size: 10.5px; color: #555; }
table.arms tbody tr:nth-child(even) td, table.arms tbody tr:nth-child(even) th { background: #f8f8f8; }
table.arms tr.section th { text-align: left; font-weight: bold; background: #eceff3; }
table.arms tr > :first-child { position: sticky; left: 0; background: #fff; }
.good { color: #1b7f3b; } .bad { color: #b3261e; } .flat { color: #777; }
.swatch { display: inline-block; width: 0.9em; height: 0.9em; margin-right: 0.4em; }
figure { margin: 1em 0 1.6em; } figcaption { font-weight: bold; margin-bottom: 0.4em; }
figcaption span { font-weight: normal; color: #555; }
.pair { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(100%, 560px), 1fr));
  gap: 0 28px; }
.multiples { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(100%, 290px), 1fr));
  gap: 8px 14px; }
svg { display: block; max-width: 100%; height: auto; }
section.verdict { border-left: 4px solid #1b7f3b; background: #f3f7f4; padding: 0.2em 1em 0.6em;
  margin: 0 0 1em; }
section.verdict h2 { margin: 0.4em 0 0.2em; border: none; } p.lead { margin: 0 0 0.4em; color: #555; }
dl.verdict, dl.glossary { margin: 0; }
dl.verdict div, dl.glossary div { display: grid; grid-template-columns: 9em 1fr; gap: 0 1em;
  padding: 1px 0; }
dl.glossary div { grid-template-columns: 15em 1fr; }
dl.verdict dt, dl.glossary dt { color: #555; } dl.verdict dd, dl.glossary dd { margin: 0; }
dl.verdict div:first-child dd { font-weight: bold; }
)";

}  // namespace

std::string PageStart(const std::string& title) {
  std::string html = "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n";
  html += "<head>\n<meta charset=\"utf-8\"/>\n";
  html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n";
  html += "<title>" + Escape(title) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n";
  return html + "<h1>" + Escape(title) + "</h1>\n";
}

std::string PageEnd() { return "</body>\n</html>\n"; }

std::string Figure(const std::string& caption, const std::string& note, const std::string& body) {
  std::string html = "<figure>\n<figcaption>" + Escape(caption);
  if (!note.empty()) html += " <span>" + note + "</span>";
  return html + "</figcaption>\n" + body + "</figure>\n";
}

}  // namespace agentkv::report::internal
