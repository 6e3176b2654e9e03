// Molecular integrals with libint2. The only translation unit that includes <libint2.hpp>.
//
// Conventions (see chem/integrals.hpp): libint2 returns each shell set row-major over the functions of its
// shells in the order they are passed (for the two-centre and three-centre Coulomb integrals the unit shell
// contributes a dimension of 1). Shells with l < 2 are passed to libint2 as cartesian, so p functions are x, y, z
// (as in Psi4 and the .gbs convention); shells with l >= 2 are pure or cartesian as the basis says.
#include "chem/integrals.hpp"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#pragma GCC diagnostic ignored "-Wstringop-overread"  // boost::small_vector, a false positive of GCC 12
#endif
#include <libint2.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#include "chem/engine_pool.hpp"
#include "linalg/errors.hpp"

namespace dfmp2::chem {
namespace {

using libint2::BraKet;
using libint2::Operator;

void ensure_libint_initialized() {
  static std::once_flag once;
  std::call_once(once, [] { libint2::initialize(); });
}

// A basis set in libint2's terms, with what the engines need to know about it.
struct LibintBasis {
  std::vector<libint2::Shell> shells;
  std::vector<std::size_t> offsets;  // first function of each shell
  std::vector<int> sizes;            // functions per shell
  std::size_t nbf = 0;
  std::size_t max_nprim = 1;
  int max_l = 0;

  int nshells() const { return static_cast<int>(shells.size()); }
};

LibintBasis to_libint(const BasisSet& basis) {
  ensure_libint_initialized();
  LibintBasis out;
  out.shells.reserve(basis.shells.size());
  for (std::size_t i = 0; i < basis.shells.size(); ++i) {
    const Shell& s = basis.shells[i];
    if (s.l < 0 || s.exponents.empty() || s.exponents.size() != s.coefficients.size()) {
      throw std::invalid_argument("integrals: basis '" + basis.name + "' shell " + std::to_string(i) +
                                  " is malformed (l " + std::to_string(s.l) + ", " +
                                  std::to_string(s.exponents.size()) + " exponents, " +
                                  std::to_string(s.coefficients.size()) + " coefficients)");
    }
    libint2::svector<double> alpha(s.exponents.begin(), s.exponents.end());
    libint2::svector<double> coeff(s.coefficients.begin(), s.coefficients.end());
    // libint2::Shell multiplies in the normalisation of each primitive (the coefficients are for normalised
    // primitives, as in .gbs files) and rescales the contraction to unit norm, as Psi4 does.
    const bool pure = s.pure && s.l >= 2;
    out.shells.emplace_back(std::move(alpha), libint2::svector<libint2::Shell::Contraction>{{s.l, pure, std::move(coeff)}},
                            std::array<double, 3>{s.center[0], s.center[1], s.center[2]});
    out.offsets.push_back(out.nbf);
    const int size = static_cast<int>(out.shells.back().size());
    out.sizes.push_back(size);
    out.nbf += static_cast<std::size_t>(size);
    out.max_nprim = std::max(out.max_nprim, s.exponents.size());
    out.max_l = std::max(out.max_l, s.l);
  }
  return out;
}

// Engines throw lmax_exceeded when the basis needs more angular momentum than the library was built for.
template <class... Args>
libint2::Engine make_engine(const char* what, Operator op, std::size_t max_nprim, int max_l, Args&&... args) {
  try {
    return libint2::Engine(op, max_nprim, max_l, 0, std::numeric_limits<double>::epsilon(),
                           std::forward<Args>(args)...);
  } catch (const libint2::Engine::lmax_exceeded& e) {
    throw UnsupportedError(std::string("integrals: ") + what + " need angular momentum " + std::to_string(max_l) +
                           ", beyond what this libint2 build supports (" + e.what() + ")");
  }
}

libint2::Engine make_coulomb_engine(const char* what, BraKet braket, std::size_t max_nprim, int max_l) {
  return make_engine(what, Operator::coulomb, max_nprim, max_l,
                     libint2::operator_traits<Operator::coulomb>::default_params(), braket);
}

// An engine of first derivatives of the Coulomb integrals over `braket` (the metric's xs_xs, the four-centre xx_xx).
libint2::Engine make_coulomb_derivative_engine(const char* what, BraKet braket, std::size_t max_nprim, int max_l) {
  try {
    return libint2::Engine(Operator::coulomb, max_nprim, max_l, 1, std::numeric_limits<double>::epsilon(),
                           libint2::operator_traits<Operator::coulomb>::default_params(), braket);
  } catch (const libint2::Engine::lmax_exceeded& e) {
    throw UnsupportedError(std::string("integrals: ") + what + " need angular momentum " + std::to_string(max_l) +
                           ", beyond what this libint2 build supports (" + e.what() + ")");
  }
}

// A gradient's contributions kept per shell (so that threads may compute them in any order) summed in shell order:
// the same bits for any thread count.
linalg::Matrix sum_in_shell_order(const std::vector<linalg::Matrix>& by_shell, linalg::Index natoms) {
  linalg::Matrix gradient = linalg::Matrix::Zero(natoms, 3);
  for (const auto& g : by_shell) gradient += g;
  return gradient;
}

// A symmetric matrix over the shell pairs s1 >= s2 of `b`, both triangles filled; `compute(engine, s1, s2)` puts
// the pair's integrals in the engine's result buffer `component` (0 for one-electron operators and the two-centre
// metric; the dipole's x, y, z are 1, 2, 3 after the overlap).
template <class Compute>
linalg::Matrix symmetric_shell_pair_matrix(const LibintBasis& b, const libint2::Engine& proto, Compute compute,
                                           std::size_t component = 0) {
  const auto nbf = static_cast<linalg::Index>(b.nbf);
  linalg::Matrix out = linalg::Matrix::Zero(nbf, nbf);
  EnginePool engines(proto);
  const int nsh = b.nshells();
#pragma omp parallel
  {
    libint2::Engine& engine = engines.mine();
    const auto& buf = engine.results();
#pragma omp for schedule(dynamic)
    for (int s1 = 0; s1 < nsh; ++s1) {
      const int n1 = b.sizes[s1];
      const auto o1 = static_cast<linalg::Index>(b.offsets[s1]);
      for (int s2 = 0; s2 <= s1; ++s2) {
        compute(engine, s1, s2);
        const double* ints = buf[component];
        if (ints == nullptr) continue;  // screened out: zero
        const int n2 = b.sizes[s2];
        const auto o2 = static_cast<linalg::Index>(b.offsets[s2]);
        for (int f1 = 0; f1 < n1; ++f1) {
          for (int f2 = 0; f2 < n2; ++f2) {
            const double v = ints[f1 * n2 + f2];
            out(o1 + f1, o2 + f2) = v;
            out(o2 + f2, o1 + f1) = v;
          }
        }
      }
    }
  }
  return out;
}

// One-electron operator matrix.
linalg::Matrix one_body_matrix(const LibintBasis& b, const libint2::Engine& proto, std::size_t component = 0) {
  return symmetric_shell_pair_matrix(
      b, proto, [&](libint2::Engine& engine, int s1, int s2) { engine.compute1(b.shells[s1], b.shells[s2]); },
      component);
}

// Shell pairs (s1 >= s2) of one basis with libint2's precomputed primitive-pair data and the Schwarz factor
// sqrt(max (ab|ab)) over the functions a, b of the pair.
struct ShellPairs {
  std::vector<std::pair<int, int>> pairs;     // (s1, s2), s1 >= s2
  std::vector<libint2::ShellPair> data;       // parallel to pairs
  std::vector<double> schwarz;                // parallel to pairs
  double max_schwarz = 0;
};

double ln_engine_precision() { return std::log(std::numeric_limits<double>::epsilon()); }

ShellPairs make_shell_pairs(const LibintBasis& b) {
  const int nsh = b.nshells();
  ShellPairs sp;
  sp.pairs.reserve(static_cast<std::size_t>(nsh) * (nsh + 1) / 2);
  for (int s1 = 0; s1 < nsh; ++s1) {
    for (int s2 = 0; s2 <= s1; ++s2) sp.pairs.emplace_back(s1, s2);
  }
  const auto npairs = static_cast<long>(sp.pairs.size());
  sp.data.resize(sp.pairs.size());
  sp.schwarz.assign(sp.pairs.size(), 0.0);
  // The diagonal integrals (ab|ab) are computed without libint2's primitive screening: for distant a and b they
  // are tiny (1e-14 and less) yet their square roots bound integrals that are not, and screening at the engine's
  // precision would zero them.
  libint2::Engine proto = make_coulomb_engine("four-centre integrals", BraKet::xx_xx, b.max_nprim, b.max_l);
  proto.set_precision(0.0);
  EnginePool engines(proto);
  const double ln_prec = ln_engine_precision();
#pragma omp parallel
  {
    libint2::Engine& engine = engines.mine();
    const auto& buf = engine.results();
#pragma omp for schedule(dynamic)
    for (long p = 0; p < npairs; ++p) {
      const auto [s1, s2] = sp.pairs[static_cast<std::size_t>(p)];
      sp.data[static_cast<std::size_t>(p)].init(b.shells[s1], b.shells[s2], ln_prec);
      engine.compute2<Operator::coulomb, BraKet::xx_xx, 0>(b.shells[s1], b.shells[s2], b.shells[s1], b.shells[s2]);
      const double* ints = buf[0];
      double largest = 0;
      if (ints != nullptr) {
        const int n12 = b.sizes[s1] * b.sizes[s2];
        for (int f = 0; f < n12; ++f) largest = std::max(largest, std::abs(ints[f * n12 + f]));
      }
      const double q = std::sqrt(largest);
      sp.schwarz[static_cast<std::size_t>(p)] = q;
    }
  }
  for (double q : sp.schwarz) sp.max_schwarz = std::max(sp.max_schwarz, q);
  return sp;
}

}  // namespace

int max_orbital_angular_momentum() {
  return std::min({LIBINT2_MAX_AM_overlap, LIBINT2_MAX_AM_kinetic, LIBINT2_MAX_AM_elecpot, LIBINT2_MAX_AM_eri});
}

int max_fitting_angular_momentum() { return std::min(LIBINT2_MAX_AM_2eri, LIBINT2_MAX_AM_3eri); }

double nuclear_repulsion_energy(const Molecule& molecule) {
  double e = 0;
  const auto& atoms = molecule.atoms;
  for (std::size_t a = 0; a < atoms.size(); ++a) {
    for (std::size_t b = 0; b < a; ++b) {
      const double dx = atoms[a].x - atoms[b].x;
      const double dy = atoms[a].y - atoms[b].y;
      const double dz = atoms[a].z - atoms[b].z;
      const double r = std::sqrt(dx * dx + dy * dy + dz * dz) * kBohrPerAngstrom;
      e += atoms[a].nuclear_charge() * atoms[b].nuclear_charge() / r;
    }
  }
  return e;
}

linalg::Matrix overlap_matrix(const BasisSet& basis) {
  const LibintBasis b = to_libint(basis);
  return one_body_matrix(b, make_engine("overlap integrals", Operator::overlap, b.max_nprim, b.max_l));
}

linalg::Matrix kinetic_matrix(const BasisSet& basis) {
  const LibintBasis b = to_libint(basis);
  return one_body_matrix(b, make_engine("kinetic-energy integrals", Operator::kinetic, b.max_nprim, b.max_l));
}

std::array<linalg::Matrix, 3> dipole_matrices(const BasisSet& basis, const std::array<double, 3>& origin) {
  const LibintBasis b = to_libint(basis);
  const libint2::Engine engine =
      make_engine("dipole integrals", Operator::emultipole1, b.max_nprim, b.max_l, origin);
  return {one_body_matrix(b, engine, 1), one_body_matrix(b, engine, 2), one_body_matrix(b, engine, 3)};
}

linalg::Matrix nuclear_attraction_matrix(const BasisSet& basis, const Molecule& molecule) {
  const LibintBasis b = to_libint(basis);
  std::vector<std::pair<double, std::array<double, 3>>> charges;
  charges.reserve(molecule.atoms.size());
  for (const Atom& atom : molecule.atoms) {
    if (atom.ghost) continue;  // basis functions, no nucleus
    charges.push_back({static_cast<double>(atom.nuclear_charge()),
                       {atom.x * kBohrPerAngstrom, atom.y * kBohrPerAngstrom, atom.z * kBohrPerAngstrom}});
  }
  return one_body_matrix(b, make_engine("nuclear-attraction integrals", Operator::nuclear, b.max_nprim, b.max_l,
                                        std::move(charges)));
}

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

}  // namespace

linalg::Matrix one_electron_gradient(const BasisSet& basis, const Molecule& molecule, const linalg::Matrix& density,
                                     const linalg::Matrix& energy_weighted) {
  const LibintBasis b = to_libint(basis);
  const auto natoms = static_cast<linalg::Index>(molecule.atoms.size());
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
  std::vector<CentreDerivative> derivatives;
  for (const auto& s : b.shells) derivatives.push_back(centre_derivative(s));
  // Per bra shell (sum_in_shell_order).
  std::vector<linalg::Matrix> by_shell(static_cast<std::size_t>(nsh), linalg::Matrix::Zero(natoms, 3));
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
  return sum_in_shell_order(by_shell, natoms);
}

linalg::Matrix nuclear_repulsion_gradient(const Molecule& molecule) {
  const auto natoms = static_cast<linalg::Index>(molecule.atoms.size());
  linalg::Matrix g = linalg::Matrix::Zero(natoms, 3);
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
    const std::function<void(linalg::Index, linalg::Index, double*)>& densities) {
  // Debian's libint2 2.7.2 has three-centre first derivatives, but its builds miss shell combinations ((s|pp) among
  // them: a null build function), so the derivative with respect to the orbital centres is taken as for the
  // one-electron integrals (each shell's l + 1 and l - 1 shells, in ordinary three-centre integrals), and the
  // auxiliary centre's from translational invariance: d/dP = -(d/dm + d/dn).
  const LibintBasis a = to_libint(aux), b = to_libint(basis);
  const libint2::Engine proto = make_coulomb_engine("three-centre derivatives", BraKet::xs_xx,
                                                    std::max(a.max_nprim, b.max_nprim), std::max(a.max_l, b.max_l + 1));
  const libint2::Shell& unit = libint2::Shell::unit();
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
#pragma omp parallel
  {
    libint2::Engine engine = proto;
    std::vector<double> r;
    std::array<std::vector<double>, 3> ints;
#pragma omp for schedule(dynamic)
    for (int sp = 0; sp < nsh_a; ++sp) {
      const auto p0 = static_cast<linalg::Index>(a.offsets[static_cast<std::size_t>(sp)]);
      const int np = a.sizes[static_cast<std::size_t>(sp)];
      const std::size_t stride = static_cast<std::size_t>(np * nbf * nbf);  // one density's block
      r.resize(stride * static_cast<std::size_t>(count));
      densities(p0, p0 + np, r.data());
      const int aux_atom = aux.shells[static_cast<std::size_t>(sp)].atom;
      for (int s1 = 0; s1 < nsh_b; ++s1) {
        const CentreDerivative& d1 = derivatives[static_cast<std::size_t>(s1)];
        const int n1 = b.sizes[static_cast<std::size_t>(s1)];
        const auto o1 = static_cast<linalg::Index>(b.offsets[static_cast<std::size_t>(s1)]);
        const int atom1 = basis.shells[static_cast<std::size_t>(s1)].atom;
        for (int s2 = 0; s2 < nsh_b; ++s2) {
          if (!significant[static_cast<std::size_t>(s1 * nsh_b + s2)]) continue;
          const int n2 = b.sizes[static_cast<std::size_t>(s2)];
          const auto o2 = static_cast<linalg::Index>(b.offsets[static_cast<std::size_t>(s2)]);
          engine.compute2<Operator::coulomb, BraKet::xs_xx, 0>(a.shells[sp], unit, d1.up, b.shells[s2]);
          const std::vector<double> up = integrals_of(engine, static_cast<std::size_t>(np) * d1.up.size() * n2);
          std::vector<double> down;
          if (d1.down) {
            engine.compute2<Operator::coulomb, BraKet::xs_xx, 0>(a.shells[sp], unit, *d1.down, b.shells[s2]);
            down = integrals_of(engine, static_cast<std::size_t>(np) * d1.down->size() * n2);
          }
          combine_centre_derivative(b.shells[s1].contr[0].l, b.shells[s1].contr[0].pure, static_cast<std::size_t>(np),
                                    static_cast<std::size_t>(n2), up, down, ints);
          // Twice: m's centre and, by the symmetry of R in m and n, n's.
          for (int k = 0; k < count; ++k) {
            const double* rk = r.data() + stride * static_cast<std::size_t>(k);
            linalg::Matrix& g = by_shell[static_cast<std::size_t>(k)][static_cast<std::size_t>(sp)];
            for (int d = 0; d < 3; ++d) {
              double t = 0;
              for (int fp = 0; fp < np; ++fp)
                for (int f1 = 0; f1 < n1; ++f1)
                  for (int f2 = 0; f2 < n2; ++f2)
                    t += ints[d][static_cast<std::size_t>((fp * n1 + f1) * n2 + f2)] *
                         rk[static_cast<std::size_t>((fp * nbf + o1 + f1) * nbf + o2 + f2)];
              g(atom1, d) += 2.0 * t;
              g(aux_atom, d) -= 2.0 * t;
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

linalg::Matrix three_center_gradient(const BasisSet& aux, const BasisSet& basis, linalg::Index natoms,
                                     const std::function<void(linalg::Index, linalg::Index, double*)>& density) {
  return three_center_gradients(aux, basis, natoms, 1, density).front();
}

std::vector<linalg::Matrix> four_center_gradients(const BasisSet& basis, linalg::Index natoms,
                                                 const linalg::Matrix& density,
                                                 const std::vector<linalg::Matrix>& responses) {
  const LibintBasis b = to_libint(basis);
  const libint2::Engine proto =
      make_coulomb_derivative_engine("four-centre derivatives", BraKet::xx_xx, b.max_nprim, b.max_l);
  const int nsh = b.nshells();
  const linalg::Matrix& d = density;
  const auto count = static_cast<int>(responses.size());
  // The two-particle density of sum_mn P_mn [J(D) - 1/2 K(D)]_mn, symmetric under the integrals' eight
  // permutations: G_mnls = 1/2 (P_mn D_ls + D_mn P_ls) - 1/8 (P_ml D_ns + D_ml P_ns + P_ms D_nl + D_ms P_nl).
  // With P = D/2 it is RHF's, 1/2 D_mn D_ls - 1/8 (D_ml D_ns + D_ms D_nl).
  auto two_particle = [&](const linalg::Matrix& p, linalg::Index m, linalg::Index n, linalg::Index l, linalg::Index s) {
    return 0.5 * (p(m, n) * d(l, s) + d(m, n) * p(l, s)) -
           0.125 * (p(m, l) * d(n, s) + d(m, l) * p(n, s) + p(m, s) * d(n, l) + d(m, s) * p(n, l));
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
              const linalg::Matrix& p = responses[static_cast<std::size_t>(k)];
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

linalg::Matrix coulomb_metric(const BasisSet& aux) {
  const LibintBasis a = to_libint(aux);
  const libint2::Engine proto = make_coulomb_engine("two-centre integrals", BraKet::xs_xs, a.max_nprim, a.max_l);
  const libint2::Shell& unit = libint2::Shell::unit();
  return symmetric_shell_pair_matrix(a, proto, [&](libint2::Engine& engine, int s1, int s2) {
    engine.compute2<Operator::coulomb, BraKet::xs_xs, 0>(a.shells[s1], unit, a.shells[s2], unit);
  });
}

void coulomb_metric_tiles(const BasisSet& aux, linalg::DistributedMatrix& metric) {
  const LibintBasis a = to_libint(aux);
  const libint2::Engine proto = make_coulomb_engine("two-centre integrals", BraKet::xs_xs, a.max_nprim, a.max_l);
  const libint2::Shell& unit = libint2::Shell::unit();
  const linalg::BlockCyclicLayout& l = metric.layout;
  // The shells with a function in this rank's rows, and in its columns.
  auto held_shells = [&](auto holds) {
    std::vector<int> out;
    for (int sh = 0; sh < a.nshells(); ++sh) {
      const auto o = static_cast<linalg::Index>(a.offsets[sh]);
      for (linalg::Index f = o; f < o + a.sizes[sh]; ++f)
        if (holds(f)) {
          out.push_back(sh);
          break;
        }
    }
    return out;
  };
  const std::vector<int> rows = held_shells([&](linalg::Index g) { return l.holds_row(g); });
  const std::vector<int> cols = held_shells([&](linalg::Index g) { return l.holds_col(g); });
  EnginePool engines(proto);
#pragma omp parallel
  {
    libint2::Engine& engine = engines.mine();
    const auto& buf = engine.results();
    // Each thread writes the rows of its own shells s1.
#pragma omp for schedule(dynamic)
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const int s1 = rows[i], n1 = a.sizes[s1];
      const auto o1 = static_cast<linalg::Index>(a.offsets[s1]);
      for (const int s2 : cols) {
        engine.compute2<Operator::coulomb, BraKet::xs_xs, 0>(a.shells[s1], unit, a.shells[s2], unit);
        const double* ints = buf[0];
        const int n2 = a.sizes[s2];
        const auto o2 = static_cast<linalg::Index>(a.offsets[s2]);
        for (int f1 = 0; f1 < n1; ++f1) {
          if (!l.holds_row(o1 + f1)) continue;
          for (int f2 = 0; f2 < n2; ++f2) {
            if (!l.holds_col(o2 + f2)) continue;
            metric.local(l.local_row(o1 + f1), l.local_col(o2 + f2)) = ints != nullptr ? ints[f1 * n2 + f2] : 0.0;
          }
        }
      }
    }
  }
}

struct ThreeCenterEngine::Impl {
  LibintBasis a, b;
  ShellPairs sp;
  std::vector<double> aux_schwarz;
  std::vector<libint2::ShellPair> aux_pairs;
  std::vector<std::size_t> kept;             // shell pairs that survive screening against the largest (P|P)
  std::vector<linalg::Index> packed_offset;  // parallel to kept: first packed position of the pair
  std::vector<int> packed_m, packed_n;
  std::vector<linalg::Index> shell_starts;
  double threshold = 0;
  EnginePool engines;

  // Calls `store(P, local pair index, fm, fn, value)` for every computed integral of aux shells with functions in
  // [p0, p1), threaded over those shells.
  template <class Store>
  void compute(linalg::Index p0, linalg::Index p1, const Store& store) {
    const auto first = std::lower_bound(shell_starts.begin(), shell_starts.end(), p0) - shell_starts.begin();
    const auto last = std::lower_bound(shell_starts.begin(), shell_starts.end(), p1) - shell_starts.begin();
    if (shell_starts[static_cast<std::size_t>(first)] != p0 || shell_starts[static_cast<std::size_t>(last)] != p1) {
      throw std::logic_error("ThreeCenterEngine: block boundaries must fall on auxiliary shells");
    }
    const libint2::Shell& unit = libint2::Shell::unit();
    const int nthreads = std::min<int>(thread_count(), engines.size());
#pragma omp parallel num_threads(nthreads)
    {
      libint2::Engine& engine = engines.mine();
      const auto& buf = engine.results();
#pragma omp for schedule(dynamic)
      for (long sP = first; sP < last; ++sP) {
        const libint2::Shell& shell_p = a.shells[static_cast<std::size_t>(sP)];
        const int nP = a.sizes[static_cast<std::size_t>(sP)];
        const auto oP = static_cast<linalg::Index>(a.offsets[static_cast<std::size_t>(sP)]);
        const double qP = aux_schwarz[static_cast<std::size_t>(sP)];
        for (std::size_t kp = 0; kp < kept.size(); ++kp) {
          const std::size_t p = kept[kp];
          if (qP * sp.schwarz[p] < threshold) continue;
          const auto [sm, sn] = sp.pairs[p];
          engine.compute2<Operator::coulomb, BraKet::xs_xx, 0>(shell_p, unit, b.shells[sm], b.shells[sn],
                                                               &aux_pairs[static_cast<std::size_t>(sP)], &sp.data[p]);
          const double* ints = buf[0];
          if (ints == nullptr) continue;
          const int nm = b.sizes[sm], nn = b.sizes[sn];
          for (int fP = 0; fP < nP; ++fP) {
            const double* block = ints + static_cast<std::size_t>(fP) * nm * nn;
            for (int fm = 0; fm < nm; ++fm)
              for (int fn = 0; fn < nn; ++fn) store(oP + fP, kp, sm, sn, fm, fn, block[fm * nn + fn]);
          }
        }
      }
    }
  }
};

ThreeCenterEngine::ThreeCenterEngine(const BasisSet& aux, const BasisSet& basis, double screening_threshold)
    : impl_(std::make_unique<Impl>()) {
  Impl& d = *impl_;
  d.a = to_libint(aux);
  d.b = to_libint(basis);
  d.threshold = screening_threshold;
  const int naux_sh = d.a.nshells();
  for (int s = 0; s < naux_sh; ++s) d.shell_starts.push_back(static_cast<linalg::Index>(d.a.offsets[s]));
  d.shell_starts.push_back(static_cast<linalg::Index>(d.a.nbf));
  if (d.a.nbf == 0 || d.b.nbf == 0) return;
  d.sp = make_shell_pairs(d.b);
  const libint2::Shell& unit = libint2::Shell::unit();
  const double ln_prec = ln_engine_precision();
  // Schwarz factors of the auxiliary shells, sqrt(max (P|P)), and their (P, unit) primitive-pair data.
  d.aux_schwarz.assign(static_cast<std::size_t>(naux_sh), 0.0);
  d.aux_pairs.resize(static_cast<std::size_t>(naux_sh));
  {
    libint2::Engine engine = make_coulomb_engine("two-centre integrals", BraKet::xs_xs, d.a.max_nprim, d.a.max_l);
    engine.set_precision(0.0);
    const auto& buf = engine.results();
    for (int s = 0; s < naux_sh; ++s) {
      d.aux_pairs[static_cast<std::size_t>(s)].init(d.a.shells[s], unit, ln_prec);
      engine.compute2<Operator::coulomb, BraKet::xs_xs, 0>(d.a.shells[s], unit, d.a.shells[s], unit);
      double largest = 0;
      if (buf[0] != nullptr) {
        const int n = d.a.sizes[s];
        for (int f = 0; f < n; ++f) largest = std::max(largest, std::abs(buf[0][f * n + f]));
      }
      d.aux_schwarz[static_cast<std::size_t>(s)] = std::sqrt(largest);
    }
  }
  const double max_aux_schwarz = *std::max_element(d.aux_schwarz.begin(), d.aux_schwarz.end());
  linalg::Index packed = 0;
  for (std::size_t p = 0; p < d.sp.pairs.size(); ++p) {
    if (d.sp.schwarz[p] * max_aux_schwarz < screening_threshold) continue;
    d.kept.push_back(p);
    d.packed_offset.push_back(packed);
    const auto [sm, sn] = d.sp.pairs[p];
    const int om = static_cast<int>(d.b.offsets[sm]), on = static_cast<int>(d.b.offsets[sn]);
    for (int fm = 0; fm < d.b.sizes[sm]; ++fm) {
      for (int fn = 0; fn < d.b.sizes[sn]; ++fn) {
        if (sm == sn && fn > fm) continue;  // m >= n within a diagonal shell pair
        d.packed_m.push_back(om + fm);
        d.packed_n.push_back(on + fn);
        ++packed;
      }
    }
  }
  d.engines = EnginePool(make_coulomb_engine("three-centre integrals", BraKet::xs_xx,
                                            std::max(d.a.max_nprim, d.b.max_nprim), std::max(d.a.max_l, d.b.max_l)));
}

ThreeCenterEngine::~ThreeCenterEngine() = default;

double ThreeCenterEngine::bytes(const BasisSet& aux, const BasisSet& basis) {
  // Per shell pair: libint2's ShellPair (one PrimPairData per primitive pair, and its own fields) and the Schwarz
  // factor; per function pair m >= n: the packed index (two ints); per auxiliary shell: its pair with the unit shell.
  double prim_pairs = 0, shell_pairs = 0;
  const auto& shells = basis.shells;
  for (std::size_t i = 0; i < shells.size(); ++i) {
    for (std::size_t j = 0; j <= i; ++j) prim_pairs += double(shells[i].nprimitive()) * double(shells[j].nprimitive());
  }
  shell_pairs = double(shells.size()) * double(shells.size() + 1) / 2;
  const double nbf = basis.nbf();
  double aux_prims = 0;
  for (const auto& s : aux.shells) aux_prims += s.nprimitive();
  return double(sizeof(libint2::ShellPair::PrimPairData)) * (prim_pairs + aux_prims) +
         (sizeof(libint2::ShellPair) + 3 * sizeof(double) + 2 * sizeof(int)) * shell_pairs +
         2.0 * sizeof(int) * nbf * (nbf + 1) / 2;
}

linalg::Index ThreeCenterEngine::naux() const { return static_cast<linalg::Index>(impl_->a.nbf); }
linalg::Index ThreeCenterEngine::nbf() const { return static_cast<linalg::Index>(impl_->b.nbf); }
linalg::Index ThreeCenterEngine::npacked() const { return static_cast<linalg::Index>(impl_->packed_m.size()); }
const std::vector<linalg::Index>& ThreeCenterEngine::shell_starts() const { return impl_->shell_starts; }
const std::vector<int>& ThreeCenterEngine::packed_m() const { return impl_->packed_m; }
const std::vector<int>& ThreeCenterEngine::packed_n() const { return impl_->packed_n; }

std::vector<std::pair<linalg::Index, linalg::Index>> ThreeCenterEngine::blocks(linalg::Index max_functions) const {
  std::vector<std::pair<linalg::Index, linalg::Index>> out;
  const auto& starts = impl_->shell_starts;
  std::size_t s = 0;
  while (s + 1 < starts.size()) {
    std::size_t e = s + 1;
    while (e + 1 < starts.size() && starts[e + 1] - starts[s] <= max_functions) ++e;
    out.emplace_back(starts[s], starts[e]);
    s = e;
  }
  return out;
}

void ThreeCenterEngine::compute_packed(linalg::Index p0, linalg::Index p1, double* out) const {
  const linalg::Index np = npacked();
  std::fill(out, out + (p1 - p0) * np, 0.0);
  const Impl& d = *impl_;
  impl_->compute(p0, p1, [&](linalg::Index P, std::size_t kp, int sm, int sn, int fm, int fn, double v) {
    if (sm == sn && fn > fm) return;
    // Position inside the pair: row-major over (fm, fn), with only fn <= fm for a diagonal shell pair.
    const linalg::Index local = sm == sn ? fm * (fm + 1) / 2 + fn : fm * d.b.sizes[sn] + fn;
    out[(P - p0) * np + d.packed_offset[kp] + local] = v;
  });
}

void ThreeCenterEngine::compute_square(linalg::Index p0, linalg::Index p1, double* out) const {
  const auto nbf = static_cast<std::size_t>(this->nbf());
  std::fill(out, out + static_cast<std::size_t>(p1 - p0) * nbf * nbf, 0.0);
  const Impl& d = *impl_;
  impl_->compute(p0, p1, [&](linalg::Index P, std::size_t, int sm, int sn, int fm, int fn, double v) {
    double* slab = out + static_cast<std::size_t>(P - p0) * nbf * nbf;
    const std::size_t m = d.b.offsets[sm] + fm, n = d.b.offsets[sn] + fn;
    slab[m * nbf + n] = v;
    slab[n * nbf + m] = v;
  });
}

linalg::Index DirectThreeIndex::largest_block(linalg::Index max_functions) const {
  linalg::Index largest = 0;
  for (const auto& [p0, p1] : engine_.blocks(max_functions)) largest = std::max(largest, p1 - p0);
  return largest;
}

std::vector<double> three_center_integrals(const BasisSet& aux, const BasisSet& basis, double screening_threshold) {
  const ThreeCenterEngine engine(aux, basis, screening_threshold);
  std::vector<double> out(static_cast<std::size_t>(engine.naux() * engine.nbf() * engine.nbf()), 0.0);
  if (!out.empty()) engine.compute_square(0, engine.naux(), out.data());
  return out;
}

std::vector<double> four_center_integrals(const BasisSet& basis) {
  const LibintBasis b = to_libint(basis);
  const std::size_t nbf = b.nbf;
  std::vector<double> out(nbf * nbf * nbf * nbf, 0.0);
  const libint2::Engine proto = make_coulomb_engine("four-centre integrals", BraKet::xx_xx, b.max_nprim, b.max_l);
  EnginePool engines(proto);
  const int nsh = b.nshells();
#pragma omp parallel
  {
    libint2::Engine& engine = engines.mine();
    const auto& buf = engine.results();
#pragma omp for schedule(dynamic)
    for (int s1 = 0; s1 < nsh; ++s1) {
      for (int s2 = 0; s2 < nsh; ++s2) {
        for (int s3 = 0; s3 < nsh; ++s3) {
          for (int s4 = 0; s4 < nsh; ++s4) {
            engine.compute2<Operator::coulomb, BraKet::xx_xx, 0>(b.shells[s1], b.shells[s2], b.shells[s3],
                                                                 b.shells[s4]);
            const double* ints = buf[0];
            if (ints == nullptr) continue;
            std::size_t f1234 = 0;
            for (int f1 = 0; f1 < b.sizes[s1]; ++f1) {
              for (int f2 = 0; f2 < b.sizes[s2]; ++f2) {
                for (int f3 = 0; f3 < b.sizes[s3]; ++f3) {
                  for (int f4 = 0; f4 < b.sizes[s4]; ++f4, ++f1234) {
                    const std::size_t i1 = b.offsets[s1] + f1, i2 = b.offsets[s2] + f2;
                    const std::size_t i3 = b.offsets[s3] + f3, i4 = b.offsets[s4] + f4;
                    out[i4 + nbf * (i3 + nbf * (i2 + nbf * i1))] = ints[f1234];
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  return out;
}

// ----------------------------------------------------------------------------------------------------------------
// FourCenterJk

struct FourCenterJk::Impl {
  LibintBasis b;
  ShellPairs sp;
  double threshold = 0;
  // The shell pairs that can pass the Schwarz screening, sorted by Schwarz factor, largest first: bra j's kets
  // are the pairs i in [j, ket_end[j]).
  std::vector<std::size_t> order;     // index into sp.pairs
  std::vector<double> q;              // Schwarz factor of order[j]
  std::vector<std::size_t> ket_end;
  // Semi-direct cache: bra j's integrals start at cache_offset[j] (kNotCached when it is computed every build).
  static constexpr std::size_t kNotCached = static_cast<std::size_t>(-1);
  std::vector<std::size_t> cache_offset;
  std::vector<double> cache;
  bool cache_filled = false;
  EnginePool engines;
  std::vector<std::vector<double>> jt, kt;  // per-thread accumulators, row-major nbf x nbf
  Stats stats;
  int rank = 0, ranks = 1;  // this object's bras: those with index % ranks == rank
  bool mine(std::size_t bra) const { return bra % std::size_t(ranks) == std::size_t(rank); }
};

namespace {

// Adds one shell quartet's contributions (integrals `v`, row-major over the functions of s1 s2 s3 s4, times the
// permutational weight `deg`) to the thread's accumulators: J_12 += (12|34) D_34, J_34 += (12|34) D_12,
// K_13 += D_24, K_24 += D_13, K_14 += D_23, K_23 += D_14. The permutations the unique quartet stands for are
// restored by symmetrising the accumulators at the end.
void contract_quartet(const double* v, double deg, const double* d, std::size_t nbf, double* jt, double* kt,
                      std::size_t o1, int n1, std::size_t o2, int n2, std::size_t o3, int n3, std::size_t o4, int n4) {
  for (int f1 = 0; f1 < n1; ++f1) {
    const std::size_t i1 = o1 + std::size_t(f1);
    for (int f2 = 0; f2 < n2; ++f2) {
      const std::size_t i2 = o2 + std::size_t(f2);
      const double d12 = d[i1 * nbf + i2];
      double j12 = 0;
      for (int f3 = 0; f3 < n3; ++f3, v += n4) {
        const std::size_t i3 = o3 + std::size_t(f3);
        const double d13 = d[i1 * nbf + i3], d23 = d[i2 * nbf + i3];
        const double* d3 = d + i3 * nbf + o4;  // D(i3, i4) over f4
        const double* d2 = d + i2 * nbf + o4;  // D(i2, i4)
        const double* d1 = d + i1 * nbf + o4;  // D(i1, i4)
        double* j3 = jt + i3 * nbf + o4;
        double* k2 = kt + i2 * nbf + o4;
        double* k1 = kt + i1 * nbf + o4;
        double k13 = 0, k23 = 0;
        for (int f4 = 0; f4 < n4; ++f4) {
          const double x = v[f4] * deg;
          j12 += d3[f4] * x;
          j3[f4] += d12 * x;
          k13 += d2[f4] * x;
          k2[f4] += d13 * x;
          k23 += d1[f4] * x;
          k1[f4] += d23 * x;
        }
        kt[i1 * nbf + i3] += k13;
        kt[i2 * nbf + i3] += k23;
      }
      jt[i1 * nbf + i2] += j12;
    }
  }
}

}  // namespace

double FourCenterJk::fixed_bytes(const BasisSet& basis, int threads) {
  // The shell pairs' primitive data is known only once made; bound it by every primitive pair.
  double prim_pairs = 0, npairs = 0, nbf = 0;
  for (std::size_t a = 0; a < basis.shells.size(); ++a) {
    nbf += basis.shells[a].size();
    for (std::size_t c = 0; c <= a; ++c) {
      prim_pairs += double(basis.shells[a].exponents.size()) * double(basis.shells[c].exponents.size());
      npairs += 1;
    }
  }
  const double pairs = prim_pairs * double(sizeof(libint2::ShellPair::PrimPairData)) +
                       npairs * (double(sizeof(libint2::ShellPair)) + sizeof(std::pair<int, int>) + 9 * sizeof(double));
  // Accumulators per thread, the density's copies and the caller's J, K and D.
  return pairs + (2.0 * std::max(threads, 1) + 6.0) * 8.0 * nbf * nbf;
}

FourCenterJk::FourCenterJk(const BasisSet& basis, double cache_bytes, double screening_threshold, int rank,
                           int ranks)
    : impl_(std::make_unique<Impl>()) {
  Impl& d = *impl_;
  d.rank = rank;
  d.ranks = std::max(ranks, 1);
  d.b = to_libint(basis);
  d.threshold = screening_threshold;
  const libint2::Engine proto = make_coulomb_engine("four-centre integrals", BraKet::xx_xx, d.b.max_nprim, d.b.max_l);
  if (d.b.nbf == 0) return;
  d.sp = make_shell_pairs(d.b);
  for (std::size_t p = 0; p < d.sp.pairs.size(); ++p) {
    if (d.sp.schwarz[p] * d.sp.max_schwarz >= screening_threshold) d.order.push_back(p);
  }
  std::stable_sort(d.order.begin(), d.order.end(),
                   [&](std::size_t x, std::size_t y) { return d.sp.schwarz[x] > d.sp.schwarz[y]; });
  const std::size_t n = d.order.size();
  d.q.resize(n);
  std::vector<double> prefix(n + 1, 0.0);  // functions of the pairs before j
  for (std::size_t j = 0; j < n; ++j) {
    d.q[j] = d.sp.schwarz[d.order[j]];
    const auto [s1, s2] = d.sp.pairs[d.order[j]];
    prefix[j + 1] = prefix[j] + double(d.b.sizes[s1]) * d.b.sizes[s2];
  }
  d.ket_end.resize(n);
  d.cache_offset.assign(n, Impl::kNotCached);
  std::size_t cached = 0;
  const double cache_doubles = std::max(0.0, cache_bytes) / sizeof(double);
  for (std::size_t j = 0; j < n; ++j) {
    // First ket (at or after j) whose bound with bra j is below the threshold; q is non-increasing.
    const double qj = d.q[j];
    const auto end = std::partition_point(d.q.begin() + long(j), d.q.end(),
                                          [&](double qi) { return qi * qj >= screening_threshold; });
    d.ket_end[j] = std::size_t(end - d.q.begin());
    if (!d.mine(j)) continue;
    const double integrals = (prefix[j + 1] - prefix[j]) * (prefix[d.ket_end[j]] - prefix[j]);  // bra j's
    d.stats.quartets += double(d.ket_end[j] - j);
    d.stats.integrals += integrals;
    if (double(cached) + integrals <= cache_doubles) {
      d.cache_offset[j] = cached;
      cached += std::size_t(integrals);
    }
  }
  d.cache.resize(cached);
  d.stats.cached_integrals = double(cached);
  d.stats.cache_bytes = double(cached) * sizeof(double);
  d.engines = EnginePool(proto);
}

FourCenterJk::~FourCenterJk() = default;

const FourCenterJk::Stats& FourCenterJk::stats() const { return impl_->stats; }

void FourCenterJk::compute(const linalg::Matrix& density, linalg::Matrix& j, linalg::Matrix& k) {
  Impl& d = *impl_;
  const LibintBasis& b = d.b;
  const auto nbf = static_cast<linalg::Index>(b.nbf);
  if (density.rows() != nbf || density.cols() != nbf) {
    throw std::invalid_argument("exact_jk: density is " + std::to_string(density.rows()) + " x " +
                                std::to_string(density.cols()) + ", the basis has " + std::to_string(nbf) +
                                " functions");
  }
  j = linalg::Matrix::Zero(nbf, nbf);
  k = linalg::Matrix::Zero(nbf, nbf);
  d.stats.computed_last = d.stats.skipped_last = 0;
  if (nbf == 0) return;
  const int nsh = b.nshells();
  // Largest |D| in each shell block, for density screening.
  std::vector<double> dmax(static_cast<std::size_t>(nsh) * nsh, 0.0);
  for (int s1 = 0; s1 < nsh; ++s1) {
    for (int s2 = 0; s2 < nsh; ++s2) {
      dmax[static_cast<std::size_t>(s1) * nsh + s2] =
          density.block(static_cast<linalg::Index>(b.offsets[s1]), static_cast<linalg::Index>(b.offsets[s2]),
                        b.sizes[s1], b.sizes[s2])
              .cwiseAbs()
              .maxCoeff();
    }
  }
  auto dblock = [&](int s1, int s2) { return dmax[static_cast<std::size_t>(s1) * nsh + s2]; };

  const int nthreads = d.engines.size();
  const auto nbf2 = static_cast<std::size_t>(nbf) * static_cast<std::size_t>(nbf);
  d.jt.resize(static_cast<std::size_t>(nthreads));
  d.kt.resize(static_cast<std::size_t>(nthreads));
  const bool fill_cache = !d.cache_filled;
  const double* dens = density.data();  // symmetric: D(a, b) at a * nbf + b as well
  const auto nbra = static_cast<long>(d.order.size());
  double computed = 0, skipped = 0;
#pragma omp parallel num_threads(nthreads) reduction(+ : computed, skipped)
  {
    const int t = omp_get_thread_num();
    libint2::Engine& engine = d.engines.mine();
    const auto& buf = engine.results();
    std::vector<double>& jacc = d.jt[static_cast<std::size_t>(t)];
    std::vector<double>& kacc = d.kt[static_cast<std::size_t>(t)];
    jacc.assign(nbf2, 0.0);
    kacc.assign(nbf2, 0.0);
#pragma omp for schedule(dynamic)
    for (long jb = 0; jb < nbra; ++jb) {
      const auto bra = static_cast<std::size_t>(jb);
      if (!d.mine(bra)) continue;
      const std::size_t p12 = d.order[bra];
      const auto [s1, s2] = d.sp.pairs[p12];
      const int n1 = b.sizes[s1], n2 = b.sizes[s2];
      const std::size_t o1 = b.offsets[s1], o2 = b.offsets[s2];
      const double deg12 = (s1 == s2) ? 1.0 : 2.0;
      const double d12 = dblock(s1, s2);
      const bool cached = d.cache_offset[bra] != Impl::kNotCached;
      double* stream = cached ? d.cache.data() + d.cache_offset[bra] : nullptr;
      for (std::size_t ket = bra; ket < d.ket_end[bra]; ++ket) {
        const std::size_t p34 = d.order[ket];
        const auto [s3, s4] = d.sp.pairs[p34];
        const int n3 = b.sizes[s3], n4 = b.sizes[s4];
        const std::size_t size = std::size_t(n1) * std::size_t(n2) * std::size_t(n3) * std::size_t(n4);
        const double bound = d.q[bra] * d.q[ket];
        const double dlargest = std::max({d12, dblock(s3, s4), dblock(s1, s3), dblock(s1, s4), dblock(s2, s3),
                                          dblock(s2, s4)});
        const bool negligible = bound * dlargest < d.threshold;
        const double* ints = nullptr;
        if (cached && !fill_cache) {
          ints = stream;
        } else if (!negligible || (cached && fill_cache)) {
          engine.compute2<Operator::coulomb, BraKet::xx_xx, 0>(b.shells[s1], b.shells[s2], b.shells[s3],
                                                               b.shells[s4], &d.sp.data[p12], &d.sp.data[p34]);
          computed += 1;
          ints = buf[0];
          if (cached) {
            if (ints != nullptr) std::copy(ints, ints + size, stream);
            else std::fill(stream, stream + size, 0.0);
          }
        }
        if (cached) stream += size;
        if (negligible || ints == nullptr) {
          skipped += negligible ? 1 : 0;
          continue;
        }
        const double deg34 = (s3 == s4) ? 1.0 : 2.0;
        const double deg1234 = (ket == bra) ? 1.0 : 2.0;
        contract_quartet(ints, deg12 * deg34 * deg1234, dens, std::size_t(nbf), jacc.data(), kacc.data(), o1, n1, o2,
                         n2, b.offsets[s3], n3, b.offsets[s4], n4);
      }
    }
  }
  d.cache_filled = true;
  d.stats.computed_last = computed;
  d.stats.skipped_last = skipped;
  // Sum the threads' accumulators (row-major; the symmetrisation below makes the orientation irrelevant) and
  // restore the permutations: J = (Jacc + Jacc^T)/4, K = (Kacc + Kacc^T)/8.
  linalg::Matrix jsum = linalg::Matrix::Zero(nbf, nbf), ksum = linalg::Matrix::Zero(nbf, nbf);
  for (int t = 0; t < nthreads; ++t) {
    jsum += Eigen::Map<const linalg::Matrix>(d.jt[static_cast<std::size_t>(t)].data(), nbf, nbf);
    ksum += Eigen::Map<const linalg::Matrix>(d.kt[static_cast<std::size_t>(t)].data(), nbf, nbf);
  }
  j = (jsum + jsum.transpose()) * 0.25;
  k = (ksum + ksum.transpose()) * 0.125;
}

void exact_jk(const BasisSet& basis, const linalg::Matrix& density, linalg::Matrix& j, linalg::Matrix& k,
              double screening_threshold) {
  FourCenterJk(basis, 0.0, screening_threshold).compute(density, j, k);
}

}  // namespace dfmp2::chem
