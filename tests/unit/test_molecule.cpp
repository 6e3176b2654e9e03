#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <vector>

#include "chem/system/molecule.hpp"
#include "linalg/errors.hpp"

namespace {

TEST(Molecule, AtomicNumbersAndSymbols) {
  EXPECT_EQ(dfmp2::chem::atomic_number("H"), 1);
  EXPECT_EQ(dfmp2::chem::atomic_number("cl"), 17);
  EXPECT_EQ(dfmp2::chem::atomic_number("Xx"), 0);
  EXPECT_EQ(dfmp2::chem::element_symbol(26), "Fe");
}

TEST(Molecule, FrozenCoreFollowsPsi4) {
  using dfmp2::chem::frozen_core_orbitals;
  EXPECT_EQ(frozen_core_orbitals(1), 0);
  EXPECT_EQ(frozen_core_orbitals(2), 0);
  EXPECT_EQ(frozen_core_orbitals(3), 1);
  EXPECT_EQ(frozen_core_orbitals(10), 1);
  EXPECT_EQ(frozen_core_orbitals(11), 5);
  EXPECT_EQ(frozen_core_orbitals(18), 5);
  EXPECT_EQ(frozen_core_orbitals(19), 9);
  EXPECT_EQ(frozen_core_orbitals(36), 9);
  EXPECT_EQ(frozen_core_orbitals(37), 18);
  EXPECT_EQ(frozen_core_orbitals(55), 27);
  const auto water = dfmp2::chem::parse_xyz_lines("O 0 0 0.1\nH 0 0.7 -0.4\n\nH 0 -0.7 -0.4\n", "test");
  EXPECT_EQ(water.atoms.size(), 3u);
  EXPECT_EQ(frozen_core_orbitals(water), 1);
}

TEST(Molecule, BadXyzLinesNameTheLine) {
  try {
    dfmp2::chem::parse_xyz_lines("O 0 0 0\nQq 0 0 1\n", "geometry");
    FAIL();
  } catch (const dfmp2::InputError& e) {
    EXPECT_STREQ(e.what(), "geometry: line 2: 'Qq' is not an element symbol");
  }
  try {
    dfmp2::chem::parse_xyz_lines("O 0 0\n", "geometry");
    FAIL();
  } catch (const dfmp2::InputError& e) {
    EXPECT_STREQ(e.what(), "geometry: line 1: expected 'Symbol x y z', got 'O 0 0'");
  }
  EXPECT_THROW(dfmp2::chem::parse_xyz_lines("\n\n", "geometry"), dfmp2::InputError);
}

// Ghost atoms in Psi4's two spellings: the element's basis functions (its atomic number), no nuclear charge, no
// electrons, no frozen core; written back as Gh(X). A ghost of no element, and a molecule of ghosts only, are errors.
TEST(Molecule, GhostAtoms) {
  using dfmp2::chem::parse_xyz_lines;
  const auto m = parse_xyz_lines("O 0 0 0.1\nH 0 0.7 -0.4\nH 0 -0.7 -0.4\nGh(He) 0 0 3\n@ne 0 0 -3\ngh(Li) 3 0 0\n", "test");
  ASSERT_EQ(m.atoms.size(), 6u);
  EXPECT_FALSE(m.atoms[0].ghost);
  EXPECT_TRUE(m.atoms[3].ghost);
  EXPECT_EQ(m.atoms[3].atomic_number, 2);
  EXPECT_EQ(m.atoms[3].nuclear_charge(), 0);
  EXPECT_TRUE(m.atoms[4].ghost);
  EXPECT_EQ(m.atoms[4].atomic_number, 10);
  EXPECT_TRUE(m.atoms[5].ghost);
  EXPECT_EQ(dfmp2::chem::atom_symbol(m.atoms[5]), "Gh(Li)");
  EXPECT_EQ(dfmp2::chem::atom_symbol(m.atoms[0]), "O");
  EXPECT_EQ(dfmp2::chem::electron_count(m), 10);
  EXPECT_EQ(dfmp2::chem::closed_shell_occupied(m), 5);
  EXPECT_EQ(dfmp2::chem::frozen_core_orbitals(m), 1);  // O's 1s; the ghost Ne and Li freeze nothing
  try {
    parse_xyz_lines("O 0 0 0\nGh(Xx) 0 0 1\n", "geometry");
    FAIL();
  } catch (const dfmp2::InputError& e) {
    EXPECT_STREQ(e.what(), "geometry: line 2: 'Gh(Xx)' is a ghost of 'Xx', which is not an element symbol");
  }
  try {
    parse_xyz_lines("Gh(O) 0 0 0\n@H 0 0 1\n", "geometry");
    FAIL();
  } catch (const dfmp2::InputError& e) {
    EXPECT_STREQ(e.what(), "geometry: every atom is a ghost (Gh(X) or @X); a molecule needs at least one real atom");
  }
  EXPECT_THROW(parse_xyz_lines("Gh() 0 0 0\n", "geometry"), dfmp2::InputError);
  EXPECT_THROW(parse_xyz_lines("@ 0 0 0\n", "geometry"), dfmp2::InputError);
}

// Fragments as Psi4's geometry strings write them: "--" lines between them, each possibly starting with its
// "charge multiplicity" line; what is not given is completed as qcelemental completes it (its own documented
// examples below; tests/molecule/chgmult_against_qcelemental.py compares thousands of cases with it live).
TEST(Molecule, FragmentsAsPsi4WritesThem) {
  using dfmp2::chem::parse_xyz_lines;
  auto m = parse_xyz_lines("0 2\nO 0 0 0\nH 0 0 0.97\n--\n1 1\nNa 3 0 0\n--\nHe 0 0 -3\n", "t");
  ASSERT_EQ(m.fragments.size(), 3u);
  EXPECT_EQ(m.fragments[0].count, 2u);
  EXPECT_EQ(m.fragments[1].first, 2u);
  EXPECT_EQ(m.fragments[1].given_charge, 1);
  EXPECT_FALSE(m.fragments[2].given_charge);
  EXPECT_FALSE(m.fragments[2].given_multiplicity);
  dfmp2::chem::fill_charges_and_multiplicities(m, std::nullopt, std::nullopt);
  EXPECT_EQ(m.charge, 1);
  EXPECT_EQ(m.multiplicity, 2);
  EXPECT_EQ(dfmp2::chem::fragment_molecule(m, m.fragments[1]).atoms.size(), 1u);
  // A neutral complex: the charge the given fragments leave unallocated (-1) goes to the one without a line.
  dfmp2::chem::fill_charges_and_multiplicities(m, 0, std::nullopt);
  EXPECT_EQ(m.fragments[2].charge, -1);
  EXPECT_EQ(m.fragments[2].multiplicity, 2);
  EXPECT_EQ(m.multiplicity, 3);
  // With every fragment's charge given, the complex's must be their sum.
  m.fragments[2].given_charge = 0;
  EXPECT_THROW(dfmp2::chem::fill_charges_and_multiplicities(m, 0, std::nullopt), dfmp2::InputError);  // 0 against 1
  // Without "--" or a charge line, no fragments.
  EXPECT_TRUE(parse_xyz_lines("O 0 0 0\nH 0 0 0.97\n", "t").fragments.empty());
  // A fragment without atoms, and one whose charge and multiplicity cannot go together.
  auto empty = parse_xyz_lines("O 0 0 0\n--\n--\nH 0 0 3\n", "t");
  EXPECT_THROW(dfmp2::chem::fill_charges_and_multiplicities(empty, std::nullopt, std::nullopt), dfmp2::InputError);
  auto odd = parse_xyz_lines("O 0 0 0\nH 0 0 0.97\nH 0.9 0 -0.3\n--\n0 1\nH 0 0 3\n", "t");
  EXPECT_THROW(dfmp2::chem::fill_charges_and_multiplicities(odd, std::nullopt, std::nullopt), dfmp2::InputError);
  // The charge line comes first in its fragment.
  EXPECT_THROW(parse_xyz_lines("O 0 0 0\n0 1\nH 0 0 1\n", "t"), dfmp2::InputError);
}

TEST(Geometry, CoincidentOrDistantAtomsAreInputErrors) {
  using dfmp2::chem::check_geometry;
  using dfmp2::chem::parse_xyz_lines;
  EXPECT_NO_THROW(check_geometry(parse_xyz_lines("H 0 0 0\nH 0 0 0.74", "h2"), "h2"));
  auto message = [](const std::string& xyz) {
    try {
      check_geometry(parse_xyz_lines(xyz, "g"), "g");
    } catch (const dfmp2::InputError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(message("O 0 0 0\nH 0 0 0.05").find("atoms 1 (O) and 2 (H) are 0.05 angstrom apart"), std::string::npos);
  EXPECT_NE(message("He 0 0 20000").find("atom 1 (He) has coordinate 20000 angstrom"), std::string::npos);
  EXPECT_EQ(message("He 0 0 9999"), "(no error)");
}

}  // namespace

// A file of 125,000 atoms is checked in linear time (a grid of cells), not by 7.8e9 pair distances (a minute); the pair
// reported is the first a loop over all pairs would find, across cell boundaries too.
TEST(Geometry, ManyAtomsAreCheckedQuicklyAndCloseOnesFoundAcrossCells) {
  using dfmp2::chem::check_geometry;
  dfmp2::chem::Molecule grid;
  for (int i = 0; i < 50; ++i)
    for (int j = 0; j < 50; ++j)
      for (int k = 0; k < 50; ++k) {
        dfmp2::chem::Atom a;
        a.symbol = "He";
        a.atomic_number = 2;
        a.x = 1.0 * i, a.y = 1.0 * j, a.z = 1.0 * k;
        grid.atoms.push_back(a);
      }
  const auto start = std::chrono::steady_clock::now();
  EXPECT_NO_THROW(check_geometry(grid, "grid"));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
  // Two atoms 0.09 angstrom apart on either side of a cell boundary (x = 0.1), the second the last of all.
  auto close = grid;
  close.atoms.back().x = 0.05, close.atoms.back().y = 25.0, close.atoms.back().z = 25.0;
  close.atoms[25 * 50 + 25].x = 0.14;  // atom (0, 25, 25), the 1276th, moved to x 0.14
  try {
    check_geometry(close, "grid");
    ADD_FAILURE() << "no error";
  } catch (const dfmp2::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("atoms 1276 (He) and 125000 (He) are 0.09 angstrom apart"),
              std::string::npos)
        << e.what();
  }
}

namespace {

// Fragments of single atoms (Z of each; 0 a ghost of helium) with what was given; "?" entries are not given.
struct Filled {
  int charge, multiplicity;
  std::vector<int> charges, multiplicities;
  bool operator==(const Filled&) const = default;
};
std::optional<Filled> fill(const std::vector<int>& z, std::optional<int> charge, std::vector<std::optional<int>> charges,
                           std::optional<int> multiplicity, std::vector<std::optional<int>> multiplicities) {
  dfmp2::chem::Molecule m;
  for (std::size_t k = 0; k < z.size(); ++k) {
    dfmp2::chem::Atom a;
    a.atomic_number = z[k] == 0 ? 2 : z[k];
    a.ghost = z[k] == 0;
    a.z = 3.0 * double(k);
    m.atoms.push_back(a);
    m.fragments.push_back({k, 1, charges[k], multiplicities[k]});
  }
  try {
    dfmp2::chem::fill_charges_and_multiplicities(m, charge, multiplicity);
  } catch (const dfmp2::InputError&) {
    return std::nullopt;
  }
  Filled out{m.charge, m.multiplicity, {}, {}};
  for (const auto& f : m.fragments) out.charges.push_back(f.charge), out.multiplicities.push_back(f.multiplicity);
  return out;
}

}  // namespace

// qcelemental's own examples of validate_and_fill_chgmult (its docstring): the unallocated charge on the first
// fragment able to bear it, parity-led multiplicities, the high-spin sum, ghosts as neutral singlets.
TEST(Molecule, FragmentChargesAndMultiplicitiesAsQcelementalFillsThem) {
  const auto none = std::nullopt;
  using V = std::vector<std::optional<int>>;
  EXPECT_EQ(fill({2, 2}, 2, V{none, none}, none, V{none, none}), (Filled{2, 1, {2, 0}, {1, 1}}));
  EXPECT_EQ(fill({2, 2}, 0, V{2, none}, none, V{none, none}), (Filled{0, 1, {2, -2}, {1, 1}}));
  EXPECT_EQ(fill({10, 2, 2}, -2, V{none, 2, none}, none, V{none, none, none}), (Filled{-2, 1, {-4, 2, 0}, {1, 1, 1}}));
  EXPECT_EQ(fill({2, 2, 10}, 2, V{none, -2, none}, none, V{none, none, none}), (Filled{2, 1, {0, -2, 4}, {1, 1, 1}}));
  EXPECT_FALSE(fill({2, 2, 10}, 2, V{none, -2, 0}, none, V{none, none, none}));
  EXPECT_EQ(fill({1, 1}, none, V{none, none}, none, V{none, none}), (Filled{0, 3, {0, 0}, {2, 2}}));
  EXPECT_EQ(fill({1, 2}, -2, V{-1, none}, none, V{none, none}), (Filled{-2, 2, {-1, -1}, {1, 2}}));
  EXPECT_EQ(fill({1, 2, 11, 10}, 3, V{none, none, 1, none}, none, V{none, none, none, none}),
            (Filled{3, 2, {0, 2, 1, 0}, {2, 1, 1, 1}}));
  EXPECT_EQ(fill({2, 2, 2}, 0, V{none, none, 1}, none, V{1, none, 2}), (Filled{0, 3, {0, -1, 1}, {1, 2, 2}}));
  EXPECT_EQ(fill({7, 7, 7}, none, V{1, 1, 1}, 3, V{none, none, none}), (Filled{3, 3, {1, 1, 1}, {3, 1, 1}}));
  EXPECT_FALSE(fill({7, 7, 7}, none, V{none, none, none}, 3, V{none, none, 2}));
  EXPECT_EQ(fill({7, 7, 7}, 1, V{none, -1, none}, 3, V{none, none, 2}), (Filled{1, 3, {2, -1, 0}, {2, 1, 2}}));
  EXPECT_EQ(fill({7, 10, 7}, 1, V{none, none, none}, 4, V{none, 3, none}), (Filled{1, 4, {1, 0, 0}, {1, 3, 2}}));
  EXPECT_EQ(fill({2, 2}, none, V{-1, 1}, none, V{none, none}), (Filled{0, 3, {-1, 1}, {2, 2}}));
  EXPECT_EQ(fill({2, 0}, none, V{2, none}, none, V{none, none}), (Filled{2, 1, {2, 0}, {1, 1}}));
  EXPECT_FALSE(fill({0, 2}, none, V{2, none}, none, V{none, none}));
  EXPECT_EQ(fill({0, 2, 0}, 1, V{none, none, none}, none, V{none, none, none}), (Filled{1, 2, {0, 1, 0}, {1, 2, 1}}));
}

// qcelemental enumerates every combination of candidates (exponential in the fragments); the completion here searches
// in the same order but prunes, so a cluster of 2,000 radicals, none with its multiplicity given, takes no time.
TEST(Molecule, CompletingThousandsOfFragmentsIsQuick) {
  dfmp2::chem::Molecule m;
  for (std::size_t k = 0; k < 2000; ++k) {
    dfmp2::chem::Atom a;
    a.symbol = "H";
    a.atomic_number = 1;
    a.z = 3.0 * double(k);
    m.atoms.push_back(a);
    m.fragments.push_back({k, 1, std::nullopt, std::nullopt});
  }
  const auto start = std::chrono::steady_clock::now();
  dfmp2::chem::fill_charges_and_multiplicities(m, 1, std::nullopt);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2.0);
  EXPECT_EQ(m.fragments[0].charge, 1);  // the unallocated charge on the first fragment, a bare proton
  EXPECT_EQ(m.fragments[0].multiplicity, 1);
  EXPECT_EQ(m.multiplicity, 2000);      // 1,999 doublets, high spin
}
