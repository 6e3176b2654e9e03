#include "devices/neuron/neuron_params.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <stdexcept>
#include <utility>

#include "devices/neuron/neuron_devices_yaml.hpp"  // generated: kNeuronDevicesYaml
#include "linalg/errors.hpp"

namespace dfmp2::devices::neuron {
namespace {

using Field = double NeuronParams::*;

const std::vector<std::pair<std::string, Field>>& fields() {
  static const std::vector<std::pair<std::string, Field>> table = {
      {"pe_clock_ghz", &NeuronParams::pe_clock_ghz},
      {"pe_rows", &NeuronParams::pe_rows},
      {"moving_free_max", &NeuronParams::moving_free_max},
      {"matmul_min_cycles", &NeuronParams::matmul_min_cycles},
      {"fp32_cost_factor", &NeuronParams::fp32_cost_factor},
      {"vector_clock_ghz", &NeuronParams::vector_clock_ghz},
      {"scalar_clock_ghz", &NeuronParams::scalar_clock_ghz},
      {"engine_lanes", &NeuronParams::engine_lanes},
      {"sbuf_partition_kib", &NeuronParams::sbuf_partition_kib},
      {"psum_partition_kib", &NeuronParams::psum_partition_kib},
      {"dma_engines", &NeuronParams::dma_engines},
      {"dma_engine_gbps", &NeuronParams::dma_engine_gbps},
      {"dma_fixed_us", &NeuronParams::dma_fixed_us},
      {"hbm_gib", &NeuronParams::hbm_gib},
      {"hbm_gbps", &NeuronParams::hbm_gbps},
      {"dispatch_ms", &NeuronParams::dispatch_ms},
      {"dispatch_tensor_ms", &NeuronParams::dispatch_tensor_ms},
      {"host_link_gbps", &NeuronParams::host_link_gbps},
      {"host_copy_us", &NeuronParams::host_copy_us},
      {"host_gflops", &NeuronParams::host_gflops},
      {"syrk_mirror_gbps", &NeuronParams::syrk_mirror_gbps},
      {"densify_memset_gbps", &NeuronParams::densify_memset_gbps},
      {"densify_ns_per_nnz", &NeuronParams::densify_ns_per_nnz},
      {"compile_base_s", &NeuronParams::compile_base_s},
      {"compile_ms_per_instruction", &NeuronParams::compile_ms_per_instruction},
      {"cache_load_ms", &NeuronParams::cache_load_ms},
      {"queue_depth", &NeuronParams::queue_depth},
  };
  return table;
}

Field find_field(const std::string& name) {
  for (const auto& [n, f] : fields())
    if (n == name) return f;
  return nullptr;
}

// Zero is allowed where it means "no such cost"; rates, sizes and clocks must be positive.
bool may_be_zero(const std::string& name) {
  return name == "dma_fixed_us" || name == "dispatch_ms" || name == "dispatch_tensor_ms" || name == "host_copy_us" ||
         name == "densify_ns_per_nnz" || name == "compile_base_s" || name == "compile_ms_per_instruction" ||
         name == "cache_load_ms";
}

void check_value(const std::string& device, const std::string& name, double v) {
  const bool ok = std::isfinite(v) && (v > 0 || (v == 0 && may_be_zero(name)));
  if (!ok) throw InputError(fmt::format("device '{}': parameter '{}' = {} must be {}", device, name, v,
                                        may_be_zero(name) ? ">= 0" : "> 0"));
  if (name == "queue_depth" && (v < 1 || v != std::floor(v)))
    throw InputError(fmt::format("device '{}': parameter 'queue_depth' = {} must be a whole number >= 1", device, v));
  if ((name == "pe_rows" || name == "moving_free_max") && v != std::floor(v))
    throw InputError(fmt::format("device '{}': parameter '{}' = {} must be a whole number", device, name, v));
}

}  // namespace

const char* neuron_devices_yaml() { return kNeuronDevicesYaml; }

std::vector<std::string> neuron_devices() { return {"trn1", "trn2"}; }

std::vector<std::string> neuron_parameter_names() {
  std::vector<std::string> names;
  for (const auto& f : fields()) names.push_back(f.first);
  return names;
}

NeuronParams load_neuron_params(const std::string& device, const DeviceOptions& options) {
  // The embedded file is part of the program: a malformed one is a build defect (logic_error), not an input error.
  const YAML::Node root = YAML::Load(kNeuronDevicesYaml);
  const YAML::Node node = root[device];
  if (!node || !node.IsMap())
    throw UnsupportedError(fmt::format("no NeuronCore model named '{}' (known: {})", device,
                                       fmt::join(neuron_devices(), ", ")));
  NeuronParams p;
  p.device = device;
  for (const auto& entry : node) {
    const auto name = entry.first.as<std::string>();
    const Field f = find_field(name);
    if (!f) throw std::logic_error("neuron_devices.yaml: " + device + ": unknown parameter '" + name + "'");
    if (!entry.second["value"] || !entry.second["unit"] || !entry.second["source"])
      throw std::logic_error("neuron_devices.yaml: " + device + "." + name + " lacks value, unit or source");
    p.*f = entry.second["value"].as<double>();
  }
  for (const auto& [name, f] : fields())
    if (!node[name]) throw std::logic_error("neuron_devices.yaml: " + device + " lacks parameter '" + name + "'");

  if (const auto it = options.overrides.find(device); it != options.overrides.end()) {
    for (const auto& [name, value] : it->second) {
      const Field f = find_field(name);
      if (!f)
        throw InputError(fmt::format("unknown parameter '{}' for device '{}' (known: {})", name, device,
                                     fmt::join(neuron_parameter_names(), ", ")));
      check_value(device, name, value);
      p.*f = value;
    }
  }
  return p;
}

}  // namespace dfmp2::devices::neuron
