#include "app/instances.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <regex>

#include "app/instances_yaml.hpp"  // generated from devices/instances.yaml: kInstancesYaml
#include "app/yaml_file.hpp"
#include "app/yaml_reader.hpp"
#include "devices/registry.hpp"

namespace dfmp2::app {
namespace {

const std::vector<std::string> kTopKeys = {"pue", "defaults", "instances"};
const std::vector<std::string> kDefaultsKeys = {"cpu"};
const std::vector<std::string> kInstanceKeys = {"runs", "neuron_cores", "cores", "hardware", "price", "power"};
const std::vector<std::string> kPriceKeys = {"usd_per_hour", "pricing", "region", "source", "date"};
const std::vector<std::string> kPowerKeys = {"watts", "source", "date"};
const std::vector<std::string> kPueKeys = {"value", "source", "date"};

// Bounds that catch a slip (a price in cents, power in milliwatts, a core count with a digit too many) while leaving
// room for any real instance.
constexpr double kMaxUsdPerHour = 10000;
constexpr double kMaxWatts = 1e6;
constexpr long long kMaxSlots = 4096;

YAML::Node required(const YAML::Node& node, const YamlReader& ctx, const std::string& parent, const char* key) {
  const YAML::Node n = node[key];
  if (!n) ctx.fail(node, fmt::format("'{}' lacks '{}'", parent, key));
  return n;
}

YAML::Node mapping(const YAML::Node& node, const YamlReader& ctx, const std::string& key,
                   const std::vector<std::string>& keys) {
  if (!node.IsMap()) {
    ctx.fail_key(node, key, fmt::format("{{key}}: expected a mapping {{{}}}, got {}", fmt::join(keys, ", "),
                                        YamlReader::kind(node)));
  }
  ctx.check_keys(node, key, keys);
  return node;
}

std::string text(const YAML::Node& node, const YamlReader& ctx, const std::string& parent, const char* key) {
  const std::string k = parent + "." + key;
  const std::string value = ctx.scalar(required(node, ctx, parent, key), k, "a text");
  if (value.empty()) ctx.fail_key(node[key], k, "{key}: expected a text, got an empty string");
  return value;
}

// A number in (min, max], or [min, max] when `min_included`.
double bounded(const YAML::Node& node, const YamlReader& ctx, const std::string& parent, const char* key, double min,
               double max, const char* what, bool min_included = false) {
  const std::string k = parent + "." + key;
  const YAML::Node n = required(node, ctx, parent, key);
  const std::string value = ctx.scalar(n, k, what);
  const auto v = as_number(value);
  if (!v || !std::isfinite(*v) || (min_included ? *v < min : *v <= min) || *v > max) {
    ctx.fail_key(n, k, fmt::format("{{key}}: expected {} {} {} and at most {}, got '{}'", what,
                                   min_included ? "of at least" : "above", min, max, value));
  }
  return *v;
}

// A date as the sources state them, YYYY-MM-DD, with a month and day that exist.
std::string iso_date(const YAML::Node& node, const YamlReader& ctx, const std::string& parent) {
  const std::string value = text(node, ctx, parent, "date");
  static const std::regex pattern(R"(^(\d{4})-(\d{2})-(\d{2})$)");
  std::smatch m;
  bool ok = std::regex_match(value, m, pattern);
  if (ok) {
    const int year = std::stoi(m[1]), month = std::stoi(m[2]), day = std::stoi(m[3]);
    const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    const int days[] = {31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    ok = year >= 2000 && month >= 1 && month <= 12 && day >= 1 && day <= days[month - 1];
  }
  if (!ok) ctx.fail_key(node["date"], parent + ".date", fmt::format("{{key}}: expected a date YYYY-MM-DD, got '{}'", value));
  return value;
}

CloudInstance read_instance(const std::string& name, const YAML::Node& node, const YamlReader& ctx) {
  const std::string key = "instances." + name;
  mapping(node, ctx, key, kInstanceKeys);
  CloudInstance inst;
  inst.name = name;
  std::vector<std::string> runs = {"cpu"};
  for (const auto& b : devices::known_backends())
    if (devices::is_device_model(b)) runs.push_back(b);
  inst.runs = runs[ctx.choice_index(required(node, ctx, key, "runs"), key + ".runs", runs, "backend kind")];

  // A device instance counts NeuronCores, a CPU instance cores; the other count would be a slip.
  const bool device = inst.runs != "cpu";
  const char* count = device ? "neuron_cores" : "cores";
  const char* other = device ? "cores" : "neuron_cores";
  if (node[other]) {
    ctx.fail_key(node[other], key + "." + other,
                 fmt::format("{{key}}: an instance that runs {} counts its {}, not {}", inst.runs, count, other));
  }
  const long long slots = ctx.integer(required(node, ctx, key, count), key + "." + count, 1);
  if (slots > kMaxSlots) {
    ctx.fail_key(node[count], key + "." + count, fmt::format("{{key}}: expected at most {}, got {}", kMaxSlots, slots));
  }
  inst.slots = static_cast<int>(slots);
  inst.hardware = text(node, ctx, key, "hardware");

  const std::string price_key = key + ".price";
  const YAML::Node price = mapping(required(node, ctx, key, "price"), ctx, price_key, kPriceKeys);
  inst.usd_per_hour = {bounded(price, ctx, price_key, "usd_per_hour", 0, kMaxUsdPerHour, "a price in US dollars"),
                       text(price, ctx, price_key, "source"), iso_date(price, ctx, price_key)};
  inst.pricing = text(price, ctx, price_key, "pricing");
  inst.region = text(price, ctx, price_key, "region");

  const std::string power_key = key + ".power";
  const YAML::Node power = mapping(required(node, ctx, key, "power"), ctx, power_key, kPowerKeys);
  inst.watts = {bounded(power, ctx, power_key, "watts", 0, kMaxWatts, "a power in watts"),
                text(power, ctx, power_key, "source"), iso_date(power, ctx, power_key)};
  return inst;
}

InstanceTable read_table(const YAML::Node& root, const YamlReader& ctx) {
  if (!root.IsMap()) {
    ctx.fail(root, fmt::format("expected a mapping {{pue, defaults, instances}}, got {}", YamlReader::kind(root)));
  }
  ctx.check_keys(root, "instances file", kTopKeys);
  InstanceTable table;
  table.file = ctx.file();

  const YAML::Node pue = mapping(required(root, ctx, "instances file", "pue"), ctx, "pue", kPueKeys);
  table.pue = {bounded(pue, ctx, "pue", "value", 1, 3, "a power usage effectiveness", true),
               text(pue, ctx, "pue", "source"), iso_date(pue, ctx, "pue")};

  const YAML::Node instances = required(root, ctx, "instances file", "instances");
  if (!instances.IsMap() || instances.size() == 0) {
    ctx.fail_key(instances, "instances", fmt::format("{{key}}: expected a mapping of instance name: {{runs, ...}}, got {}",
                                                     instances.IsMap() ? "an empty mapping" : YamlReader::kind(instances)));
  }
  for (const auto& kv : instances) {
    const std::string name = ctx.scalar(kv.first, "instances", "an instance name");
    if (name.empty()) ctx.fail_key(kv.first, "instances", "{key}: expected an instance name, got an empty string");
    table.instances.push_back(read_instance(name, kv.second, ctx));
  }

  const YAML::Node defaults = mapping(required(root, ctx, "instances file", "defaults"), ctx, "defaults", kDefaultsKeys);
  const YAML::Node cpu = required(defaults, ctx, "defaults", "cpu");
  const auto cpu_names = table.names("cpu");
  if (cpu_names.empty()) ctx.fail_key(instances, "instances", "{key}: no instance runs cpu, so CPU runs have no price");
  table.default_cpu = cpu_names[ctx.choice_index(cpu, "defaults.cpu", cpu_names, "CPU instance")];
  return table;
}

}  // namespace

const CloudInstance* InstanceTable::find(const std::string& name) const {
  for (const auto& i : instances)
    if (i.name == name) return &i;
  return nullptr;
}

std::vector<std::string> InstanceTable::names(const std::string& runs) const {
  std::vector<std::string> out;
  for (const auto& i : instances)
    if (i.runs == runs) out.push_back(i.name);
  return out;
}

const char* builtin_instances_yaml() { return kInstancesYaml; }

InstanceTable load_instance_table(const std::string& path) {
  if (path.empty()) {
    // The built-in table is part of the program; tests/unit reads it, so a defect in it fails the build's tests.
    return read_table(YAML::Load(kInstancesYaml), YamlReader("devices/instances.yaml (built in)"));
  }
  return read_table(load_yaml_file(path, path), YamlReader(path));
}

}  // namespace dfmp2::app
