// MP2 properties (`driver: properties`) and the uniform electric field (`perturb_dipole`) as a user runs them: the
// relaxed dipole of every reference is the derivative of the energy with respect to the field, and the densities hold
// the electrons they should.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "../support/test_support.hpp"

namespace {

using dfmp2::testing::TempDir;
using Finished = dfmp2::testing::FinishedRun;
Finished run(const TempDir& dir, const std::string& yaml) { return dfmp2::testing::run_input(dir, yaml); }

struct Case {
  std::string name;
  std::string molecule;  // the `molecule` mapping's lines
  std::string keys;
  int alpha = 0, beta = 0;  // electrons of each spin
};

const Case kCases[] = {
    {"water, RHF, DF-SCF, frozen core",
     "  xyz: |\n    O 0.0 0.02 0.117790\n    H 0.0 0.755453 -0.471161\n    H 0.03 -0.75 -0.48\n",
     "basis: cc-pvdz\nfrozen_core: true\nscf: {type: df, e_convergence: 1e-12, d_convergence: 1e-10}\n", 5, 5},
    {"OH, UHF, exact SCF, SCS-MP2, ghost He",
     "  multiplicity: 2\n  xyz: |\n    O 0.0 0.1 0.0\n    H 0.05 0.0 0.97\n    @He 1.2 0.9 -0.8\n",
     "basis: cc-pvdz\nreference: uhf\nmethod: scs-mp2\nscf: {type: exact, e_convergence: 1e-12, d_convergence: 1e-10}\n",
     5, 4},
    {"H2O+, ROHF-MBPT(2), DF-SCF, frozen core",
     "  charge: 1\n  multiplicity: 2\n  xyz: |\n    O 0.0 0.05 0.117790\n    H 0.0 0.755453 -0.471161\n"
     "    H 0.03 -0.70 -0.50\n",
     "basis: cc-pvdz\nreference: rohf\nfrozen_core: true\nscf: {type: df, e_convergence: 1e-12, d_convergence: 1e-10}\n",
     5, 4},
};

std::string input(const Case& c, const std::string& driver, std::array<double, 3> field) {
  return fmt::format("molecule:\n{}{}threads: 1\ndriver: {}\nperturb_dipole: [{:.6e}, {:.6e}, {:.6e}]\n", c.molecule,
                     c.keys, driver, field[0], field[1], field[2]);
}

double sum(const nlohmann::json& values) {
  double s = 0;
  for (const auto& v : values) s += v.get<double>();
  return s;
}

// The relaxed dipole against five-point differences of the returned energy in fields of +-1e-4 and +-2e-4 a.u. along
// each axis (E(F) = E(0) + F . mu + ..., as Psi4's perturb_dipole defines the field): within 1e-6 a.u. Each density's
// spin populations sum to its spin's electrons, and its natural occupations to all of them.
TEST(Properties, RelaxedDipoleIsTheFieldDerivativeOfTheEnergy) {
  constexpr double kField = 1e-4;
  TempDir dir;
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const Finished p = run(dir, input(c, "properties", {0.0, 0.0, 0.0}));
    ASSERT_EQ(p.json["driver"], "properties");
    const nlohmann::json& props = p.json["extras"]["dfmp2"]["properties"];
    const nlohmann::json& dipole = props["relaxed"]["dipole"];
    EXPECT_EQ(p.json["extras"]["qcvars"]["CURRENT DIPOLE"], dipole);
    for (const char* kind : {"scf", "unrelaxed", "relaxed"}) {
      SCOPED_TRACE(kind);
      const nlohmann::json& d = props[kind];
      EXPECT_NEAR(sum(d["mulliken"]["alpha_population"]), c.alpha, 1e-10);
      EXPECT_NEAR(sum(d["mulliken"]["beta_population"]), c.beta, 1e-10);
      EXPECT_NEAR(sum(d["lowdin"]["alpha_population"]), c.alpha, 1e-10);
      EXPECT_NEAR(sum(d["natural_occupations"]["total"]), c.alpha + c.beta, 1e-10);
      EXPECT_NEAR(sum(d["natural_occupations"]["beta"]), c.beta, 1e-10);
    }
    // The relaxed and unrelaxed densities differ (the orbital response is there).
    EXPECT_GT(std::abs(dipole[2].get<double>() - props["unrelaxed"]["dipole"][2].get<double>()), 1e-4);
    for (std::size_t axis = 0; axis < 3; ++axis) {
      double stencil[4];
      int k = 0;
      for (const double s : {-2.0, -1.0, 1.0, 2.0}) {
        std::array<double, 3> field{};
        field[axis] = s * kField;
        stencil[k++] = run(dir, input(c, "energy", field)).json["return_result"].get<double>();
      }
      const double fd = (stencil[0] - 8 * stencil[1] + 8 * stencil[2] - stencil[3]) / (12 * kField);
      EXPECT_NEAR(dipole[axis].get<double>(), fd, 1e-6) << "axis " << axis;
    }
  }
}

// The field's place in the report and the results: the SCF section says so, the nuclear repulsion counts it.
TEST(Properties, FieldIsReported) {
  TempDir dir;
  const Finished zero = run(dir, input(kCases[0], "energy", {0.0, 0.0, 0.0}));
  const Finished field = run(dir, input(kCases[0], "energy", {0.0, 0.0, 1e-3}));
  EXPECT_NE(field.report.find("in a uniform electric field"), std::string::npos);
  EXPECT_EQ(zero.report.find("in a uniform electric field"), std::string::npos);
  EXPECT_NE(zero.json["properties"]["nuclear_repulsion_energy"], field.json["properties"]["nuclear_repulsion_energy"]);
}

// Charges fitted to the electrostatic potential on the Merz-Kollman shells (water, relaxed and SCF densities): they
// add up to the molecule's charge, reproduce the potential they were fitted to with the residual the run states, are
// the least-squares optimum under that constraint (the misfit's gradient is a multiple of the constraint's), and with
// `dipole: true` carry the density's dipole; without it their dipole is within 0.05 e a0 of the density's.
TEST(Properties, EspChargesReproduceTheirPotential) {
  TempDir dir;
  for (const bool dipole : {false, true}) {
    SCOPED_TRACE(dipole ? "dipole held" : "charge only");
    const Finished p = run(dir, fmt::format("molecule:\n{}{}threads: 1\ndriver: properties\n"
                                            "properties: {{esp_charges: {{dipole: {}}}}}\n",
                                            kCases[0].molecule, kCases[0].keys, dipole ? "true" : "false"));
    const nlohmann::json& esp = p.json["extras"]["dfmp2"]["properties"]["esp_charges"];
    const nlohmann::json& points = esp["points"];
    ASSERT_GT(points.size(), 200u);
    EXPECT_NE(p.report.find("charges fitted to the electrostatic potential"), std::string::npos);
    for (const char* kind : {"scf", "relaxed"}) {
      SCOPED_TRACE(kind);
      const nlohmann::json& f = esp[kind];
      const nlohmann::json& atoms = p.json["molecule"]["geometry"];
      std::vector<double> q = f["charges"].get<std::vector<double>>();
      EXPECT_NEAR(q[0] + q[1] + q[2], 0.0, 1e-10);
      // The misfit and its gradient with respect to each charge.
      double squares = 0;
      std::array<double, 3> gradient{};
      for (std::size_t k = 0; k < points.size(); ++k) {
        std::array<double, 3> inverse{};
        double fitted = 0;
        for (std::size_t a = 0; a < 3; ++a) {
          double r2 = 0;
          for (std::size_t i = 0; i < 3; ++i) {
            const double d = points[k][i].get<double>() - atoms[3 * a + i].get<double>();
            r2 += d * d;
          }
          inverse[a] = 1.0 / std::sqrt(r2);
          fitted += q[a] * inverse[a];
        }
        const double misfit = fitted - f["potential"][k].get<double>();
        squares += misfit * misfit;
        for (std::size_t a = 0; a < 3; ++a) gradient[a] += misfit * inverse[a];
      }
      EXPECT_NEAR(std::sqrt(squares / double(points.size())), f["rms_residual"].get<double>(), 1e-12);
      EXPECT_LT(f["relative_residual"].get<double>(), 0.2);
      const nlohmann::json& mu = p.json["extras"]["dfmp2"]["properties"][kind]["dipole"];
      std::array<double, 3> charges_dipole{};
      for (std::size_t a = 0; a < 3; ++a)
        for (std::size_t i = 0; i < 3; ++i) charges_dipole[i] += q[a] * atoms[3 * a + i].get<double>();
      for (std::size_t i = 0; i < 3; ++i) {
        EXPECT_NEAR(charges_dipole[i], f["dipole"][i].get<double>(), 1e-10);
        EXPECT_NEAR(charges_dipole[i], mu[i].get<double>(), dipole ? 1e-8 : 0.05);
      }
      if (!dipole) {  // stationary along every charge change that keeps the total: equal gradient components
        EXPECT_NEAR(gradient[0], gradient[1], 1e-9);
        EXPECT_NEAR(gradient[0], gradient[2], 1e-9);
      }
    }
  }
}

}  // namespace
