// Derivative integrals with libint2 (chem/integrals/integrals.hpp: one-electron, three-centre, metric and
// four-centre gradients, the nuclear repulsion's).
#include "chem/integrals/integrals.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "chem/integrals/libint_support.hpp"

namespace dfmp2::chem {

using namespace libint_support;

namespace {

// The derivative of a shell's functions with respect to their centre A, as two cartesian shells on A: along x,
// d/dA_x of (x - A_x)^i e^{-alpha r^2} is 2 alpha (x - A_x)^{i+1} e^{-alpha r^2} - i (x - A_x)^{i-1} e^{-alpha r^2},
// so the shell of l + 1 with coefficients 2 alpha c and the shell of l - 1 (none for an s shell) with c. The
// coefficients are libint2's, normalisation included (embedded, not redone), and every cartesian component of a
// libint2 shell carries the same coefficient, so the components' derivatives are read off these two shells.
struct CentreDerivative {
  libint2::Shell up;
  std::optional<libint2::Shell> down;
};

CentreDerivative centre_derivative(const libint2::Shell& s) {
  const auto& c = s.contr[0];
  libint2::svector<double> up(c.coeff.size());
  for (std::size_t p = 0; p < up.size(); ++p) up[p] = 2.0 * s.alpha[p] * c.coeff[p];
  CentreDerivative d{libint2::Shell(s.alpha, {{c.l + 1, false, up}}, s.O, false), std::nullopt};
  if (c.l > 0) d.down = libint2::Shell(s.alpha, {{c.l - 1, false, c.coeff}}, s.O, false);
  return d;
}

// Position of the cartesian component x^i y^j z^k in a shell of l, in libint2's standard order.
int cartesian_index(int l, int i, int j) { return (l - i) * (l - i + 1) / 2 + l - i - j; }

// For each cartesian component x^i y^j z^k of a shell of l (libint2's order) and direction d: its power along d and
// the positions of the components one step up (in the l + 1 shell) and one step down (in the l - 1 shell) along d,
// which make its centre derivative (CentreDerivative).
struct CartesianStep {
  std::array<int, 3> power{}, up{}, down{};
};
struct CartesianSteps {
  std::vector<CartesianStep> components;
};
CartesianSteps cartesian_steps(int l) {
  CartesianSteps out;
  for (int i = l; i >= 0; --i) {
    for (int j = l - i; j >= 0; --j) {
      CartesianStep c;
      c.power = {i, j, l - i - j};
      for (int d = 0; d < 3; ++d) {
        c.up[d] = cartesian_index(l + 1, i + (d == 0), j + (d == 1));
        c.down[d] = c.power[d] > 0 ? cartesian_index(l - 1, i - (d == 0), j - (d == 1)) : 0;
      }
      out.components.push_back(c);
    }
  }
  return out;
}

// The row of a shell's functions `rows` (n(l) rows of `n` elements, the shell's own form) as weights of its cartesian
// components (ncart(l) rows): for a pure shell w_c = sum_s T_sc rows_s, T the solid-harmonic transform (pure_s =
// sum_c T_sc cart_c), so that sum_s (d pure_s) rows_s = sum_c (d cart_c) w_c; a cartesian shell's rows as they are.
void cartesian_weights(const libint2::Shell& shell, const double* rows, std::size_t n, double* out) {
  const auto l = static_cast<std::size_t>(shell.contr[0].l);
  const std::size_t ncart = (l + 1) * (l + 2) / 2;
  if (!shell.contr[0].pure) {
    std::copy(rows, rows + ncart * n, out);
    return;
  }
  std::fill(out, out + ncart * n, 0.0);
  const auto& coefs = libint2::solidharmonics::SolidHarmonicsCoefficients<double>::instance(static_cast<unsigned>(l));
  for (std::size_t s = 0; s < 2 * l + 1; ++s) {
    const auto* idx = coefs.row_idx(s);
    const auto* val = coefs.row_values(s);
    for (std::size_t ic = 0; ic < coefs.nnz(s); ++ic) {
      double* w = out + std::size_t(idx[ic]) * n;
      const double* src = rows + s * n;
      for (std::size_t f = 0; f < n; ++f) w[f] += val[ic] * src[f];
    }
  }
}

// The centre derivative of a shell of l (pure or cartesian) inside a block of integrals, from the blocks over its
// l + 1 and l - 1 shells (CentreDerivative): `up` is outer x ncart(l + 1) x inner, `down` outer x ncart(l - 1) x
// inner (row-major); out[d] becomes outer x n(l) x inner, the derivative along direction d of the shell's functions
// (pure shells transformed from the cartesian derivatives).
void combine_centre_derivative(int l, bool pure, std::size_t outer, std::size_t inner, const std::vector<double>& up,
                               const std::vector<double>& down, std::array<std::vector<double>, 3>& out) {
  const auto ncart = static_cast<std::size_t>((l + 1) * (l + 2) / 2);
  const auto nup = static_cast<std::size_t>((l + 2) * (l + 3) / 2), ndown = static_cast<std::size_t>(l * (l + 1) / 2);
  std::array<std::vector<double>, 3> cart;
  for (auto& c : cart) c.assign(outer * ncart * inner, 0.0);
  for (std::size_t o = 0; o < outer; ++o) {
    std::size_t c = 0;
    for (int i = l; i >= 0; --i) {
      for (int j = l - i; j >= 0; --j, ++c) {
        const int power[3] = {i, j, l - i - j};
        for (int d = 0; d < 3; ++d) {
          const auto iu = static_cast<std::size_t>(cartesian_index(l + 1, i + (d == 0), j + (d == 1)));
          const double* u = &up[(o * nup + iu) * inner];
          double* row = &cart[d][(o * ncart + c) * inner];
          for (std::size_t f = 0; f < inner; ++f) row[f] = u[f];
          if (power[d] == 0) continue;
          const auto id = static_cast<std::size_t>(cartesian_index(l - 1, i - (d == 0), j - (d == 1)));
          const double* w = &down[(o * ndown + id) * inner];
          for (std::size_t f = 0; f < inner; ++f) row[f] -= power[d] * w[f];
        }
      }
    }
  }
  const auto npure = static_cast<std::size_t>(2 * l + 1);
  for (int d = 0; d < 3; ++d) {
    if (!pure) {
      out[d] = std::move(cart[d]);
      continue;
    }
    out[d].assign(outer * npure * inner, 0.0);
    for (std::size_t o = 0; o < outer; ++o)
      libint2::solidharmonics::transform_first(static_cast<std::size_t>(l), inner, &cart[d][o * ncart * inner],
                                               &out[d][o * npure * inner]);
  }
}

// The integrals of one engine call as a vector (zeros when libint2 screened the set out).
std::vector<double> integrals_of(const libint2::Engine& engine, std::size_t n) {
  const double* ints = engine.results()[0];
  return ints == nullptr ? std::vector<double>(n, 0.0) : std::vector<double>(ints, ints + n);
}

// (d phi_m / dA | O | phi_n) for the functions m of shell `s1` (on A) and n of `s2`, for the three directions:
// out[d] is n1 x n2, row-major, in s1's own form.
void bra_derivative(libint2::Engine& engine, const libint2::Shell& s1, const CentreDerivative& d1,
                    const libint2::Shell& s2, std::array<std::vector<double>, 3>& out) {
  const auto n2 = s2.size();
  engine.compute(d1.up, s2);
  const std::vector<double> up = integrals_of(engine, d1.up.size() * n2);
  std::vector<double> down;
  if (d1.down) {
    engine.compute(*d1.down, s2);
    down = integrals_of(engine, d1.down->size() * n2);
  }
  combine_centre_derivative(s1.contr[0].l, s1.contr[0].pure, 1, n2, up, down, out);
}

// For aux shell P (np functions) and orbital shell m (its CentreDerivative d1 and cartesian steps st), over every
// significant shell n: t[k][d] += sum over P's functions, m's cartesian components c and n's functions of
// d/dA_d (P|c n) w_k(P, c, n), the weights of density k (cartesian_weights; np x ncart x nbf per density).
void contract_shell_row(libint2::Engine& engine, const libint2::Shell& aux_shell, const CentreDerivative& d1,
                        const CartesianSteps& st, const LibintBasis& b, const char* significant, const double* weights,
                        int count, std::vector<double>& up, std::vector<std::array<double, 3>>& t) {
  const libint2::Shell& unit = libint2::Shell::unit();
  const auto np = static_cast<int>(aux_shell.size());
  const auto nbf = static_cast<std::size_t>(b.nbf);
  const std::size_t ncart = st.components.size(), nup = d1.up.size(), ndown = d1.down ? d1.down->size() : 0;
  for (int s2 = 0; s2 < b.nshells(); ++s2) {
    if (!significant[s2]) continue;
    const auto n2 = static_cast<std::size_t>(b.sizes[static_cast<std::size_t>(s2)]);
    const auto o2 = static_cast<std::size_t>(b.offsets[static_cast<std::size_t>(s2)]);
    // (x - A_x)^{i+1}: the l + 1 shell's component one step up along d, for every component and d.
    engine.compute2<Operator::coulomb, BraKet::xs_xx, 0>(aux_shell, unit, d1.up, b.shells[s2]);
    const double* ints = engine.results()[0];
    if (ints != nullptr) up.assign(ints, ints + std::size_t(np) * nup * n2);
    const double* down = nullptr;
    if (d1.down) {
      engine.compute2<Operator::coulomb, BraKet::xs_xx, 0>(aux_shell, unit, *d1.down, b.shells[s2]);
      down = engine.results()[0];
    }
    if (ints == nullptr && down == nullptr) continue;
    for (int k = 0; k < count; ++k) {
      std::array<double, 3>& tk = t[static_cast<std::size_t>(k)];
      for (int fp = 0; fp < np; ++fp) {
        for (std::size_t c = 0; c < ncart; ++c) {
          const double* w = weights + ((std::size_t(k) * np + fp) * ncart + c) * nbf + o2;
          const CartesianStep& cs = st.components[c];
          for (int d = 0; d < 3; ++d) {
            double sum = 0;
            if (ints != nullptr) {
              const double* u = up.data() + (std::size_t(fp) * nup + cs.up[d]) * n2;
              for (std::size_t f = 0; f < n2; ++f) sum += u[f] * w[f];
            }
            if (down != nullptr && cs.power[d] > 0) {
              const double* v = down + (std::size_t(fp) * ndown + cs.down[d]) * n2;
              double lower = 0;
              for (std::size_t f = 0; f < n2; ++f) lower += v[f] * w[f];
              sum -= cs.power[d] * lower;
            }
            tk[static_cast<std::size_t>(d)] += sum;
          }
        }
      }
    }
  }
}

}  // namespace

linalg::Matrix one_electron_gradient(const BasisSet& basis, const Molecule& molecule, const linalg::Matrix& density,
                                     const linalg::Matrix& energy_weighted, const PointCharges& external) {
  const LibintBasis b = to_libint(basis);
  const auto natoms = static_cast<linalg::Index>(molecule.atoms.size());
  const auto rows = natoms + static_cast<linalg::Index>(external.size());
  const int nsh = b.nshells();
  // The derivative shells have one more unit of angular momentum than the basis.
  const libint2::Engine overlap = make_engine("overlap derivatives", Operator::overlap, b.max_nprim, b.max_l + 1);
  const libint2::Engine kinetic = make_engine("kinetic-energy derivatives", Operator::kinetic, b.max_nprim, b.max_l + 1);
  std::vector<libint2::Engine> nuclei;  // one engine per nucleus: its attraction alone
  std::vector<linalg::Index> nucleus_atom;
  for (linalg::Index a = 0; a < natoms; ++a) {
    const Atom& atom = molecule.atoms[static_cast<std::size_t>(a)];
    if (atom.ghost) continue;
    std::vector<std::pair<double, std::array<double, 3>>> charge{
        {static_cast<double>(atom.nuclear_charge()),
         {atom.x * kBohrPerAngstrom, atom.y * kBohrPerAngstrom, atom.z * kBohrPerAngstrom}}};
    nuclei.push_back(make_engine("nuclear-attraction derivatives", Operator::nuclear, b.max_nprim, b.max_l + 1,
                                 std::move(charge)));
    nucleus_atom.push_back(a);
  }
  for (std::size_t c = 0; c < external.size(); ++c) {  // each point charge as a nucleus of its own row
    nuclei.push_back(make_engine("point-charge derivatives", Operator::nuclear, b.max_nprim, b.max_l + 1,
                                 PointCharges{external[c]}));
    nucleus_atom.push_back(natoms + static_cast<linalg::Index>(c));
  }
  std::vector<CentreDerivative> derivatives;
  for (const auto& s : b.shells) derivatives.push_back(centre_derivative(s));
  // Per bra shell (sum_in_shell_order).
  std::vector<linalg::Matrix> by_shell(static_cast<std::size_t>(nsh), linalg::Matrix::Zero(rows, 3));
#pragma omp parallel
  {
    libint2::Engine s_engine = overlap, t_engine = kinetic;
    std::vector<libint2::Engine> v_engines = nuclei;
    std::array<std::vector<double>, 3> ints;
#pragma omp for schedule(dynamic)
    for (int s1 = 0; s1 < nsh; ++s1) {
      linalg::Matrix& g = by_shell[static_cast<std::size_t>(s1)];
      const auto a1 = static_cast<linalg::Index>(basis.shells[static_cast<std::size_t>(s1)].atom);
      const auto o1 = static_cast<linalg::Index>(b.offsets[static_cast<std::size_t>(s1)]);
      const int n1 = b.sizes[static_cast<std::size_t>(s1)];
      for (int s2 = 0; s2 < nsh; ++s2) {
        const auto o2 = static_cast<linalg::Index>(b.offsets[static_cast<std::size_t>(s2)]);
        const int n2 = b.sizes[static_cast<std::size_t>(s2)];
        // sum_mn M_mn (d phi_m/dA | O | phi_n) over this shell pair, per direction; twice it is the derivative of
        // sum_mn M_mn (phi_m | O | phi_n) through both functions (M and O symmetric).
        auto contract = [&](const linalg::Matrix& m, std::array<double, 3>& sum) {
          for (int d = 0; d < 3; ++d) {
            double t = 0;
            for (int f1 = 0; f1 < n1; ++f1)
              for (int f2 = 0; f2 < n2; ++f2) t += m(o1 + f1, o2 + f2) * ints[d][static_cast<std::size_t>(f1 * n2 + f2)];
            sum[d] = 2.0 * t;
          }
        };
        std::array<double, 3> sum{};
        bra_derivative(s_engine, b.shells[s1], derivatives[s1], b.shells[s2], ints);
        contract(energy_weighted, sum);
        for (int d = 0; d < 3; ++d) g(a1, d) -= sum[d];
        bra_derivative(t_engine, b.shells[s1], derivatives[s1], b.shells[s2], ints);
        contract(density, sum);
        for (int d = 0; d < 3; ++d) g(a1, d) += sum[d];
        // Each nucleus C: the functions' centres move (A here, B through the factor 2), and C itself, whose
        // derivative is -(d/dA + d/dB) by translational invariance.
        for (std::size_t c = 0; c < v_engines.size(); ++c) {
          bra_derivative(v_engines[c], b.shells[s1], derivatives[s1], b.shells[s2], ints);
          contract(density, sum);
          for (int d = 0; d < 3; ++d) {
            g(a1, d) += sum[d];
            g(nucleus_atom[c], d) -= sum[d];
          }
        }
      }
    }
  }
  linalg::Matrix g = sum_in_shell_order(by_shell, rows);
  g.topRows(natoms) += core_potential_gradient(basis, molecule, density);  // the potentials are one-electron terms too
  return g;
}

linalg::Matrix nuclear_repulsion_gradient(const Molecule& molecule, const PointCharges& external) {
  const auto natoms = static_cast<linalg::Index>(molecule.atoms.size());
  linalg::Matrix g = linalg::Matrix::Zero(natoms + static_cast<linalg::Index>(external.size()), 3);
  // Each nucleus and each point charge: Z_A q_c / |R_A - R_c|, on both.
  for (linalg::Index a = 0; a < natoms; ++a) {
    const Atom& p = molecule.atoms[static_cast<std::size_t>(a)];
    for (std::size_t c = 0; c < external.size(); ++c) {
      const auto& [q, at] = external[c];
      const double r[3] = {p.x * kBohrPerAngstrom - at[0], p.y * kBohrPerAngstrom - at[1], p.z * kBohrPerAngstrom - at[2]};
      const double dist = std::sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]);
      for (int d = 0; d < 3; ++d) {
        const double f = p.nuclear_charge() * q * r[d] / (dist * dist * dist);
        g(a, d) -= f;
        g(natoms + static_cast<linalg::Index>(c), d) += f;
      }
    }
  }
  for (linalg::Index a = 0; a < natoms; ++a) {
    for (linalg::Index c = 0; c < natoms; ++c) {
      if (a == c) continue;
      const Atom& p = molecule.atoms[static_cast<std::size_t>(a)];
      const Atom& q = molecule.atoms[static_cast<std::size_t>(c)];
      const double r[3] = {(p.x - q.x) * kBohrPerAngstrom, (p.y - q.y) * kBohrPerAngstrom,
                           (p.z - q.z) * kBohrPerAngstrom};
      const double dist = std::sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]);
      for (int d = 0; d < 3; ++d)
        g(a, d) -= p.nuclear_charge() * q.nuclear_charge() * r[d] / (dist * dist * dist);
    }
  }
  return g;
}

std::vector<linalg::Matrix> three_center_gradients(
    const BasisSet& aux, const BasisSet& basis, linalg::Index natoms, int count,
    const std::function<void(linalg::Index, linalg::Index, double*)>& densities, const AuxFunctions& mine) {
  // Debian's libint2 2.7.2 has three-centre first derivatives, but its builds miss shell combinations ((s|pp) among
  // them: a null build function), so the derivative with respect to the orbital centres is taken as for the
  // one-electron integrals (each shell's l + 1 and l - 1 shells, in ordinary three-centre integrals), and the
  // auxiliary centre's from translational invariance: d/dP = -(d/dm + d/dn).
  const LibintBasis a = to_libint(aux), b = to_libint(basis);
  const libint2::Engine proto = make_coulomb_engine("three-centre derivatives", BraKet::xs_xx,
                                                    std::max(a.max_nprim, b.max_nprim), std::max(a.max_l, b.max_l + 1));
  const int nsh_a = a.nshells(), nsh_b = b.nshells();
  const auto nbf = static_cast<linalg::Index>(b.nbf);
  std::vector<CentreDerivative> derivatives;
  for (const auto& sh : b.shells) derivatives.push_back(centre_derivative(sh));
  // Shell pairs whose Schwarz bound sqrt((mn|mn)) max_P sqrt((P|P)) is below kDerivativeScreening are skipped: their
  // derivatives (the same Gaussians' products, times exponents of at most ~1e4) cannot reach 1e-12 Eh/bohr.
  constexpr double kDerivativeScreening = 1e-17;
  const ShellPairs shell_pairs = make_shell_pairs(b);
  const double aux_largest = std::sqrt(coulomb_metric(aux).diagonal().maxCoeff());
  std::vector<char> significant(static_cast<std::size_t>(nsh_b) * static_cast<std::size_t>(nsh_b), 0);
  for (std::size_t k = 0; k < shell_pairs.pairs.size(); ++k) {
    if (shell_pairs.schwarz[k] * aux_largest < kDerivativeScreening) continue;
    const auto [s1, s2] = shell_pairs.pairs[k];
    significant[static_cast<std::size_t>(s1 * nsh_b + s2)] = significant[static_cast<std::size_t>(s2 * nsh_b + s1)] = 1;
  }
  // Per auxiliary shell and density (sum_in_shell_order).
  std::vector<std::vector<linalg::Matrix>> by_shell(static_cast<std::size_t>(count),
                                                    std::vector<linalg::Matrix>(static_cast<std::size_t>(nsh_a),
                                                                                linalg::Matrix::Zero(natoms, 3)));
  std::vector<CartesianSteps> steps;
  for (int l = 0; l <= b.max_l; ++l) steps.push_back(cartesian_steps(l));
#pragma omp parallel
  {
    libint2::Engine engine = proto;
    std::vector<double> r, weights, up;
    std::vector<std::array<double, 3>> t;  // per density: the sums along x, y, z
#pragma omp for schedule(dynamic)
    for (int sp = 0; sp < nsh_a; ++sp) {
      const auto p0 = static_cast<linalg::Index>(a.offsets[static_cast<std::size_t>(sp)]);
      if (p0 < mine.first || p0 >= mine.last) continue;
      const int np = a.sizes[static_cast<std::size_t>(sp)];
      const std::size_t stride = static_cast<std::size_t>(np * nbf * nbf);  // one density's block
      r.resize(stride * static_cast<std::size_t>(count));
      densities(p0, p0 + np, r.data());
      const int aux_atom = aux.shells[static_cast<std::size_t>(sp)].atom;
      for (int s1 = 0; s1 < nsh_b; ++s1) {
        const CentreDerivative& d1 = derivatives[static_cast<std::size_t>(s1)];
        const libint2::Shell& shell1 = b.shells[static_cast<std::size_t>(s1)];
        const CartesianSteps& st = steps[static_cast<std::size_t>(shell1.contr[0].l)];
        const auto o1 = static_cast<std::size_t>(b.offsets[static_cast<std::size_t>(s1)]);
        const std::size_t ncart = st.components.size();
        // The densities' rows of this shell's functions in its cartesian components (for a pure shell, the
        // transpose of the solid-harmonic transform), so that each shell pair contracts them with the cartesian
        // derivative directly: the derivative of a pure function is the same combination of the cartesian ones'.
        weights.resize(static_cast<std::size_t>(count) * np * ncart * nbf);
        for (int k = 0; k < count; ++k)
          for (int fp = 0; fp < np; ++fp)
            cartesian_weights(shell1, r.data() + stride * k + (fp * nbf + o1) * nbf, static_cast<std::size_t>(nbf),
                              weights.data() + ((std::size_t(k) * np + fp) * ncart) * nbf);
        // sum over the shell pairs of the derivative along d of (P|mn), contracted with the densities' elements.
        t.assign(static_cast<std::size_t>(count), {0.0, 0.0, 0.0});
        contract_shell_row(engine, a.shells[static_cast<std::size_t>(sp)], d1, st, b,
                           &significant[static_cast<std::size_t>(s1 * nsh_b)], weights.data(), count, up, t);
        // Twice: m's centre and, by the symmetry of R in m and n, n's.
        const int atom1 = basis.shells[static_cast<std::size_t>(s1)].atom;
        for (int k = 0; k < count; ++k) {
          linalg::Matrix& g = by_shell[static_cast<std::size_t>(k)][static_cast<std::size_t>(sp)];
          for (int d = 0; d < 3; ++d) {
            g(atom1, d) += 2.0 * t[static_cast<std::size_t>(k)][static_cast<std::size_t>(d)];
            g(aux_atom, d) -= 2.0 * t[static_cast<std::size_t>(k)][static_cast<std::size_t>(d)];
          }
        }
      }
    }
  }
  std::vector<linalg::Matrix> out;
  for (const auto& shells : by_shell) out.push_back(sum_in_shell_order(shells, natoms));
  return out;
}

linalg::Matrix three_center_gradient(const BasisSet& aux, const BasisSet& basis, linalg::Index natoms,
                                     const std::function<void(linalg::Index, linalg::Index, double*)>& density,
                                     const AuxFunctions& mine) {
  return three_center_gradients(aux, basis, natoms, 1, density, mine).front();
}

std::vector<linalg::Matrix> four_center_gradients(const BasisSet& basis, linalg::Index natoms,
                                                 const FourCenterDensities& density,
                                                 const std::vector<FourCenterDensities>& responses) {
  const LibintBasis b = to_libint(basis);
  const libint2::Engine proto =
      make_coulomb_derivative_engine("four-centre derivatives", BraKet::xx_xx, b.max_nprim, b.max_l);
  const int nsh = b.nshells();
  const linalg::Matrix& d = density.coulomb;
  const auto count = static_cast<int>(responses.size());
  // The two-particle density of sum_mn P_mn J(D)_mn - sum_c P_c K(X_c), symmetric under the integrals' eight
  // permutations: G_mnls = 1/2 (P_mn D_ls + D_mn P_ls) - 1/4 sum_c (P_ml X_ns + X_ml P_ns + P_ms X_nl + X_ms P_nl)
  // (the channel's P_c and X_c). RHF with P = D/2 and X = P_c = D/2: 1/2 D_mn D_ls - 1/8 (D_ml D_ns + D_ms D_nl).
  auto two_particle = [&](const FourCenterDensities& p, linalg::Index m, linalg::Index n, linalg::Index l,
                          linalg::Index s) {
    double exchange = 0;
    for (std::size_t c = 0; c < p.exchange.size(); ++c) {
      const linalg::Matrix &pc = p.exchange[c], &x = density.exchange[c];
      exchange += pc(m, l) * x(n, s) + x(m, l) * pc(n, s) + pc(m, s) * x(n, l) + x(m, s) * pc(n, l);
    }
    return 0.5 * (p.coulomb(m, n) * d(l, s) + d(m, n) * p.coulomb(l, s)) - 0.25 * exchange;
  };
  std::vector<std::vector<linalg::Matrix>> by_shell(
      static_cast<std::size_t>(count), std::vector<linalg::Matrix>(static_cast<std::size_t>(nsh), linalg::Matrix::Zero(natoms, 3)));
#pragma omp parallel
  {
    libint2::Engine engine = proto;
    const auto& buf = engine.results();
#pragma omp for schedule(dynamic)
    for (int s1 = 0; s1 < nsh; ++s1) {
      for (int s2 = 0; s2 <= s1; ++s2) {
        for (int s3 = 0; s3 <= s1; ++s3) {
          for (int s4 = 0; s4 <= (s3 == s1 ? s2 : s3); ++s4) {
            // Each unique quartet once, with the number of orderings it stands for.
            const double degeneracy = (s1 == s2 ? 1.0 : 2.0) * (s3 == s4 ? 1.0 : 2.0) *
                                      (s1 == s3 && s2 == s4 ? 1.0 : 2.0);
            engine.compute(b.shells[s1], b.shells[s2], b.shells[s3], b.shells[s4]);
            const int sh[4] = {s1, s2, s3, s4};
            int n[4];
            linalg::Index o[4];
            for (int k = 0; k < 4; ++k) {
              n[k] = b.sizes[static_cast<std::size_t>(sh[k])];
              o[k] = static_cast<linalg::Index>(b.offsets[static_cast<std::size_t>(sh[k])]);
            }
            for (int k = 0; k < count; ++k) {
              const FourCenterDensities& p = responses[static_cast<std::size_t>(k)];
              linalg::Matrix& g = by_shell[static_cast<std::size_t>(k)][static_cast<std::size_t>(s1)];
              for (int c = 0; c < 4; ++c) {
                const int atom = basis.shells[static_cast<std::size_t>(sh[c])].atom;
                for (int x = 0; x < 3; ++x) {
                  const double* ints = buf[static_cast<std::size_t>(3 * c + x)];
                  if (ints == nullptr) continue;
                  double t = 0;
                  for (int f1 = 0, f = 0; f1 < n[0]; ++f1)
                    for (int f2 = 0; f2 < n[1]; ++f2)
                      for (int f3 = 0; f3 < n[2]; ++f3)
                        for (int f4 = 0; f4 < n[3]; ++f4, ++f)
                          t += ints[f] * two_particle(p, o[0] + f1, o[1] + f2, o[2] + f3, o[3] + f4);
                  g(atom, x) += degeneracy * t;
                }
              }
            }
          }
        }
      }
    }
  }
  std::vector<linalg::Matrix> out;
  for (const auto& shells : by_shell) out.push_back(sum_in_shell_order(shells, natoms));
  return out;
}

linalg::Matrix metric_gradient(const BasisSet& aux, linalg::Index natoms, const linalg::Matrix& v) {
  const LibintBasis a = to_libint(aux);
  const libint2::Engine proto =
      make_coulomb_derivative_engine("two-centre derivatives", BraKet::xs_xs, a.max_nprim, a.max_l);
  const libint2::Shell& unit = libint2::Shell::unit();
  const int nsh = a.nshells();
  std::vector<linalg::Matrix> by_shell(static_cast<std::size_t>(nsh), linalg::Matrix::Zero(natoms, 3));
#pragma omp parallel
  {
    libint2::Engine engine = proto;
    const auto& buf = engine.results();
#pragma omp for schedule(dynamic)
    for (int s1 = 0; s1 < nsh; ++s1) {
      linalg::Matrix& g = by_shell[static_cast<std::size_t>(s1)];
      for (int s2 = 0; s2 <= s1; ++s2) {
        engine.compute2<Operator::coulomb, BraKet::xs_xs, 1>(a.shells[s1], unit, a.shells[s2], unit);
        const int n1 = a.sizes[static_cast<std::size_t>(s1)], n2 = a.sizes[static_cast<std::size_t>(s2)];
        const auto o1 = static_cast<linalg::Index>(a.offsets[static_cast<std::size_t>(s1)]);
        const auto o2 = static_cast<linalg::Index>(a.offsets[static_cast<std::size_t>(s2)]);
        const double both = s1 == s2 ? 1.0 : 2.0;
        const int atoms[2] = {aux.shells[static_cast<std::size_t>(s1)].atom, aux.shells[static_cast<std::size_t>(s2)].atom};
        for (int c = 0; c < 2; ++c) {
          for (int d = 0; d < 3; ++d) {
            const double* ints = buf[static_cast<std::size_t>(3 * c + d)];
            if (ints == nullptr) continue;
            double t = 0;
            for (int f1 = 0; f1 < n1; ++f1)
              for (int f2 = 0; f2 < n2; ++f2) t += ints[f1 * n2 + f2] * v(o1 + f1, o2 + f2);
            g(atoms[c], d) += both * t;
          }
        }
      }
    }
  }
  return sum_in_shell_order(by_shell, natoms);
}


}  // namespace dfmp2::chem
