// Invariants: input is read in chunks of kChunkBytes and handed on in pieces that never hold
// a newline; no piece of a line is handed on once the line has passed its bound, and nothing
// of a line is kept except what the JSON parser builds from it. The file system is used only
// through its error_code overloads and Boost.JSON only through error codes; the one thrower,
// Boost.Iostreams' gzip decompressor, throws only out of the read in ScanLines, which catches
// it, so no exception escapes (an allocation failure aside).
#include "agentkv/sim/workload/trace_input.h"

#include <boost/iostreams/filter/gzip.hpp>
#include <boost/iostreams/filtering_stream.hpp>
#include <boost/json/basic_parser_impl.hpp>
#include <boost/json/stream_parser.hpp>
#include <cerrno>
#include <exception>
#include <filesystem>
#include <optional>
#include <system_error>
#include <utility>
#include <vector>

namespace agentkv::sim {
namespace {

constexpr size_t kChunkBytes = size_t{64} << 10;
// What the readers skip as a blank line (JSON whitespace, plus form feed and vertical tab).
constexpr std::string_view kBlank = " \t\r\n\f\v";
// What JSON allows around a value.
constexpr std::string_view kJsonWhitespace = " \t\r\n";

Status Located(std::string_view source, int64_t line, const Status& status) {
  return Status(status.code(),
                std::string(source) + ":" + std::to_string(line) + ": " + status.message());
}

// Why the gzip decompressor stopped, in words.
std::string GzipFailure(const boost::iostreams::gzip_error& error) {
  namespace gzip = boost::iostreams::gzip;
  namespace zlib = boost::iostreams::zlib;
  switch (error.error()) {
    case gzip::zlib_error: {
      const int code = error.zlib_error_code();
      if (code == zlib::data_error) return "corrupt gzip data";
      if (code == zlib::buf_error) return "truncated gzip data";
      if (code == zlib::mem_error) return "out of memory";
      return "zlib error " + std::to_string(code);
    }
    case gzip::bad_crc:
      return "gzip checksum mismatch (corrupt data)";
    case gzip::bad_length:
      return "gzip length mismatch (corrupt data)";
    case gzip::bad_header:
      return "bad gzip header";
    case gzip::bad_footer:
      return "bad gzip footer (truncated data)";
    default:
      return "gzip error " + std::to_string(error.error());
  }
}

// Reads up to `size` bytes of `in` into `buffer` and returns how many; stops at the end of
// `in`. A decompressing stream throws when its data is bad: InvalidArgument "cannot
// decompress: <reason>".
StatusOr<size_t> ReadChunk(std::istream& in, char* buffer, size_t size) {
  try {
    in.read(buffer, static_cast<std::streamsize>(size));
  } catch (const boost::iostreams::gzip_error& error) {
    return InvalidArgumentError("cannot decompress: " + GzipFailure(error));
  } catch (const std::exception& error) {
    return UnavailableError(std::string("cannot read: ") + error.what());
  }
  return static_cast<size_t>(in.gcount());
}

// Reads `in` to its end in chunks and hands every line to `sink` in pieces:
// sink.Piece(piece, line, offset) for bytes of line `line` (`offset` is where the piece starts
// in its line), sink.EndLine(line, length) after each newline, and sink.EndInput(line, length)
// for the last line, which has no newline and may be empty. The first non-OK status of the
// sink stops the scan and comes back located at its line; so does a line past
// `max_line_bytes`, before any of its bytes past the bound are handed on.
template <typename Sink>
Status ScanLines(std::istream& in, std::string_view source, int64_t max_line_bytes, Sink& sink) {
  AGENTKV_CHECK(max_line_bytes >= 1) << max_line_bytes;
  std::vector<char> chunk(kChunkBytes);
  int64_t line = 1;
  int64_t length = 0;  // Bytes of the current line so far.
  while (true) {
    StatusOr<size_t> read = ReadChunk(in, chunk.data(), chunk.size());
    if (!read.ok()) return Located(source, line, read.status());
    const size_t got = *read;
    if (got == 0) break;
    std::string_view rest(chunk.data(), got);
    while (!rest.empty()) {
      const size_t newline = rest.find('\n');
      const std::string_view piece = rest.substr(0, newline);
      if (static_cast<int64_t>(piece.size()) > max_line_bytes - length) {
        return Located(
            source, line,
            InvalidArgumentError("line longer than " + std::to_string(max_line_bytes) + " bytes"));
      }
      if (!piece.empty()) {
        if (Status s = sink.Piece(piece, line, length); !s.ok()) return Located(source, line, s);
        length += static_cast<int64_t>(piece.size());
      }
      if (newline == std::string_view::npos) break;
      if (Status s = sink.EndLine(line, length); !s.ok()) return Located(source, line, s);
      ++line;
      length = 0;
      rest.remove_prefix(newline + 1);
    }
  }
  if (in.bad()) {
    return UnavailableError("error reading trace " + std::string(source) + " at line " +
                            std::to_string(line));
  }
  if (Status s = sink.EndInput(line, length); !s.ok()) return Located(source, line, s);
  return Status::Ok();
}

// JSON Lines: one value per non-blank line, parsed as its pieces arrive.
class JsonLinesSink {
 public:
  using Visit = std::function<Status(const boost::json::value&, int64_t)>;
  explicit JsonLinesSink(const Visit& visit) : visit_(visit) {}

  Status Piece(std::string_view piece, int64_t /*line*/, int64_t /*offset*/) {
    if (blank_) {
      const size_t first = piece.find_first_not_of(kBlank);
      if (first == std::string_view::npos) return Status::Ok();
      blank_ = false;
      piece.remove_prefix(first);
    }
    std::error_code ec;
    parser_.write(piece.data(), piece.size(), ec);
    if (ec) return Malformed(ec);
    return Status::Ok();
  }

  Status EndLine(int64_t line, int64_t /*length*/) {
    if (blank_) return Status::Ok();
    blank_ = true;
    std::error_code ec;
    parser_.finish(ec);
    if (ec) return Malformed(ec);
    const boost::json::value value = parser_.release();
    parser_.reset();
    return visit_(value, line);
  }

  Status EndInput(int64_t line, int64_t length) { return EndLine(line, length); }

 private:
  Status Malformed(const std::error_code& ec) {
    parser_.reset();
    return InvalidArgumentError("malformed JSON: " + ec.message());
  }

  const Visit& visit_;
  boost::json::stream_parser parser_;
  // No byte but blanks on the current line so far.
  bool blank_ = true;
};

// One JSON value over all lines; only whitespace may follow it.
class JsonDocumentSink {
 public:
  Status Piece(std::string_view piece, int64_t /*line*/, int64_t offset) {
    return Feed(piece, offset);
  }

  Status EndLine(int64_t /*line*/, int64_t length) {
    // The newline is whitespace that ends a number or a literal on this line.
    return Feed("\n", length);
  }

  Status EndInput(int64_t /*line*/, int64_t length) {
    if (parser_.done()) return Status::Ok();
    std::error_code ec;
    parser_.finish(ec);
    if (ec) return Malformed(length, ec.message());
    return Status::Ok();
  }

  boost::json::value Release() { return parser_.release(); }

 private:
  Status Feed(std::string_view piece, int64_t offset) {
    size_t used = 0;
    if (!parser_.done()) {
      std::error_code ec;
      used = parser_.write_some(piece.data(), piece.size(), ec);
      if (ec) return Malformed(offset + static_cast<int64_t>(used), ec.message());
    }
    if (const size_t extra = piece.find_first_not_of(kJsonWhitespace, used);
        extra != std::string_view::npos) {
      return Malformed(offset + static_cast<int64_t>(extra),
                       "extra data after the top-level value");
    }
    return Status::Ok();
  }

  // `offset`: 0-based byte of the current line where parsing stopped.
  static Status Malformed(int64_t offset, std::string_view reason) {
    return InvalidArgumentError("malformed JSON at column " + std::to_string(offset + 1) + ": " +
                                std::string(reason));
  }

  boost::json::stream_parser parser_;
};

// One step of a JSON path: a member key, or an array index.
struct PathStep {
  bool is_index = false;
  size_t index = 0;
  std::string key;
};

// "requests[1].requests[0].hash_ids" -> requests, [1], requests, [0], hash_ids; "" -> none.
// Keys may not contain '.' or '['; nullopt for a path that does not parse.
std::optional<std::vector<PathStep>> ParsePath(std::string_view path) {
  std::vector<PathStep> steps;
  size_t i = 0;
  while (i < path.size()) {
    if (!steps.empty()) {
      if (path[i] == '.') {
        ++i;
      } else if (path[i] != '[') {
        return std::nullopt;
      }
    }
    if (i < path.size() && path[i] != '[') {
      const size_t end = path.find_first_of(".[", i);
      steps.push_back(PathStep{false, 0, std::string(path.substr(i, end - i))});
      i = end == std::string_view::npos ? path.size() : end;
    }
    while (i < path.size() && path[i] == '[') {
      const size_t close = path.find(']', i);
      if (close == std::string_view::npos || close == i + 1) return std::nullopt;
      size_t index = 0;
      for (size_t d = i + 1; d < close; ++d) {
        if (path[d] < '0' || path[d] > '9' || index > (size_t{1} << 40)) return std::nullopt;
        index = index * 10 + static_cast<size_t>(path[d] - '0');
      }
      steps.push_back(PathStep{true, index, ""});
      i = close + 1;
    }
  }
  return steps;
}

// A boost::json::basic_parser handler that follows the JSON path of every value and keeps the
// line where the value at `target` (or, when there is none, at its longest prefix that exists)
// begins; the last such value when keys repeat, as Boost.JSON keeps the last of equal keys.
class PathLineHandler {
 public:
  static constexpr size_t max_object_size = static_cast<size_t>(-1);
  static constexpr size_t max_array_size = static_cast<size_t>(-1);
  static constexpr size_t max_key_size = static_cast<size_t>(-1);
  static constexpr size_t max_string_size = static_cast<size_t>(-1);

  explicit PathLineHandler(std::vector<PathStep> target) : target_(std::move(target)) {}

  // The line the parser is being fed.
  void set_line(int64_t line) { line_ = line; }
  std::optional<int64_t> found() const { return found_line_; }

  bool on_document_begin(std::error_code&) { return true; }
  bool on_document_end(std::error_code&) { return true; }
  bool on_object_begin(std::error_code&) { return Open(/*array=*/false); }
  bool on_object_end(size_t, std::error_code&) { return Close(); }
  bool on_array_begin(std::error_code&) { return Open(/*array=*/true); }
  bool on_array_end(size_t, std::error_code&) { return Close(); }
  bool on_key_part(boost::json::string_view s, size_t n, std::error_code&) {
    AddKey(s, n);
    return true;
  }
  bool on_key(boost::json::string_view s, size_t n, std::error_code&) {
    AddKey(s, n);
    return true;
  }
  bool on_string_part(boost::json::string_view s, size_t n, std::error_code&) {
    if (n == s.size()) BeginValue();
    return true;
  }
  bool on_string(boost::json::string_view s, size_t n, std::error_code&) {
    if (n == s.size()) BeginValue();
    return EndValue();
  }
  bool on_number_part(boost::json::string_view, std::error_code&) {
    if (!in_number_) BeginValue();
    in_number_ = true;
    return true;
  }
  bool on_int64(int64_t, boost::json::string_view, std::error_code&) { return Scalar(); }
  bool on_uint64(uint64_t, boost::json::string_view, std::error_code&) { return Scalar(); }
  bool on_double(double, boost::json::string_view, std::error_code&) { return Scalar(); }
  bool on_bool(bool, std::error_code&) { return Scalar(); }
  bool on_null(std::error_code&) { return Scalar(); }
  bool on_comment_part(boost::json::string_view, std::error_code&) { return true; }
  bool on_comment(boost::json::string_view, std::error_code&) { return true; }

 private:
  struct Frame {
    bool array = false;
    size_t index = 0;  // Of the next element, in an array.
    std::string key;   // Of the current member, in an object.
  };

  // A value begins at the path the frames spell.
  void BeginValue() {
    const size_t depth = frames_.size();
    if (depth > target_.size() || depth < found_depth_) return;
    for (size_t i = 0; i < depth; ++i) {
      const Frame& f = frames_[i];
      const PathStep& step = target_[i];
      if (f.array != step.is_index) return;
      if (f.array ? f.index != step.index : f.key != step.key) return;
    }
    found_depth_ = depth;
    found_line_ = line_;
  }
  bool EndValue() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
    return true;
  }
  bool Scalar() {
    if (!in_number_) BeginValue();
    in_number_ = false;
    return EndValue();
  }
  bool Open(bool array) {
    BeginValue();
    frames_.push_back(Frame{array, 0, ""});
    return true;
  }
  bool Close() {
    frames_.pop_back();
    return EndValue();
  }
  // `n` counts the key's characters so far, `s` included: equal sizes mean a new key.
  void AddKey(boost::json::string_view s, size_t n) {
    std::string& key = frames_.back().key;
    if (n == s.size()) key.clear();
    key.append(s.data(), s.size());
  }

  std::vector<PathStep> target_;
  std::vector<Frame> frames_;
  int64_t line_ = 1;
  bool in_number_ = false;
  size_t found_depth_ = 0;
  std::optional<int64_t> found_line_;
};

// Feeds a PathLineHandler's parser line by line.
class PathLineSink {
 public:
  explicit PathLineSink(std::vector<PathStep> target)
      : parser_(boost::json::parse_options(), std::move(target)) {}

  Status Piece(std::string_view piece, int64_t line, int64_t /*offset*/) {
    return Feed(piece, line);
  }
  Status EndLine(int64_t line, int64_t /*length*/) { return Feed("\n", line); }
  Status EndInput(int64_t /*line*/, int64_t /*length*/) {
    if (parser_.done()) return Status::Ok();
    std::error_code ec;
    parser_.write_some(false, nullptr, 0, ec);
    return ec ? InvalidArgumentError(ec.message()) : Status::Ok();
  }
  std::optional<int64_t> found() const { return parser_.handler().found(); }

 private:
  Status Feed(std::string_view piece, int64_t line) {
    if (parser_.done()) return Status::Ok();
    parser_.handler().set_line(line);
    std::error_code ec;
    parser_.write_some(true, piece.data(), piece.size(), ec);
    return ec ? InvalidArgumentError(ec.message()) : Status::Ok();
  }

  boost::json::basic_parser<PathLineHandler> parser_;
};

}  // namespace

StatusOr<TraceFile> TraceFile::Open(const std::string& path) {
  std::error_code fs_error;
  if (std::filesystem::is_directory(path, fs_error)) {
    return InvalidArgumentError("cannot read trace file \"" + path + "\": Is a directory");
  }
  errno = 0;
  auto file = std::make_unique<std::ifstream>(path, std::ios::in | std::ios::binary);
  if (!file->is_open()) {
    const int error = errno;
    // std::generic_category().message is the thread-safe spelling of strerror.
    return NotFoundError("cannot open trace file \"" + path + "\": " +
                         (error != 0 ? std::generic_category().message(error) : "open failed"));
  }
  // RFC 1952: every gzip member starts with ID1 = 0x1f, ID2 = 0x8b.
  char magic[2] = {0, 0};
  file->read(magic, 2);
  const bool compressed = file->gcount() == 2 && static_cast<unsigned char>(magic[0]) == 0x1f &&
                          static_cast<unsigned char>(magic[1]) == 0x8b;
  file->clear();
  file->seekg(0);
  if (!*file) return UnavailableError("cannot read trace file \"" + path + "\" from its start");
  return TraceFile(path, std::move(file), compressed);
}

TraceFile::TraceFile(std::string path, std::unique_ptr<std::ifstream> file, bool compressed)
    : path_(std::move(path)), file_(std::move(file)), compressed_(compressed) {
  if (compressed_) StartDecompressing();
}

TraceFile::TraceFile(TraceFile&&) noexcept = default;
TraceFile& TraceFile::operator=(TraceFile&&) noexcept = default;
TraceFile::~TraceFile() = default;

void TraceFile::StartDecompressing() {
  auto gunzip = std::make_unique<boost::iostreams::filtering_istream>();
  gunzip->push(boost::iostreams::gzip_decompressor());
  gunzip->push(*file_);
  // Bad data throws out of the read (ReadChunk turns it into a status) instead of only
  // setting badbit, so that the error can say why.
  gunzip->exceptions(std::ios::badbit);
  gunzip_ = std::move(gunzip);
}

std::istream& TraceFile::stream() { return compressed_ ? *gunzip_ : *file_; }

Status TraceFile::Rewind() {
  file_->clear();
  file_->seekg(0);
  if (!*file_) return UnavailableError("cannot read trace file \"" + path_ + "\" again");
  if (compressed_) StartDecompressing();
  return Status::Ok();
}

Status EmptyTraceError(std::string_view source) {
  return InvalidArgumentError(std::string(source) + ": no requests (an empty trace)");
}

Status ForEachJsonLine(
    std::istream& in, std::string_view source,
    const std::function<Status(const boost::json::value& value, int64_t line_number)>& visit,
    int64_t max_line_bytes) {
  JsonLinesSink sink(visit);
  return ScanLines(in, source, max_line_bytes, sink);
}

StatusOr<boost::json::value> ReadJsonDocument(std::istream& in, std::string_view source,
                                              int64_t max_line_bytes) {
  JsonDocumentSink sink;
  AGENTKV_RETURN_IF_ERROR(ScanLines(in, source, max_line_bytes, sink));
  return sink.Release();
}

std::optional<int64_t> FindJsonPathLine(std::istream& in, std::string_view path,
                                        int64_t max_line_bytes) {
  std::optional<std::vector<PathStep>> target = ParsePath(path);
  if (!target.has_value()) return std::nullopt;
  PathLineSink sink(*std::move(target));
  // A scan that stops early (a line past the bound, malformed JSON) still knows the lines of
  // the values before the stop.
  ScanLines(in, "", max_line_bytes, sink).IgnoreError();
  return sink.found();
}

}  // namespace agentkv::sim
