// Basis sets from .gbs files: sizes against Psi4 1.3.2, SP splitting, spherical/cartesian, name mapping, paths,
// and every error message.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "chem/system/basis_set.hpp"
#include "chem/system/molecule.hpp"
#include "linalg/errors.hpp"
#include "../support/test_support.hpp"

namespace {

using dfmp2::InputError;
using dfmp2::chem::basis_file_name;
using dfmp2::chem::BasisSet;
using dfmp2::chem::load_basis;
using dfmp2::chem::Molecule;
using dfmp2::chem::parse_xyz_lines;

const std::string kLibrary = std::string(DFMP2_SOURCE_DIR) + "/inputs/basis";

// The geometries of shared/reference/psi4_refs.json (angstrom).
Molecule water() {
  return parse_xyz_lines(
      "O 0.000000 0.000000 0.117790\nH 0.000000 0.755453 -0.471161\n"
      "H 0.000000 -0.755453 -0.471161\n",
      "water");
}
Molecule methane() {
  return parse_xyz_lines(
      "C 0.000000 0.000000 0.000000\nH 0.629118 0.629118 0.629118\n"
      "H -0.629118 -0.629118 0.629118\nH -0.629118 0.629118 -0.629118\n"
      "H 0.629118 -0.629118 -0.629118\n",
      "methane");
}
Molecule one_atom(const std::string& symbol) { return parse_xyz_lines(symbol + " 0 0 0\n", "atom"); }

// The message of the InputError that f throws ("" if it throws none).
template <class F>
std::string input_error(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

struct Psi4Size {
  const char* basis;
  int nbf, nshell, max_l, nprimitive;
};

// psi4.core.BasisSet.build(mol, 'BASIS', name) in Psi4 1.3.2: nbf(), nshell(), max_am(), nprimitive().
constexpr Psi4Size kWaterSizes[] = {
    {"sto-3g", 7, 5, 1, 15},
    {"6-31g*", 19, 10, 2, 23},
    {"cc-pvdz", 24, 12, 2, 32},
    {"cc-pvdz-ri", 84, 30, 3, 30},
    {"cc-pvdz-jkfit", 116, 42, 3, 42},
    {"cc-pvtz", 58, 22, 3, 42},
    {"cc-pvtz-ri", 141, 43, 4, 43},
    {"cc-pvtz-jkfit", 139, 45, 4, 45},
    {"def2-svp", 24, 12, 2, 22},
    {"def2-svp-ri", 76, 28, 3, 40},
    {"def2-svp-jkfit", 113, 37, 4, 49},
    {"def2-tzvp", 43, 19, 3, 32},
    {"def2-tzvp-ri", 106, 36, 4, 41},
    {"def2-tzvp-jkfit", 113, 37, 4, 49},
    {"def2-qzvpp-ri", 253, 65, 5, 65},
    {"def2-qzvpp-jkfit", 113, 37, 4, 49},
    {"aug-cc-pvdz", 41, 19, 2, 39},
    {"aug-cc-pvdz-ri", 118, 40, 3, 40},
    {"aug-cc-pvdz-jkfit", 150, 52, 3, 52},
    {"aug-cc-pvtz", 92, 32, 3, 52},
    {"aug-cc-pvtz-ri", 198, 56, 4, 56},
    {"aug-cc-pvtz-jkfit", 196, 58, 4, 58},
    {"cc-pvqz", 115, 35, 4, 57},
    {"cc-pvqz-ri", 242, 60, 5, 60},
    {"cc-pvqz-jkfit", 208, 54, 5, 54},
    {"def2-qzvpp", 117, 37, 4, 55},
    // The interaction-energy sets (issue 26) and their fitting partners, Psi4 1.3.2's BasisSet.build sizes.
    {"jun-cc-pv(d+d)z", 28, 14, 2, 34},
    {"aug-cc-pv(d+d)z", 41, 19, 2, 39},
    {"aug-cc-pv(t+d)z", 92, 32, 3, 52},
    {"def2-svpd", 39, 17, 2, 27},
    {"def2-tzvpd", 58, 24, 3, 37},
    {"def2-tzvpp", 59, 23, 3, 36},
    {"3-21g", 13, 9, 1, 15},
    {"6-31g", 13, 9, 1, 22},
    {"6-31g**", 25, 12, 2, 25},
    {"6-31+g", 17, 11, 1, 24},
    {"6-31+g*", 23, 12, 2, 25},
    {"6-31+g**", 29, 14, 2, 27},
    {"6-31++g", 19, 13, 1, 26},
    {"6-31++g*", 25, 14, 2, 27},
    {"6-31++g**", 31, 16, 2, 29},
    {"6-311g", 19, 13, 1, 26},
    {"6-311g*", 24, 14, 2, 27},
    {"6-311g**", 30, 16, 2, 29},
    {"6-311+g", 23, 15, 1, 28},
    {"6-311+g*", 28, 16, 2, 29},
    {"6-311+g**", 34, 18, 2, 31},
    {"6-311++g", 25, 17, 1, 30},
    {"6-311++g*", 30, 18, 2, 31},
    {"6-311++g**", 36, 20, 2, 33},
    {"jun-cc-pvdz-ri", 93, 33, 3, 33},
    {"jun-cc-pvdz-jkfit", 125, 45, 3, 45},
    {"def2-svpd-ri", 110, 38, 3, 50},
    {"def2-tzvpd-ri", 140, 46, 4, 51},
    {"def2-tzvpp-ri", 136, 42, 4, 43},
    {"def2-tzvpp-jkfit", 113, 37, 4, 49},
    {"heavy-aug-cc-pvdz-ri", 100, 34, 3, 34},
    {"heavy-aug-cc-pvdz-jkfit", 132, 46, 3, 46},
    {"heavy-aug-cc-pvtz-ri", 166, 48, 4, 48},
    {"heavy-aug-cc-pvtz-jkfit", 164, 50, 4, 50},
};
constexpr Psi4Size kMethaneSizes[] = {
    {"sto-3g", 9, 7, 1, 21},
    {"6-31g*", 23, 14, 2, 31},
    {"cc-pvdz", 34, 18, 2, 42},
    {"cc-pvdz-ri", 112, 42, 3, 42},
    {"cc-pvdz-jkfit", 162, 60, 3, 60},
    {"cc-pvtz", 86, 34, 3, 58},
    {"cc-pvtz-ri", 201, 63, 4, 63},
    {"cc-pvtz-jkfit", 199, 65, 4, 65},
    {"def2-svp", 34, 18, 2, 32},
    {"def2-svp-ri", 104, 40, 3, 58},
    {"def2-svp-jkfit", 147, 49, 4, 65},
    {"def2-tzvp", 55, 27, 3, 44},
    {"def2-tzvp-ri", 136, 50, 4, 59},
    {"def2-tzvp-jkfit", 147, 49, 4, 65},
    {"def2-qzvpp-ri", 365, 97, 5, 97},
    {"def2-qzvpp-jkfit", 147, 49, 4, 65},
    {"aug-cc-pvdz", 59, 29, 2, 53},
    {"aug-cc-pvdz-ri", 164, 58, 3, 58},
    {"aug-cc-pvdz-jkfit", 214, 76, 3, 76},
    {"aug-cc-pvtz", 138, 50, 3, 74},
    {"aug-cc-pvtz-ri", 290, 84, 4, 84},
    {"aug-cc-pvtz-jkfit", 288, 86, 4, 86},
    {"cc-pvqz", 175, 55, 4, 81},
    {"cc-pvqz-ri", 352, 90, 5, 90},
    {"cc-pvqz-jkfit", 310, 80, 5, 80},
    {"def2-qzvpp", 177, 57, 4, 81},
    {"jun-cc-pv(d+d)z", 38, 20, 2, 44},
    {"aug-cc-pv(d+d)z", 59, 29, 2, 53},
    {"aug-cc-pv(t+d)z", 138, 50, 3, 74},
    {"def2-svpd", 52, 24, 2, 38},
    {"def2-tzvpd", 73, 33, 3, 50},
    {"def2-tzvpp", 87, 35, 3, 52},
    {"3-21g", 17, 13, 1, 21},
    {"6-31g", 17, 13, 1, 30},
    {"6-31g**", 35, 18, 2, 35},
    {"6-31+g", 21, 15, 1, 32},
    {"6-31+g*", 27, 16, 2, 33},
    {"6-31+g**", 39, 20, 2, 37},
    {"6-31++g", 25, 19, 1, 36},
    {"6-31++g*", 31, 20, 2, 37},
    {"6-31++g**", 43, 24, 2, 41},
    {"6-311g", 25, 19, 1, 36},
    {"6-311g*", 30, 20, 2, 37},
    {"6-311g**", 42, 24, 2, 41},
    {"6-311+g", 29, 21, 1, 38},
    {"6-311+g*", 34, 22, 2, 39},
    {"6-311+g**", 46, 26, 2, 43},
    {"6-311++g", 33, 25, 1, 42},
    {"6-311++g*", 38, 26, 2, 43},
    {"6-311++g**", 50, 30, 2, 47},
    {"jun-cc-pvdz-ri", 121, 45, 3, 45},
    {"jun-cc-pvdz-jkfit", 171, 63, 3, 63},
    {"def2-svpd-ri", 156, 56, 3, 74},
    {"def2-tzvpd-ri", 188, 66, 4, 75},
    {"def2-tzvpp-ri", 196, 62, 4, 63},
    {"def2-tzvpp-jkfit", 147, 49, 4, 65},
    {"heavy-aug-cc-pvdz-ri", 128, 46, 3, 46},
    {"heavy-aug-cc-pvdz-jkfit", 178, 64, 3, 64},
    {"heavy-aug-cc-pvtz-ri", 226, 68, 4, 68},
    {"heavy-aug-cc-pvtz-jkfit", 224, 70, 4, 70},
};

void expect_sizes(const Molecule& molecule, const Psi4Size& want) {
  SCOPED_TRACE(want.basis);
  const BasisSet b = load_basis(want.basis, molecule, kLibrary, "basis");
  EXPECT_EQ(b.nbf(), want.nbf);
  EXPECT_EQ(static_cast<int>(b.shells.size()), want.nshell);
  EXPECT_EQ(b.max_l(), want.max_l);
  EXPECT_EQ(b.nprimitive(), want.nprimitive);
}

TEST(BasisSet, WaterSizesMatchPsi4) {
  for (const auto& want : kWaterSizes) expect_sizes(water(), want);
}

TEST(BasisSet, MethaneSizesMatchPsi4) {
  for (const auto& want : kMethaneSizes) expect_sizes(methane(), want);
}

// Psi4's blend for the default JK fitting set (its output: "Blend: CC-PVDZ-JKFIT + DEF2-QZVPP-JKFIT", 139 functions
// for water with a ghost helium): helium, which cc-pVDZ-JKFIT lacks, takes the universal set's functions.
TEST(BasisSet, MissingElementTakesTheFallbackAsPsi4Blends) {
  const auto m = dfmp2::chem::parse_xyz_lines("O 0 0 0.1178\nH 0 0.7555 -0.4712\nH 0 -0.7555 -0.4712\nGh(He) 0 0 3\n", "t");
  EXPECT_THROW(load_basis("cc-pvdz-jkfit", m, kLibrary, "scf.jk_basis"), dfmp2::InputError);
  const BasisSet b = load_basis("cc-pvdz-jkfit", m, kLibrary, "scf.jk_basis", 6, dfmp2::chem::kUniversalJkFit);
  EXPECT_EQ(b.nbf(), 139);
  EXPECT_EQ(b.name, "cc-pvdz-jkfit + def2-qzvpp-jkfit");
  // Without an element missing, the fallback is not used and the name stays.
  EXPECT_EQ(load_basis("cc-pvdz-jkfit", water(), kLibrary, "scf.jk_basis", 6, dfmp2::chem::kUniversalJkFit).name,
            "cc-pvdz-jkfit");
}

TEST(BasisSet, ShellsAreInAtomOrderWithCentresInBohr) {
  const BasisSet b = load_basis("cc-pvdz", water(), kLibrary, "basis");
  EXPECT_EQ(b.name, "cc-pvdz");
  EXPECT_EQ(b.source, kLibrary + "/cc-pvdz.gbs");
  // Psi4 shell 0: O 1s contraction, 8 primitives, centre (0, 0, 0.2225908403176776) bohr.
  const auto& s0 = b.shells[0];
  EXPECT_EQ(s0.l, 0);
  EXPECT_EQ(s0.atom, 0);
  EXPECT_EQ(s0.exponents, (std::vector<double>{11720.0, 1759.0, 400.8, 113.7, 37.03, 13.27, 5.025, 1.013}));
  EXPECT_EQ(s0.coefficients,
            (std::vector<double>{0.00071, 0.00547, 0.027837, 0.1048, 0.283062, 0.448719, 0.270952, 0.015458}));
  EXPECT_DOUBLE_EQ(s0.center[0], 0.0);
  EXPECT_NEAR(s0.center[2], 0.2225908403176776, 1e-14);
  // Psi4 shell 3: O p, 3 primitives.
  EXPECT_EQ(b.shells[3].l, 1);
  EXPECT_EQ(b.shells[3].exponents, (std::vector<double>{17.7, 3.854, 1.046}));
  EXPECT_EQ(b.shells[3].coefficients, (std::vector<double>{0.043018, 0.228913, 0.508728}));
  // Psi4 shell 9: the second H's first s shell, centre (0, -1.4275992706554927, -0.8903652509968357) bohr.
  const auto& s9 = b.shells[9];
  EXPECT_EQ(s9.atom, 2);
  EXPECT_EQ(s9.exponents, (std::vector<double>{13.01, 1.962, 0.4446}));
  EXPECT_NEAR(s9.center[1], -1.4275992706554927, 1e-14);
  EXPECT_NEAR(s9.center[2], -0.8903652509968357, 1e-14);
  // Atoms never interleave, and offsets are running sums of shell sizes.
  for (std::size_t i = 1; i < b.shells.size(); ++i) EXPECT_LE(b.shells[i - 1].atom, b.shells[i].atom);
  const auto offsets = b.shell_offsets();
  ASSERT_EQ(offsets.size(), b.shells.size());
  EXPECT_EQ(offsets[0], 0);
  for (std::size_t i = 1; i < offsets.size(); ++i) EXPECT_EQ(offsets[i], offsets[i - 1] + b.shells[i - 1].size());
  EXPECT_EQ(offsets.back() + b.shells.back().size(), b.nbf());
}

TEST(BasisSet, SpShellsSplitIntoSThenP) {
  const BasisSet b = load_basis("6-31G*", water(), kLibrary, "basis");
  // Psi4's shell list for water 6-31G*: angular momenta and primitive counts.
  std::vector<int> ls, nprims;
  for (const auto& s : b.shells) {
    ls.push_back(s.l);
    nprims.push_back(s.nprimitive());
  }
  EXPECT_EQ(ls, (std::vector<int>{0, 0, 1, 0, 1, 2, 0, 0, 0, 0}));
  EXPECT_EQ(nprims, (std::vector<int>{6, 3, 3, 1, 1, 1, 3, 1, 3, 1}));
  // O's first SP line in 6-31gs.gbs: "15.5396160 -0.1107775 0.0708743". S and P share the exponents.
  EXPECT_EQ(b.shells[1].exponents, b.shells[2].exponents);
  EXPECT_DOUBLE_EQ(b.shells[1].exponents[0], 15.5396160);
  EXPECT_DOUBLE_EQ(b.shells[1].coefficients[0], -0.1107775);
  EXPECT_DOUBLE_EQ(b.shells[2].coefficients[0], 0.0708743);
}

TEST(BasisSet, CartesianAndSphericalFunctionCounts) {
  const BasisSet pople = load_basis("6-31g*", water(), kLibrary, "basis");  // file header: cartesian
  const auto& d = pople.shells[5];
  EXPECT_EQ(d.l, 2);
  EXPECT_FALSE(d.pure);
  EXPECT_EQ(d.size(), 6);
  for (const auto& s : pople.shells) {
    if (s.l <= 1) {
      EXPECT_TRUE(s.pure);  // documented: s and p are marked pure in either form
    }
  }
  const BasisSet dunning = load_basis("cc-pvdz", water(), kLibrary, "basis");  // spherical
  EXPECT_TRUE(dunning.shells[5].pure);
  EXPECT_EQ(dunning.shells[5].l, 2);
  EXPECT_EQ(dunning.shells[5].size(), 5);
  // l = 3..6 in both forms.
  dfmp2::chem::Shell s;
  for (int l = 0; l <= 6; ++l) {
    s.l = l;
    s.pure = true;
    EXPECT_EQ(s.size(), 2 * l + 1);
    s.pure = false;
    EXPECT_EQ(s.size(), (l + 1) * (l + 2) / 2);
  }

  // The same file with the other header: 6-31G* water has one d shell, 6 -> 5 functions.
  std::ifstream in(kLibrary + "/6-31gs.gbs");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  const auto pos = text.find("cartesian");
  ASSERT_NE(pos, std::string::npos);
  text.replace(pos, 9, "spherical");
  dfmp2::testing::TempDir dir;
  const auto path = dir.file("631gs-spherical.gbs", text);
  EXPECT_EQ(load_basis(path, water(), kLibrary, "basis").nbf(), 18);
}

// A library of several folders (DFMP2_BASIS_DIR's, then the one built in): the first folder with the file wins, and
// an unknown name lists every folder searched.
TEST(BasisSet, FoldersAreSearchedInOrder) {
  dfmp2::testing::TempDir first, second;
  second.file("cc-pvdz.gbs", "spherical\n****\nH 0\nS 1 1.00\n 1.0 1.0\n****\n");
  first.file("mine.gbs", "spherical\n****\nH 0\nS 1 1.00\n 2.0 1.0\nS 1 1.00\n 0.5 1.0\n****\n");
  const std::string folders = first.path().string() + ":" + second.path().string() + ":" + kLibrary;
  EXPECT_EQ(load_basis("mine", one_atom("H"), folders, "basis").shells.size(), 2u);
  // cc-pvdz is in the second folder and the library: the second folder's wins.
  const BasisSet shadowed = load_basis("cc-pvdz", one_atom("H"), folders, "basis");
  EXPECT_EQ(shadowed.shells.size(), 1u);
  EXPECT_EQ(shadowed.source, (second.path() / "cc-pvdz.gbs").string());
  EXPECT_EQ(load_basis("cc-pvtz", water(), folders, "basis").nbf(), 58);  // from the library
  EXPECT_EQ(input_error([&] { load_basis("nothing", water(), folders, "basis"); }),
            "key 'basis': no basis set 'nothing' (no file nothing.gbs in " + first.path().string() + ", " +
                second.path().string() + ", " + kLibrary + ")");
}

TEST(BasisSet, NamesMapToPsi4FileNames) {
  EXPECT_EQ(basis_file_name("6-31G*"), "6-31gs.gbs");
  EXPECT_EQ(basis_file_name("6-31G**"), "6-31gss.gbs");
  EXPECT_EQ(basis_file_name("6-31G(d)"), "6-31g_d_.gbs");
  EXPECT_EQ(basis_file_name("6-31G(d,p)"), "6-31g_d_p_.gbs");
  EXPECT_EQ(basis_file_name("6-31++G*"), "6-31ppgs.gbs");
  EXPECT_EQ(basis_file_name("cc-pVDZ-RI"), "cc-pvdz-ri.gbs");
  EXPECT_EQ(basis_file_name("STO-3G"), "sto-3g.gbs");
  EXPECT_EQ(basis_file_name("def2-SVP-JKFIT"), "def2-svp-jkfit.gbs");

  // Any spelling reaches the same file and keeps the name as asked for.
  const BasisSet b = load_basis("CC-pVDZ-RI", water(), kLibrary, "aux_basis");
  EXPECT_EQ(b.name, "CC-pVDZ-RI");
  EXPECT_EQ(b.source, kLibrary + "/cc-pvdz-ri.gbs");
  EXPECT_EQ(b.nbf(), 84);
  EXPECT_EQ(load_basis("STO-3G", water(), kLibrary, "basis").nbf(), 7);
}

TEST(BasisSet, EveryShippedFileParses) {
  const Molecule hcno = parse_xyz_lines("H 0 0 0\nC 0 0 1\nN 0 0 2\nO 0 0 3\n", "hcno");
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kLibrary)) {
    if (entry.path().extension() != ".gbs") continue;
    ++files;
    SCOPED_TRACE(entry.path().string());
    const BasisSet b = load_basis(entry.path().stem().string(), hcno, kLibrary, "basis");
    EXPECT_GT(b.nbf(), 0);
    for (const auto& s : b.shells) {
      EXPECT_EQ(s.exponents.size(), s.coefficients.size());
      for (const double e : s.exponents) EXPECT_GT(e, 0.0);
    }
  }
  EXPECT_GE(files, 16);
}

// A small file in the format's less common spellings: no header (spherical), comments, D exponents, a scale
// factor, an L (= SP) shell, several symbols on one element line, lower-case symbols, CRLF line ends.
constexpr const char* kCustom =
    "! a test basis\r\n"
    "Free text between blocks is ignored, as Psi4 ignores it\r\n"
    "****\r\n"
    "h He 0\r\n"
    "S 2 1.00\r\n"
    "  1.0D+01 0.5D0   ! trailing comment\r\n"
    "  2.5d-1 0.5\r\n"
    "****\r\n"
    "O 0\r\n"
    "S 1 2.0\r\n"
    "  3.0 1.0\r\n"
    "L 1 1.00\r\n"
    "  0.75 0.2 0.3\r\n"
    "D 1 1.00\r\n"
    "  0.8 1.0\r\n"
    "****\r\n";

TEST(BasisSet, ReadsFilesByPath) {
  dfmp2::testing::TempDir dir;
  const auto path = dir.file("custom.gbs", kCustom);
  const BasisSet b = load_basis(path, water(), kLibrary, "basis");
  EXPECT_EQ(b.source, path);
  ASSERT_EQ(b.shells.size(), 6u);                                 // O: s, s, p, d; H: s; H: s
  EXPECT_EQ(b.shells[0].exponents, (std::vector<double>{12.0}));  // 3.0 * 2.0^2
  EXPECT_EQ(b.shells[1].l, 0);
  EXPECT_EQ(b.shells[2].l, 1);
  EXPECT_EQ(b.shells[2].exponents, (std::vector<double>{0.75}));
  EXPECT_EQ(b.shells[2].coefficients, (std::vector<double>{0.3}));
  EXPECT_EQ(b.shells[3].l, 2);
  EXPECT_TRUE(b.shells[3].pure);  // no header: spherical, as Psi4
  EXPECT_EQ(b.shells[4].exponents, (std::vector<double>{10.0, 0.25}));
  EXPECT_EQ(b.shells[4].coefficients, (std::vector<double>{0.5, 0.5}));
  EXPECT_EQ(b.nbf(), 1 + 1 + 3 + 5 + 1 + 1);
  EXPECT_EQ(load_basis(path, one_atom("He"), kLibrary, "basis").nbf(), 1);

  // A path without the .gbs ending (it has a '/'), and a bare "name.gbs" relative to the current folder.
  const auto other = dir.file("custom.basis", kCustom);
  EXPECT_EQ(load_basis(other, water(), kLibrary, "basis").nbf(), 12);
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir.path());
  const auto relative = input_error([&] { EXPECT_EQ(load_basis("custom.gbs", water(), kLibrary, "basis").nbf(), 12); });
  std::filesystem::current_path(cwd);
  EXPECT_EQ(relative, "");
}

TEST(BasisSet, RereadsAFileThatChanged) {
  dfmp2::testing::TempDir dir;
  const auto path = dir.file("h.gbs", "H 0\nS 1 1.00\n 1.0 1.0\n****\n");
  EXPECT_EQ(load_basis(path, one_atom("H"), kLibrary, "basis").shells.size(), 1u);
  EXPECT_EQ(load_basis(path, one_atom("H"), kLibrary, "basis").shells.size(), 1u);  // cached
  dir.file("h.gbs", "H 0\nS 1 1.00\n 1.0 1.0\nP 1 1.00\n 0.5 1.0\n****\n");
  EXPECT_EQ(load_basis(path, one_atom("H"), kLibrary, "basis").shells.size(), 2u);
  // The same size and modification time, other bytes (an edit by a tool that keeps times): the new exponent.
  const auto mtime = std::filesystem::last_write_time(path);
  dir.file("h.gbs", "H 0\nS 1 1.00\n 2.0 1.0\nP 1 1.00\n 0.5 1.0\n****\n");
  std::filesystem::last_write_time(path, mtime);
  EXPECT_EQ(load_basis(path, one_atom("H"), kLibrary, "basis").shells[0].exponents, (std::vector<double>{2.0}));
}

TEST(BasisSetErrors, UnknownName) {
  EXPECT_EQ(input_error([] { load_basis("cc-pv5z", water(), kLibrary, "basis"); }),
            "key 'basis': no basis set 'cc-pv5z' (no file cc-pv5z.gbs in " + kLibrary + ")");
  EXPECT_EQ(input_error([] { load_basis("6-311G(2df)", water(), kLibrary, "aux_basis"); }),
            "key 'aux_basis': no basis set '6-311G(2df)' (no file 6-311g_2df_.gbs in " + kLibrary + ")");
  EXPECT_EQ(input_error([] { load_basis("", water(), kLibrary, "basis"); }), "key 'basis': empty basis set name");
  EXPECT_EQ(input_error([] { load_basis("/no/such/dir/x.gbs", water(), kLibrary, "basis"); }),
            "key 'basis': no basis set file '/no/such/dir/x.gbs'");
}

TEST(BasisSetErrors, MissingElement) {
  EXPECT_EQ(input_error([] { load_basis("cc-pvdz-ri", one_atom("Xe"), kLibrary, "aux_basis"); }),
            "key 'aux_basis': basis set 'cc-pvdz-ri' has no functions for element Xe");
  // Psi4 1.3.2's cc-pvdz.gbs has Ca but not K; its cc-pvdz-jkfit has no Li (nor He, Be, Na, Mg).
  EXPECT_EQ(input_error([] { load_basis("cc-pVDZ", one_atom("K"), kLibrary, "basis"); }),
            "key 'basis': basis set 'cc-pVDZ' has no functions for element K");
  EXPECT_EQ(input_error([] { load_basis("cc-pvdz", one_atom("Ca"), kLibrary, "basis"); }), "");
  EXPECT_EQ(input_error([] {
              load_basis("cc-pvdz-jkfit", parse_xyz_lines("Li 0 0 0\nH 0 0 1.6\n", "lih"), kLibrary, "jk_basis");
            }),
            "key 'jk_basis': basis set 'cc-pvdz-jkfit' has no functions for element Li");
}

TEST(BasisSetErrors, EffectiveCorePotential) {
  // An atom whose core electrons were not set from the orbital basis (as a fitting set with a potential of its own
  // would find it): refused, naming the file's line, the atom and both counts.
  const std::string message = input_error([] { load_basis("def2-svp", one_atom("Rb"), kLibrary, "basis"); });
  EXPECT_NE(message.find("def2-svp.gbs:"), std::string::npos) << message;
  EXPECT_NE(message.find("key 'basis': 'def2-svp' replaces 28 core electrons of atom 1 (Rb) by a potential, and the "
                         "orbital basis none"), std::string::npos) << message;
  Molecule rb = one_atom("Rb");
  dfmp2::chem::assign_core_electrons(rb, "def2-svp", kLibrary, "basis");
  EXPECT_EQ(load_basis("def2-svp", rb, kLibrary, "basis").core_potentials.size(), 1u);
  EXPECT_EQ(input_error([] { load_basis("def2-svp", one_atom("Kr"), kLibrary, "basis"); }), "");  // all-electron
}

TEST(BasisSetErrors, MalformedFilesNameFileAndLine) {
  dfmp2::testing::TempDir dir;
  struct Case {
    const char* text;
    int line;
    const char* what;
    const char* element = "H";
  };
  const Case cases[] = {
      {"spherical\nH 0\nS 2 1.00\n 1.0 0.5\n 0.2\n****\n", 5,
       "S shell of H, primitive 2 of 2: expected 'exponent coefficient', got '0.2'"},
      {"H 0\nS 1 1.00\n 1.0x 0.5\n****\n", 3,
       "S shell of H, primitive 1 of 1: expected 'exponent coefficient', got '1.0x 0.5'"},
      {"H 0\nSP 1 1.00\n 1.0 0.5\n****\n", 3,
       "SP shell of H, primitive 1 of 1: expected 'exponent s-coefficient p-coefficient', got '1.0 0.5'"},
      {"H 0\nX 1 1.00\n 1.0 0.5\n****\n", 2,
       "expected a shell 'S|P|D|F|G|H|I|SP|L nprim scale' or '****' in the block of H, got 'X 1 1.00'"},
      {"H 0\nS 1 1.00\n 1.0 0.5\nS 1 1.00\n 2.0 0.5\n", 5, "unexpected end of file in the block of H (no '****')"},
      {"H 0\nS 3 1.00\n 1.0 0.5\n", 3, "S shell of H: unexpected end of file after 1 of 3 primitives"},
      {"H 0\nS 0 1.00\n****\n", 2, "S shell of H: 0 primitives (must be 1 to 100)"},
      {"H 0\nS 1 0.00\n 1.0 0.5\n****\n", 2, "S shell of H: scale factor 0.00 (must be from 0.01 to 100; it multiplies the exponents by its square)"},
      {"H 0\nS 1 1.00\n -1.0 0.5\n****\n", 3, "S shell of H: exponent -1.0 is not positive"},
      {"! comment\n\nXy 0\nS 1 1.00\n 1.0 0.5\n****\n", 3, "'Xy' is not an element symbol"},
      {"spherical\nS 1 1.00\n 1.0 1.0\n****\n", 2,
       "'S 1 1.00' outside an element block (no 'Symbol 0' line before it)"},
      {"H 0\nS 1 1.00\n 1.0 1.0\n****\n 2.0 1.0\n", 5,
       "'2.0 1.0' outside an element block (no 'Symbol 0' line before it)"},
      {"H 0\nS 1 1.00\n 1.0 1.0\nO 0\nS 1 1.00\n 2.0 1.0\n****\n", 4,
       "expected a shell 'S|P|D|F|G|H|I|SP|L nprim scale' or '****' in the block of H, got 'O 0'"},
      {"H 0\n", 1, "unexpected end of file after the element line of H"},
      {"H 0\nS 1 1.00\n 1.0 1.0\n****\ncartesian\n", 5, "'cartesian' after the first element block"},
      {"H 0\nS 1 1.00\n 1.0 1.0\n****\n\nH 0\nS 1 1.00\n 2.0 1.0\n****\n", 6, "second block for element H"},
      {"RB 0\nRB-ECP 1 28\ns-ul potential\n 1\n2 1.0\n", 5,
       "expected 'rpower exponent coefficient' in the ECP of Rb, got '2 1.0'", "Rb"},
      {"RB 0\nRB-ECP 0 28\ns-ul potential\n", 3, "unexpected end of file in the ECP of Rb", "Rb"},
  };
  int n = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    const auto path = dir.file("bad" + std::to_string(n++) + ".gbs", c.text);
    EXPECT_EQ(input_error([&] { load_basis(path, one_atom(c.element), kLibrary, "basis"); }),
              path + ":" + std::to_string(c.line) + ": " + c.what);
  }
}

TEST(BasisSetErrors, ABadBlockOnlyStopsItsElement) {
  // A block without its '****': H is an error, O (whose line ended H's block) is read.
  dfmp2::testing::TempDir dir;
  const auto path = dir.file("open.gbs", "H 0\nS 1 1.00\n 1.0 1.0\nO 0\nS 1 1.00\n 2.0 1.0\n****\n");
  EXPECT_EQ(load_basis(path, one_atom("O"), kLibrary, "basis").shells.size(), 1u);
  // Psi4 1.3.2's def2-svp-ri.gbs has a stray '*' line as the first line of the block of Sr (Psi4 itself fails on
  // Sr there); the rest of the file is usable.
  EXPECT_EQ(input_error([] { load_basis("def2-svp-ri", one_atom("Sr"), kLibrary, "aux_basis"); }),
            kLibrary +
                "/def2-svp-ri.gbs:1995: expected a shell 'S|P|D|F|G|H|I|SP|L nprim scale' or '****' in the "
                "block of Sr, got '*'");
  EXPECT_EQ(load_basis("def2-svp-ri", one_atom("Rb"), kLibrary, "aux_basis").shells.empty(), false);
}

TEST(BasisSetErrors, MalformedLibraryFileNamesItsPath) {
  dfmp2::testing::TempDir dir;
  dir.file("broken.gbs", "spherical\n\nH 0\nS 1 1.00\n 1.0\n****\n");
  EXPECT_EQ(input_error([&] { load_basis("Broken", one_atom("H"), dir.path().string(), "basis"); }),
            (dir.path() / "broken.gbs").string() +
                ":5: S shell of H, primitive 1 of 1: expected 'exponent coefficient', got '1.0'");
}

// def2's potentials (issue 47): Xe's replaces 28 electrons, its four parts (the local f part first, then s, p, d)
// as the file gives them; a ghost of the same element carries the functions and no potential.
TEST(BasisSet, Def2PotentialsReplaceCoreElectrons) {
  Molecule m = parse_xyz_lines("Xe 0 0 0\nI 0 0 3\nGh(Xe) 0 3 0\nH 0 0 4.6\n", "atoms");
  dfmp2::chem::assign_core_electrons(m, "def2-svp", kLibrary, "basis");
  EXPECT_EQ(m.atoms[0].core_electrons, 28);
  EXPECT_EQ(m.atoms[0].nuclear_charge(), 26);
  EXPECT_EQ(m.atoms[1].nuclear_charge(), 25);
  EXPECT_EQ(m.atoms[2].nuclear_charge(), 0);
  EXPECT_EQ(m.atoms[3].core_electrons, 0);
  EXPECT_EQ(dfmp2::chem::electron_count(m), 26 + 25 + 1);
  // Psi4's freeze_core: [Kr] (18 orbitals) less the potential's 14 on each heavy atom.
  EXPECT_EQ(dfmp2::chem::frozen_core_orbitals(m), 4 + 4);
  const BasisSet b = load_basis("def2-svp", m, kLibrary, "basis");
  ASSERT_EQ(b.core_potentials.size(), 2u);  // none on the ghost
  const auto& xe = b.core_potentials[0];
  EXPECT_EQ(xe.atom, 0);
  EXPECT_EQ(xe.core_electrons, 28);
  EXPECT_EQ(xe.lmax, 3);
  // 4 local terms (f-ul), then s 7, p 8, d 10.
  ASSERT_EQ(xe.terms.size(), 29u);
  EXPECT_EQ(xe.terms[0].l, 3);
  EXPECT_EQ(xe.terms[0].power, 2);
  EXPECT_DOUBLE_EQ(xe.terms[0].exponent, 20.881557);
  EXPECT_DOUBLE_EQ(xe.terms[0].coefficient, -23.089295);
  EXPECT_EQ(xe.terms[4].l, 0);
  EXPECT_DOUBLE_EQ(xe.terms[4].coefficient, 49.997962);
  EXPECT_EQ(xe.terms[28].l, 2);
  EXPECT_EQ(b.core_potentials[1].atom, 1);
  // A basis without potentials leaves every atom whole.
  Molecule water_again = water();
  dfmp2::chem::assign_core_electrons(water_again, "cc-pvdz", kLibrary, "basis");
  for (const auto& atom : water_again.atoms) EXPECT_EQ(atom.core_electrons, 0);
}

}  // namespace
