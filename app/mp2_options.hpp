#pragma once
// Keys `method`, `mp2_os_scale`, `mp2_ss_scale`, `mp2_sos_scale` and `mp2_storage` of the input (README "Input"):
// which energy the run returns and differentiates (MP2, SCS-MP2, SOS-MP2 and their scales), and where DF-MP2's
// tensors live.
#include <yaml-cpp/yaml.h>

#include "app/input.hpp"
#include "app/yaml_reader.hpp"

namespace dfmp2::app {

void read_mp2_options(const YAML::Node& root, const YamlReader& ctx, Input& in);

}  // namespace dfmp2::app
