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
    {"OH, UHF, exact SCF, SCS-MP2",
     "  multiplicity: 2\n  xyz: |\n    O 0.0 0.1 0.0\n    H 0.05 0.0 0.97\n",
     "basis: cc-pvdz\nreference: uhf\nmethod: scs-mp2\nscf: {type: exact, e_convergence: 1e-12, d_convergence: 1e-10}\n",
     5, 4},
    {"H2O+, ROHF-MBPT(2), DF-SCF, frozen core",
     "  charge: 1\n  multiplicity: 2\n  xyz: |\n    O 0.0 0.05 0.117790\n    H 0.0 0.755453 -0.471161\n"
     "    H 0.03 -0.70 -0.50\n",
     "basis: cc-pvdz\nreference: rohf\nfrozen_core: true\nscf: {type: df, e_convergence: 1e-12, d_convergence: 1e-10}\n",
     5, 4},
};

std::string input(const Case& c, const std::string& driver, std::array<double, 3> field) {
  return fmt::format("molecule:\n{}{}threads: 2\ndriver: {}\nperturb_dipole: [{:.6e}, {:.6e}, {:.6e}]\n", c.molecule,
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

}  // namespace
