// Orbitals in the Molden format (molden.hpp).
#include "chem/io/molden.hpp"

#include <fmt/format.h>

#include "linalg/errors.hpp"

namespace dfmp2::chem {

namespace {

// Molden's position k of a spherical shell's functions is libint2's m = 0, +1, -1, +2, -2, ... at index l + m.
int libint_index(int l, int k) { return k == 0 ? l : (k % 2 == 1 ? l + (k + 1) / 2 : l - k / 2); }

void check_shells(const BasisSet& basis) {
  for (const Shell& shell : basis.shells) {
    if (shell.l > 4) {
      throw UnsupportedError(fmt::format("molden: the basis has a shell of l = {}; the Molden format stops at g", shell.l));
    }
    if (shell.l >= 2 && !shell.pure) {
      throw UnsupportedError("molden: the basis has cartesian d, f or g shells, which Molden normalises otherwise than "
                             "the integrals do; only spherical ones are written");
    }
  }
}

}  // namespace

std::string molden_text(const Molecule& molecule, const BasisSet& basis, const std::vector<MoldenOrbitals>& sets) {
  check_shells(basis);
  std::string out = "[Molden Format]\n[Title]\n written by dfmp2\n[Atoms] AU\n";
  for (std::size_t a = 0; a < molecule.atoms.size(); ++a) {
    const Atom& atom = molecule.atoms[a];
    out += fmt::format("{:<3} {:>4} {:>3} {:20.12f} {:20.12f} {:20.12f}\n", element_symbol(atom.atomic_number), a + 1,
                       atom.nuclear_charge(), atom.x * kBohrPerAngstrom, atom.y * kBohrPerAngstrom,
                       atom.z * kBohrPerAngstrom);
  }
  out += "[GTO]\n";
  static const char kLetters[] = "spdfg";
  for (std::size_t a = 0; a < molecule.atoms.size(); ++a) {
    out += fmt::format("{:>4} 0\n", a + 1);
    for (const Shell& shell : basis.shells) {
      if (shell.atom != static_cast<int>(a)) continue;
      out += fmt::format(" {} {:>3} 1.00\n", kLetters[shell.l], shell.nprimitive());
      for (int p = 0; p < shell.nprimitive(); ++p)
        out += fmt::format(" {:22.14e} {:22.14e}\n", shell.exponents[std::size_t(p)], shell.coefficients[std::size_t(p)]);
    }
    out += "\n";
  }
  if (basis.max_l() >= 2) out += "[5D7F]\n";
  if (basis.max_l() >= 4) out += "[9G]\n";
  out += "[MO]\n";
  const std::vector<int> offsets = basis.shell_offsets();
  for (const MoldenOrbitals& set : sets) {
    for (linalg::Index k = 0; k < set.coefficients.cols(); ++k) {
      out += fmt::format(" Sym= A\n Ene= {:.10f}\n Spin= {}\n Occup= {:.10f}\n", set.energies(k),
                         set.beta ? "Beta" : "Alpha", set.occupations(k));
      int written = 0;
      for (std::size_t s = 0; s < basis.shells.size(); ++s) {
        const Shell& shell = basis.shells[s];
        for (int f = 0; f < shell.size(); ++f) {
          const int from = shell.l >= 2 ? libint_index(shell.l, f) : f;
          out += fmt::format("{:>5} {:22.14e}\n", ++written, set.coefficients(offsets[s] + from, k));
        }
      }
    }
  }
  return out;
}

}  // namespace dfmp2::chem
