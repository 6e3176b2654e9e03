#pragma once
// Atoms of a molecule and what the method needs to know about them: nuclear charges (for frozen-core counts)
// and positions.
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dfmp2::chem {

inline constexpr double kBohrPerAngstrom = 1.0 / 0.52917721067;  // CODATA 2014, as Psi4 1.3 uses

struct Atom {
  std::string symbol;  // as written, e.g. "O" or "Gh(O)"
  int atomic_number = 0;  // of the element whose basis functions the atom carries
  double x = 0, y = 0, z = 0;  // angstrom
  // A ghost atom (Psi4's Gh(X) or @X, QCSchema real: false): X's basis functions, no nucleus and no electrons, as
  // counterpoise corrections place them.
  bool ghost = false;
  // Core electrons an effective core potential of the orbital basis replaces (0 without one): the nucleus and the
  // potential act together as a charge Z - core_electrons (assign_core_electrons sets it).
  int core_electrons = 0;
  int nuclear_charge() const { return ghost ? 0 : atomic_number - core_electrons; }
};

// A fragment of a molecule (Psi4's `--`-separated blocks of xyz text, a YAML list of fragments, QCSchema's
// `fragments`): atoms [first, first + count), its charge and multiplicity as the input gave them (a "charge
// multiplicity" line, keys, QCSchema lists) and as fill_charges_and_multiplicities completed them.
struct Fragment {
  std::size_t first = 0, count = 0;
  std::optional<int> given_charge, given_multiplicity;
  int charge = 0, multiplicity = 1;  // filled
};

struct Molecule {
  std::vector<Atom> atoms;
  int charge = 0;
  int multiplicity = 1;  // 2S + 1
  std::vector<Fragment> fragments;  // none: the molecule is one fragment
};

// The molecule of fragment `f`'s atoms, with the fragment's charge and multiplicity.
Molecule fragment_molecule(const Molecule& molecule, const Fragment& f);
// Fragment `f` in the complex's basis (the counterpoise correction): every atom of the complex in its place, the
// other fragments' atoms as ghosts, with the fragment's charge and multiplicity.
Molecule fragment_in_complex_basis(const Molecule& molecule, const Fragment& f);
// Every fragment's charge and multiplicity, and the complex's, from what the input gave (the complex's `charge` and
// `multiplicity`, each fragment's given_charge and given_multiplicity), by the rules of qcelemental's
// validate_and_fill_chgmult, which Psi4 and QCEngine apply: the charges add up; a charge of the complex that the
// fragments' given charges leave unallocated goes whole to the first fragment without a charge that can bear it (the
// others neutral); multiplicities follow the electron counts' parity, at least as many electrons as unpaired ones;
// the complex's multiplicity is the high-spin sum 1 + sum (m_i - 1) unless it and every fragment's are given; a
// fragment of ghost atoms only is a neutral singlet. Among the candidates qcelemental considers, the first in its
// order is chosen, so the result is the one a QCSchema AtomicResult validates to. Throws InputError about
// molecule.charge, molecule.multiplicity or the fragment ("molecule fragment 2") when no assignment obeys the rules.
// A molecule without fragments takes `charge` and `multiplicity` as given, else 0 and 1.
void fill_charges_and_multiplicities(Molecule& molecule, std::optional<int> charge, std::optional<int> multiplicity);

// Atomic number of an element symbol (case-insensitive), 0 when the symbol is not an element.
int atomic_number(const std::string& symbol);
// Standard capitalisation ("O", "Cl") of atomic number z.
std::string element_symbol(int z);
// The atom's symbol as the xyz reader takes it back: "O", or "Gh(O)" for a ghost.
std::string atom_symbol(const Atom& atom);

// Parses xyz lines "Symbol x y z" (angstrom); `where` names the source for error messages. Blank lines are
// skipped. A symbol Gh(X) or @X is a ghost atom of element X (Psi4's two spellings). As in Psi4's geometry strings, a
// line "--" starts a new fragment and a line of two integers first in a fragment gives its charge and multiplicity. Throws InputError naming
// `where` and the line, and when every atom is a ghost.
Molecule parse_xyz_lines(const std::string& text, const std::string& where);

// Geometry a calculation can use: every coordinate within kMaxCoordinate angstrom of the origin and no two atoms
// closer than kMinDistance angstrom (coincident atoms make the basis linearly dependent and the nuclear repulsion
// infinite). Throws InputError naming `where` and the atoms.
inline constexpr double kMaxCoordinate = 1e4;  // 1 micrometre: far beyond any molecule
inline constexpr double kMinDistance = 0.1;    // the shortest bond (H2) is 0.74 angstrom
void check_geometry(const Molecule& molecule, const std::string& where);

// Electrons: the nuclear charges less the molecule's charge.
int electron_count(const Molecule& molecule);
// Doubly occupied orbitals of the closed-shell reference: half the electrons (nuclear charges minus `charge`).
// Throws InputError about the key `molecule.charge` when no electron is left or the count is odd (an open shell).
int closed_shell_occupied(const Molecule& molecule);
// Alpha and beta electrons of `molecule` in spin multiplicity `multiplicity` (2S + 1): n_alpha - n_beta = 2S. Throws
// InputError about `molecule.multiplicity` naming the charge too when the two cannot go together (an even electron
// count with an even multiplicity, or more unpaired electrons than electrons).
std::pair<int, int> spin_occupied(const Molecule& molecule, int multiplicity);

// Psi4's `freeze_core true`: each atom freezes the orbitals of the previous noble-gas shell, less those its
// effective core potential already replaced (Xe with def2's 28-electron potential: [Kr]'s 18 less 14).
int frozen_core_orbitals(int atomic_number);
int frozen_core_orbitals(const Molecule& molecule);

}  // namespace dfmp2::chem
