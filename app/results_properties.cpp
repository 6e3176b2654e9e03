// driver: properties in the results file (README "Results file"): QCSchema's properties (scf_dipole_moment,
// scf_quadrupole_moment, mp2_dipole_moment), return_result the dictionary of properties an AtomicResult holds for this
// driver, Psi4's variables in extras.qcvars, and every density's properties in extras.dfmp2.properties. Atomic units.
#include <algorithm>
#include <cctype>
#include <string>

#include "app/results.hpp"

namespace dfmp2::app {

namespace {

nlohmann::json vector_json(const linalg::Vector& v) { return std::vector<double>(v.data(), v.data() + v.size()); }

// The second moment as the 3 x 3 matrix QCSchema and Psi4's variables hold (e a0^2, not traceless).
nlohmann::json matrix_3x3(const std::array<double, 6>& q) {
  return {{q[0], q[1], q[2]}, {q[1], q[3], q[4]}, {q[2], q[4], q[5]}};
}

nlohmann::json charges_json(const chem::AtomicCharges& c) {
  return {{"alpha_population", c.alpha}, {"beta_population", c.beta}, {"charge", c.charge}};
}

nlohmann::json density_json(const chem::DensityProperties& p) {
  return {{"dipole", p.multipoles.dipole},
          {"quadrupole", matrix_3x3(p.multipoles.quadrupole)},
          {"traceless_quadrupole", matrix_3x3(p.multipoles.traceless_quadrupole())},
          {"mulliken", charges_json(p.mulliken)},
          {"lowdin", charges_json(p.lowdin)},
          {"natural_occupations",
           {{"alpha", vector_json(p.natural_alpha.occupations)},
            {"beta", vector_json(p.natural_beta.occupations)},
            {"total", vector_json(p.natural.occupations)}}}};
}

}  // namespace

void add_properties(const Calculation& calc, nlohmann::json& j) {
  const PropertiesRun& p = *calc.properties;
  const chem::DfMp2Gradient& g = calc.gradient->result;
  const chem::Mp2Model& model = calc.input.mp2_model;
  std::string method = model.label();
  std::transform(method.begin(), method.end(), method.begin(), [](unsigned char c) { return std::tolower(c); });

  nlohmann::json& v = j["extras"]["qcvars"];
  v["SCF DIPOLE"] = p.scf.multipoles.dipole;
  v["SCF QUADRUPOLE"] = matrix_3x3(p.scf.multipoles.quadrupole);
  v[model.label() + " DIPOLE"] = v["CURRENT DIPOLE"] = p.relaxed.multipoles.dipole;
  v[model.label() + " QUADRUPOLE"] = v["CURRENT QUADRUPOLE"] = matrix_3x3(p.relaxed.multipoles.quadrupole);
  v["MULLIKEN CHARGES"] = p.relaxed.mulliken.charge;
  v["LOWDIN CHARGES"] = p.relaxed.lowdin.charge;

  nlohmann::json& q = j["properties"];
  q["scf_dipole_moment"] = p.scf.multipoles.dipole;
  q["scf_quadrupole_moment"] = matrix_3x3(p.scf.multipoles.quadrupole);
  if (model.method == chem::Mp2Method::mp2) q["mp2_dipole_moment"] = p.relaxed.multipoles.dipole;

  // An AtomicResult's return_result for driver properties: a dictionary with property keys.
  j["return_result"] = {{"scf_dipole_moment", p.scf.multipoles.dipole},
                        {"scf_quadrupole_moment", matrix_3x3(p.scf.multipoles.quadrupole)},
                        {method + "_dipole_moment", p.relaxed.multipoles.dipole},
                        {method + "_quadrupole_moment", matrix_3x3(p.relaxed.multipoles.quadrupole)},
                        {"mulliken_charges", p.relaxed.mulliken.charge},
                        {"lowdin_charges", p.relaxed.lowdin.charge},
                        {method + "_natural_occupations", vector_json(p.relaxed.natural.occupations)}};

  j["extras"]["dfmp2"]["properties"] = {{"method", model.label()},
                                        {"origin", p.origin},
                                        {"scf", density_json(p.scf)},
                                        {"unrelaxed", density_json(p.unrelaxed)},
                                        {"relaxed", density_json(p.relaxed)},
                                        {"mp2_correlation_energy", g.correlation()},
                                        {"zvector_iterations", g.zvector_iterations},
                                        {"zvector_residual", g.zvector_residual},
                                        {"seconds", p.seconds},
                                        {"density_seconds", calc.gradient->seconds}};
}

}  // namespace dfmp2::app
