// libFuzzer target: the basis set file reader (chem/system/basis_set.cpp, Psi4's .gbs format), for one atom whose element
// the first byte picks (H to Kr), with the angular-momentum limit of orbital basis sets.
#include "chem/system/basis_set.hpp"
#include "chem/integrals/integrals.hpp"
#include "tests/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  dfmp2::chem::Molecule molecule;
  dfmp2::chem::Atom atom;
  atom.atomic_number = 1 + data[0] % 36;
  atom.symbol = dfmp2::chem::element_symbol(atom.atomic_number);
  molecule.atoms.push_back(atom);
  const std::string path = dfmp2::fuzz::as_file("fuzz.gbs", data + 1, size - 1);
  dfmp2::fuzz::expect_only_input_errors([&] {
    const auto basis = dfmp2::chem::load_basis(path, molecule, "", "basis", dfmp2::chem::max_orbital_angular_momentum());
    (void)basis.nbf();
  });
  return 0;
}
