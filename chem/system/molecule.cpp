#include "chem/system/molecule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <set>
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
      // Alone on its line, as Psi4 takes it: text after it would be read as nothing, silently.
      if (std::string rest; fields >> rest) {
        throw InputError(fmt::format("{}: line {}: '{}': the fragment separator '--' stands alone on its line", where,
                                     number, line));
      }
      fragments.push_back({mol.atoms.size(), 0, std::nullopt, std::nullopt});
      continue;
    }
    // "charge multiplicity", first in its fragment.
    long charge = 0, multiplicity = 0;
    std::string trailing;
    std::istringstream state(line);
    if ((state >> charge >> multiplicity) && !(state >> trailing) && line.find('.') == std::string::npos) {
      Fragment& f = fragments.back();
      if (f.count > 0 || f.given_charge) {
        throw InputError(fmt::format("{}: line {}: '{}': a fragment's charge and multiplicity come first in it",
                                     where, number, line));
      }
      if (std::abs(charge) > 1000 || multiplicity < 1 || multiplicity > 1001) {
        throw InputError(fmt::format("{}: line {}: charge {} and multiplicity {} are out of range", where, number,
                                     charge, multiplicity));
      }
      f.given_charge = f.charge = static_cast<int>(charge);
      f.given_multiplicity = f.multiplicity = static_cast<int>(multiplicity);
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
  if (fragments.size() > 1 || fragments[0].given_charge) mol.fragments = fragments;
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
  for (const auto& atom : molecule.atoms) {
    if (atom.ghost) continue;  // no core
    n += std::max(0, frozen_core_orbitals(atom.atomic_number) - atom.core_electrons / 2);
  }
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

namespace {

int parity(int n) { return ((n % 2) + 2) % 2; }

// qcelemental's physical rules for one species of `neutral` electrons (its nuclear charges) at charge c and
// multiplicity m: a positive multiplicity, no more unpaired electrons than electrons, and their parity.
bool state_possible(int neutral, int c, int m) {
  return m >= 1 && m - 1 <= neutral - c && parity(m) != parity(neutral - c);
}

int high_spin_sum(const std::vector<int>& multiplicities) {
  int sum = 1;
  for (const int m : multiplicities) sum += m - 1;
  return sum;
}

void add_candidate(std::vector<int>& candidates, int value) {
  if (std::find(candidates.begin(), candidates.end(), value) == candidates.end()) candidates.push_back(value);
}

// The sums reachable by picking one value of each of lists[f..] (+ offset each), for every f: suffix[f].
std::vector<std::set<int>> reachable_sums(const std::vector<std::vector<int>>& lists, int offset) {
  std::vector<std::set<int>> suffix(lists.size() + 1);
  suffix.back() = {0};
  for (std::size_t f = lists.size(); f-- > 0;)
    for (const int v : lists[f])
      for (const int rest : suffix[f + 1]) suffix[f].insert(v + offset + rest);
  return suffix;
}

// qcelemental's search: candidate values for the complex's charge c, each fragment's charge, the complex's
// multiplicity m and each fragment's, tried in the order of itertools.product over (c, fragment charges, m, fragment
// multiplicities), the first combination that obeys every rule kept. Depth first in that order with pruning of
// subtrees that hold no valid combination (reachable sums), so that the first found is the product's first, without
// enumerating the product (exponential in the fragments).
struct ChargeMultiplicitySearch {
  std::vector<int> neutral;  // electrons of each neutral fragment (its nuclear charges; ghosts none)
  std::vector<bool> ghost;   // fragments of ghost atoms only: neutral singlets (R9)
  int total_neutral = 0;
  std::optional<int> given_m;
  std::vector<int> c_candidates, m_candidates;
  std::vector<std::vector<int>> fc_candidates, fm_candidates;
  bool high_spin_rule = true;  // m is the high-spin sum unless it and every fragment's are given (R8)

  int c = 0, m = 0;
  std::vector<int> fc, fm;
  bool charges_possible = false;  // some charges added up and left every fragment and the complex electrons

  bool search() {
    const std::size_t n = neutral.size();
    fc.assign(n, 0);
    fm.assign(n, 1);
    std::vector<std::vector<int>> charges = fc_candidates;
    for (std::size_t f = 0; f < n; ++f)
      if (ghost[f]) std::erase_if(charges[f], [](int q) { return q != 0; });
    const auto charge_sums = reachable_sums(charges, 0);
    for (const int candidate : c_candidates) {
      c = candidate;
      if (charges_from(0, 0, charges, charge_sums)) return true;
    }
    return false;
  }

  bool charges_from(std::size_t f, int partial, const std::vector<std::vector<int>>& charges,
                    const std::vector<std::set<int>>& sums) {
    if (!sums[f].count(c - partial)) return false;  // the complex's charge is the fragments' sum (R2)
    if (f == charges.size()) {
      bool electrons_left = total_neutral >= c;
      for (std::size_t k = 0; k < fc.size(); ++k) electrons_left = electrons_left && neutral[k] >= fc[k];
      charges_possible = charges_possible || electrons_left;
      return multiplicities();
    }
    for (const int q : charges[f]) {
      fc[f] = q;
      if (charges_from(f + 1, partial + q, charges, sums)) return true;
    }
    return false;
  }

  bool multiplicities() {
    // Each fragment's candidates that its own electrons allow (R3-R5, R9), then the complex's.
    std::vector<std::vector<int>> allowed(neutral.size());
    for (std::size_t f = 0; f < neutral.size(); ++f)
      for (const int mf : fm_candidates[f])
        if (state_possible(neutral[f], fc[f], mf) && (!ghost[f] || mf == 1)) allowed[f].push_back(mf);
    const auto unpaired_sums = reachable_sums(allowed, -1);
    for (const int candidate : m_candidates) {
      m = candidate;
      if (!state_possible(total_neutral, c, m)) continue;
      if (multiplicities_from(0, 0, allowed, unpaired_sums)) return true;
    }
    return false;
  }

  bool multiplicities_from(std::size_t f, int unpaired, const std::vector<std::vector<int>>& allowed,
                           const std::vector<std::set<int>>& sums) {
    if (high_spin_rule ? !sums[f].count(m - 1 - unpaired) : sums[f].empty()) return false;
    if (f == allowed.size()) return true;
    for (const int mf : allowed[f]) {
      fm[f] = mf;
      if (multiplicities_from(f + 1, unpaired + mf - 1, allowed, sums)) return true;
    }
    return false;
  }
};

std::string listed(const std::vector<std::optional<int>>& values) {
  std::string out;
  for (const auto& v : values) out += fmt::format("{}{}", out.empty() ? "" : ", ", v ? fmt::format("{}", *v) : "?");
  return out;
}

}  // namespace

void fill_charges_and_multiplicities(Molecule& molecule, std::optional<int> charge, std::optional<int> multiplicity) {
  const std::size_t n = molecule.fragments.size();
  if (n == 0) {  // one molecule: what was given, else neutral and a singlet (the caller checks the electron count)
    molecule.charge = charge.value_or(0);
    molecule.multiplicity = multiplicity.value_or(1);
    return;
  }
  ChargeMultiplicitySearch s;
  s.given_m = multiplicity;
  std::vector<std::optional<int>> given_fc, given_fm;
  for (std::size_t k = 0; k < n; ++k) {
    const Fragment& f = molecule.fragments[k];
    const std::string name = fmt::format("molecule fragment {}", k + 1);
    if (f.count == 0) throw InputError("", name, "{key} has no atoms");
    const Molecule part = fragment_molecule(molecule, f);
    const int neutral = electron_count(part) + part.charge;
    const bool ghost = std::all_of(part.atoms.begin(), part.atoms.end(), [](const Atom& a) { return a.ghost; });
    // What one fragment's own lines or keys cannot be, named at once (the search would only say that nothing fits).
    if (ghost && (f.given_charge.value_or(0) != 0 || f.given_multiplicity.value_or(1) != 1)) {
      throw InputError("", name,
                       fmt::format("{{key}} holds only ghost atoms (basis functions, no electrons), so it is neutral "
                                   "and a singlet; got charge {}, multiplicity {}",
                                   f.given_charge ? fmt::format("{}", *f.given_charge) : "not given",
                                   f.given_multiplicity ? fmt::format("{}", *f.given_multiplicity) : "not given"));
    }
    if (f.given_charge && f.given_multiplicity && !state_possible(neutral, *f.given_charge, *f.given_multiplicity)) {
      Molecule charged = part;
      charged.charge = *f.given_charge;
      try {
        spin_occupied(charged, *f.given_multiplicity);
      } catch (const InputError& e) {
        throw InputError("", name, std::string("{key}: ") + e.text().substr(e.text().find(':') + 2));
      }
    }
    s.neutral.push_back(neutral);
    s.ghost.push_back(ghost);
    s.total_neutral += neutral;
    given_fc.push_back(f.given_charge);
    given_fm.push_back(f.given_multiplicity);
  }
  int given_charge_sum = 0;
  for (const auto& q : given_fc) given_charge_sum += q.value_or(0);
  const bool all_fc = std::all_of(given_fc.begin(), given_fc.end(), [](const auto& q) { return q.has_value(); });
  const bool all_fm = std::all_of(given_fm.begin(), given_fm.end(), [](const auto& q) { return q.has_value(); });
  if (charge && all_fc && *charge != given_charge_sum) {
    throw InputError("", "molecule.charge",
                     fmt::format("{{key}}: {}, and the fragments' charges add up to {}", *charge, given_charge_sum));
  }

  // The candidates, in qcelemental's order (its rules S1-S7).
  if (charge) s.c_candidates.push_back(*charge);
  add_candidate(s.c_candidates, given_charge_sum);
  if (charge) s.c_candidates.resize(1);  // R6: the given charge only
  const int unallocated = charge.value_or(0) - given_charge_sum;
  std::vector<int> with_ones, with_twos;  // the given multiplicities, the others at their smallest or next default
  for (const auto& mf : given_fm) with_ones.push_back(mf.value_or(1)), with_twos.push_back(mf.value_or(2));
  if (multiplicity) {
    s.m_candidates = {*multiplicity};
  } else {
    for (int m = high_spin_sum(with_ones); m <= high_spin_sum(with_twos); ++m) add_candidate(s.m_candidates, m);
  }
  // The multiplicity a fragment without one would need for the complex's: its range when the others take 1 or 2.
  int missing_low = 0, missing_high = 0;
  if (multiplicity && !all_fm) {
    std::vector<int> others_ones = with_ones, others_twos = with_twos;
    const auto first_missing = static_cast<std::size_t>(
        std::find_if(given_fm.begin(), given_fm.end(), [](const auto& mf) { return !mf; }) - given_fm.begin());
    others_ones.erase(others_ones.begin() + static_cast<std::ptrdiff_t>(first_missing));
    others_twos.erase(others_twos.begin() + static_cast<std::ptrdiff_t>(first_missing));
    missing_high = *multiplicity - high_spin_sum(others_ones) + 1;
    missing_low = *multiplicity - high_spin_sum(others_twos) + 1;
  }
  for (std::size_t k = 0; k < n; ++k) {
    std::vector<int> fc, fm;
    if (given_fc[k]) {
      fc = {*given_fc[k]};
    } else {
      add_candidate(fc, unallocated);
      add_candidate(fc, 0);
    }
    if (given_fm[k]) {
      fm = {*given_fm[k]};
    } else {
      for (int m = missing_high; m >= std::max(missing_low, 1); --m) add_candidate(fm, m);
      add_candidate(fm, 1);
      add_candidate(fm, 2);
    }
    s.fc_candidates.push_back(fc);
    s.fm_candidates.push_back(fm);
  }
  s.high_spin_rule = !multiplicity || !all_fm;

  if (!s.search()) {
    // The key to blame: the complex's charge when no charges could be given out, else its multiplicity when given.
    const std::string key = charge && (!s.charges_possible || !multiplicity) ? "molecule.charge"
                            : multiplicity                                  ? "molecule.multiplicity"
                                                                            : "molecule fragment 1";
    throw InputError(
        "", key,
        fmt::format("{{key}}: no charge and multiplicity of each fragment fit what was given (complex: charge {}, "
                    "multiplicity {}; fragments' charges {}, multiplicities {}; ? where not given): the charges must "
                    "add up, each fragment's electrons must allow its multiplicity, and the complex's multiplicity is "
                    "the high-spin sum unless every one is given; give each fragment its 'charge multiplicity' line",
                    charge ? fmt::format("{}", *charge) : "?", multiplicity ? fmt::format("{}", *multiplicity) : "?",
                    listed(given_fc), listed(given_fm)));
  }
  for (std::size_t k = 0; k < n; ++k) {
    molecule.fragments[k].charge = s.fc[k];
    molecule.fragments[k].multiplicity = s.fm[k];
  }
  molecule.charge = s.c;
  molecule.multiplicity = s.m;
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
