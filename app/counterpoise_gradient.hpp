#pragma once
// Counterpoise-corrected gradients (README "Counterpoise-corrected gradients"): the input's check, beside the stage
// (app/counterpoise_gradient.cpp; its maker in app/stage.hpp).
#include <yaml-cpp/yaml.h>

#include "app/input.hpp"
#include "app/yaml_reader.hpp"

namespace dfmp2::app {

// `driver` (gradient or hessian) with `interaction`, at `node`: the counterpoise correction asked for (bsse cp or
// both), else the one line naming the key. (Each fragment's reference is fragment_reference's: RHF or UHF here, since
// an ROHF complex is refused with the driver.)
void check_counterpoise_gradient(const YAML::Node& node, const YamlReader& ctx, const Input& in);

}  // namespace dfmp2::app
