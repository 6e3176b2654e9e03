#pragma once
// Gaussian basis sets: shells placed on a molecule's atoms, read from Gaussian94 / Psi4 `.gbs` files.
//
// A `.gbs` file begins with `spherical` or `cartesian` (the angular form of every shell with l >= 2; s and p are
// the same either way; without the line, spherical, as Psi4 assumes), then one block per element: a line
// `Symbol 0`, shells `L nprim scale` followed by nprim lines `exponent coefficient`, and `****`. Shell types are
// S P D F G H I (l = 0..6); `SP` (also written `L`) lines carry two coefficients and stand for an S shell then a
// P shell with the same exponents. The scale factor multiplies the exponents by scale^2, as Gaussian defines it
// (Psi4 1.3.2 instead multiplies the coefficients by scale, which the normalisation of the contraction undoes;
// every file in inputs/basis/ has 1.00, where the two agree). Numbers may use Fortran `D` exponents. Lines
// starting with `!` are comments. Coefficients are for normalised primitives, as the format defines; integral
// code normalises the contraction.
//
// Blocks `Symbol 0` followed by `SYMBOL-ECP lmax ncore` are effective core potentials (the def2 files' for Rb to Rn:
// lmax + 1 parts, the local one first, then s, p, ... each as terms `n a d`, meaning d r^(n-2) exp(-a r^2)). The
// potential replaces ncore electrons: the atom's nuclear charge and electrons are Z - ncore (Atom::core_electrons,
// set from the orbital basis by assign_core_electrons before anything counts electrons).
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "chem/system/molecule.hpp"

namespace dfmp2::chem {

struct Shell {
  int l = 0;                         // angular momentum
  bool pure = true;                  // spherical (2l+1 functions) or cartesian ((l+1)(l+2)/2 functions); always
                                     // true for l <= 1, where both forms are the same functions
  std::vector<double> exponents;     // primitive exponents, bohr^-2 (scale factor applied)
  std::vector<double> coefficients;  // contraction coefficients of normalised primitives, as in the file
  std::array<double, 3> center{};    // bohr
  int atom = 0;                      // index of the atom in the molecule

  int size() const { return pure ? 2 * l + 1 : (l + 1) * (l + 2) / 2; }
  int nprimitive() const { return static_cast<int>(exponents.size()); }
};

// One term d r^(n-2) exp(-a r^2) of an effective core potential: of the local part when l is the potential's lmax,
// else of the semilocal part (U_l - U_lmax) projected on angular momentum l.
struct CorePotentialTerm {
  int l = 0;
  int power = 2;  // n
  double exponent = 0, coefficient = 0;
};

// An effective core potential on one atom.
struct CorePotential {
  int atom = 0;             // index of the atom in the molecule
  int core_electrons = 0;   // the electrons it replaces
  int lmax = 0;             // angular momentum of its local part
  std::array<double, 3> center{};  // bohr
  std::vector<CorePotentialTerm> terms;
};

struct BasisSet {
  std::string name;                        // as asked for, e.g. "cc-pVDZ"
  std::string source;                      // the file it was read from
  std::vector<Shell> shells;               // in atom order, then file order (an SP line gives S, then P)
  std::vector<CorePotential> core_potentials;  // on the real atoms whose element has one in the file (none on ghosts)
  int nbf() const {  // number of basis functions
    int n = 0;
    for (const auto& s : shells) n += s.size();
    return n;
  }
  int max_l() const {  // largest l of any shell; 0 for an empty set
    int l = 0;
    for (const auto& s : shells) l = std::max(l, s.l);
    return l;
  }
  int nprimitive() const {  // primitives summed over shells (an SP line counts for both), as Psi4 counts
    int n = 0;
    for (const auto& s : shells) n += s.nprimitive();
    return n;
  }
  std::vector<int> shell_offsets() const {  // first function of each shell
    std::vector<int> offsets;
    offsets.reserve(shells.size());
    int n = 0;
    for (const auto& s : shells) {
      offsets.push_back(n);
      n += s.size();
    }
    return offsets;
  }
};

// The library of basis sets shipped in inputs/basis/ (or another folder): a name such as "cc-pVDZ", "6-31G*",
// "def2-svp-jkfit" is lower-cased and mapped to a file name as Psi4 does ("*" -> "s", "+" -> "p",
// "(d)" -> "_d_", ...). A name that contains '/' or ends in ".gbs" is a path and is read as given (relative
// to the current folder).
// Throws InputError naming `key` (e.g. "basis") and the name when the file does not exist, and naming the element
// and the basis when an element of the molecule is missing from it. The potentials of the file's elements go on the
// real atoms (core_potentials); each must replace the electrons the atom's core_electrons says (a fitting set whose
// file has potentials the orbital basis has not is an InputError).
// A malformed file throws InputError "<file>:<line>: <what>". Parsed files are cached per process (keyed by
// path, and reused only while the file's bytes are unchanged), so loading the same basis for many molecules reads the file once.
// A shell of angular momentum above `max_l` (what the integral code can do for the basis's role, see
// chem/integrals/integrals.hpp) is an InputError naming the file and line.
// `library_dir` is one folder or a ':'-separated list of folders, searched in order for a name's file.
// Psi4's def2-universal-jkfit, which its library file names def2-qzvpp-jkfit.
inline constexpr const char* kUniversalJkFit = "def2-qzvpp-jkfit";
// `fallback` (may be empty): a basis whose functions an element missing from `name` takes instead, as Psi4 blends a
// default fitting set with the universal one (cc-pVDZ-JKFIT + def2-QZVPP-JKFIT for helium); the name becomes
// "<name> + <fallback>" when it is used.
BasisSet load_basis(const std::string& name, const Molecule& molecule, const std::string& library_dir,
                    const std::string& key, int max_l = 6, const std::string& fallback = "");

// Sets each atom's core_electrons from the potentials basis `name` has for its element (0 without one): what the
// orbital basis decides before electrons are counted. InputError naming `key` as load_basis's, and for a potential
// that would take every electron of its element.
void assign_core_electrons(Molecule& molecule, const std::string& name, const std::string& library_dir,
                           const std::string& key);

// Whether a basis name is a file path rather than a library name: it holds a '/' or ends in .gbs (any case).
bool is_basis_file_path(const std::string& name);

// The Psi4 file name for a basis name ("6-31G*" -> "6-31gs.gbs", "6-31G(d,p)" -> "6-31g_d_p_.gbs").
std::string basis_file_name(const std::string& name);

}  // namespace dfmp2::chem
