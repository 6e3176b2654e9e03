// driver: properties in the results file (README "Results file"): QCSchema's properties (scf_dipole_moment,
// scf_quadrupole_moment, mp2_dipole_moment), return_result the dictionary of properties an AtomicResult holds for this
// driver, Psi4's variables in extras.qcvars, and every density's properties in extras.dfmp2.properties. Atomic units.
#include <algorithm>
#include <cctype>
#include <string>

#include "app/results.hpp"
#include "chem/io/io.hpp"

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

nlohmann::json fitted_json(const chem::FittedCharges& f, const std::vector<double>& potential) {
  return {{"charges", f.charges},
          {"potential", potential},
          {"dipole", f.dipole},
          {"dipole_constrained", f.dipole_constrained},
          {"rms_residual", f.rms_residual},
          {"relative_residual", f.relative_residual}};
}

// The natural orbitals of the relaxed density (a closed shell's of both spins, an open shell's of each), or the SCF's
// orbitals with their energies and occupations (ROHF: its own orbitals, doubly, singly and unoccupied).
std::vector<chem::MoldenOrbitals> molden_sets(const Calculation& calc, bool natural) {
  const chem::ScfResult& scf = calc.reference.molecule()->scf;
  const bool open_shell = scf.reference != chem::ScfReference::rhf;
  auto occupations = [&](linalg::Index n, int doubly, int singly) {
    linalg::Vector o = linalg::Vector::Zero(n);
    o.head(doubly).setConstant(open_shell && scf.reference == chem::ScfReference::uhf ? 1.0 : 2.0);
    o.segment(doubly, singly).setConstant(1.0);
    return o;
  };
  if (natural) {
    const chem::DensityProperties& r = calc.properties->relaxed;
    auto set = [](const chem::NaturalOrbitals& no, bool beta) {
      return chem::MoldenOrbitals{no.coefficients, linalg::Vector::Zero(no.occupations.size()), no.occupations, beta};
    };
    if (!open_shell) return {set(r.natural, false)};
    return {set(r.natural_alpha, false), set(r.natural_beta, true)};
  }
  const auto n = scf.mo_coefficients.cols();
  switch (scf.reference) {
    case chem::ScfReference::rhf: return {{scf.mo_coefficients, scf.orbital_energies, occupations(n, scf.nocc, 0)}};
    case chem::ScfReference::uhf:
      return {{scf.mo_coefficients, scf.orbital_energies, occupations(n, scf.nocc, 0)},
              {scf.mo_coefficients_beta, scf.orbital_energies_beta, occupations(n, scf.nocc_beta, 0), true}};
    case chem::ScfReference::rohf:
      return {{scf.rohf_coefficients, scf.rohf_orbital_energies,
               occupations(n, scf.nocc_beta, scf.nocc - scf.nocc_beta)}};
  }
  return {};
}

}  // namespace

nlohmann::json step_seconds(const chem::DfMp2Gradient& g) {
  nlohmann::json steps = nlohmann::json::object();
  for (const auto& [step, seconds] : g.seconds) steps[step] = seconds;
  return steps;
}

void write_molden_files(const Calculation& calc) {
  if (!calc.properties) return;
  const Input::PropertiesOptions& o = calc.input.properties;
  const MoleculeRun& m = *calc.reference.molecule();
  if (o.molden)
    write_atomically(*o.molden, chem::molden_text(*calc.input.molecule, m.basis, molden_sets(calc, true)),
                     "properties.molden");
  if (o.scf_molden)
    write_atomically(*o.scf_molden, chem::molden_text(*calc.input.molecule, m.basis, molden_sets(calc, false)),
                     "properties.scf_molden");
}

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
                                        {"esp", p.esp_relaxed.empty() ? nlohmann::json(nullptr)
                                                : nlohmann::json{{"points_file", calc.input.properties.esp_points_file},
                                                                 {"points", calc.input.properties.esp_points},
                                                                 {"scf", p.esp_scf},
                                                                 {"relaxed", p.esp_relaxed}}},
                                        {"esp_charges", !p.fitted_relaxed ? nlohmann::json(nullptr)
                                                        : nlohmann::json{{"grid", "merz-kollman"},
                                                                         {"points", p.fit_points},
                                                                         {"scf", fitted_json(*p.fitted_scf,
                                                                                             p.fit_potential_scf)},
                                                                         {"relaxed", fitted_json(*p.fitted_relaxed,
                                                                                                 p.fit_potential_relaxed)}}},
                                        {"step_seconds", step_seconds(g)},
                                        {"seconds", p.seconds},
                                        {"density_seconds", calc.gradient->seconds}};
}

}  // namespace dfmp2::app
