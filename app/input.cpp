#include "app/input.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <regex>
#include <set>
#include <thread>

#include "devices/registry.hpp"
#include "linalg/errors.hpp"

namespace dfmp2::app {
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kKeys = {"integrals", "frozen_core", "backends", "precision",
                                        "memory",    "threads",     "output"};
const std::vector<std::string> kPrecisions = {"fp64", "fp32", "mixed"};
const std::vector<std::string> kSupportedPrecisions = {"fp64"};

class Context {
 public:
  explicit Context(std::string file) : file_(std::move(file)) {}

  std::string where(const YAML::Node& node) const {
    const YAML::Mark m = node.Mark();
    if (m.line < 0) return file_;
    return fmt::format("{}:{}:{}", file_, m.line + 1, m.column + 1);
  }
  [[noreturn]] void fail(const YAML::Node& node, const std::string& what) const {
    throw InputError(fmt::format("{}: {}", where(node), what));
  }
  [[noreturn]] void fail(const std::string& what) const { throw InputError(fmt::format("{}: {}", file_, what)); }

  std::string scalar(const YAML::Node& node, const std::string& key, const char* expected) const {
    if (!node.IsScalar()) fail(node, fmt::format("key '{}': expected {}, got {}", key, expected, kind(node)));
    return node.Scalar();
  }

  static std::string kind(const YAML::Node& node) {
    if (node.IsMap()) return "a mapping";
    if (node.IsSequence()) return "a list";
    if (node.IsNull()) return "nothing";
    return fmt::format("'{}'", node.Scalar());
  }

  fs::path resolve(const std::string& p) const {
    const fs::path path(p);
    if (path.is_absolute()) return path;
    return fs::path(file_).parent_path() / path;
  }

 private:
  std::string file_;
};

std::optional<long long> as_integer(const std::string& s) {
  static const std::regex integer(R"(^\s*[+-]?[0-9]+\s*$)");
  if (!std::regex_match(s, integer)) return std::nullopt;
  try {
    return std::stoll(s);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<bool> as_bool(const std::string& s) {
  std::string l = s;
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
  if (l == "true" || l == "yes" || l == "on") return true;
  if (l == "false" || l == "no" || l == "off") return false;
  return std::nullopt;
}

// YAML node -> JSON, keeping scalars' types as YAML would resolve them (for the results file's echo).
nlohmann::json to_json(const YAML::Node& node) {
  if (node.IsMap()) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& kv : node) j[kv.first.Scalar()] = to_json(kv.second);
    return j;
  }
  if (node.IsSequence()) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& v : node) j.push_back(to_json(v));
    return j;
  }
  if (node.IsNull()) return nullptr;
  const std::string& s = node.Scalar();
  if (node.Tag() == "!") return s;  // quoted: a string whatever it looks like
  if (auto i = as_integer(s)) return *i;
  if (auto b = as_bool(s)) return *b;
  try {
    std::size_t used = 0;
    const double d = std::stod(s, &used);
    if (used == s.size()) return d;
  } catch (const std::exception&) {
  }
  return s;
}

}  // namespace

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

std::optional<double> parse_memory_size(const std::string& text) {
  static const std::regex size(R"(^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$)");
  std::smatch m;
  if (!std::regex_match(text, m, size)) return std::nullopt;
  const double value = std::stod(m[1].str());
  std::string unit = m[2].str();
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return std::tolower(c); });
  const std::vector<std::pair<std::string, double>> units = {
      {"", 1.0},      {"b", 1.0},      {"kb", 1e3},          {"mb", 1e6},          {"gb", 1e9},
      {"tb", 1e12},   {"kib", 1024.0}, {"mib", 1048576.0},   {"gib", 1073741824.0}, {"tib", 1099511627776.0}};
  for (const auto& [name, factor] : units) {
    if (unit == name) {
      const double bytes = value * factor;
      if (!std::isfinite(bytes) || bytes <= 0) return std::nullopt;
      return bytes;
    }
  }
  return std::nullopt;
}

Input read_input(const std::string& path) {
  Context ctx(path);
  std::error_code ec;
  if (!fs::exists(path, ec)) throw InputError(fmt::format("{}: no such file", path));
  if (fs::is_directory(path, ec)) throw InputError(fmt::format("{}: is a directory, expected a YAML file", path));

  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::ParserException& e) {
    throw InputError(fmt::format("{}:{}:{}: YAML syntax error: {}", path, e.mark.line + 1, e.mark.column + 1, e.msg));
  } catch (const YAML::BadFile&) {
    throw InputError(fmt::format("{}: cannot be read", path));
  }
  if (root.IsNull()) ctx.fail("the input is empty; expected a mapping with at least 'integrals'");
  if (!root.IsMap()) ctx.fail(root, fmt::format("expected a mapping of keys (integrals, backends, ...), got {}", Context::kind(root)));

  Input in;
  in.path = path;
  std::set<std::string> seen;
  for (const auto& kv : root) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
    if (std::find(kKeys.begin(), kKeys.end(), key) == kKeys.end()) {
      const auto guess = nearest(key, kKeys);
      ctx.fail(kv.first, guess ? fmt::format("unknown key '{}' (did you mean '{}'?)", key, *guess)
                               : fmt::format("unknown key '{}' (valid keys: {})", key, fmt::join(kKeys, ", ")));
    }
    if (!seen.insert(key).second) ctx.fail(kv.first, fmt::format("key '{}' is given twice", key));
  }
  in.as_read = to_json(root);

  // integrals
  if (!root["integrals"]) ctx.fail("missing required key 'integrals' (path of the HDF5 integral file)");
  {
    const YAML::Node node = root["integrals"];
    const std::string value = ctx.scalar(node, "integrals", "a file path");
    if (value.empty()) ctx.fail(node, "key 'integrals': expected a file path, got an empty string");
    const fs::path resolved = ctx.resolve(value);
    if (!fs::exists(resolved, ec)) {
      ctx.fail(node, fmt::format("key 'integrals': file '{}' does not exist", resolved.string()));
    }
    in.integrals = resolved.string();
  }

  if (const YAML::Node node = root["frozen_core"]) {
    const std::string value = ctx.scalar(node, "frozen_core", "true, false or a number of orbitals");
    if (auto b = as_bool(value)) {
      in.frozen_core.kind = *b ? FrozenCore::Kind::psi4_rule : FrozenCore::Kind::none;
    } else if (auto n = as_integer(value); n && *n >= 0 && *n <= 1000000) {
      in.frozen_core = {FrozenCore::Kind::count, static_cast<int>(*n)};
    } else {
      ctx.fail(node, fmt::format("key 'frozen_core': expected true, false or a number of orbitals >= 0, got '{}'", value));
    }
  }

  if (const YAML::Node node = root["backends"]) {
    if (!node.IsSequence()) ctx.fail(node, fmt::format("key 'backends': expected a list such as [openblas, eigen], got {}", Context::kind(node)));
    if (node.size() == 0) ctx.fail(node, "key 'backends': the list is empty; name at least one backend");
    in.backends.clear();
    const auto built = devices::built_backends();
    const auto known = devices::known_backends();
    for (const auto& item : node) {
      const std::string name = ctx.scalar(item, "backends", "a backend name");
      if (std::find(built.begin(), built.end(), name) == built.end()) {
        if (std::find(known.begin(), known.end(), name) != known.end()) {
          throw UnsupportedError(fmt::format("{}: key 'backends': backend '{}' is not built into this dfmp2 (built: {})",
                                             ctx.where(item), name, fmt::join(built, ", ")));
        }
        const auto guess = nearest(name, known);
        ctx.fail(item, fmt::format("key 'backends': unknown backend '{}'{} (built: {})", name,
                                   guess ? fmt::format(" (did you mean '{}'?)", *guess) : "", fmt::join(built, ", ")));
      }
      if (std::find(in.backends.begin(), in.backends.end(), name) != in.backends.end()) {
        ctx.fail(item, fmt::format("key 'backends': backend '{}' is named twice", name));
      }
      in.backends.push_back(name);
    }
  }

  if (const YAML::Node node = root["precision"]) {
    const std::string value = ctx.scalar(node, "precision", "fp64");
    if (std::find(kPrecisions.begin(), kPrecisions.end(), value) == kPrecisions.end()) {
      const auto guess = nearest(value, kPrecisions);
      ctx.fail(node, fmt::format("key 'precision': unknown precision '{}'{} (expected one of {})", value,
                                 guess ? fmt::format(" (did you mean '{}'?)", *guess) : "", fmt::join(kPrecisions, ", ")));
    }
    if (std::find(kSupportedPrecisions.begin(), kSupportedPrecisions.end(), value) == kSupportedPrecisions.end()) {
      throw UnsupportedError(fmt::format("{}: key 'precision': '{}' is not supported by this dfmp2 (supported: {})",
                                         ctx.where(node), value, fmt::join(kSupportedPrecisions, ", ")));
    }
    in.precision = value;
  }

  if (const YAML::Node node = root["memory"]) {
    const std::string value = ctx.scalar(node, "memory", "a size such as '2 GiB'");
    const auto bytes = parse_memory_size(value);
    if (!bytes) ctx.fail(node, fmt::format("key 'memory': expected a size such as '2 GiB' or '500 MB', got '{}'", value));
    in.memory_bytes = *bytes;
    in.memory_text = value;
  }

  in.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (const YAML::Node node = root["threads"]) {
    const std::string value = ctx.scalar(node, "threads", "a number of threads >= 1");
    const auto n = as_integer(value);
    if (!n || *n < 1 || *n > 4096) ctx.fail(node, fmt::format("key 'threads': expected a number of threads >= 1, got '{}'", value));
    in.threads = static_cast<int>(*n);
  }

  if (const YAML::Node node = root["output"]) {
    const std::string value = ctx.scalar(node, "output", "a file path");
    if (value.empty()) ctx.fail(node, "key 'output': expected a file path, got an empty string");
    in.output = ctx.resolve(value).string();
  }
  return in;
}

}  // namespace dfmp2::app
