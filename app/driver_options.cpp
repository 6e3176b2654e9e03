// Keys `driver` and `perturb_dipole` (driver_options.hpp).
#include "app/driver_options.hpp"

#include <fmt/format.h>

#include <cmath>
#include <string>

#include "app/counterpoise_gradient.hpp"

namespace dfmp2::app {

namespace {

// A field beyond this (a.u., each component; 0.1 a.u. is 5e10 V/m) ionises any molecule: a slip, not a field.
constexpr double kLargestField = 0.1;

// Key `driver`: energy; the DF-MP2 gradient or Hessian, which need the molecule and its basis sets (their derivative
// integrals); or the MP2 densities' properties, which need them for the densities' integrals. Any reference (RHF,
// UHF, ROHF-MBPT(2)).
void read_driver(const YAML::Node& root, const YamlReader& ctx, Input& in) {
  const YAML::Node node = root["driver"];
  in.driver = ctx.choice(node, "driver", driver_names(), "driver");
  if (in.driver == Driver::energy) return;
  const bool properties = in.driver == Driver::properties;
  if (!in.molecule) {
    ctx.fail_key(node, "driver",
                 fmt::format("{{key}}: {} needs 'molecule' input (the {} integrals come from the molecule's basis "
                             "sets); {} gives no {}",
                             properties ? "properties" : "a " + linalg::name_in(driver_names(), in.driver),
                             properties ? "density's" : "derivative",
                             in.synthetic ? "a synthetic problem" : "an integral file",
                             properties ? "basis functions" : "geometry to differentiate"));
  }
  if (in.interaction && properties) {
    ctx.fail_key(node, "driver", "{key}: properties with 'interaction': the properties are one molecule's density; "
                                 "run the complex (or a fragment) without 'interaction'");
  }
  if (in.interaction) check_counterpoise_gradient(node, ctx, in);
  if (in.driver == Driver::hessian) {
    for (const chem::Atom& atom : in.molecule->atoms) {
      if (atom.ghost) {
        ctx.fail_key(node, "driver", "{key}: hessian: the molecule has ghost atoms, which have no mass for the "
                                     "frequencies; leave them out");
      }
    }
  }
}

// Key `perturb_dipole` (Psi4's perturb_h with perturb_with dipole): [Fx, Fy, Fz] in atomic units, about the
// input's origin; in the SCF's one-electron Hamiltonian and the nuclei's energy (chem::ScfOptions::electric_field).
// The derivative integrals have no field terms: a gradient or Hessian in a field is refused rather than wrong.
void read_perturb_dipole(const YAML::Node& root, const YamlReader& ctx, Input& in) {
  const YAML::Node node = root["perturb_dipole"];
  if (!node.IsSequence() || node.size() != 3) {
    ctx.fail_key(node, "perturb_dipole",
                 fmt::format("{{key}}: expected a list of 3 numbers [Fx, Fy, Fz] (a.u.), got {}",
                             node.IsSequence() ? fmt::format("a list of {}", node.size()) : YamlReader::kind(node)));
  }
  for (std::size_t i = 0; i < 3; ++i) {
    const double f = ctx.number(node[i], "perturb_dipole");
    if (!std::isfinite(f) || std::abs(f) > kLargestField) {
      ctx.fail_key(node[i], "perturb_dipole", fmt::format("{{key}}: component {} is {}: expected a finite field of at "
                                                          "most {} a.u. in magnitude", "xyz"[i], f, kLargestField));
    }
    in.scf.electric_field[i] = f;
  }
  if (!in.molecule) {
    ctx.fail_key(node, "perturb_dipole", "{key}: a field needs 'molecule' input (its dipole integrals come from the "
                                         "molecule's basis set)");
  }
  if (in.driver == Driver::gradient || in.driver == Driver::hessian) {
    ctx.fail_key(node, "perturb_dipole", fmt::format("{{key}}: driver {} in a field: the gradient has no field terms; "
                                                     "run energies (or properties) in the field",
                                                     linalg::name_in(driver_names(), in.driver)));
  }
}

}  // namespace

void read_driver_options(const YAML::Node& root, const YamlReader& ctx, Input& in) {
  if (root["driver"]) read_driver(root, ctx, in);
  if (root["perturb_dipole"]) read_perturb_dipole(root, ctx, in);
}

}  // namespace dfmp2::app
