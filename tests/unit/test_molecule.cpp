#include <gtest/gtest.h>

#include "chem/molecule.hpp"
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
