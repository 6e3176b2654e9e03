// DF-MP2 gradients (`driver: gradient`) as a user runs them: the shipped example against Psi4, the report's section
// and the results file's fields; the same gradient from every SCF J/K storage and CPU backend; the memory promise.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../support/test_support.hpp"

namespace {

using dfmp2::testing::run_command;
using dfmp2::testing::TempDir;

using Finished = dfmp2::testing::FinishedRun;
Finished run(const TempDir& dir, const std::string& yaml) { return dfmp2::testing::run_input(dir, yaml); }

std::string example() {
  std::ifstream in(std::string(DFMP2_SOURCE_DIR) + "/inputs/water-gradient.yaml");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

double largest_difference(const nlohmann::json& a, const nlohmann::json& b) {
  double d = 0;
  for (std::size_t k = 0; k < a.size(); ++k) d = std::max(d, std::abs(a[k].get<double>() - b[k].get<double>()));
  return d;
}

// The shipped example against the Psi4 1.3.2 numbers in its comment, and where the gradient appears.
TEST(Gradient, ExampleInputMatchesPsi4) {
  TempDir dir;
  const Finished r = run(dir, example() + "threads: 2\n");
  const nlohmann::json psi4 = {-0.000359741916, 0.049417075898, -0.026339621239, 0.000113550062, -0.045932421020,
                               0.033638631178,  0.000246191854, -0.003484654879, -0.007299009939};
  EXPECT_EQ(r.json["driver"], "gradient");
  ASSERT_EQ(r.json["return_result"].size(), 9u);
  EXPECT_LT(largest_difference(r.json["return_result"], psi4), 1e-8);
  EXPECT_EQ(r.json["properties"]["return_gradient"], r.json["return_result"]);
  EXPECT_EQ(r.json["properties"]["calcinfo_natom"], 3);
  EXPECT_EQ(r.json["extras"]["qcvars"]["MP2 TOTAL GRADIENT"].size(), 3u);
  const auto& g = r.json["extras"]["dfmp2"]["gradient"];
  EXPECT_LT(g["zvector_residual"].get<double>(), 1e-8);
  for (const char* line : {"==> DF-MP2 gradient <==", "MP2 total gradient [Eh/bohr]", "SCF gradient [Eh/bohr]",
                           "MP2 relaxed dipole", "Kernel timings of the gradient", "computed once, by the gradient"}) {
    EXPECT_NE(r.report.find(line), std::string::npos) << line;
  }
  // The energy is computed once, by the gradient's amplitude pass: no DF-MP2 run and no DF-MP2 rows in the plan,
  // and the energy is what the energy's own kernels give (driver: energy on the same input).
  const auto& first = r.json["extras"]["dfmp2"]["backends"][0];
  EXPECT_TRUE(first["energy_from_gradient"].get<bool>());
  EXPECT_TRUE(first["blocking"].is_null());
  EXPECT_EQ(first["kernels"].size(), 0u);
  std::vector<std::string> phases;
  for (const auto& phase : r.json["extras"]["dfmp2"]["memory_plan"]["phases"]) phases.push_back(phase["phase"]);
  EXPECT_EQ(phases, (std::vector<std::string>{"SCF", "SCF J/K", "MP2 gradient"}));
  std::string energy_input = example();
  energy_input.replace(energy_input.find("driver: gradient"), 16, "driver: energy");
  const Finished energy = run(dir, energy_input + "threads: 2\n");
  EXPECT_FALSE(energy.json["extras"]["dfmp2"]["backends"][0]["energy_from_gradient"].get<bool>());
  for (const char* key : {"mp2_correlation_energy", "mp2_same_spin_correlation_energy",
                          "mp2_opposite_spin_correlation_energy", "mp2_total_energy"}) {
    EXPECT_NEAR(r.json["properties"][key].get<double>(), energy.json["properties"][key].get<double>(), 1e-12) << key;
  }
}

// A second backend, or another metric, runs its DF-MP2 energy as the input asks; only the gradient's own energy
// (its backend, fp64, the Cholesky metric, no screening) comes from the gradient.
TEST(Gradient, OtherEnergiesRunTheirOwnDfMp2) {
  TempDir dir;
  const Finished two = run(dir, example() + "threads: 2\nbackends: [eigen, openblas]\n");
  const auto& runs = two.json["extras"]["dfmp2"]["backends"];
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_TRUE(runs[0]["energy_from_gradient"].get<bool>());
  EXPECT_FALSE(runs[1]["energy_from_gradient"].get<bool>());
  EXPECT_GT(runs[1]["kernels"].size(), 0u);
  EXPECT_NEAR(runs[0]["properties"]["mp2_correlation_energy"].get<double>(),
              runs[1]["properties"]["mp2_correlation_energy"].get<double>(), 1e-12);
  EXPECT_EQ(two.json["extras"]["dfmp2"]["gradient"]["backend"], "eigen");
  EXPECT_NE(two.report.find("==> Backend comparison <=="), std::string::npos);
  EXPECT_NE(two.report.find("eigen fp64: the energy of the gradient's amplitude pass; wall is the gradient step's"),
            std::string::npos);
  const Finished eigh = run(dir, example() + "threads: 2\nmetric: eigh\n");
  EXPECT_FALSE(eigh.json["extras"]["dfmp2"]["backends"][0]["energy_from_gradient"].get<bool>());
  EXPECT_EQ(eigh.report.find("computed once, by the gradient"), std::string::npos);
  EXPECT_NEAR(eigh.json["properties"]["mp2_correlation_energy"].get<double>(),
              two.json["properties"]["mp2_correlation_energy"].get<double>(), 1e-9);
}

// Every storage of the DF-SCF's J/K (the orbital response's builds go through it) and every CPU backend give the
// same gradient, within 1e-10 Eh/bohr; the peak resident memory stays within `memory`.
TEST(Gradient, StoragesAndBackendsAgree) {
  TempDir dir;
  std::string base = example();
  base.erase(base.find("scf:"), base.find('\n', base.find("scf:")) - base.find("scf:") + 1);  // each variant's own
  base += "threads: 2\nmemory: 1 GiB\n";
  const Finished memory = run(dir, base + "scf: {e_convergence: 1e-10, d_convergence: 1e-10, jk_storage: memory}\n");
  EXPECT_LE(memory.json["extras"]["dfmp2"]["mpi"]["peak_resident_bytes"][0].get<double>(), double(1 << 30));
  // The SCF's J/K fits beside DF-MP2's blocks: kept from the SCF for the orbital response, and the plan says so.
  for (const auto& phase : memory.json["extras"]["dfmp2"]["memory_plan"]["phases"])
    if (phase["phase"] == "MP2 gradient")
      EXPECT_NE(phase["reason"].get<std::string>().find("kept from the SCF"), std::string::npos) << phase["reason"];
  for (const std::string variant :
       {"scf: {e_convergence: 1e-10, d_convergence: 1e-10, jk_storage: scratch}\n",
        "scf: {e_convergence: 1e-10, d_convergence: 1e-10, jk_storage: recompute}\n",
        "scf: {e_convergence: 1e-10, d_convergence: 1e-10}\nmp2_storage: scratch\n",
        "scf: {e_convergence: 1e-10, d_convergence: 1e-10}\nbackends: [eigen]\n",
        "scf: {e_convergence: 1e-10, d_convergence: 1e-10}\nbackends: [openblas]\n",
        "scf: {e_convergence: 1e-10, d_convergence: 1e-10}\nbackends: [trn1]\n"}) {
    SCOPED_TRACE(variant);
    const Finished other = run(dir, base + variant);
    EXPECT_LT(largest_difference(other.json["return_result"], memory.json["return_result"]), 1e-10);
    // With only a device model named, the energy runs on it (fp32) and the gradient on the host, which the report says.
    if (variant.find("trn1") != std::string::npos)
      EXPECT_NE(other.report.find("the device models have no fp64"), std::string::npos);
    if (variant.find("mp2_storage: scratch") != std::string::npos) {  // the gradient's blocks on scratch too
      bool on_scratch = false;
      for (const auto& phase : other.json["extras"]["dfmp2"]["memory_plan"]["phases"])
        if (phase["phase"] == "MP2 gradient") on_scratch = phase["storage"] == "scratch";
      EXPECT_TRUE(on_scratch);
    }
  }
}

// driver: hessian on the example: the Hessian (3 natoms x 3 natoms, symmetric) as return_result, its harmonic
// analysis in the results file and the report. (Its frequencies against Psi4's dfmp2-freq samples: the psi4 tier.)
TEST(Gradient, HessianOfTheExample) {
  TempDir dir;
  std::string yaml = example();
  yaml.replace(yaml.find("driver: gradient"), 16, "driver: hessian");
  const Finished r = run(dir, yaml + "threads: 2\n");
  EXPECT_EQ(r.json["driver"], "hessian");
  const auto& h = r.json["return_result"];
  ASSERT_EQ(h.size(), 81u);
  for (int i = 0; i < 9; ++i)
    for (int j = 0; j < 9; ++j) EXPECT_DOUBLE_EQ(h[9 * i + j].get<double>(), h[9 * j + i].get<double>());
  const auto& v = r.json["extras"]["dfmp2"]["vibrations"];
  EXPECT_EQ(v["displacements"], 18);
  EXPECT_EQ(v["projected_rigid_motions"], 6);
  ASSERT_EQ(v["frequencies_cm"].size(), 3u);
  // A distorted water: bend near 1600, stretches near 3900 cm^-1.
  EXPECT_GT(v["frequencies_cm"][0].get<double>(), 1000.0);
  EXPECT_LT(v["frequencies_cm"][0].get<double>(), 2000.0);
  EXPECT_GT(v["frequencies_cm"][2].get<double>(), 3500.0);
  EXPECT_EQ(r.json["extras"]["dfmp2"]["gradient"]["gradient"].size(), 3u);  // the gradient at the input geometry too
  EXPECT_NE(r.report.find("==> Harmonic frequencies <=="), std::string::npos);
  // Each displaced SCF starts from the undisplaced orbitals: fewer iterations than the input geometry's from SAD.
  const auto& iterations = v["displaced_scf_iterations"];
  ASSERT_EQ(iterations.size(), 18u);
  for (const auto& n : iterations) {
    EXPECT_GT(n.get<int>(), 1);
    EXPECT_LT(n.get<int>(), r.json["extras"]["dfmp2"]["problem"]["scf"]["iterations"].get<int>());
  }
  EXPECT_NE(r.report.find("displaced geometries on backend "), std::string::npos);
  EXPECT_NE(r.report.find("their SCFs from the undisplaced orbitals"), std::string::npos);
}

// A single atom's Hessian (issue 42: it ended in SIGSEGV after the displacements): three translations projected out,
// nothing left to vibrate, and the report and results say so; by translational invariance the Hessian is zero.
TEST(Gradient, HessianOfASingleAtom) {
  TempDir dir;
  const Finished r = run(dir, "molecule: {xyz: \"Ne 0 0 0\"}\nbasis: cc-pvdz\ndriver: hessian\nthreads: 2\n");
  const auto& h = r.json["return_result"];
  ASSERT_EQ(h.size(), 9u);
  for (const auto& x : h) EXPECT_LT(std::abs(x.get<double>()), 1e-6);
  const auto& v = r.json["extras"]["dfmp2"]["vibrations"];
  EXPECT_EQ(v["displacements"], 6);
  EXPECT_EQ(v["projected_rigid_motions"], 3);
  EXPECT_EQ(v["frequencies_cm"].size(), 0u);
  EXPECT_NE(r.report.find("no vibrations: a single atom only translates"), std::string::npos);
}

// method scs-mp2 (with a user's scales) and sos-mp2: the energy returned is SCF + c_os E_os + c_ss E_ss of the same
// run's components, under Psi4's names, and the gradient returned is its derivative: against central differences
// (1e-3 bohr) of that energy along three coordinates of a water without symmetry, 1e-6 Eh/bohr; and not MP2's.
TEST(Gradient, SpinScaledMethodsDifferentiateTheirEnergy) {
  constexpr double kStep = 1e-3, kBohr = 0.52917721092;  // bohr; angstrom per bohr
  const double atoms[3][3] = {{0.0, 0.05, 0.117790}, {0.0, 0.755453, -0.471161}, {0.03, -0.70, -0.50}};
  auto input = [&](const std::string& method, int atom, int axis, double shift, const char* driver) {
    std::string xyz;
    for (int a = 0; a < 3; ++a) {
      double r[3] = {atoms[a][0], atoms[a][1], atoms[a][2]};
      if (a == atom) r[axis] += shift * kBohr;
      xyz += fmt::format("    {} {:.12f} {:.12f} {:.12f}\n", a == 0 ? "O" : "H", r[0], r[1], r[2]);
    }
    return fmt::format("molecule:\n  xyz: |\n{}basis: cc-pvdz\nscf: {{type: df, e_convergence: 1e-11, "
                       "d_convergence: 1e-10}}\nthreads: 2\ndriver: {}\n{}",
                       xyz, driver, method);
  };
  struct Case {
    std::string method, label;
    double os, ss;
  };
  const Case cases[] = {{"method: scs-mp2\nmp2_os_scale: 0.9\nmp2_ss_scale: 0.5\n", "SCS-MP2", 0.9, 0.5},
                        {"method: sos-mp2\n", "SOS-MP2", 1.3, 0.0}};
  TempDir dir;
  const Finished mp2 = run(dir, input("", 0, 0, 0.0, "gradient"));
  for (const Case& c : cases) {
    SCOPED_TRACE(c.label);
    const Finished g = run(dir, input(c.method, 0, 0, 0.0, "gradient"));
    const auto& p = g.json["properties"];
    const double scaled = p["scf_total_energy"].get<double>() +
                          c.os * p["mp2_opposite_spin_correlation_energy"].get<double>() +
                          c.ss * p["mp2_same_spin_correlation_energy"].get<double>();
    EXPECT_NEAR(p["return_energy"].get<double>(), scaled, 1e-12);
    EXPECT_NEAR(g.json["extras"]["qcvars"][c.label + " TOTAL ENERGY"].get<double>(), scaled, 1e-12);
    EXPECT_NEAR(g.json["extras"]["qcvars"]["CURRENT ENERGY"].get<double>(), scaled, 1e-12);
    EXPECT_EQ(g.json["extras"]["qcvars"][c.label + " TOTAL GRADIENT"].size(), 3u);
    EXPECT_FALSE(p.contains("mp2_dipole_moment"));  // QCSchema's is MP2's
    EXPECT_NE(g.report.find(c.label + " total gradient"), std::string::npos);
    EXPECT_GT(largest_difference(g.json["return_result"], mp2.json["return_result"]), 1e-4);
    for (const auto& [atom, axis] : {std::pair{0, 2}, std::pair{1, 1}, std::pair{2, 0}}) {
      const double plus = run(dir, input(c.method, atom, axis, kStep, "energy")).json["return_result"].get<double>();
      const double minus = run(dir, input(c.method, atom, axis, -kStep, "energy")).json["return_result"].get<double>();
      EXPECT_NEAR(g.json["return_result"][std::size_t(3 * atom + axis)].get<double>(), (plus - minus) / (2 * kStep),
                  1e-6)
          << "atom " << atom << " axis " << axis;
    }
  }
}

// UHF and ROHF-MBPT(2) gradients (issue 45) against five-point central differences (5e-3 bohr) of the program's returned
// energy, every component checked to 1e-7 Eh/bohr: the OH radical with a DF-SCF, all electrons, and a ghost helium
// beside it (the ghost's basis functions move with it, so its row is not zero); H2O+ with an exact SCF, a frozen core
// and custom SCS-MP2 scales; ROHF-MBPT(2) (its singles and semicanonical orbitals) of H2O+ with a DF-SCF and a frozen
// core and of OH
// with an exact SCF, a ghost helium and SOS-MP2. The energy the gradient run returns is the energy run's, and its
// same-spin parts are reported.
TEST(Gradient, OpenShellGradientsDifferentiateTheirEnergy) {
  constexpr double kStep = 5e-3, kBohr = 0.52917721092;  // bohr; angstrom per bohr
  struct Case {
    std::string name;
    std::vector<std::pair<std::string, std::array<double, 3>>> atoms;
    std::string keys;
  };
  const Case cases[] = {
      {"OH, DF-SCF, ghost He",
       {{"O", {0.0, 0.1, 0.0}}, {"H", {0.05, 0.0, 0.97}}, {"@He", {1.2, 0.9, -0.8}}},
       "  multiplicity: 2\nbasis: cc-pvdz\nscf: {type: df, e_convergence: 1e-12, d_convergence: 1e-10}\n"},
      {"H2O+, exact SCF, frozen core, SCS-MP2 1.1/0.4",
       {{"O", {0.0, 0.05, 0.117790}}, {"H", {0.0, 0.755453, -0.471161}}, {"H", {0.03, -0.70, -0.50}}},
       "  charge: 1\n  multiplicity: 2\nbasis: cc-pvdz\nfrozen_core: true\nmethod: scs-mp2\nmp2_os_scale: 1.1\n"
       "mp2_ss_scale: 0.4\nscf: {type: exact, e_convergence: 1e-12, d_convergence: 1e-10}\n"},
      {"H2O+, ROHF-MBPT(2), DF-SCF, frozen core",
       {{"O", {0.0, 0.05, 0.117790}}, {"H", {0.0, 0.755453, -0.471161}}, {"H", {0.03, -0.70, -0.50}}},
       "  charge: 1\n  multiplicity: 2\nbasis: cc-pvdz\nreference: rohf\nfrozen_core: true\n"
       "scf: {type: df, e_convergence: 1e-12, d_convergence: 1e-10}\n"},
      {"OH, ROHF-MBPT(2), exact SCF, ghost He, SOS-MP2",
       {{"O", {0.0, 0.1, 0.0}}, {"H", {0.05, 0.0, 0.97}}, {"@He", {1.2, 0.9, -0.8}}},
       "  multiplicity: 2\nbasis: cc-pvdz\nreference: rohf\nmethod: sos-mp2\n"
       "scf: {type: exact, e_convergence: 1e-12, d_convergence: 1e-10}\n"}};
  TempDir dir;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto input = [&](std::size_t atom, int axis, double shift, const char* driver) {
      std::string xyz;
      for (std::size_t a = 0; a < c.atoms.size(); ++a) {
        std::array<double, 3> r = c.atoms[a].second;
        if (a == atom) r[std::size_t(axis)] += shift * kBohr;
        xyz += fmt::format("    {} {:.12f} {:.12f} {:.12f}\n", c.atoms[a].first, r[0], r[1], r[2]);
      }
      const std::string reference = c.keys.find("reference:") == std::string::npos ? "reference: uhf\n" : "";
      return fmt::format("molecule:\n  xyz: |\n{}{}{}threads: 2\ndriver: {}\n", xyz, c.keys, reference, driver);
    };
    const Finished g = run(dir, input(0, 0, 0.0, "gradient"));
    const Finished e = run(dir, input(0, 0, 0.0, "energy"));
    // (Two runs of one input differ by up to about 1e-10 Eh: the SCF's convergence, its sums in threads' order. The
    // five-point step of 5e-3 bohr keeps that below 5e-8 Eh/bohr in the differences.)
    EXPECT_NEAR(g.json["properties"]["return_energy"].get<double>(), e.json["return_result"].get<double>(), 1e-9);
    const auto& gp = g.json["properties"];
    EXPECT_NEAR(gp["mp2_same_spin_correlation_energy"].get<double>(),
                e.json["properties"]["mp2_same_spin_correlation_energy"].get<double>(), 1e-9);
    EXPECT_NE(g.report.find("same-spin energy by spin"), std::string::npos);
    ASSERT_EQ(g.json["return_result"].size(), 3 * c.atoms.size());
    for (std::size_t atom = 0; atom < c.atoms.size(); ++atom) {
      for (int axis = 0; axis < 3; ++axis) {
        double stencil[4];
        int k = 0;
        for (const double s : {-2.0, -1.0, 1.0, 2.0})
          stencil[k++] = run(dir, input(atom, axis, s * kStep, "energy")).json["return_result"].get<double>();
        const double fd = (stencil[0] - 8 * stencil[1] + 8 * stencil[2] - stencil[3]) / (12 * kStep);
        EXPECT_NEAR(g.json["return_result"][3 * atom + std::size_t(axis)].get<double>(), fd, 1e-7)
            << "atom " << atom << " axis " << axis;
      }
    }
  }
}

}  // namespace
