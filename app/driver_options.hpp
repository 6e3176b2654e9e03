#pragma once
// Keys `driver`, `properties`, `perturb_dipole` and `external_charges` of the input (README "Input"): what the run
// returns (the energy, its gradient or Hessian, or the MP2 densities' properties) and what the molecule sits in (a
// uniform electric field, point charges).
#include <yaml-cpp/yaml.h>

#include "app/input.hpp"
#include "app/yaml_reader.hpp"

namespace dfmp2::app {

// After the molecule, the reference and `interaction` were read.
void read_driver_options(const YAML::Node& root, const YamlReader& ctx, Input& in);

}  // namespace dfmp2::app
