// Keys `driver`, `perturb_dipole`, `properties` and `external_charges` (driver_options.hpp).
#include "app/driver_options.hpp"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

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

// A file of points, one "x y z" per line (blank lines and lines starting with '#' aside), as Psi4's grid.dat: at most
// kMaxEspPoints, none where a nucleus sits (the potential is infinite there). Bohr out.
constexpr std::size_t kMaxEspPoints = 1000000;
constexpr std::uintmax_t kMaxEspFileBytes = 64u << 20;

std::vector<std::array<double, 3>> read_esp_points(const YAML::Node& node, const YamlReader& ctx, double to_bohr,
                                                   const chem::Molecule& molecule, std::string& resolved) {
  namespace fs = std::filesystem;
  const std::string key = "properties.esp_points";
  const fs::path path = ctx.resolve(ctx.scalar(node, key, "a file path"));
  resolved = path.string();
  auto fail = [&](const std::string& what) { ctx.fail_key(node, key, "{key}: " + what); };
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) fail(fmt::format("'{}' does not exist", path.string()));
  if (!fs::is_regular_file(status)) fail(fmt::format("'{}' is not a regular file", path.string()));
  if (fs::file_size(path, ec) > kMaxEspFileBytes) {
    fail(fmt::format("'{}' is larger than {} MiB: more than any grid of {} points", path.string(),
                     kMaxEspFileBytes >> 20, kMaxEspPoints));
  }
  std::ifstream in(path);
  if (!in) fail(fmt::format("cannot read '{}'", path.string()));
  std::vector<std::array<double, 3>> points;
  std::string line;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    const std::size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    std::istringstream words(line);
    std::array<double, 3> p{};
    std::string word, extra;
    for (double& x : p) {
      const std::optional<double> v = words >> word ? as_number(word) : std::nullopt;
      if (!v || !std::isfinite(*v) || std::abs(*v) > 1e6) {
        fail(fmt::format("'{}' line {}: expected three finite coordinates 'x y z', got '{}'", path.string(), number,
                         line.substr(0, 80)));
      }
      x = *v * to_bohr;
    }
    if (words >> extra) fail(fmt::format("'{}' line {}: more than three numbers", path.string(), number));
    for (const chem::Atom& atom : molecule.atoms) {
      const double d = std::hypot(p[0] - atom.x * chem::kBohrPerAngstrom, p[1] - atom.y * chem::kBohrPerAngstrom,
                                  p[2] - atom.z * chem::kBohrPerAngstrom);
      if (!atom.ghost && d < 1e-3) {
        fail(fmt::format("'{}' line {}: the point is on the nucleus of atom {} ({}), where the potential is infinite",
                         path.string(), number, &atom - molecule.atoms.data() + 1, atom.symbol));
      }
    }
    if (points.size() == kMaxEspPoints) fail(fmt::format("'{}': more than {} points", path.string(), kMaxEspPoints));
    points.push_back(p);
  }
  if (points.empty()) fail(fmt::format("'{}' holds no points", path.string()));
  return points;
}

// Key `properties` (driver: properties): origin, esp_points and esp_units, esp_charges, molden, scf_molden.
void read_properties(const YAML::Node& root, const YamlReader& ctx, Input& in) {
  const YAML::Node node = root["properties"];
  if (in.driver != Driver::properties) {
    ctx.fail_key(node, "properties", "{key}: only with 'driver: properties' (it says what the properties run gives)");
  }
  if (!node.IsMap()) {
    ctx.fail_key(node, "properties", fmt::format("{{key}}: expected a mapping {{origin, esp_points, esp_units, "
                                                 "esp_charges, molden, scf_molden}}, got {}", YamlReader::kind(node)));
  }
  ctx.check_keys(node, "properties", {"origin", "esp_points", "esp_units", "esp_charges", "molden", "scf_molden"});
  Input::PropertiesOptions& p = in.properties;
  if (const YAML::Node n = node["origin"]) {
    if (!n.IsSequence() || n.size() != 3) {
      ctx.fail_key(n, "properties.origin", "{key}: expected a list of 3 numbers [x, y, z] (bohr)");
    }
    for (std::size_t i = 0; i < 3; ++i) {
      p.origin[i] = ctx.number(n[i], "properties.origin");
      if (!std::isfinite(p.origin[i]) || std::abs(p.origin[i]) > 1e6) {
        ctx.fail_key(n[i], "properties.origin", "{key}: expected finite coordinates within 1e6 bohr");
      }
    }
  }
  if (node["esp_units"] && !node["esp_points"]) {
    ctx.fail_key(node["esp_units"], "properties.esp_units", "{key}: without 'esp_points' it changes nothing");
  }
  if (const YAML::Node n = node["esp_points"]) {
    double to_bohr = chem::kBohrPerAngstrom;  // angstrom, as Psi4 reads grid.dat
    if (const YAML::Node u = node["esp_units"]) {
      const std::string units = ctx.scalar(u, "properties.esp_units", "angstrom or bohr");
      if (units == "bohr") to_bohr = 1.0;
      else if (units != "angstrom") ctx.fail_key(u, "properties.esp_units", fmt::format("{{key}}: expected angstrom or bohr, got '{}'", units));
    }
    p.esp_points = read_esp_points(n, ctx, to_bohr, *in.molecule, p.esp_points_file);
  }
  if (const YAML::Node n = node["esp_charges"]) {
    if (n.IsMap()) {
      ctx.check_keys(n, "properties.esp_charges", {"dipole", "density"});
      p.esp_charges = true;
      if (n["dipole"]) p.esp_charges_dipole = ctx.boolean(n["dipole"], "properties.esp_charges.dipole");
      if (n["density"]) {
        p.esp_density = ctx.number(n["density"], "properties.esp_charges.density");
        if (!(p.esp_density >= 0.1 && p.esp_density <= 100.0)) {
          ctx.fail_key(n["density"], "properties.esp_charges.density",
                       "{key}: expected from 0.1 to 100 points per square angstrom");
        }
      }
    } else {
      p.esp_charges = ctx.boolean(n, "properties.esp_charges");
    }
    for (const chem::Atom& atom : in.molecule->atoms) {
      if (p.esp_charges && atom.atomic_number > 36) {
        ctx.fail_key(n, "properties.esp_charges", fmt::format("{{key}}: no van der Waals radius for {} (beyond krypton) "
                                                              "to place the fitting grid", atom.symbol));
      }
    }
  }
  for (const char* key : {"molden", "scf_molden"}) {
    if (const YAML::Node n = node[key]) {
      const std::string full = std::string("properties.") + key;
      (key == std::string("molden") ? p.molden : p.scf_molden) = ctx.resolve(ctx.scalar(n, full, "a file path")).string();
      for (const chem::Atom& atom : in.molecule->atoms) {
        if (atom.core_electrons > 0 && !atom.ghost) {
          ctx.fail_key(n, full, fmt::format("{{key}}: {} carries an effective core potential, and dfmp2's Molden files "
                                            "do not yet give the [Pseudo] charges a reader would need", atom.symbol));
        }
      }
    }
  }
  if (p.molden && p.scf_molden && *p.molden == *p.scf_molden) {
    ctx.fail_key(node["scf_molden"], "properties.scf_molden", "{key}: the same file as 'properties.molden'");
  }
}

// Key `external_charges` (Psi4's EXTERN, QM/MM point charges): a list of [q, x, y, z], the charge in e and the
// position in angstrom (as Psi4's QMMM().extern.addCharge takes them for a molecule in angstrom); in the SCF's
// Hamiltonian and the nuclei's energy (chem::ScfOptions::external_charges), and in the gradient (the forces on the
// atoms and on the charges). Not yet: a Hessian, or a counterpoise-corrected gradient, among charges.
constexpr std::size_t kMaxExternalCharges = 100000;
constexpr double kClosestToANucleus = 0.5;  // bohr: nearer, a point charge sits inside the atom's core

void read_external_charges(const YAML::Node& root, const YamlReader& ctx, Input& in) {
  const YAML::Node node = root["external_charges"];
  const std::string key = "external_charges";
  if (!in.molecule) ctx.fail_key(node, key, "{key}: point charges need 'molecule' input (their integrals come from the molecule's basis set)");
  if (!node.IsSequence() || node.size() == 0 || node.size() > kMaxExternalCharges) {
    ctx.fail_key(node, key, fmt::format("{{key}}: expected a list of 1 to {} charges [q, x, y, z] (e, angstrom), got {}",
                                        kMaxExternalCharges,
                                        node.IsSequence() ? fmt::format("a list of {}", node.size()) : YamlReader::kind(node)));
  }
  for (std::size_t c = 0; c < node.size(); ++c) {
    const YAML::Node entry = node[c];
    const std::string where = fmt::format("external_charges[{}]", c);
    if (!entry.IsSequence() || entry.size() != 4) {
      ctx.fail_key(entry, where, "{key}: expected [q, x, y, z] (the charge in e, the position in angstrom)");
    }
    std::array<double, 4> v{};
    for (std::size_t i = 0; i < 4; ++i) {
      v[i] = ctx.number(entry[i], where);
      const double limit = i == 0 ? 10.0 : 1e5;
      if (!std::isfinite(v[i]) || std::abs(v[i]) > limit) {
        ctx.fail_key(entry[i], where, fmt::format("{{key}}: {} is {}: expected a finite {} of at most {} in magnitude",
                                                  i == 0 ? "the charge" : "a coordinate", v[i],
                                                  i == 0 ? "charge (e)" : "coordinate (angstrom)", limit));
      }
    }
    const std::array<double, 3> r = {v[1] * chem::kBohrPerAngstrom, v[2] * chem::kBohrPerAngstrom,
                                     v[3] * chem::kBohrPerAngstrom};
    for (const chem::Atom& atom : in.molecule->atoms) {
      const double d = std::hypot(r[0] - atom.x * chem::kBohrPerAngstrom, r[1] - atom.y * chem::kBohrPerAngstrom,
                                  r[2] - atom.z * chem::kBohrPerAngstrom);
      if (!atom.ghost && d < kClosestToANucleus) {
        ctx.fail_key(entry, where, fmt::format("{{key}}: {:.3f} bohr from atom {} ({}): a point charge this close sits "
                                               "inside the atom (at least {} bohr)", d,
                                               &atom - in.molecule->atoms.data() + 1, atom.symbol, kClosestToANucleus));
      }
    }
    in.scf.external_charges.push_back({v[0], r});
  }
  if (in.driver == Driver::hessian) {
    ctx.fail_key(node, key, "{key}: driver hessian among point charges: the charges move too, and a Hessian of the "
                            "atoms alone is not offered yet; run the gradient (the forces on atoms and charges)");
  }
  if (in.driver == Driver::gradient && in.interaction) {
    ctx.fail_key(node, key, "{key}: a counterpoise-corrected gradient among point charges is not offered yet (the "
                            "charges' forces of each fragment's calculation); run the complex's gradient, or energies");
  }
}

}  // namespace

void read_driver_options(const YAML::Node& root, const YamlReader& ctx, Input& in) {
  if (root["driver"]) read_driver(root, ctx, in);
  if (root["perturb_dipole"]) read_perturb_dipole(root, ctx, in);
  if (root["properties"]) read_properties(root, ctx, in);
  if (root["external_charges"]) read_external_charges(root, ctx, in);
}

}  // namespace dfmp2::app
