// Molecular integrals with libint2 (chem/integrals/libint_support.hpp has the glue's declarations): the glue itself,
// the one-electron integrals, the Coulomb metric and the three-centre integrals. The derivative integrals are in
// derivatives.cpp, the four-centre integrals and J/K in four_centre.cpp.
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

namespace dfmp2::chem::libint_support {

namespace {
void ensure_libint_initialized() {
  static std::once_flag once;
  std::call_once(once, [] { libint2::initialize(); });
}

}  // namespace

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

linalg::Matrix one_body_matrix(const LibintBasis& b, const libint2::Engine& proto, std::size_t component) {
  return symmetric_shell_pair_matrix(
      b, proto, [&](libint2::Engine& engine, int s1, int s2) { engine.compute1(b.shells[s1], b.shells[s2]); },
      component);
}


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


}  // namespace dfmp2::chem::libint_support

namespace dfmp2::chem {

using namespace libint_support;

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

linalg::Matrix overlap_matrix(const BasisSet& rows, const BasisSet& cols) {
  const LibintBasis a = to_libint(rows), b = to_libint(cols);
  libint2::Engine engine = make_engine("overlap integrals", Operator::overlap, std::max(a.max_nprim, b.max_nprim),
                                       std::max(a.max_l, b.max_l));
  linalg::Matrix s(static_cast<linalg::Index>(a.nbf), static_cast<linalg::Index>(b.nbf));
  const auto& buf = engine.results();
  for (int s1 = 0; s1 < a.nshells(); ++s1) {
    for (int s2 = 0; s2 < b.nshells(); ++s2) {
      engine.compute1(a.shells[static_cast<std::size_t>(s1)], b.shells[static_cast<std::size_t>(s2)]);
      const int n1 = a.sizes[static_cast<std::size_t>(s1)], n2 = b.sizes[static_cast<std::size_t>(s2)];
      const auto o1 = static_cast<linalg::Index>(a.offsets[static_cast<std::size_t>(s1)]);
      const auto o2 = static_cast<linalg::Index>(b.offsets[static_cast<std::size_t>(s2)]);
      for (int i = 0; i < n1; ++i)
        for (int j = 0; j < n2; ++j) s(o1 + i, o2 + j) = buf[0] == nullptr ? 0.0 : buf[0][i * n2 + j];
    }
  }
  return s;
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

std::array<linalg::Matrix, 6> second_moment_matrices(const BasisSet& basis, const std::array<double, 3>& origin) {
  const LibintBasis b = to_libint(basis);
  const libint2::Engine engine =
      make_engine("quadrupole integrals", Operator::emultipole2, b.max_nprim, b.max_l, origin);
  // libint2's components: the overlap, x, y, z, then xx, xy, xz, yy, yz, zz.
  std::array<linalg::Matrix, 6> out;
  for (std::size_t k = 0; k < 6; ++k) out[k] = one_body_matrix(b, engine, 4 + k);
  return out;
}

std::vector<double> electronic_potential(const BasisSet& basis, const linalg::Matrix& density,
                                         const std::vector<std::array<double, 3>>& points) {
  const LibintBasis b = to_libint(basis);
  // A unit positive charge at the point: libint2's attraction integrals are then -<m|1/|r - point||n>.
  const std::vector<std::pair<double, std::array<double, 3>>> unit = {{1.0, {0.0, 0.0, 0.0}}};
  EnginePool engines(make_engine("electrostatic-potential integrals", Operator::nuclear, b.max_nprim, b.max_l, unit));
  std::vector<double> potential(points.size(), 0.0);
  const auto npoints = static_cast<long>(points.size());
#pragma omp parallel
  {
    libint2::Engine& engine = engines.mine();
    const auto& buf = engine.results();
#pragma omp for schedule(dynamic)
    for (long k = 0; k < npoints; ++k) {
      engine.set_params(std::vector<std::pair<double, std::array<double, 3>>>{
          {1.0, points[static_cast<std::size_t>(k)]}});
      double v = 0;
      for (int s1 = 0; s1 < b.nshells(); ++s1) {
        for (int s2 = 0; s2 <= s1; ++s2) {
          engine.compute(b.shells[s1], b.shells[s2]);
          if (buf[0] == nullptr) continue;
          const double pair_weight = s1 == s2 ? 1.0 : 2.0;  // the lower triangle's twin
          const auto o1 = static_cast<linalg::Index>(b.offsets[s1]), o2 = static_cast<linalg::Index>(b.offsets[s2]);
          for (int f1 = 0; f1 < b.sizes[s1]; ++f1)
            for (int f2 = 0; f2 < b.sizes[s2]; ++f2)
              v += pair_weight * density(o1 + f1, o2 + f2) * buf[0][f1 * b.sizes[s2] + f2];
        }
      }
      potential[static_cast<std::size_t>(k)] = v;
    }
  }
  return potential;
}

linalg::Matrix point_charge_matrix(const BasisSet& basis,
                                   const std::vector<std::pair<double, std::array<double, 3>>>& charges) {
  const LibintBasis b = to_libint(basis);
  return one_body_matrix(b, make_engine("point-charge integrals", Operator::nuclear, b.max_nprim, b.max_l, charges));
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


}  // namespace dfmp2::chem
