// The MP2 method's input keys (mp2_options.hpp).
#include "app/mp2_options.hpp"

#include <fmt/format.h>

#include <cmath>
#include <string>

namespace dfmp2::app {

namespace {

// A spin-component scale: a number from 0 to kLargestScale. Published scalings lie within 0-2 (SCS-MP2 6/5 and 1/3,
// SOS-MP2 1.3, SCS(MI) 0.40 and 1.29, SCS-MP2-vdW 1.28 and 0.50); a negative scale or one beyond 10 is a slip.
constexpr double kLargestScale = 10.0;

double read_scale(const YAML::Node& node, const std::string& key, const YamlReader& ctx) {
  const double v = ctx.number(node, key);
  if (!std::isfinite(v) || v < 0.0 || v > kLargestScale) {
    ctx.fail_key(node, key, fmt::format("{{key}}: expected a scale from 0 to {}, got '{}'", kLargestScale,
                                        node.Scalar()));
  }
  return v;
}

}  // namespace

void read_mp2_options(const YAML::Node& root, const YamlReader& ctx, Input& in) {
  chem::Mp2Model& m = in.mp2_model;
  if (const YAML::Node node = root["method"]) m.method = ctx.choice(node, "method", chem::mp2_method_names(), "method");
  // As in Psi4: mp2_os_scale and mp2_ss_scale are SCS-MP2's (the method's with scs-mp2, the SCS lines' always);
  // mp2_sos_scale is SOS-MP2's only, and anything else would leave it unused.
  if (const YAML::Node node = root["mp2_os_scale"]) m.scs.opposite_spin = read_scale(node, "mp2_os_scale", ctx);
  if (const YAML::Node node = root["mp2_ss_scale"]) m.scs.same_spin = read_scale(node, "mp2_ss_scale", ctx);
  if (const YAML::Node node = root["mp2_sos_scale"]) {
    if (m.method != chem::Mp2Method::sos_mp2) {
      ctx.fail_key(node, "mp2_sos_scale",
                   fmt::format("{{key}}: SOS-MP2's opposite-spin scale, used with 'method: sos-mp2' only (method is "
                               "{}); SCS-MP2's are mp2_os_scale and mp2_ss_scale",
                               linalg::name_in(chem::mp2_method_names(), m.method)));
    }
    m.sos = read_scale(node, "mp2_sos_scale", ctx);
  }
  if (const YAML::Node node = root["mp2_storage"]) {
    in.mp2_storage = ctx.choice(node, "mp2_storage", chem::mp2_storage_names(), "storage");
  }
}

}  // namespace dfmp2::app
