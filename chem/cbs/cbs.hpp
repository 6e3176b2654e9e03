#pragma once
// Basis-set extrapolation (README "Basis-set extrapolation"): series of basis sets of increasing cardinal number in
// Psi4's bracket notation, and the schemes of Psi4's cbs() that take a quantity computed in each (an energy, or a
// gradient element by element) to its complete-basis-set limit.
#include <optional>
#include <string>
#include <vector>

#include "linalg/matrix_view.hpp"

namespace dfmp2::chem {

// Basis sets in order of their cardinal number (zeta): "cc-pv[dt]z" is cc-pVDZ (2) and cc-pVTZ (3),
// "aug-cc-pv[tq]z" aug-cc-pVTZ (3) and aug-cc-pVQZ (4), "def2-[st]zvp" def2-SVP (2) and def2-TZVP (3). A name
// without brackets is a series of one, zeta 0 (as Psi4 takes it).
struct BasisSeries {
  std::vector<std::string> names;
  std::vector<int> zetas;
  bool extrapolated() const { return names.size() > 1 || (!zetas.empty() && zetas.front() > 0); }
};

// Whether `text` asks for a series (has a '[').
bool is_basis_series(const std::string& text);
// Psi4's rules (driver_cbs._expand_bracketed_basis): a Dunning name (containing "cc-") or a def2 name (starting
// "def2-") with the zetas in brackets, as letters d t q 5 6 7 8 or digits 2 to 8 (s for def2's double zeta; commas
// and order do not matter), each one more than the one before. std::invalid_argument saying what is wrong otherwise.
BasisSeries expand_basis_series(const std::string& text);

// Psi4's extrapolation functions, by their names there.
enum class CbsScheme {
  xtpl_highest_1,        // the largest basis's value
  scf_xtpl_helgaker_2,   // E_X = E_inf + b exp(-alpha X), alpha 1.63 (Halkier et al. 1999)
  scf_xtpl_truhlar_2,    // E_X = E_inf + b X^-alpha, alpha 3.4 (Truhlar 1998)
  scf_xtpl_karton_2,     // Karton and Martin (2006) in the form Psi4 1.3.2 computes, alpha 6.3
  scf_xtpl_helgaker_3,   // E_X = E_inf + b exp(-alpha X), alpha and b from three bases
  corl_xtpl_helgaker_2,  // E_X = E_inf + b X^-alpha, alpha 3.0 (Helgaker et al. 1997)
};
const std::vector<std::pair<CbsScheme, const char*>>& cbs_scheme_names();
const char* cbs_scheme_name(CbsScheme scheme);
// How many basis sets the scheme takes (xtpl_highest_1: any number, of which it uses the largest: 0 here).
int cbs_scheme_points(CbsScheme scheme);
// The alpha a scheme takes by default (0 for those without one).
double cbs_default_alpha(CbsScheme scheme);
// Whether the limit is a fixed weighted sum of the values (every scheme but scf_xtpl_helgaker_3): then it commutes
// with differences such as interaction energies.
bool cbs_scheme_is_linear(CbsScheme scheme);

// The limit of `values`, one per basis of `zetas` (ascending), by `scheme` with `alpha` (the scheme's default when
// not given), as Psi4 computes it. std::invalid_argument when the count does not fit the scheme.
double extrapolate(CbsScheme scheme, const std::vector<int>& zetas, const std::vector<double>& values,
                   std::optional<double> alpha = std::nullopt);
// Element by element (a gradient); scf_xtpl_helgaker_3 fits each element's own alpha and leaves elements whose
// largest-basis value is below 1e-14 at zero, as Psi4 does.
linalg::Matrix extrapolate(CbsScheme scheme, const std::vector<int>& zetas, const std::vector<linalg::Matrix>& values,
                           std::optional<double> alpha = std::nullopt);

}  // namespace dfmp2::chem
