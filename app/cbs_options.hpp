#pragma once
// Key `cbs` and a basis series in `basis` (README "Basis-set extrapolation"): the basis sets of an extrapolation to
// the complete-basis-set limit and its schemes, as Psi4's cbs() takes them.
#include <yaml-cpp/yaml.h>

#include "app/input.hpp"
#include "app/yaml_reader.hpp"

namespace dfmp2::app {

// After `basis` was read into in.basis and before the fitting sets are chosen: with a series (cc-pv[dt]z) or key
// `cbs`, sets in.cbs and makes in.basis the largest basis of the extrapolation.
void read_cbs_options(const YAML::Node& root, const YamlReader& ctx, Input& in);

// The input of the calculation in `basis` (one of in.cbs's), with the fitting sets that go with it.
Input cbs_basis_input(const Input& in, const std::string& basis);

}  // namespace dfmp2::app
