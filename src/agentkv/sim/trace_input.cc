// Invariants: none beyond the header's contract. The file system is used only through its
// error_code overloads, so no std::filesystem exception escapes.
#include "agentkv/sim/trace_input.h"

#include <boost/json/serialize.hpp>
#include <cerrno>
#include <filesystem>
#include <system_error>

namespace agentkv::sim {

std::string Quote(const boost::json::value& value) {
  std::string text = boost::json::serialize(value);
  if (text.size() > kMaxQuotedChars) text = text.substr(0, kMaxQuotedChars) + "...";
  return text;
}

StatusOr<std::ifstream> OpenTraceFile(const std::string& path, std::ios::openmode mode) {
  std::error_code fs_error;
  if (std::filesystem::is_directory(path, fs_error)) {
    return InvalidArgumentError("cannot read trace file \"" + path + "\": Is a directory");
  }
  errno = 0;
  std::ifstream in(path, mode);
  if (!in.is_open()) {
    const int error = errno;
    // std::generic_category().message is the thread-safe spelling of strerror.
    return NotFoundError("cannot open trace file \"" + path + "\": " +
                         (error != 0 ? std::generic_category().message(error) : "open failed"));
  }
  return in;
}

Status ForEachJsonLine(
    std::istream& in, std::string_view source,
    const std::function<Status(std::string_view line, int64_t line_number)>& visit) {
  std::string line;
  int64_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (line.find_first_not_of(" \t\r\n\f\v") == std::string::npos) continue;  // Blank.
    const Status status = visit(line, line_number);
    if (!status.ok()) {
      return InvalidArgumentError(std::string(source) + ":" + std::to_string(line_number) + ": " +
                                  status.message());
    }
  }
  if (in.bad()) {
    return UnavailableError("error reading trace " + std::string(source) + " after line " +
                            std::to_string(line_number));
  }
  return Status::Ok();
}

}  // namespace agentkv::sim
