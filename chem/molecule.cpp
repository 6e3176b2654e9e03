#include "chem/molecule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <vector>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "linalg/errors.hpp"

namespace dfmp2::chem {
namespace {

constexpr std::array<const char*, 119> kSymbols = {
    "X",  "H",  "He", "Li", "Be", "B",  "C",  "N",  "O",  "F",  "Ne", "Na", "Mg", "Al", "Si", "P",  "S",
    "Cl", "Ar", "K",  "Ca", "Sc", "Ti", "V",  "Cr", "Mn", "Fe", "Co", "Ni", "Cu", "Zn", "Ga", "Ge", "As",
    "Se", "Br", "Kr", "Rb", "Sr", "Y",  "Zr", "Nb", "Mo", "Tc", "Ru", "Rh", "Pd", "Ag", "Cd", "In", "Sn",
    "Sb", "Te", "I",  "Xe", "Cs", "Ba", "La", "Ce", "Pr", "Nd", "Pm", "Sm", "Eu", "Gd", "Tb", "Dy", "Ho",
    "Er", "Tm", "Yb", "Lu", "Hf", "Ta", "W",  "Re", "Os", "Ir", "Pt", "Au", "Hg", "Tl", "Pb", "Bi", "Po",
    "At", "Rn", "Fr", "Ra", "Ac", "Th", "Pa", "U",  "Np", "Pu", "Am", "Cm", "Bk", "Cf", "Es", "Fm", "Md",
    "No", "Lr", "Rf", "Db", "Sg", "Bh", "Hs", "Mt", "Ds", "Rg", "Cn", "Nh", "Fl", "Mc", "Lv", "Ts", "Og"};

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

int atomic_number(const std::string& symbol) {
  const std::string want = lower(symbol);
  for (std::size_t z = 1; z < kSymbols.size(); ++z) {
    if (lower(kSymbols[z]) == want) return static_cast<int>(z);
  }
  return 0;
}

std::string element_symbol(int z) {
  if (z < 1 || z >= static_cast<int>(kSymbols.size())) return "?";
  return kSymbols[static_cast<std::size_t>(z)];
}

std::string atom_symbol(const Atom& atom) {
  return atom.ghost ? "Gh(" + element_symbol(atom.atomic_number) + ")" : element_symbol(atom.atomic_number);
}

namespace {
// The element of a symbol and whether it is a ghost: "O", "Gh(O)" (any case) or "@O". Empty element when the text
// inside names none.
std::pair<std::string, bool> element_of(const std::string& symbol) {
  if (symbol.size() > 1 && symbol[0] == '@') return {symbol.substr(1), true};
  if (symbol.size() > 4 && lower(symbol.substr(0, 3)) == "gh(" && symbol.back() == ')')
    return {symbol.substr(3, symbol.size() - 4), true};
  return {symbol, false};
}
}  // namespace

Molecule parse_xyz_lines(const std::string& text, const std::string& where) {
  Molecule mol;
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  std::vector<Fragment> fragments(1);
  while (std::getline(lines, line)) {
    ++number;
    std::istringstream fields(line);
    std::string symbol;
    if (!(fields >> symbol)) continue;  // blank line
    if (symbol == "--") {
      fragments.push_back({mol.atoms.size(), 0, 0, 1, false});
      continue;
    }
    // "charge multiplicity", first in its fragment.
    long charge = 0, multiplicity = 0;
    std::string trailing;
    std::istringstream state(line);
    if ((state >> charge >> multiplicity) && !(state >> trailing) && line.find('.') == std::string::npos) {
      Fragment& f = fragments.back();
      if (f.count > 0 || f.state_given) {
        throw InputError(fmt::format("{}: line {}: '{}': a fragment's charge and multiplicity come first in it",
                                     where, number, line));
      }
      if (std::abs(charge) > 1000 || multiplicity < 1 || multiplicity > 1001) {
        throw InputError(fmt::format("{}: line {}: charge {} and multiplicity {} are out of range", where, number,
                                     charge, multiplicity));
      }
      f.charge = static_cast<int>(charge);
      f.multiplicity = static_cast<int>(multiplicity);
      f.state_given = true;
      continue;
    }
    Atom atom;
    atom.symbol = symbol;
    const auto [element, ghost] = element_of(symbol);
    atom.atomic_number = atomic_number(element);
    atom.ghost = ghost;
    if (atom.atomic_number == 0) {
      throw InputError(ghost ? fmt::format("{}: line {}: '{}' is a ghost of '{}', which is not an element symbol",
                                           where, number, symbol, element)
                             : fmt::format("{}: line {}: '{}' is not an element symbol", where, number, symbol));
    }
    std::string extra;
    if (!(fields >> atom.x >> atom.y >> atom.z) || (fields >> extra) || !std::isfinite(atom.x) ||
        !std::isfinite(atom.y) || !std::isfinite(atom.z)) {
      throw InputError(fmt::format("{}: line {}: expected 'Symbol x y z', got '{}'", where, number, line));
    }
    mol.atoms.push_back(atom);
    ++fragments.back().count;
  }
  if (mol.atoms.empty()) throw InputError(fmt::format("{}: no atoms", where));
  if (fragments.size() > 1 || fragments[0].state_given) mol.fragments = fragments;
  if (std::all_of(mol.atoms.begin(), mol.atoms.end(), [](const Atom& a) { return a.ghost; })) {
    throw InputError(fmt::format("{}: every atom is a ghost (Gh(X) or @X); a molecule needs at least one real atom",
                                 where));
  }
  return mol;
}

void check_geometry(const Molecule& molecule, const std::string& where) {
  const auto& atoms = molecule.atoms;
  for (std::size_t a = 0; a < atoms.size(); ++a) {
    const Atom& p = atoms[a];
    for (const double c : {p.x, p.y, p.z}) {
      if (!std::isfinite(c) || std::abs(c) > kMaxCoordinate) {
        throw InputError(fmt::format("{}: atom {} ({}) has coordinate {:.6g} angstrom; coordinates must lie within "
                                     "{:.0e} angstrom of the origin",
                                     where, a + 1, p.symbol, c, kMaxCoordinate));
      }
    }
  }
  // Pairs closer than kMinDistance, found through a grid of cells that size: each atom is compared with the atoms of
  // its own and the 26 neighbouring cells only, so a file of a million atoms is checked in linear time rather than
  // hanging on 5e11 distances. Atoms are visited in input order, so the pair reported is the one with the lowest
  // second atom, as a loop over all pairs would find it.
  const auto cell_of = [](double c) { return static_cast<long long>(std::floor(c / kMinDistance)); };
  std::map<std::array<long long, 3>, std::vector<std::size_t>> cells;
  for (std::size_t a = 0; a < atoms.size(); ++a) {
    const std::array<long long, 3> cell = {cell_of(atoms[a].x), cell_of(atoms[a].y), cell_of(atoms[a].z)};
    std::size_t closest = a;
    double closest_distance = kMinDistance;
    for (long long dx = -1; dx <= 1; ++dx)
      for (long long dy = -1; dy <= 1; ++dy)
        for (long long dz = -1; dz <= 1; ++dz) {
          const auto it = cells.find({cell[0] + dx, cell[1] + dy, cell[2] + dz});
          if (it == cells.end()) continue;
          for (const std::size_t b : it->second) {
            const double d = std::hypot(atoms[a].x - atoms[b].x, atoms[a].y - atoms[b].y, atoms[a].z - atoms[b].z);
            if (d < kMinDistance && (closest == a || b < closest)) closest = b, closest_distance = d;
          }
        }
    if (closest != a) {
      throw InputError(fmt::format("{}: atoms {} ({}) and {} ({}) are {:.4g} angstrom apart; atoms closer than "
                                   "{} angstrom are not a molecule (a duplicated line?)",
                                   where, closest + 1, atoms[closest].symbol, a + 1, atoms[a].symbol, closest_distance,
                                   kMinDistance));
    }
    cells[cell].push_back(a);
  }
}

int frozen_core_orbitals(int z) {
  if (z <= 2) return 0;
  if (z <= 10) return 1;   // [He]
  if (z <= 18) return 5;   // [Ne]
  if (z <= 36) return 9;   // [Ar]
  if (z <= 54) return 18;  // [Kr]
  if (z <= 86) return 27;  // [Xe]
  return 43;               // [Rn]
}

int frozen_core_orbitals(const Molecule& molecule) {
  int n = 0;
  for (const auto& atom : molecule.atoms) n += frozen_core_orbitals(atom.nuclear_charge());  // ghosts: no core
  return n;
}

Molecule fragment_molecule(const Molecule& molecule, const Fragment& f) {
  Molecule out;
  out.atoms.assign(molecule.atoms.begin() + static_cast<std::ptrdiff_t>(f.first),
                   molecule.atoms.begin() + static_cast<std::ptrdiff_t>(f.first + f.count));
  out.charge = f.charge;
  out.multiplicity = f.multiplicity;
  return out;
}

Molecule fragment_in_complex_basis(const Molecule& molecule, const Fragment& f) {
  Molecule out;
  out.atoms = molecule.atoms;
  for (std::size_t a = 0; a < out.atoms.size(); ++a)
    if (a < f.first || a >= f.first + f.count) out.atoms[a].ghost = true;
  out.charge = f.charge;
  out.multiplicity = f.multiplicity;
  return out;
}

void combine_fragments(Molecule& molecule, std::optional<int> charge, std::optional<int> multiplicity) {
  int charges = 0, unpaired = 0;
  bool any_given = false;
  for (std::size_t k = 0; k < molecule.fragments.size(); ++k) {
    const Fragment& f = molecule.fragments[k];
    const std::string name = fmt::format("molecule fragment {}", k + 1);
    if (f.count == 0) throw InputError("", name, "{key} has no atoms");
    if (!f.state_given) continue;
    any_given = true;
    charges += f.charge;
    unpaired += f.multiplicity - 1;
    try {
      spin_occupied(fragment_molecule(molecule, f), f.multiplicity);
    } catch (const InputError& e) {
      throw InputError("", name, std::string("{key}: ") + e.text().substr(e.text().find(':') + 2));
    }
  }
  if (charge && any_given && *charge != charges) {
    throw InputError("", "molecule.charge",
                     fmt::format("{{key}}: {}, and the fragments' charges add up to {}", *charge, charges));
  }
  molecule.charge = charge ? *charge : charges;
  molecule.multiplicity = multiplicity ? *multiplicity : any_given ? 1 + unpaired : 1;
}

int electron_count(const Molecule& molecule) {
  int electrons = -molecule.charge;
  for (const auto& a : molecule.atoms) electrons += a.nuclear_charge();
  return electrons;
}

int closed_shell_occupied(const Molecule& molecule) {
  const int electrons = electron_count(molecule);
  if (electrons <= 0 || electrons % 2 != 0) {
    throw InputError("", "molecule.charge",
                     fmt::format("{{key}}: charge {} leaves {} electron{}, {}; a closed-shell RHF needs an even "
                                 "number of electrons (set molecule.multiplicity for an open shell)",
                                 molecule.charge, electrons, std::abs(electrons) == 1 ? "" : "s",
                                 electrons <= 0 ? "none at all" : "an open shell"));
  }
  return electrons / 2;
}

std::pair<int, int> spin_occupied(const Molecule& molecule, int multiplicity) {
  const int electrons = electron_count(molecule);
  const int unpaired = multiplicity - 1;
  if (electrons <= 0 || multiplicity < 1 || unpaired > electrons || (electrons - unpaired) % 2 != 0) {
    throw InputError("", "molecule.multiplicity",
                     fmt::format("{{key}}: multiplicity {} with charge {} ({} electron{}) is impossible; {}",
                                 multiplicity, molecule.charge, electrons, std::abs(electrons) == 1 ? "" : "s",
                                 electrons <= 0 ? "no electron is left"
                                 : unpaired > electrons
                                     ? fmt::format("{} unpaired electrons need at least as many", unpaired)
                                     : fmt::format("an {} count of electrons needs an {} multiplicity",
                                                   electrons % 2 == 0 ? "even" : "odd",
                                                   electrons % 2 == 0 ? "odd" : "even")));
  }
  return {(electrons + unpaired) / 2, (electrons - unpaired) / 2};
}

}  // namespace dfmp2::chem
