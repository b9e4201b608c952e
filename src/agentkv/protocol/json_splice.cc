#include "agentkv/protocol/json_splice.h"

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <utility>

// Invariants: the scanner only runs on text that Boost.JSON accepted as one document, yet it
// bounds-checks every read so that a scanner bug yields Internal, never a crash. Splices copy
// the input verbatim outside the member spans they replace or remove.

namespace agentkv::protocol {
namespace {

bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// The bytes that open or close a string or a container: all SkipValue looks for inside one.
constexpr std::array<bool, 256> kStructural = [] {
  std::array<bool, 256> table{};
  for (const char c : {'"', '{', '}', '[', ']'}) table[static_cast<unsigned char>(c)] = true;
  return table;
}();

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void AppendUtf8(std::string& out, uint32_t code_point) {
  if (code_point < 0x80) {
    out += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    out += static_cast<char>(0xC0 | (code_point >> 6));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else if (code_point < 0x10000) {
    out += static_cast<char>(0xE0 | (code_point >> 12));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code_point >> 18));
    out += static_cast<char>(0x80 | ((code_point >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  }
}

// Walks the top level of one JSON object text. Each method returns false on text that is not
// well-formed where it looks; callers turn that into Internal (validation already passed).
class TopLevelScanner {
 public:
  explicit TopLevelScanner(std::string_view text) : text_(text) {}

  bool Scan(ObjectLayout* layout) {
    SkipSpace();
    if (!Peek('{')) return false;
    layout->open_brace = pos_++;
    SkipSpace();
    if (Peek('}')) {
      layout->close_brace = pos_;
      return true;
    }
    while (true) {
      MemberSpan member;
      SkipSpace();
      member.key_begin = pos_;
      if (!ScanString(&member.key)) return false;
      member.key_end = pos_;
      SkipSpace();
      if (!Peek(':')) return false;
      ++pos_;
      SkipSpace();
      member.value_begin = pos_;
      if (!SkipValue()) return false;
      member.value_end = pos_;
      layout->members.push_back(std::move(member));
      SkipSpace();
      if (Peek(',')) {
        ++pos_;
        continue;
      }
      if (Peek('}')) {
        layout->close_brace = pos_;
        return true;
      }
      return false;
    }
  }

 private:
  bool Peek(char c) const { return pos_ < text_.size() && text_[pos_] == c; }

  void SkipSpace() {
    while (pos_ < text_.size() && IsJsonSpace(text_[pos_])) ++pos_;
  }

  // At a '"': moves past the closing quote; appends the decoded string to `decoded` if given.
  bool ScanString(std::string* decoded) {
    if (!Peek('"')) return false;
    ++pos_;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (c != '\\') {
        if (decoded != nullptr) *decoded += c;
        ++pos_;
        continue;
      }
      if (pos_ + 1 >= text_.size()) return false;
      const char escape = text_[pos_ + 1];
      pos_ += 2;
      if (escape == 'u') {
        std::optional<uint32_t> unit = ReadHex4();
        if (!unit) return false;
        uint32_t code_point = *unit;
        // A high surrogate followed by an escaped low surrogate is one code point; a lone
        // surrogate is kept as its 3-byte form (only used for key comparison).
        if (code_point >= 0xD800 && code_point <= 0xDBFF && pos_ + 1 < text_.size() &&
            text_[pos_] == '\\' && text_[pos_ + 1] == 'u') {
          const size_t saved = pos_;
          pos_ += 2;
          const std::optional<uint32_t> low = ReadHex4();
          if (low && *low >= 0xDC00 && *low <= 0xDFFF) {
            code_point = 0x10000 + ((code_point - 0xD800) << 10) + (*low - 0xDC00);
          } else {
            pos_ = saved;
          }
        }
        if (decoded != nullptr) AppendUtf8(*decoded, code_point);
        continue;
      }
      if (decoded == nullptr) continue;
      switch (escape) {
        case 'n':
          *decoded += '\n';
          break;
        case 't':
          *decoded += '\t';
          break;
        case 'r':
          *decoded += '\r';
          break;
        case 'b':
          *decoded += '\b';
          break;
        case 'f':
          *decoded += '\f';
          break;
        default:  // '"', '\\', '/'
          *decoded += escape;
      }
    }
    return false;
  }

  // Moves to the next of the five bytes SkipValue acts on inside a container (or the end).
  // Most bytes of a large value (the digits, commas and spaces of a token id list) are none of
  // them: eight bytes at a time are tested at once (SWAR), then the byte that matched is found
  // one by one. `b | 0x20` maps '[' to '{' and ']' to '}', so three byte compares cover the
  // five (byte 0x02 maps to '"' too: a false alarm the byte loop resolves).
  void SkipToStructural() {
    constexpr uint64_t kOnes = 0x0101010101010101ULL;
    constexpr uint64_t kHighs = 0x8080808080808080ULL;
    const auto has_byte = [](uint64_t word, unsigned char c) {
      const uint64_t x = word ^ (kOnes * c);
      return ((x - kOnes) & ~x & kHighs) != 0;
    };
    while (pos_ + sizeof(uint64_t) <= text_.size()) {
      uint64_t word;
      std::memcpy(&word, text_.data() + pos_, sizeof(word));
      word |= kOnes * 0x20;
      if (has_byte(word, '"') || has_byte(word, '{') || has_byte(word, '}')) break;
      pos_ += sizeof(uint64_t);
    }
    while (pos_ < text_.size() && !kStructural[static_cast<unsigned char>(text_[pos_])]) ++pos_;
  }

  std::optional<uint32_t> ReadHex4() {
    if (pos_ + 4 > text_.size()) return std::nullopt;
    uint32_t value = 0;
    for (size_t i = 0; i < 4; ++i) {
      const int digit = HexValue(text_[pos_ + i]);
      if (digit < 0) return std::nullopt;
      value = value * 16 + static_cast<uint32_t>(digit);
    }
    pos_ += 4;
    return value;
  }

  // Moves past one value: a string, a container (by bracket depth, skipping strings) or a
  // scalar (up to the next delimiter).
  bool SkipValue() {
    if (pos_ >= text_.size()) return false;
    const char c = text_[pos_];
    if (c == '"') return ScanString(nullptr);
    if (c == '{' || c == '[') {
      size_t depth = 0;
      while (pos_ < text_.size()) {
        SkipToStructural();
        if (pos_ >= text_.size()) break;
        const char d = text_[pos_];
        if (d == '"') {
          if (!ScanString(nullptr)) return false;
          continue;
        }
        if (d == '{' || d == '[') ++depth;
        if (d == '}' || d == ']') {
          if (depth == 0) return false;
          if (--depth == 0) {
            ++pos_;
            return true;
          }
        }
        ++pos_;
      }
      return false;
    }
    const size_t begin = pos_;
    while (pos_ < text_.size()) {
      const char d = text_[pos_];
      if (d == ',' || d == '}' || d == ']' || IsJsonSpace(d)) break;
      ++pos_;
    }
    return pos_ > begin;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

// Scans text already known to be valid JSON.
StatusOr<ObjectLayout> ScanValidated(std::string_view text) {
  ObjectLayout layout;
  if (!TopLevelScanner(text).Scan(&layout)) {
    return InvalidArgumentError("expected a JSON object");
  }
  return layout;
}

std::optional<size_t> FindMember(const ObjectLayout& layout, std::string_view key) {
  for (size_t i = 0; i < layout.members.size(); ++i) {
    if (layout.members[i].key == key) return i;
  }
  return std::nullopt;
}

}  // namespace

StatusOr<ObjectLayout> ScanTopLevelMembers(std::string_view json_object_text,
                                           const JsonLimits& limits) {
  AGENTKV_RETURN_IF_ERROR(ValidateJson(json_object_text, limits, "JSON object"));
  return ScanValidated(json_object_text);
}

StatusOr<std::string> SetTopLevelFields(std::string_view json_object_text,
                                        const std::vector<FieldEdit>& edits,
                                        const JsonLimits& limits) {
  for (size_t i = 0; i < edits.size(); ++i) {
    AGENTKV_RETURN_IF_ERROR(ValidateJson(edits[i].value_json, limits, "value"));
    for (size_t j = 0; j < i; ++j) {
      if (edits[j].key == edits[i].key) {
        return InvalidArgumentError("SetTopLevelFields: key \"" + std::string(edits[i].key) +
                                    "\" given twice");
      }
    }
  }
  AGENTKV_RETURN_IF_ERROR(ValidateJson(json_object_text, limits, "JSON object"));
  return SetTopLevelFieldsOfValidObject(json_object_text, edits);
}

StatusOr<std::string> SetTopLevelFieldsOfValidObject(std::string_view json_object_text,
                                                     const std::vector<FieldEdit>& edits) {
  size_t added_bytes = 0;
  for (const FieldEdit& edit : edits) added_bytes += edit.key.size() + edit.value_json.size() + 4;
  AGENTKV_ASSIGN_OR_RETURN(const ObjectLayout layout, ScanValidated(json_object_text));
  // Which edit (if any) replaces each member; edits matching no member are appended after the
  // last member, in order, as successive SetTopLevelField calls would.
  std::vector<bool> matched(edits.size(), false);
  std::string out;
  out.reserve(json_object_text.size() + added_bytes);
  size_t copied = 0;
  for (const MemberSpan& member : layout.members) {
    for (size_t i = 0; i < edits.size(); ++i) {
      if (member.key != edits[i].key) continue;
      out.append(json_object_text.substr(copied, member.value_begin - copied));
      out.append(edits[i].value_json);
      copied = member.value_end;
      matched[i] = true;
      break;
    }
  }
  const size_t at = layout.members.empty() ? layout.close_brace : layout.members.back().value_end;
  out.append(json_object_text.substr(copied, at - copied));
  bool has_member = !layout.members.empty();
  for (size_t i = 0; i < edits.size(); ++i) {
    if (matched[i]) continue;
    if (has_member) out += ',';
    AppendJsonString(out, edits[i].key);
    out += ':';
    out.append(edits[i].value_json);
    has_member = true;
  }
  out.append(json_object_text.substr(at));
  return out;
}

StatusOr<std::string> SetTopLevelField(std::string_view json_object_text, std::string_view key,
                                       std::string_view value_json, const JsonLimits& limits) {
  AGENTKV_RETURN_IF_ERROR(ValidateJson(value_json, limits, "value"));
  AGENTKV_ASSIGN_OR_RETURN(const ObjectLayout layout,
                           ScanTopLevelMembers(json_object_text, limits));
  std::string out;
  out.reserve(json_object_text.size() + key.size() + value_json.size() + 4);
  size_t copied = 0;
  bool replaced = false;
  for (const MemberSpan& member : layout.members) {
    if (member.key != key) continue;
    out.append(json_object_text.substr(copied, member.value_begin - copied));
    out.append(value_json);
    copied = member.value_end;
    replaced = true;
  }
  if (!replaced) {
    const size_t at = layout.members.empty() ? layout.close_brace : layout.members.back().value_end;
    out.append(json_object_text.substr(0, at));
    if (!layout.members.empty()) out += ',';
    AppendJsonString(out, key);
    out += ':';
    out.append(value_json);
    copied = at;
  }
  out.append(json_object_text.substr(copied));
  return out;
}

StatusOr<std::string> RemoveTopLevelField(std::string_view json_object_text, std::string_view key,
                                          const JsonLimits& limits) {
  AGENTKV_ASSIGN_OR_RETURN(ObjectLayout layout, ScanTopLevelMembers(json_object_text, limits));
  std::string text(json_object_text);
  // Removes one copy at a time and rescans, so that removal ranges never overlap.
  for (std::optional<size_t> index = FindMember(layout, key); index.has_value();
       index = FindMember(layout, key)) {
    const std::vector<MemberSpan>& members = layout.members;
    const size_t i = *index;
    size_t begin = members[i].key_begin;
    size_t end = members[i].value_end;
    if (i + 1 < members.size()) {
      end = members[i + 1].key_begin;
    } else if (i > 0) {
      begin = members[i - 1].value_end;
    }
    text.erase(begin, end - begin);
    AGENTKV_ASSIGN_OR_RETURN(layout, ScanValidated(text));
  }
  return text;
}

}  // namespace agentkv::protocol
