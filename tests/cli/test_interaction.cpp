// Interaction energies (`interaction:`), as a user runs them: every calculation of the counterpoise scheme gives the
// energies of the single point a user would write by hand with ghost atoms, every backend and storage gives the same
// interaction energy, and the report and results file carry every scheme.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../support/test_support.hpp"

namespace {

namespace fs = std::filesystem;
using dfmp2::testing::run_command;
using dfmp2::testing::TempDir;

using Finished = dfmp2::testing::FinishedRun;
Finished run(const TempDir& dir, const std::string& yaml) { return dfmp2::testing::run_input(dir, yaml); }

double qcvar(const Finished& r, const std::string& name) { return r.json["extras"]["qcvars"][name].get<double>(); }

// The shipped example against the Psi4 1.3.2 numbers in its comment (energy('mp2', bsse_type=['cp', 'nocp'])),
// and the report's section.
TEST(Interaction, ExampleInputMatchesPsi4) {
  TempDir dir;
  std::ifstream example(std::string(DFMP2_SOURCE_DIR) + "/inputs/water-dimer-interaction.yaml");
  const std::string yaml((std::istreambuf_iterator<char>(example)), std::istreambuf_iterator<char>());
  const Finished r = run(dir, yaml + "threads: 2\n");
  EXPECT_NEAR(qcvar(r, "CP-CORRECTED INTERACTION ENERGY"), -0.0069652814, 1e-7);
  EXPECT_NEAR(qcvar(r, "NOCP-CORRECTED INTERACTION ENERGY"), -0.0084370752, 1e-7);
  EXPECT_DOUBLE_EQ(qcvar(r, "CP-CORRECTED INTERACTION ENERGY"), qcvar(r, "CP-CORRECTED 2-BODY INTERACTION ENERGY"));
  const auto& ie = r.json["extras"]["dfmp2"]["interaction"];
  EXPECT_EQ(ie["bsse"], "both");
  ASSERT_EQ(ie["calculations"].size(), 5u);  // the complex, two fragments in its basis, two in their own
  const auto& cp = ie["runs"][0]["energies"]["cp"];
  EXPECT_DOUBLE_EQ(cp["mp2_total"].get<double>(), qcvar(r, "CP-CORRECTED INTERACTION ENERGY"));
  EXPECT_NEAR(cp["mp2_correlation"].get<double>(),
              cp["mp2_opposite_spin"].get<double>() + cp["mp2_same_spin"].get<double>(), 1e-15);
  EXPECT_NEAR(cp["mp2_total_kcal_mol"].get<double>(), cp["mp2_total"].get<double>() * 627.5094737775374, 1e-12);
  for (const char* line : {"==> Interaction energy <==", "fragment 1 in the complex's basis (CP)",
                           "fragment 2 in its own basis (NOCP)", "shared by the complex and the 2 fragments",
                           "CP     MP2 total", "NOCP   SCS-MP2 total"}) {
    EXPECT_NE(r.report.find(line), std::string::npos) << line;
  }
}

// A radical beside a water: each calculation of the interaction energy (the complex, each fragment in the complex's
// basis, each in its own) against the single point of that calculation written by hand (ghost atoms, charge,
// multiplicity), in UHF with DF-SCF and ROHF with the exact SCF (whose incremental J/K builds carry on from the
// complex's density into each fragment's SCF), with each calculation's own frozen core.
class InteractionReference : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(InteractionReference, EachCalculationIsItsOwnSinglePoint) {
  const auto& [reference, scf_type] = GetParam();
  const std::string settings = "basis: cc-pvdz\nfrozen_core: true\nthreads: 2\n"
                               "scf: {type: " + scf_type + ", e_convergence: 1e-10, d_convergence: 1e-10}\n";
  const std::string oh = "O 0 0 0\n    H 0 0 0.97", water = "O 0 0 2.9\n    H 0.76 0 3.5\n    H -0.76 0 3.5";
  const std::string ghost_oh = "Gh(O) 0 0 0\n    Gh(H) 0 0 0.97",
                    ghost_water = "Gh(O) 0 0 2.9\n    Gh(H) 0.76 0 3.5\n    Gh(H) -0.76 0 3.5";
  TempDir dir;
  const Finished all = run(dir, "molecule:\n  xyz: |\n    0 2\n    " + oh + "\n    --\n    0 1\n    " + water +
                               "\nreference: " + reference + "\ninteraction: {bsse: both}\n" + settings);
  // name, xyz, multiplicity: the single points in calculations[] order.
  const std::vector<std::tuple<std::string, std::string, int>> singles = {
      {"complex", oh + "\n    " + water, 2},
      {"OH in the complex's basis", oh + "\n    " + ghost_water, 2},
      {"water in the complex's basis", ghost_oh + "\n    " + water, 1},
      {"OH in its own basis", oh, 2},
      {"water in its own basis", water, 1}};
  const auto& calcs = all.json["extras"]["dfmp2"]["interaction"]["calculations"];
  ASSERT_EQ(calcs.size(), singles.size());
  for (std::size_t k = 0; k < singles.size(); ++k) {
    const auto& [what, xyz, multiplicity] = singles[k];
    SCOPED_TRACE(what);
    TempDir one;
    const Finished single = run(one, "molecule:\n  multiplicity: " + std::to_string(multiplicity) + "\n  xyz: |\n    " +
                                    xyz + "\n" + (multiplicity == 1 ? "" : "reference: " + reference + "\n") +
                                    settings);
    const auto& p = single.json["properties"];
    EXPECT_NEAR(calcs[k]["scf_energy"].get<double>(), p["scf_total_energy"].get<double>(), 1e-9);
    EXPECT_NEAR(calcs[k]["mp2_correlation_energy"].get<double>(), p["mp2_correlation_energy"].get<double>(), 1e-9);
    EXPECT_EQ(calcs[k]["nfrozen"], single.json["keywords"]["num_frozen_docc"]);
    EXPECT_EQ(calcs[k]["reference"], multiplicity == 1 ? "rhf" : reference);
  }
  // The interaction energies are the differences of those calculations.
  auto total = [&](std::size_t k) {
    return calcs[k]["scf_energy"].get<double>() + calcs[k]["mp2_correlation_energy"].get<double>();
  };
  EXPECT_NEAR(qcvar(all, "CP-CORRECTED INTERACTION ENERGY"), total(0) - total(1) - total(2), 1e-12);
  EXPECT_NEAR(qcvar(all, "NOCP-CORRECTED INTERACTION ENERGY"), total(0) - total(3) - total(4), 1e-12);
}

INSTANTIATE_TEST_SUITE_P(Radical, InteractionReference,
                         ::testing::Values(std::pair<std::string, std::string>{"uhf", "df"},
                                           std::pair<std::string, std::string>{"rohf", "exact"}));

// Every CPU backend and a device model, the SCF's and DF-MP2's tensors in memory or on scratch: the same CP
// interaction energy (the device model's fp32 within its own error); the memory plan holds every calculation's
// tensors at once, so the DF-MP2 phases plan more than the complex alone would.
TEST(Interaction, EveryBackendAndStorageGiveTheSameEnergy) {
  const std::string molecule = "molecule:\n  xyz: |\n    O 0 0 0.1178\n    H 0 0.7555 -0.4712\n    H 0 -0.7555 "
                               "-0.4712\n    --\n    O 0 0 3.1178\n    H 0 0.7555 2.5288\n    H 0 -0.7555 2.5288\n"
                               "basis: cc-pvdz\nthreads: 2\n";
  TempDir dir;
  const Finished memory = run(dir, molecule + "interaction: {bsse: cp}\nbackends: [eigen, openblas, trn1]\n");
  const Finished scratch = run(dir, molecule + "interaction: {bsse: cp}\nbackends: [openblas]\nmp2_storage: scratch\n"
                                          "scf: {jk_storage: scratch}\n");
  const Finished alone = run(dir, molecule + "backends: [openblas]\n");
  const auto& runs = memory.json["extras"]["dfmp2"]["interaction"]["runs"];
  ASSERT_EQ(runs.size(), 3u);
  const double eigen = runs[0]["energies"]["cp"]["mp2_total"].get<double>();
  EXPECT_NEAR(runs[1]["energies"]["cp"]["mp2_total"].get<double>(), eigen, 1e-10);
  EXPECT_EQ(runs[2]["backend"], "trn1");
  EXPECT_EQ(runs[2]["precision"], "fp32");
  EXPECT_NEAR(runs[2]["energies"]["cp"]["mp2_total"].get<double>(), eigen, 1e-6);
  EXPECT_NE(runs[2]["energies"]["cp"]["mp2_total"].get<double>(), eigen);  // it did run in fp32
  EXPECT_NEAR(qcvar(scratch, "CP-CORRECTED INTERACTION ENERGY"), eigen, 1e-10);
  auto planned = [](const Finished& r, const std::string& phase) {
    for (const auto& p : r.json["extras"]["dfmp2"]["memory_plan"]["phases"])
      if (p["phase"] == phase) return p["memory_bytes"].get<double>();
    return 0.0;
  };
  EXPECT_GT(planned(memory, "MP2 pair energies"), planned(alone, "MP2 pair energies"));
  // The complex's energies are those of its single point.
  EXPECT_NEAR(memory.json["properties"]["mp2_total_energy"].get<double>(),
              alone.json["properties"]["mp2_total_energy"].get<double>(), 1e-10);
}

// Three fragments (a water trimer, a cation among them): every fragment in the complex's basis is a system of the
// one DF-MP2 run, and the interaction energy is the complex's energy minus the three fragments', under Psi4's n-body
// name for n = 3.
TEST(Interaction, ThreeFragmentsGiveTheWholeInteractionEnergy) {
  TempDir dir;
  const Finished r = run(dir, "molecule:\n  xyz: |\n    O 0 0 0.1178\n    H 0 0.7555 -0.4712\n    H 0 -0.7555 -0.4712\n"
                              "    --\n    1 1\n    O 0 0 3.1178\n    H 0 0.7555 2.5288\n    H 0 -0.7555 2.5288\n"
                              "    H 0 0 4.1\n    --\n    O 3 0 0.1178\n    H 3 0.7555 -0.4712\n    H 3 -0.7555 -0.4712\n"
                              "basis: cc-pvdz\nthreads: 2\ninteraction: {bsse: both}\n");
  const auto& calcs = r.json["extras"]["dfmp2"]["interaction"]["calculations"];
  ASSERT_EQ(calcs.size(), 7u);
  auto total = [&](std::size_t k) {
    return calcs[k]["scf_energy"].get<double>() + calcs[k]["mp2_correlation_energy"].get<double>();
  };
  EXPECT_NEAR(qcvar(r, "CP-CORRECTED 3-BODY INTERACTION ENERGY"), total(0) - total(1) - total(2) - total(3), 1e-12);
  EXPECT_NEAR(qcvar(r, "NOCP-CORRECTED 3-BODY INTERACTION ENERGY"), total(0) - total(4) - total(5) - total(6), 1e-12);
  EXPECT_FALSE(r.json["extras"]["qcvars"].contains("CP-CORRECTED 2-BODY INTERACTION ENERGY"));
  EXPECT_EQ(r.json["molecule"]["molecular_charge"], 1);
  EXPECT_EQ(calcs[2]["nalpha"], 5);  // the hydronium fragment: 10 electrons
  EXPECT_LT(qcvar(r, "CP-CORRECTED INTERACTION ENERGY"), 0.0);
}

// method sos-mp2: the interaction energies returned are SOS-MP2's (SCF + 1.3 of the opposite-spin part of each
// scheme's difference), the MP2 and SCS-MP2 ones beside them in the results file.
TEST(Interaction, SpinScaledMethodGivesItsInteractionEnergy) {
  TempDir dir;
  const Finished r = run(dir, "molecule:\n  xyz: |\n    O 0 0 0.1178\n    H 0 0.7555 -0.4712\n    H 0 -0.7555 -0.4712\n"
                              "    --\n    O 0 0 3.1178\n    H 0 0.7555 2.5288\n    H 0 -0.7555 2.5288\n"
                              "basis: cc-pvdz\nthreads: 2\ninteraction: {bsse: both}\nmethod: sos-mp2\n");
  const auto& schemes = r.json["extras"]["dfmp2"]["interaction"]["runs"][0]["energies"];
  for (const char* scheme : {"cp", "nocp"}) {
    const auto& e = schemes[scheme];
    const double sos = e["scf"].get<double>() + 1.3 * e["mp2_opposite_spin"].get<double>();
    EXPECT_NEAR(e["method_total"].get<double>(), sos, 1e-12) << scheme;
    EXPECT_GT(std::abs(sos - e["mp2_total"].get<double>()), 1e-5) << scheme;
  }
  EXPECT_NEAR(qcvar(r, "CP-CORRECTED INTERACTION ENERGY"), schemes["cp"]["method_total"].get<double>(), 1e-12);
  EXPECT_NEAR(qcvar(r, "NOCP-CORRECTED INTERACTION ENERGY"), schemes["nocp"]["method_total"].get<double>(), 1e-12);
  EXPECT_NE(r.report.find("SOS-MP2 total"), std::string::npos);
}

// interaction with driver gradient: the gradient returned is that of the CP-corrected total energy (the energy
// driver's `CP-CORRECTED TOTAL ENERGY`, bsse both), against central differences (1e-3 bohr) along a coordinate of
// each fragment, 1e-6 Eh/bohr; its energy is that total, and its parts are the complex's and the fragments'.
TEST(Interaction, CounterpoiseGradientIsTheDerivativeOfTheCpEnergy) {
  constexpr double kStep = 1e-3, kBohr = 0.52917721092;
  const double atoms[6][3] = {{-1.551007, -0.114520, 0.0}, {-1.934259, 0.762503, 0.0},  {-0.599677, 0.040712, 0.0},
                              {1.350625, 0.111469, 0.0},   {1.680398, -0.373741, -0.758561},
                              {1.680398, -0.373741, 0.758561}};
  auto input = [&](int atom, int axis, double shift, const std::string& rest) {
    std::string xyz;
    for (int a = 0; a < 6; ++a) {
      double r[3] = {atoms[a][0], atoms[a][1], atoms[a][2]};
      if (a == atom) r[axis] += shift * kBohr;
      xyz += fmt::format("{}    {} {:.12f} {:.12f} {:.12f}\n", a == 3 ? "    --\n" : "", a % 3 == 0 ? "O" : "H", r[0],
                         r[1], r[2]);
    }
    return "molecule:\n  xyz: |\n" + xyz +
           "basis: cc-pvdz\nscf: {type: df, e_convergence: 1e-11, d_convergence: 1e-10}\nthreads: 2\n" + rest;
  };
  TempDir dir;
  const Finished g = run(dir, input(0, 0, 0.0, "interaction: {bsse: cp}\ndriver: gradient\n"));
  const auto& cp = g.json["extras"]["dfmp2"]["counterpoise_gradient"];
  ASSERT_EQ(cp["parts"].size(), 4u);
  EXPECT_NEAR(g.json["properties"]["return_energy"].get<double>(), cp["energy"].get<double>(), 1e-12);
  EXPECT_NEAR(qcvar(g, "CP-CORRECTED TOTAL ENERGY"), cp["energy"].get<double>(), 1e-12);
  for (const auto& [atom, axis] : {std::pair{1, 1}, std::pair{4, 2}}) {
    auto energy = [&](double shift) {
      return qcvar(run(dir, input(atom, axis, shift, "interaction: {bsse: both}\n")), "CP-CORRECTED TOTAL ENERGY");
    };
    const double difference = (energy(kStep) - energy(-kStep)) / (2 * kStep);
    EXPECT_NEAR(g.json["return_result"][std::size_t(3 * atom + axis)].get<double>(), difference, 1e-6)
        << "atom " << atom << " axis " << axis;
    // The complex's own gradient is not it: the correction moves this component.
    EXPECT_GT(std::abs(cp["complex_gradient"][std::size_t(atom)][std::size_t(axis)].get<double>() - difference), 1e-5);
  }
}

// The same for an open shell (issue 45): the hydroxyl radical beside a water, a doublet complex (UHF, then ROHF-MBPT(2)
// with a frozen core), its OH fragment UHF (ROHF) and its water RHF in either basis. And two hydroxyl radicals as a singlet complex (RHF): their
// fragments are UHF doublets (an RHF of 9 electrons was asked for them and the run ended after the complex's SCF).
TEST(Interaction, OpenShellCounterpoiseGradientIsTheDerivativeOfTheCpEnergy) {
  constexpr double kStep = 1e-3, kBohr = 0.52917721092;
  const char* symbols[5] = {"O", "H", "O", "H", "H"};
  const double atoms[5][3] = {{-1.60, -0.10, 0.0}, {-0.63, 0.03, 0.0}, {1.350625, 0.111469, 0.0},
                              {1.680398, -0.373741, -0.758561}, {1.680398, -0.373741, 0.758561}};
  auto input = [&](int atom, int axis, double shift, const std::string& rest) {
    std::string xyz = "    0 2\n";
    for (int a = 0; a < 5; ++a) {
      double r[3] = {atoms[a][0], atoms[a][1], atoms[a][2]};
      if (a == atom) r[axis] += shift * kBohr;
      xyz += fmt::format("{}    {} {:.12f} {:.12f} {:.12f}\n", a == 2 ? "    --\n    0 1\n" : "", symbols[a], r[0], r[1],
                         r[2]);
    }
    return "molecule:\n  multiplicity: 2\n  xyz: |\n" + xyz +
           "basis: cc-pvdz\nscf: {type: df, e_convergence: 1e-11, d_convergence: 1e-10}\nthreads: 2\n" + rest;
  };
  TempDir dir;
  const Finished g = run(dir, input(0, 0, 0.0, "interaction: {bsse: cp}\ndriver: gradient\n"));
  const auto& cp = g.json["extras"]["dfmp2"]["counterpoise_gradient"];
  ASSERT_EQ(cp["parts"].size(), 4u);
  EXPECT_NEAR(qcvar(g, "CP-CORRECTED TOTAL ENERGY"), cp["energy"].get<double>(), 1e-12);
  for (const auto& [atom, axis] : {std::pair{0, 1}, std::pair{1, 0}, std::pair{3, 2}}) {
    auto energy = [&](double shift) {
      return qcvar(run(dir, input(atom, axis, shift, "interaction: {bsse: both}\n")), "CP-CORRECTED TOTAL ENERGY");
    };
    const double difference = (energy(kStep) - energy(-kStep)) / (2 * kStep);
    EXPECT_NEAR(g.json["return_result"][std::size_t(3 * atom + axis)].get<double>(), difference, 1e-6)
        << "atom " << atom << " axis " << axis;
    EXPECT_GT(std::abs(cp["complex_gradient"][std::size_t(atom)][std::size_t(axis)].get<double>() - difference), 1e-6);
  }
  // ROHF-MBPT(2) with a frozen core (the OH fragment's SCF in each basis started from its ROHF orbitals: from its
  // alpha semicanonical ones it ended in another state, 5e-5 Eh/bohr off), five-point differences.
  {
    const std::string rohf = "reference: rohf\nfrozen_core: true\ninteraction: {bsse: ";
    const Finished gr = run(dir, input(0, 0, 0.0, rohf + "cp}\ndriver: gradient\n"));
    double e[4];
    int k = 0;
    for (const double shift : {-2.0, -1.0, 1.0, 2.0})
      e[k++] = qcvar(run(dir, input(1, 0, shift * 4e-3, rohf + "both}\n")), "CP-CORRECTED TOTAL ENERGY");
    EXPECT_NEAR(gr.json["return_result"][std::size_t(3)].get<double>(), (e[0] - 8 * e[1] + 8 * e[2] - e[3]) / (12 * 4e-3), 1e-7);
  }
  const Finished pair = run(dir, "molecule:\n  multiplicity: 1\n  xyz: |\n    0 2\n    O 0 0 0\n    H 0 0 0.97\n"
                                 "    --\n    0 2\n    O 0 0 3\n    H 0 0 3.97\nbasis: cc-pvdz\n"
                                 "interaction: {bsse: cp}\nthreads: 2\n");
  EXPECT_NE(pair.report.find("fragment 1 in the complex's basis (the other fragments' atoms as ghosts): UHF, 5 alpha "
                             "and 4 beta electrons"), std::string::npos);
  EXPECT_TRUE(pair.json["success"].get<bool>());
}

// driver: hessian with interaction: central differences of counterpoise-corrected gradients (each displaced
// complex's fragments in their own basis start from the default guess, not from the complex's orbitals: it ended in
// an internal error), with SCS-MP2; symmetric, and the two H-H stretches where H2's is.
TEST(Interaction, CounterpoiseHessianOfTwoHydrogenMolecules) {
  TempDir dir;
  const Finished r = run(dir, "molecule:\n  xyz: |\n    H 0 0 0\n    H 0 0 0.74\n    --\n    H 0 0.3 3\n"
                              "    H 0 0.3 3.74\nbasis: cc-pvdz\ninteraction: {bsse: cp}\ndriver: hessian\n"
                              "method: scs-mp2\nthreads: 2\n");
  const auto& h = r.json["return_result"];
  ASSERT_EQ(h.size(), 144u);
  for (std::size_t i = 0; i < 12; ++i)
    for (std::size_t j = 0; j < i; ++j) EXPECT_NEAR(h[12 * i + j].get<double>(), h[12 * j + i].get<double>(), 1e-6);
  const auto& f = r.json["extras"]["dfmp2"]["vibrations"]["frequencies_cm"];
  ASSERT_EQ(f.size(), 6u);
  EXPECT_NEAR(f[5].get<double>(), 4710.0, 30.0);
  EXPECT_NEAR(f[4].get<double>(), 4710.0, 30.0);
}

// A charged complex written with '--' but without the fragments' 'charge multiplicity' lines (issue 42: it ran every
// fragment neutral, +0.31 Eh for a water-dimer cation): the charge and the doublet go to the first fragment, as Psi4
// and qcelemental complete them, so the energies are those of the input with the lines written out.
TEST(Interaction, ChargedComplexWithoutFragmentLinesIsCompletedAsPsi4Does) {
  const std::string first = "O 0 0 0.1178\n    H 0 0.7555 -0.4712\n    H 0 -0.7555 -0.4712\n",
                    second = "O 0 0 3.1\n    H 0 0.7555 3.69\n    H 0 -0.7555 3.69\n";
  const std::string settings = "basis: cc-pvdz\nthreads: 2\ninteraction: {bsse: cp}\n"
                               "scf: {e_convergence: 1e-10, d_convergence: 1e-10}\n";
  TempDir implicit_dir, explicit_dir;
  const Finished implicit = run(implicit_dir, "molecule:\n  charge: 1\n  multiplicity: 2\n  xyz: |\n    " + first +
                                                  "    --\n    " + second + settings);
  const Finished written = run(explicit_dir, "molecule:\n  xyz: |\n    1 2\n    " + first + "    --\n    0 1\n    " +
                                                 second + settings);
  EXPECT_EQ(implicit.json["molecule"]["fragment_charges"], nlohmann::json::parse("[1, 0]"));
  EXPECT_EQ(implicit.json["molecule"]["fragment_multiplicities"], nlohmann::json::parse("[2, 1]"));
  const double ie = qcvar(implicit, "CP-CORRECTED INTERACTION ENERGY");
  EXPECT_NEAR(ie, qcvar(written, "CP-CORRECTED INTERACTION ENERGY"), 1e-10);
  EXPECT_LT(ie, 0.0);  // a cation binds a water
  EXPECT_GT(ie, -0.1);
  EXPECT_NE(implicit.report.find("fragment 1: atoms 1-3, charge 1, multiplicity 2 (neither given: completed as Psi4 "
                                 "does)"), std::string::npos);
}

// A fragment with one electron (no beta electron: issue 42 ended it in an internal error): a hydrogen atom beside
// helium. The hydrogen atom's MP2 energy is its UHF energy (one electron has no pair), in its own basis Psi4 1.3.2's
// UHF/cc-pVDZ -0.4992784034195831 Eh (energy('scf'), DF); the interaction energies are the calculations' differences.
TEST(Interaction, AOneElectronFragment) {
  TempDir dir;
  const Finished r = run(dir, "molecule:\n  xyz: |\n    He 0 0 0\n    --\n    0 2\n    H 0 0 3\nbasis: cc-pvdz\n"
                              "threads: 2\ninteraction: {bsse: both}\nscf: {e_convergence: 1e-10, d_convergence: 1e-10}\n");
  const auto& calcs = r.json["extras"]["dfmp2"]["interaction"]["calculations"];
  ASSERT_EQ(calcs.size(), 5u);
  for (const std::size_t k : {2, 4}) {  // hydrogen in the complex's basis and in its own
    EXPECT_EQ(calcs[k]["mp2_correlation_energy"].get<double>(), 0.0);
    EXPECT_EQ(calcs[k]["nbeta"], 0);
  }
  EXPECT_NEAR(calcs[4]["scf_energy"].get<double>(), -0.4992784034195831, 1e-8);
  auto total = [&](std::size_t k) {
    return calcs[k]["scf_energy"].get<double>() + calcs[k]["mp2_correlation_energy"].get<double>();
  };
  EXPECT_NEAR(qcvar(r, "CP-CORRECTED INTERACTION ENERGY"), total(0) - total(1) - total(2), 1e-12);
  EXPECT_NEAR(qcvar(r, "NOCP-CORRECTED INTERACTION ENERGY"), total(0) - total(3) - total(4), 1e-12);
}

}  // namespace
