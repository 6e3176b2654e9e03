// Options of `dfmp2 bench`: list flags, their checks, and the `bench:` section of a config file.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "app/bench/bench.hpp"
#include "app/yaml_file.hpp"
#include "app/yaml_reader.hpp"
#include "chem/mp2/mp2.hpp"
#include "devices/registry.hpp"
#include "linalg/errors.hpp"

namespace dfmp2::app::bench {

namespace fs = std::filesystem;

const std::vector<std::string>& kernel_names() {
  static const std::vector<std::string> names = {
      "gemm",  "gemm_df",      "gemm_batched", "syrk",   "trsm",     "trsm_left", "cholesky",
      "eigh",  "invsqrt_eigh", "invsqrt_ns",   "random", "spmm_csr", "spmm_bsr"};
  return names;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  for (const char ch : text + ",") {
    if (ch == ',') {
      if (!item.empty()) out.push_back(item);
      item.clear();
    } else if (ch != ' ' && ch != '\t') {
      item += ch;
    }
  }
  return out;
}

std::vector<linalg::Index> parse_sizes(const std::string& flag, const std::vector<std::string>& items) {
  std::vector<linalg::Index> out;
  for (const auto& s : items) {
    const auto v = as_integer(s);
    if (!v || *v < 1 || *v > 65536) throw InputError(fmt::format("{}: expected sizes from 1 to 65536, got '{}'", flag, s));
    out.push_back(static_cast<linalg::Index>(*v));
  }
  if (out.empty()) throw InputError(fmt::format("{}: expected at least one size", flag));
  return out;
}

std::vector<double> parse_densities(const std::string& flag, const std::vector<std::string>& items) {
  std::vector<double> out;
  for (const auto& s : items) {
    const auto v = as_number(s);
    if (!v || !(*v > 0 && *v <= 1)) throw InputError(fmt::format("{}: expected densities in (0, 1], got '{}'", flag, s));
    out.push_back(*v);
  }
  if (out.empty()) throw InputError(fmt::format("{}: expected at least one density", flag));
  return out;
}

namespace {

void check_names(const std::string& flag, const std::vector<std::string>& given, const std::vector<std::string>& valid,
                 const char* what) {
  if (given.empty()) throw InputError(fmt::format("{}: expected at least one {}", flag, what));
  std::set<std::string> seen;
  for (const auto& g : given) {
    if (std::find(valid.begin(), valid.end(), g) == valid.end()) {
      throw InputError(fmt::format("{}: unknown {} '{}' (valid: {})", flag, what, g, fmt::join(valid, ", ")));
    }
    if (!seen.insert(g).second) throw InputError(fmt::format("{}: {} '{}' is given twice", flag, what, g));
  }
}

}  // namespace

void validate(BenchOptions& o) {
  if (o.mode == Mode::kernels) {
    check_names("--ops", o.ops, kernel_names(), "kernel");
    if (o.sizes.empty()) throw InputError("--sizes: expected at least one size");
  }
  if (o.mode == Mode::dfmp2) check_names("--dfmp2", o.shapes, chem::synthetic_shape_names(), "synthetic shape");
  if (o.precisions.empty()) {
    // fp64, or fp32 when a device model (no fp64 arithmetic) is among the backends.
    bool device = false;
    for (const auto& b : o.backends) device = device || b == "trn1" || b == "trn2";
    o.precisions = {device ? "fp32" : "fp64"};
  }
  const std::vector<std::string> precisions =
      o.mode == Mode::dfmp2 ? std::vector<std::string>{"fp64", "fp32", "mixed", "bf16", "bf16x3"}
                            : std::vector<std::string>{"fp64", "fp32", "bf16", "bf16x3"};
  check_names("--precision", o.precisions, precisions, "precision");
  // Unknown backends are an input error naming the flag; a known one not built is UnsupportedError (make_backend).
  {
    std::set<std::string> seen;
    const auto known = devices::known_backends();
    if (o.backends.empty()) throw InputError("--backends: expected at least one backend");
    for (const auto& b : o.backends) {
      if (std::find(known.begin(), known.end(), b) == known.end()) {
        throw InputError(fmt::format("--backends: unknown backend '{}' (valid: {})", b, fmt::join(known, ", ")));
      }
      if (!seen.insert(b).second) throw InputError(fmt::format("--backends: backend '{}' is given twice", b));
    }
  }
  for (const double d : o.densities) {
    if (!(d > 0 && d <= 1)) throw InputError(fmt::format("--density: expected densities in (0, 1], got '{}'", d));
  }
  if (o.condition != 0 && !(o.condition > 1 && o.condition < 1e300)) {
    throw InputError(fmt::format("--condition: expected a condition number > 1 (or 0 for the default matrix), got '{}'",
                                 o.condition));
  }
  if (o.repeat < 1) throw InputError(fmt::format("--repeat: expected a count >= 1, got '{}'", o.repeat));
  if (o.warmup < 0) throw InputError(fmt::format("--warmup: expected a count >= 0, got '{}'", o.warmup));
  if (o.threads < 0) throw InputError(fmt::format("--threads: expected a number of threads >= 1, got '{}'", o.threads));
  if (o.batch_count < 1) throw InputError(fmt::format("--batch-count: expected a count >= 1, got '{}'", o.batch_count));
  if (o.bsr_block < 1) throw InputError(fmt::format("--bsr-block: expected a block size >= 1, got '{}'", o.bsr_block));
  if (!o.svg.empty() && (o.mode == Mode::trace || o.mode == Mode::calibration)) {
    throw InputError("--svg: draws time against size, so it needs --ops or --dfmp2");
  }
}

namespace {

// The config file's keys live under `bench:`; scalars, integers, booleans and paths are read by the one YAML
// reading layer (app/yaml_reader.hpp), with the key named "bench.<key>" in messages.
struct ConfigReader : YamlReader {
  using YamlReader::YamlReader;

  // A list given as a YAML sequence or as one comma-separated string.
  std::vector<std::string> list(const YAML::Node& node, const std::string& key) const {
    std::vector<std::string> out;
    if (node.IsSequence()) {
      for (const auto& item : node) {
        if (!item.IsScalar()) fail(item, fmt::format("key 'bench.{}': expected a list of values", key));
        out.push_back(item.Scalar());
      }
    } else if (node.IsScalar()) {
      out = split_list(node.Scalar());
    } else {
      fail(node, fmt::format("key 'bench.{}': expected a list or a comma-separated string", key));
    }
    return out;
  }

  std::string scalar(const YAML::Node& node, const std::string& key) const {
    return YamlReader::scalar(node, "bench." + key);
  }
  long long integer(const YAML::Node& node, const std::string& key, long long lo) const {
    return YamlReader::integer(node, "bench." + key, lo);
  }
  bool boolean(const YAML::Node& node, const std::string& key) const { return YamlReader::boolean(node, "bench." + key); }
  std::string file(const YAML::Node& node, const std::string& key) const { return resolve(scalar(node, key)).string(); }
};

const std::vector<std::string> kConfigKeys = {
    "ops",    "sizes",   "densities",   "backends",      "precision",      "repeat",
    "warmup", "threads", "batch_count", "bsr_block",     "seed",           "dfmp2",
    "trace",  "calibration", "allow_fallback", "compile_cache", "csv", "json", "svg", "condition"};

}  // namespace

void read_bench_config(const std::string& path, const std::vector<std::string>& given, BenchOptions& o) {
  const YAML::Node root = load_yaml_file(path, "--config: " + path);
  ConfigReader r(path);
  if (!root.IsMap() || !root["bench"]) {
    throw InputError(fmt::format("{}: expected a mapping with a 'bench:' section", path));
  }
  const YAML::Node bench = root["bench"];
  if (!bench.IsMap()) r.fail(bench, "key 'bench': expected a mapping of settings");
  for (const auto& kv : root) {
    if (kv.first.Scalar() != "bench") r.fail(kv.first, fmt::format("unknown key '{}' (the file holds one 'bench:' section)", kv.first.Scalar()));
  }
  auto is_given = [&](const std::string& key) { return std::find(given.begin(), given.end(), key) != given.end(); };
  for (const auto& kv : bench) {
    const std::string key = kv.first.Scalar();
    const YAML::Node& v = kv.second;
    if (std::find(kConfigKeys.begin(), kConfigKeys.end(), key) == kConfigKeys.end()) {
      r.fail(kv.first, fmt::format("unknown key 'bench.{}' (valid keys: {})", key, fmt::join(kConfigKeys, ", ")));
    }
    const bool mode_key = key == "ops" || key == "dfmp2" || key == "trace" || key == "calibration";
    if (is_given(key) || (mode_key && is_given("mode"))) continue;  // the command line wins
    const std::string where = fmt::format("{}:{}:{}: key 'bench.{}'", path, v.Mark().line + 1, v.Mark().column + 1, key);
    if (key == "ops") {
      o.ops = r.list(v, key);
      o.mode = Mode::kernels;
    } else if (key == "sizes") {
      o.sizes = parse_sizes(where, r.list(v, key));
    } else if (key == "densities") {
      o.densities = parse_densities(where, r.list(v, key));
    } else if (key == "backends") {
      o.backends = r.list(v, key);
    } else if (key == "precision") {
      o.precisions = r.list(v, key);
      o.precisions_given = true;
    } else if (key == "repeat") {
      o.repeat = static_cast<int>(r.integer(v, key, 1));
    } else if (key == "warmup") {
      o.warmup = static_cast<int>(r.integer(v, key, 0));
    } else if (key == "threads") {
      o.threads = static_cast<int>(r.integer(v, key, 1));
    } else if (key == "batch_count") {
      o.batch_count = r.integer(v, key, 1);
    } else if (key == "bsr_block") {
      o.bsr_block = r.integer(v, key, 1);
    } else if (key == "seed") {
      o.seed = static_cast<std::uint64_t>(r.integer(v, key, 0));
    } else if (key == "condition") {
      o.condition = r.number(v, key);
    } else if (key == "dfmp2") {
      o.shapes = r.list(v, key);
      o.mode = Mode::dfmp2;
    } else if (key == "trace") {
      o.trace_path = r.file(v, key);
      o.mode = Mode::trace;
    } else if (key == "calibration") {
      if (r.boolean(v, key)) o.mode = Mode::calibration;
    } else if (key == "allow_fallback") {
      o.allow_fallback = r.boolean(v, key);
    } else if (key == "compile_cache") {
      o.compile_cache = r.file(v, key);
    } else if (key == "csv") {
      o.csv = r.file(v, key);
    } else if (key == "json") {
      o.json = r.file(v, key);
    } else if (key == "svg") {
      o.svg = r.file(v, key);
    }
  }
  int modes = 0;
  for (const char* k : {"ops", "dfmp2", "trace"}) modes += bench[k] ? 1 : 0;
  if (bench["calibration"] && r.boolean(bench["calibration"], "calibration")) ++modes;
  if (modes > 1) r.fail(bench, "keys 'bench.ops', 'bench.dfmp2', 'bench.trace' and 'bench.calibration' exclude each other");
}

}  // namespace dfmp2::app::bench
