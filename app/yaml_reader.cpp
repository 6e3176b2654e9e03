#include "app/yaml_reader.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <regex>
#include <stdexcept>

#include "linalg/errors.hpp"

namespace dfmp2::app {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::optional<std::string> nearest(const std::string& word, const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  std::size_t best_distance = std::max<std::size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

std::optional<bool> as_bool(const std::string& s) {
  std::string l = s;
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
  if (l == "true" || l == "yes" || l == "on") return true;
  if (l == "false" || l == "no" || l == "off") return false;
  return std::nullopt;
}

std::optional<long long> as_integer(const std::string& s) {
  static const std::regex integer(R"(^\s*[+-]?[0-9]+\s*$)");
  if (!std::regex_match(s, integer)) return std::nullopt;
  try {
    return std::stoll(s);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<double> as_number(const std::string& s) {
  std::size_t used = 0;
  try {
    const double v = std::stod(s, &used);
    if (used == s.size()) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

std::string YamlReader::where(const YAML::Node& node) const {
  const YAML::Mark m = node.Mark();
  if (m.line < 0) return file_;
  return fmt::format("{}:{}:{}", file_, m.line + 1, m.column + 1);
}

void YamlReader::fail(const YAML::Node& node, const std::string& what) const {
  throw InputError(fmt::format("{}: {}", where(node), what));
}

void YamlReader::fail(const std::string& what) const { throw InputError(fmt::format("{}: {}", file_, what)); }

void YamlReader::fail_key(const YAML::Node& node, const std::string& key, const std::string& text) const {
  throw InputError(where(node), key, text);
}

std::string YamlReader::kind(const YAML::Node& node) {
  if (node.IsMap()) return "a mapping";
  if (node.IsSequence()) return "a list";
  if (node.IsNull()) return "nothing";
  return fmt::format("'{}'", node.Scalar());
}

void YamlReader::check_keys(const YAML::Node& node, const std::string& parent,
                            const std::vector<std::string>& keys) const {
  for (const auto& kv : node) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      const auto guess = nearest(key, keys);
      fail(kv.first, guess ? fmt::format("unknown key '{}.{}' (did you mean '{}.{}'?)", parent, key, parent, *guess)
                           : fmt::format("unknown key '{}.{}' (valid keys: {})", parent, key, fmt::join(keys, ", ")));
    }
  }
}

std::string YamlReader::scalar(const YAML::Node& node, const std::string& key, const char* expected) const {
  if (!node.IsScalar()) fail_key(node, key, fmt::format("{{key}}: expected {}, got {}", expected, kind(node)));
  return node.Scalar();
}

bool YamlReader::boolean(const YAML::Node& node, const std::string& key) const {
  const std::string s = scalar(node, key, "true or false");
  if (const auto b = as_bool(s)) return *b;
  fail_key(node, key, fmt::format("{{key}}: expected true or false, got '{}'", s));
}

long long YamlReader::integer(const YAML::Node& node, const std::string& key, long long min) const {
  const std::string s = scalar(node, key, "an integer");
  const auto v = as_integer(s);
  if (!v || *v < min) fail_key(node, key, fmt::format("{{key}}: expected an integer >= {}, got '{}'", min, s));
  return *v;
}

double YamlReader::number(const YAML::Node& node, const std::string& key) const {
  const std::string s = scalar(node, key, "a number");
  const auto v = as_number(s);
  if (!v) fail_key(node, key, fmt::format("{{key}}: expected a number, got '{}'", s));
  return *v;
}

std::filesystem::path YamlReader::resolve(const std::string& path) const {
  const std::filesystem::path p(path);
  if (p.is_absolute()) return p;
  return std::filesystem::path(file_).parent_path() / p;
}

std::size_t YamlReader::choice_index(const YAML::Node& node, const std::string& key,
                                     const std::vector<std::string>& names, const char* noun) const {
  const std::string value = scalar(node, key, fmt::format("one of {}", fmt::join(names, ", ")).c_str());
  const auto it = std::find(names.begin(), names.end(), value);
  if (it == names.end()) {
    const auto guess = nearest(value, names);
    fail_key(node, key, fmt::format("{{key}}: unknown {} '{}'{} (expected one of {})", noun, value, guess ? fmt::format(" (did you mean '{}'?)", *guess) : "", fmt::join(names, ", ")));
  }
  return static_cast<std::size_t>(it - names.begin());
}

}  // namespace dfmp2::app
