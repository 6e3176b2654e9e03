#pragma once
// Settings a device model takes from the input (key `device`, README "Device models"). CPU backends ignore them.
#include <map>
#include <string>

namespace dfmp2::devices {

struct DeviceOptions {
  // Parameter overrides per device name ("trn1", "trn2"): parameter name as in devices/neuron/neuron_devices.yaml
  // -> value in that file's unit. An unknown name is an InputError naming it.
  std::map<std::string, std::map<std::string, double>> overrides;
  // Folder of the persistent compile cache; empty: no cache on disk (every process starts cold).
  std::string compile_cache;
};

}  // namespace dfmp2::devices
