#include "app/bench/trace.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "app/bench/calls.hpp"
#include "app/yaml_file.hpp"
#include "app/yaml_reader.hpp"
#include "linalg/errors.hpp"

namespace dfmp2::app::bench {

namespace {

// Ops a trace entry may name: the kernel names of --ops, less gemm_df (a set of shapes, not one call).
std::vector<std::string> trace_ops() {
  std::vector<std::string> out;
  for (const auto& k : kernel_names())
    if (k != "gemm_df") out.push_back(k);
  return out;
}

// Keys each op takes besides op, repeat, label and precision.
std::vector<std::string> op_keys(const std::string& op) {
  if (op == "gemm") return {"m", "n", "k", "transa", "transb"};
  if (op == "gemm_batched") return {"count", "m", "n", "k", "transa", "transb"};
  if (op == "syrk") return {"n", "k", "trans"};
  if (op == "trsm") return {"m", "n", "side", "trans"};
  if (op == "trsm_left") return {"m", "n", "trans"};
  if (op == "spmm_csr") return {"m", "n", "k", "density"};
  if (op == "spmm_bsr") return {"m", "n", "k", "density", "block"};
  return {"n"};  // cholesky, eigh, invsqrt_eigh, invsqrt_ns, random (n numbers)
}

// Scalars, integers and numbers come from the one YAML reading layer (app/yaml_reader.hpp); a transpose flag is
// the trace's own.
struct Reader : YamlReader {
  using YamlReader::YamlReader;
  bool trans(const YAML::Node& node, const std::string& key) const {
    const std::string s = scalar(node, key);
    if (s == "n" || s == "N") return false;
    if (s == "t" || s == "T") return true;
    fail(node, fmt::format("key '{}': expected n or t, got '{}'", key, s));
  }
};

}  // namespace

Trace read_trace(const std::string& path) {
  Trace trace;
  trace.path = path;
  trace.published_device = "trn1";
  Reader r(path);
  // A trace may list many calls: ten times an input's node budget.
  const YAML::Node root = load_yaml_file(path, "--trace: " + path, 10 * kMaxYamlNodes);
  if (!root.IsMap()) throw InputError(fmt::format("{}: expected a mapping with a 'trace:' list", path));
  const std::vector<std::string> top_keys = {"trace", "description", "precision", "published_seconds", "published_device"};
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    if (std::find(top_keys.begin(), top_keys.end(), key) == top_keys.end()) {
      r.fail(kv.first, fmt::format("unknown key '{}' (valid keys: {})", key, fmt::join(top_keys, ", ")));
    }
  }
  if (!root["trace"] || !root["trace"].IsSequence() || root["trace"].size() == 0) {
    throw InputError(fmt::format("{}: key 'trace': expected a non-empty list of kernel calls", path));
  }
  if (root["description"]) trace.description = r.scalar(root["description"], "description");
  if (root["precision"]) {
    trace.precision = r.scalar(root["precision"], "precision");
    if (trace.precision != "fp64" && trace.precision != "fp32" && trace.precision != "bf16" &&
        trace.precision != "bf16x3") {
      r.fail(root["precision"], fmt::format("key 'precision': expected fp64, fp32, bf16 or bf16x3, got '{}'", trace.precision));
    }
  }
  if (root["published_seconds"]) {
    trace.published_seconds = r.number(root["published_seconds"], "published_seconds");
    if (!(*trace.published_seconds > 0)) r.fail(root["published_seconds"], "key 'published_seconds': expected a time > 0");
  }
  if (root["published_device"]) trace.published_device = r.scalar(root["published_device"], "published_device");

  const auto ops = trace_ops();
  std::size_t index = 0;
  for (const auto& item : root["trace"]) {
    ++index;
    const std::string where = fmt::format("trace[{}]", index);
    if (!item.IsMap()) r.fail(item, fmt::format("{}: expected a mapping {{op: ..., ...}}", where));
    if (!item["op"]) r.fail(item, fmt::format("{}: missing key 'op' (one of {})", where, fmt::join(ops, ", ")));
    TraceEntry e;
    CallSpec& c = e.call;
    c.op = r.scalar(item["op"], where + ".op");
    if (std::find(ops.begin(), ops.end(), c.op) == ops.end()) {
      r.fail(item["op"], fmt::format("{}: unknown op '{}' (valid: {})", where, c.op, fmt::join(ops, ", ")));
    }
    auto valid = op_keys(c.op);
    for (const char* k : {"op", "repeat", "label", "precision"}) valid.emplace_back(k);
    for (const auto& kv : item) {
      const std::string key = kv.first.Scalar();
      if (std::find(valid.begin(), valid.end(), key) == valid.end()) {
        r.fail(kv.first, fmt::format("{}: unknown key '{}' for op {} (valid keys: {})", where, key, c.op, fmt::join(valid, ", ")));
      }
    }
    const auto needed = op_keys(c.op);
    for (const char* k : {"m", "n", "k", "count"}) {
      if (std::find(needed.begin(), needed.end(), k) != needed.end() && !item[k]) {
        r.fail(item, fmt::format("{}: op {} needs key '{}'", where, c.op, k));
      }
    }
    if (item["m"]) c.m = r.integer(item["m"], where + ".m", 1);
    if (item["n"]) c.n = r.integer(item["n"], where + ".n", 1);
    if (item["k"]) c.k = r.integer(item["k"], where + ".k", 1);
    if (item["count"]) c.count = r.integer(item["count"], where + ".count", 1);
    if (item["transa"]) c.trans_a = r.trans(item["transa"], where + ".transa");
    if (item["transb"]) c.trans_b = r.trans(item["transb"], where + ".transb");
    if (c.op == "syrk" && !item["k"]) r.fail(item, fmt::format("{}: op syrk needs key 'k'", where));
    if (c.op == "syrk" && item["trans"]) c.syrk_trans = r.trans(item["trans"], where + ".trans");
    if (c.op == "trsm" && item["side"]) {
      const std::string side = r.scalar(item["side"], where + ".side");
      if (side != "left" && side != "right") r.fail(item["side"], fmt::format("{}.side: expected left or right, got '{}'", where, side));
      c.side = side == "left" ? linalg::Side::left : linalg::Side::right;
    }
    if (c.op == "trsm_left") c.side = linalg::Side::left;
    if (c.op == "trsm" || c.op == "trsm_left") {
      // Default: the DF-MP2 fitting pattern X L^T = B on the right, L X = B on the left.
      c.trsm_trans = c.side == linalg::Side::right;
      if (item["trans"]) c.trsm_trans = r.trans(item["trans"], where + ".trans");
      if (c.side == linalg::Side::left) c.op = "trsm_left";
    }
    if (item["density"]) c.density = r.number(item["density"], where + ".density");
    if (item["block"]) c.block = r.integer(item["block"], where + ".block", 1);
    if (item["repeat"]) e.repeat = static_cast<int>(r.integer(item["repeat"], where + ".repeat", 1));
    e.label = item["label"] ? r.scalar(item["label"], where + ".label") : c.op;
    if (item["precision"]) {
      e.precision = r.scalar(item["precision"], where + ".precision");
      if (e.precision != "fp64" && e.precision != "fp32" && e.precision != "bf16" && e.precision != "bf16x3") {
        r.fail(item["precision"], fmt::format("{}.precision: expected fp64, fp32, bf16 or bf16x3, got '{}'", where, e.precision));
      }
    }
    try {
      check_call(c, fmt::format("{}:{}:{}: {}", path, item.Mark().line + 1, item.Mark().column + 1, where));
    } catch (const InputError&) {
      throw;
    }
    trace.entries.push_back(e);
  }
  return trace;
}

}  // namespace dfmp2::app::bench
