#include "app/yaml_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <set>
#include <vector>

#include <yaml-cpp/eventhandler.h>

#include "linalg/bytes.hpp"
#include "linalg/errors.hpp"

namespace dfmp2::app {
namespace {

namespace fs = std::filesystem;

constexpr std::uintmax_t kMaxYamlBytes = 64 << 20;
constexpr int kMaxYamlDepth = 64;

std::string where(const std::string& label, const YAML::Node& node) {
  const YAML::Mark m = node.Mark();
  return m.line < 0 ? label : fmt::format("{}:{}:{}", label, m.line + 1, m.column + 1);
}

// Whether the tree, walked as a program walks it (aliases expanded), has at most `left` nodes and nests at most
// kMaxYamlDepth levels; stops counting as soon as the budget is spent, so a "billion laughs" costs nothing. A key
// given twice in one mapping is refused on the way: yaml-cpp keeps both, a lookup finds the first and an echo of the
// file (the results file, an AtomicResult) may show the last, so the run would not be the one the file describes.
// `path` is the dotted path of keys (and [i] of list items) from the root to `node`, for that message; `noun` what
// the file calls a key ("key" in a YAML input, "field" in a QCSchema AtomicInput).
bool within_budget(const YAML::Node& node, const std::string& label, const char* noun, const std::string& path,
                   std::size_t& left, int depth = 0) {
  if (depth > kMaxYamlDepth || left == 0) return false;
  --left;
  if (node.IsMap()) {
    std::set<std::string> keys;
    for (const auto& kv : node) {
      if (left == 0) return false;
      --left;  // the key
      const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "?";
      const std::string child = path.empty() ? key : path + "." + key;
      if (kv.first.IsScalar() && !keys.insert(key).second) {
        throw InputError(fmt::format("{}: {} '{}' is given twice", where(label, kv.first), noun, child));
      }
      if (!within_budget(kv.second, label, noun, child, left, depth + 1)) return false;
    }
  } else if (node.IsSequence()) {
    std::size_t i = 0;
    for (const auto& v : node) {
      if (!within_budget(v, label, noun, fmt::format("{}[{}]", path, i++), left, depth + 1)) return false;
    }
  }
  return true;
}

}  // namespace

void check_input_file(const std::string& path, const std::string& label, const char* expected) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (!fs::exists(status)) throw InputError(fmt::format("{}: no such file", label));
  if (fs::is_directory(status)) throw InputError(fmt::format("{}: is a directory, expected {}", label, expected));
  if (!fs::is_regular_file(status)) {
    throw InputError(fmt::format("{}: not a regular file (a FIFO, socket or device?), expected {}", label, expected));
  }
  if (const auto size = fs::file_size(path, ec); !ec && size > kMaxYamlBytes) {
    throw InputError(fmt::format("{}: {} bytes; a dfmp2 input file is at most {} (put large molecules in "
                                 "molecule.file)",
                                 label, size, linalg::format_bytes(double(kMaxYamlBytes))));
  }
}

namespace {

// The text of an input file, refused unless it is UTF-8 without control characters other than tab, line feed and
// carriage return: YAML and JSON allow no others, and yaml-cpp 0.7 loops without end on some inputs holding a NUL
// byte (found by fuzzing: 18 bytes that grew its memory until the kernel killed it).
std::string read_input_text(const std::string& path, const std::string& label, const char* expected) {
  check_input_file(path, label, expected);
  std::ifstream in(path, std::ios::binary);
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (!in.good() && !in.eof()) throw InputError(fmt::format("{}: cannot be read", label));
  auto line_of = [&](std::size_t at) { return 1 + std::count(text.begin(), text.begin() + long(at), '\n'); };
  const std::size_t not_utf8 = first_invalid_utf8(text);
  const auto control = std::find_if(text.begin(), text.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f;
  });
  const std::size_t at = std::min(not_utf8, std::size_t(control - text.begin()));  // the first fault of either kind
  if (at < text.size()) {
    const auto c = static_cast<unsigned char>(text[at]);
    throw InputError(at == not_utf8 ? fmt::format("{}:{}: byte {} (0x{:02x}) is not UTF-8; {} must be UTF-8 text",
                                                  label, line_of(at), at + 1, c, expected)
                                    : fmt::format("{}:{}: byte {} (0x{:02x}) is a control character, which {} may "
                                                  "not hold (a binary file?)",
                                                  label, line_of(at), at + 1, c, expected));
  }
  return text;
}

// The documents of a YAML text, counted from the parser's events. yaml-cpp 0.7 does not consume a ',' (or another
// flow indicator) outside [ ] or { }: each further document starts at that token again, so YAML::LoadAll never ends
// (`[1],` or a lone `,`, found by fuzzing). A document starting where the previous one started is that token.
std::size_t count_documents(const std::string& text, const std::string& label) {
  struct Starts : YAML::EventHandler {
    std::vector<YAML::Mark> marks;
    void OnDocumentStart(const YAML::Mark& m) override { marks.push_back(m); }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
    void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
    void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
    void OnMapEnd() override {}
  } starts;
  std::istringstream in(text);
  YAML::Parser parser(in);
  while (parser.HandleNextDocument(starts)) {
    const auto& m = starts.marks;
    if (m.size() >= 2 && m[m.size() - 1].pos == m[m.size() - 2].pos) {
      // yaml-cpp's marks may count characters rather than bytes: the token is named only when the byte there is
      // the ',' that makes this loop.
      const YAML::Mark at = m.back();
      const std::size_t pos = std::size_t(at.pos);
      const bool comma = pos < text.size() && text[pos] == ',';
      throw InputError(fmt::format("{}:{}:{}: YAML syntax error: {} outside a flow collection ([ ] or {{ }})", label,
                                   at.line + 1, at.column + 1, comma ? "','" : "a flow indicator"));
    }
  }
  // A stray token after the last document makes one empty document at its place, then the next one stops there.
  return starts.marks.size();
}

}  // namespace

YAML::Node load_yaml_file(const std::string& path, const std::string& label, std::size_t max_nodes,
                          const char* key_noun) {
  const std::string text = read_input_text(path, label, "a YAML file");
  YAML::Node root;
  try {
    if (const std::size_t documents = count_documents(text, label); documents > 1) {
      throw InputError(fmt::format("{}: holds {} YAML documents (separated by '---'); it must hold one", label,
                                   documents));
    }
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw InputError(fmt::format("{}:{}:{}: YAML syntax error: {}", label, e.mark.line + 1, e.mark.column + 1, e.msg));
  } catch (const YAML::Exception& e) {  // yaml-cpp's other refusals (e.g. nesting too deep)
    throw InputError(fmt::format("{}: cannot be read as YAML: {}", label, e.msg));
  }
  if (std::size_t left = max_nodes; !within_budget(root, label, key_noun, "", left)) {
    throw InputError(fmt::format("{}: expands to more than {} YAML nodes (anchors and aliases), or nests deeper than {} "
                                 "levels",
                                 label, max_nodes, kMaxYamlDepth));
  }
  return root;
}

std::string read_json_text(const std::string& path, const std::string& label) {
  std::string text = read_input_text(path, label, "a JSON file");
  auto line_of = [&](std::size_t at) { return 1 + std::count(text.begin(), text.begin() + long(at), '\n'); };
  // Arrays and objects counted outside strings, before any parser recurses into them (yaml-cpp's parser recurses, and
  // so do nlohmann::json's destructor and dump): 100,000 nested brackets would overflow the stack.
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxYamlDepth) {
        throw InputError(fmt::format("{}:{}: nests deeper than {} levels of arrays and objects", label, line_of(i),
                                     kMaxYamlDepth));
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return text;
}

std::size_t first_invalid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::size_t len = 0;
    unsigned min = 0;
    if (c < 0x80) len = 1;
    else if ((c & 0xe0) == 0xc0) len = 2, min = 0x80;
    else if ((c & 0xf0) == 0xe0) len = 3, min = 0x800;
    else if ((c & 0xf8) == 0xf0) len = 4, min = 0x10000;
    else return i;
    if (i + len > text.size()) return i;
    unsigned cp = len == 1 ? c : c & (0x7fu >> len);
    for (std::size_t k = 1; k < len; ++k) {
      const auto d = static_cast<unsigned char>(text[i + k]);
      if ((d & 0xc0) != 0x80) return i;
      cp = (cp << 6) | (d & 0x3fu);
    }
    // Overlong forms, UTF-16 surrogates and code points beyond U+10FFFF are not UTF-8 either.
    if (len > 1 && (cp < min || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)) return i;
    i += len;
  }
  return std::string::npos;
}

}  // namespace dfmp2::app
