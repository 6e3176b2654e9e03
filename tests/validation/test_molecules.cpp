// Molecule in, energies out: integrals, RHF and DF-MP2 computed by dfmp2 itself against every case of
// shared/reference/psi4_refs.json (Psi4 1.3.2): SCF within 1e-6 Eh, MP2 correlation within 1e-7 Eh, for exact
// (pk) and density-fitted SCF, all electrons and frozen core.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "app/run.hpp"
#include "chem/molecule.hpp"

namespace {

struct RefCase {
  nlohmann::json json;
  std::string scf;  // "pk" or "df"
  std::string name;
};

std::vector<RefCase> reference_cases() {
  std::vector<RefCase> out;
  std::ifstream in(DFMP2_SHARED_REFERENCE);
  if (!in) return out;
  const auto refs = nlohmann::json::parse(in);
  for (const auto& c : refs["cases"]) {
    for (const std::string scf : {"pk", "df"}) {
      std::string name = c["molecule"].get<std::string>() + "_" + c["basis"].get<std::string>() + "_" + scf +
                         (c["frozen_core"].get<bool>() ? "_fc" : "");
      for (auto& ch : name) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      out.push_back({c, scf, name});
    }
  }
  return out;
}

class Psi4References : public ::testing::TestWithParam<RefCase> {};

TEST_P(Psi4References, ScfAndMp2MatchPsi4) {
  const RefCase& rc = GetParam();
  const auto& c = rc.json;
  dfmp2::app::Input in;
  in.path = "(test)";
  in.molecule = dfmp2::chem::parse_xyz_lines(c["geometry_angstrom"].get<std::string>(), "geometry");
  in.molecule_source = "psi4_refs.json";
  in.basis = c["basis"];
  in.aux_basis = c["aux_basis"];
  in.jk_basis = c["jk_basis"];
  in.basis_dir = std::string(DFMP2_SOURCE_DIR) + "/inputs/basis";
  in.scf.type = rc.scf == "pk" ? dfmp2::chem::ScfType::exact : dfmp2::chem::ScfType::df;
  in.scf.e_convergence = 1e-10;
  in.scf.d_convergence = 1e-8;
  in.frozen_core.kind = c["frozen_core"].get<bool>() ? dfmp2::app::FrozenCore::Kind::psi4_rule
                                                     : dfmp2::app::FrozenCore::Kind::none;
  in.backends = {"openblas"};
  in.threads = 2;
  const auto calc = dfmp2::app::run_calculation(in);
  const auto& ref = c[std::string("scf_") + rc.scf];
  ASSERT_TRUE(calc.molecule);
  EXPECT_EQ(calc.problem.nbf, c["nbf"].get<int>());
  EXPECT_EQ(calc.problem.nocc, c["nocc"].get<int>());
  EXPECT_EQ(calc.nfrozen, c["nfrozen"].get<int>());
  EXPECT_NEAR(calc.molecule->scf.nuclear_repulsion, ref["e_nuc"].get<double>(), 1e-9);
  EXPECT_NEAR(calc.molecule->scf.energy, ref["e_scf"].get<double>(), 1e-6);
  const auto& r = calc.runs.at(0).result;
  EXPECT_NEAR(r.correlation(), ref["e_corr"].get<double>(), 1e-7);
  EXPECT_NEAR(r.opposite_spin, ref["e_os"].get<double>(), 1e-7);
  EXPECT_NEAR(r.same_spin, ref["e_ss"].get<double>(), 1e-7);
  EXPECT_NEAR(calc.molecule->scf.energy + r.correlation(), ref["e_total"].get<double>(), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Cases, Psi4References, ::testing::ValuesIn(reference_cases()),
                         [](const auto& info) { return info.param.name; });
// Without the shared reference file there are no cases: say so rather than pass silently.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Psi4References);

TEST(Psi4ReferencesFile, IsThere) {
  std::ifstream in(DFMP2_SHARED_REFERENCE);
  if (!in) GTEST_SKIP() << "shared reference file not found: " << DFMP2_SHARED_REFERENCE;
  EXPECT_EQ(reference_cases().size(), 8u);
}

}  // namespace
