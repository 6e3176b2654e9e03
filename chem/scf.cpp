#include "chem/scf.hpp"

#include <fmt/format.h>
#include <omp.h>

#include <Eigen/Dense>
#include <cmath>
#include <deque>
#include <map>
#include <string>

#include "chem/integrals.hpp"
#include "linalg/bytes.hpp"
#include "linalg/errors.hpp"

namespace dfmp2::chem {

using linalg::ConstMatrixView;
using linalg::Index;
using linalg::Matrix;
using linalg::MatrixView;
using linalg::Stopwatch;
using linalg::Trans;
using linalg::Vector;

void JkBuilder::compute_response(const Matrix& m, const Matrix& c, Matrix& j, Matrix& kc) {
  Matrix k;
  compute_symmetric(m, j, k);
  kc = k * c;
}

void JkBuilder::compute_rotation_response(const Matrix& l, const Matrix& c_occ, Matrix& j, Matrix& kc) {
  const Matrix half = l * c_occ.transpose();
  compute_response(0.5 * (half + half.transpose()), c_occ, j, kc);
}

void JkBuilder::compute_symmetric(const Matrix& m, Matrix& j, Matrix& k) {
  const Index n = m.rows();
  j.setZero(n, n);
  k.setZero(n, n);
  const Eigen::SelfAdjointEigenSolver<Matrix> eig(0.5 * (m + m.transpose()));
  const double negligible = 1e-14 * std::max(1.0, eig.eigenvalues().cwiseAbs().maxCoeff());
  for (const double sign : {1.0, -1.0}) {
    std::vector<Index> part;
    for (Index x = 0; x < n; ++x)
      if (sign * eig.eigenvalues()(x) > negligible) part.push_back(x);
    const Index chunk = std::max<Index>(1, std::min<Index>(max_columns(), n));
    for (std::size_t first = 0; first < part.size(); first += static_cast<std::size_t>(chunk)) {
      const std::size_t last = std::min(part.size(), first + static_cast<std::size_t>(chunk));
      Matrix c(n, static_cast<Index>(last - first));
      for (std::size_t x = first; x < last; ++x)
        c.col(static_cast<Index>(x - first)) = eig.eigenvectors().col(part[x]) * std::sqrt(sign * eig.eigenvalues()(part[x]));
      Matrix jp, kp;
      compute(c, jp, kp, false, kResponseDensity);
      j += sign * jp;
      k += sign * kp;
    }
  }
}

namespace {

// Screening threshold of the exact J/K's quartets (bound times largest density element), as Psi4's default
// ints_tolerance. Measured against the earlier direct build at 1e-14: the SCF energy of (H2O)4 and (H2O)8 cc-pVDZ
// moved by 3e-12 and 3e-11 Eh.
constexpr double kExactScreening = 1e-12;

class ExactJk final : public JkBuilder {
 public:
  ExactJk(const BasisSet& basis, double cache_bytes, linalg::Kernels* kernels, linalg::Comm* comm = nullptr)
      : four_(basis, cache_bytes, kExactScreening, comm != nullptr ? comm->rank() : 0,
              comm != nullptr ? comm->size() : 1),
        kernels_(kernels), comm_(comm) {}
  void compute(const Matrix& c_occ, Matrix& j, Matrix& k, bool fp32_exchange, int which) override {
    if (fp32_exchange) throw std::logic_error("exact J/K has no fp32 exchange");
    Stopwatch clock;
    if (which >= int(last_.size())) last_.resize(std::size_t(which) + 1);
    Build& last = last_[std::size_t(which)];
    const Matrix density = c_occ * c_occ.transpose();
    const bool full = last.builds % kExactFullBuildEvery == 0;
    // This rank's share of J and K (of the density's change, after the first build), summed over the ranks.
    Matrix dj, dk;
    auto share = [&](const Matrix& d) {
      if (comm_ == nullptr) {
        four_.compute(d, dj, dk);
        return;
      }
      comm_->checked([&] { four_.compute(d, dj, dk); });
      comm_->sum(dj.data(), static_cast<std::size_t>(dj.size()));
      comm_->sum(dk.data(), static_cast<std::size_t>(dk.size()));
    };
    if (full) {
      share(density);
      last.j = dj;
      last.k = dk;
    } else {
      share(density - last.density);
      last.j += dj;
      last.k += dk;
    }
    last.density = density;
    ++last.builds;
    j = last.j;
    k = last.k;
    if (kernels_) {
      const auto& st = four_.stats();
      // Bytes: the cache streamed. No flop count: the time is mostly libint2's integrals, which have none to give.
      kernels_->record_host(step_name(ScfStep::jk), full ? "exact_jk_full" : "exact_jk_delta", clock.seconds(),
                            {0, st.cached_integrals * 8.0});
    }
  }
  // The four-centre contraction takes any symmetric matrix: one build, no split, no incremental state.
  void compute_symmetric(const Matrix& m, Matrix& j, Matrix& k) override {
    if (comm_ == nullptr) {
      four_.compute(m, j, k);
      return;
    }
    comm_->checked([&] { four_.compute(m, j, k); });
    comm_->sum(j.data(), static_cast<std::size_t>(j.size()));
    comm_->sum(k.data(), static_cast<std::size_t>(k.size()));
  }
  const FourCenterJk& four() const { return four_; }

 private:
  FourCenterJk four_;
  linalg::Kernels* kernels_;  // where the time is recorded; none for the atomic guesses
  linalg::Comm* comm_;        // the ranks sharing the bras; none for the atomic guesses (every rank does them alike)
  // Per density (UHF: alpha and beta) the last build's D, J[D], K[D], and how many builds it has had.
  struct Build {
    Matrix density, j, k;
    int builds = 0;
  };
  std::vector<Build> last_;
};

// Pulay's DIIS: extrapolates the Fock matrix from the last few (F, error) pairs. When the subspace is full the pair
// with the largest error goes (not the oldest, as Psi4 does too): an early, poor Fock matrix kept instead of a good
// recent one stalls the extrapolation on hard cases (ethene-ethyne in cc-pVDZ took 33 iterations with the oldest
// dropped, 14 in Psi4; bench/README.md "SCF iterations").
class Diis {
 public:
  explicit Diis(int max_vectors) : max_(max_vectors) {}
  Matrix extrapolate(const Matrix& fock, const Matrix& error) {
    if (static_cast<int>(focks_.size()) >= max_ && !focks_.empty()) {
      std::size_t worst = 0;
      for (std::size_t i = 1; i < errors_.size(); ++i)
        if (errors_[i].squaredNorm() > errors_[worst].squaredNorm()) worst = i;
      focks_.erase(focks_.begin() + static_cast<std::ptrdiff_t>(worst));
      errors_.erase(errors_.begin() + static_cast<std::ptrdiff_t>(worst));
    }
    focks_.push_back(fock);
    errors_.push_back(error);
    const Index n = static_cast<Index>(focks_.size());
    if (n < 2) return fock;
    Matrix b = Matrix::Zero(n + 1, n + 1);
    Vector rhs = Vector::Zero(n + 1);
    for (Index i = 0; i < n; ++i)
      for (Index k = 0; k <= i; ++k) b(i, k) = b(k, i) = errors_[i].cwiseProduct(errors_[k]).sum();
    // The error products scaled to at most 1 before the -1 border is added: near convergence they are 1e-20 and
    // less, and beside the border's 1 the rank-revealing solve took them for zero, so new vectors stopped counting
    // and the gradient stalled at 1e-10 (20 extra iterations at d_convergence 1e-10). The coefficients are the same.
    const double largest = b.topLeftCorner(n, n).cwiseAbs().maxCoeff();
    if (largest > 0) b.topLeftCorner(n, n) /= largest;
    for (Index i = 0; i < n; ++i) b(i, n) = b(n, i) = -1.0;
    rhs[n] = -1.0;
    const Vector c = b.completeOrthogonalDecomposition().solve(rhs);
    Matrix out = Matrix::Zero(fock.rows(), fock.cols());
    for (Index i = 0; i < n; ++i) out += c[i] * focks_[i];
    return out;
  }

 private:
  int max_;
  std::deque<Matrix> focks_, errors_;
};

// The eigenvalues and eigenvectors (in place) of the symmetric `a`: the backend's eigh on every rank, or on the ranks'
// grid when `options` gives one and the order reaches its limit (the vectors gathered, so every rank has the same
// bits either way).
void symmetric_eigen(Matrix& a, Vector& eps, linalg::Kernels& kernels, const ScfOptions* options,
                     const std::string& step) {
  eps.resize(a.rows());
  if (options == nullptr || options->dense == nullptr || a.rows() < options->distributed_min_order) {
    kernels.eigh(step, linalg::view(a), eps.data());
    return;
  }
  linalg::DenseGrid& grid = *options->dense;
  Stopwatch clock;
  linalg::DistributedMatrix m = grid.matrix(a.rows()), vectors = grid.matrix(a.rows());
  m.copy_from(linalg::view(a));
  grid.eigh(m, eps, vectors);
  grid.gather(vectors, linalg::view(a));
  const double n = double(a.rows());
  kernels.record_host(step, fmt::format("{} eigh", dense_library_name(grid.eigh_library(a.rows()))), clock.seconds(),
                      {9.0 * n * n * n, 16.0 * n * n}, "fp64");
}

// Symmetric orthogonaliser X = S^-1/2 (its eigenproblem on the ranks' grid when `options` gives one and the order
// reaches its limit).
Matrix orthogonaliser(const Matrix& s, linalg::Kernels* kernels = nullptr, const ScfOptions* options = nullptr) {
  Vector w;
  Matrix vectors;
  if (kernels != nullptr && options != nullptr && options->dense != nullptr &&
      s.rows() >= options->distributed_min_order) {
    vectors = s;
    symmetric_eigen(vectors, w, *kernels, options, step_name(ScfStep::integrals));
  } else {
    Eigen::SelfAdjointEigenSolver<Matrix> eig(s);
    if (eig.info() != Eigen::Success) throw NumericalError("overlap matrix: eigensolver failed");
    w = eig.eigenvalues();
    vectors = eig.eigenvectors();
  }
  if (w.minCoeff() < 1e-10 * w.maxCoeff()) {
    throw NumericalError(fmt::format("overlap matrix: smallest eigenvalue {:.3e} (largest {:.3e}); the basis is "
                                     "linearly dependent",
                                     w.minCoeff(), w.maxCoeff()));
  }
  return vectors * w.cwiseInverse().cwiseSqrt().asDiagonal() * vectors.transpose();
}

struct Orbitals {
  Matrix c;
  Vector eps;
};

// op(A) op(B) through the backend, timed under `step` (the SCF's dense products belong in its timing table).
Matrix product(linalg::Kernels& kernels, const std::string& step, const Matrix& a, Trans ta, const Matrix& b,
               Trans tb) {
  Matrix out(ta == Trans::no ? a.rows() : a.cols(), tb == Trans::no ? b.cols() : b.rows());
  kernels.gemm<double>(step, ta, tb, 1.0, linalg::view(a), linalg::view(b), 0.0, linalg::view(out));
  return out;
}

// The orbital gradient DIIS extrapolates with: X^T (F D S - S D F) X, in the orthonormal basis. On the ranks'
// grid when the order reaches its limit (pdgemm and pdtran; S D F = (F D S)^T for symmetric F, D and S), each rank
// holding its tiles, the result gathered.
Matrix orbital_gradient(const Matrix& fock, const Matrix& d, const Matrix& s, const Matrix& x, linalg::Kernels& kernels,
                        const ScfOptions& options) {
  const std::string step = step_name(ScfStep::iterations);
  const Index n = fock.rows();
  if (options.dense == nullptr || n < options.distributed_min_order) {
    const Matrix fds = product(kernels, step, fock, Trans::no, product(kernels, step, d, Trans::no, s, Trans::no), Trans::no);
    const Matrix commutator = fds - fds.transpose();
    return product(kernels, step, x, Trans::yes, product(kernels, step, commutator, Trans::no, x, Trans::no), Trans::no);
  }
  linalg::DenseGrid& grid = *options.dense;
  Stopwatch clock;
  linalg::DistributedMatrix a = grid.matrix(n), b = grid.matrix(n), c = grid.matrix(n);
  a.copy_from(linalg::view(d));
  b.copy_from(linalg::view(s));
  grid.multiply(false, false, 1.0, a, b, 0.0, c);  // D S
  a.copy_from(linalg::view(fock));
  grid.multiply(false, false, 1.0, a, c, 0.0, b);  // F D S
  c.local = b.local;
  grid.add_transpose(-1.0, b, 1.0, c);             // F D S - (F D S)^T
  a.copy_from(linalg::view(x));
  grid.multiply(false, false, 1.0, c, a, 0.0, b);  // (...) X
  grid.multiply(true, false, 1.0, a, b, 0.0, c);   // X^T (...) X
  Matrix out(n, n);
  grid.gather(c, linalg::view(out));
  const double nn = double(n);
  kernels.record_host(step, "pdgemm", clock.seconds(), {8.0 * nn * nn * nn, 8.0 * nn * nn}, "fp64");
  return out;
}

// The same on the ranks' grid: F' = X^T F X, its eigenvectors C' and C = X C' with ScaLAPACK's pdgemm and the
// grid's eigensolver, each rank holding its tiles; only C is gathered (the same bits on every rank).
Orbitals diagonalise_on_grid(const Matrix& fock, const Matrix& x, linalg::DenseGrid& grid, linalg::Kernels& kernels) {
  const Index n = fock.rows();
  Stopwatch clock;
  linalg::DistributedMatrix f = grid.matrix(n), xd = grid.matrix(n), t = grid.matrix(n), v = grid.matrix(n);
  f.copy_from(linalg::view(fock));
  xd.copy_from(linalg::view(x));
  grid.multiply(false, false, 1.0, f, xd, 0.0, t);  // F X
  grid.multiply(true, false, 1.0, xd, t, 0.0, f);   // X^T (F X)
  Orbitals out;
  grid.eigh(f, out.eps, v);
  grid.multiply(false, false, 1.0, xd, v, 0.0, t);  // X C'
  out.c.resize(n, n);
  grid.gather(t, linalg::view(out.c));
  const double nn = double(n);
  kernels.record_host(step_name(ScfStep::iterations),
                      fmt::format("pdgemm + {} eigh", dense_library_name(grid.eigh_library(n))), clock.seconds(),
                      {6.0 * nn * nn * nn + 9.0 * nn * nn * nn, 8.0 * nn * nn}, "fp64");
  return out;
}

Orbitals diagonalise(const Matrix& fock, const Matrix& x, linalg::Kernels& kernels,
                     const ScfOptions* options = nullptr) {
  if (options != nullptr && options->dense != nullptr && fock.rows() >= options->distributed_min_order)
    return diagonalise_on_grid(fock, x, *options->dense, kernels);
  const std::string step = step_name(ScfStep::iterations);
  Matrix f_orth = product(kernels, step, x, Trans::yes, product(kernels, step, fock, Trans::no, x, Trans::no), Trans::no);
  Vector eps;
  symmetric_eigen(f_orth, eps, kernels, options, step);
  return {product(kernels, step, x, Trans::no, f_orth, Trans::no), eps};
}

// The occupied columns scaled by sqrt(weight), so that D = c c^T.
Matrix weighted_occupied(const Matrix& c, const std::vector<double>& weights) {
  Matrix out(c.rows(), static_cast<Index>(weights.size()));
  for (std::size_t i = 0; i < weights.size(); ++i) out.col(Index(i)) = c.col(Index(i)) * std::sqrt(weights[i]);
  return out;
}

// Aufbau over groups of degenerate orbitals (energies within 1e-6 Eh), a partly filled group sharing its electrons
// evenly: the occupation of a spherically averaged atom (O: 1s2 2s2 and 4/3 electrons in each 2p). As weights per
// orbital (half its electrons), for the occupied ones.
std::vector<double> spherical_weights(const Vector& eps, int electrons) {
  std::vector<double> weights;
  double left = electrons;
  for (Index i = 0; i < eps.size() && left > 0;) {
    Index end = i + 1;
    while (end < eps.size() && eps(end) - eps(i) < 1e-6) ++end;
    const double group = double(end - i), filled = std::min(left, 2.0 * group);
    for (Index o = i; o < end; ++o) weights.push_back(filled / (2.0 * group));
    left -= filled;
    i = end;
  }
  return weights;
}

// A few iterations of fractional-occupation RHF for one atom in its own basis functions, spherically averaged: a
// guess, not a result (the same density whichever way the eigensolver orders degenerate orbitals).
Matrix atomic_density_factor(const Atom& atom, const BasisSet& atom_basis, linalg::Kernels& kernels) {
  Molecule single;
  single.atoms = {atom};
  const Matrix s = overlap_matrix(atom_basis);
  const Matrix h = kinetic_matrix(atom_basis) + nuclear_attraction_matrix(atom_basis, single);
  const Matrix x = orthogonaliser(s);
  const int electrons = std::min<int>(atom.atomic_number, 2 * static_cast<int>(h.rows()));  // a real atom's
  ExactJk jk(atom_basis, 0.0, nullptr);
  Orbitals orb = diagonalise(h, x, kernels);
  std::vector<double> weights = spherical_weights(orb.eps, electrons);
  Diis diis(6);
  Matrix j, k;
  for (int it = 0; it < 40; ++it) {
    const Matrix c_occ = weighted_occupied(orb.c, weights);
    jk.compute(c_occ, j, k, false, 0);
    const Matrix fock = h + 2.0 * j - k;
    const Matrix d = c_occ * c_occ.transpose();
    const Matrix error = x.transpose() * (fock * d * s - s * d * fock) * x;
    orb = diagonalise(diis.extrapolate(fock, error), x, kernels);
    weights = spherical_weights(orb.eps, electrons);
    if (error.norm() / double(error.rows()) < 1e-6) break;
  }
  return weighted_occupied(orb.c, weights);
}

BasisSet atom_subset(const BasisSet& basis, int atom) {
  BasisSet out;
  out.name = basis.name;
  out.source = basis.source;
  for (const auto& sh : basis.shells) {
    if (sh.atom == atom) out.shells.push_back(sh);
  }
  return out;
}

// Superposition of atomic densities, as a factor c with D = c c^T (one block of columns per atom).
Matrix sad_guess(const Molecule& molecule, const BasisSet& basis, linalg::Kernels& kernels) {
  const std::vector<int> offsets = basis.shell_offsets();
  std::vector<int> first(molecule.atoms.size(), -1), count(molecule.atoms.size(), 0);
  for (std::size_t s = 0; s < basis.shells.size(); ++s) {
    const int a = basis.shells[s].atom;
    if (first[static_cast<std::size_t>(a)] < 0) first[static_cast<std::size_t>(a)] = offsets[s];
    count[static_cast<std::size_t>(a)] += basis.shells[s].size();
  }
  std::map<int, Matrix> by_element;  // atoms of one element in one basis share their density
  std::vector<Matrix> factors;
  Index columns = 0;
  for (std::size_t a = 0; a < molecule.atoms.size(); ++a) {
    const int z = molecule.atoms[a].atomic_number;
    if (molecule.atoms[a].ghost) {  // no electrons: no columns in the guess
      factors.emplace_back(count[a], 0);
      continue;
    }
    auto it = by_element.find(z);
    if (it == by_element.end()) {
      it = by_element.emplace(z, atomic_density_factor(molecule.atoms[a], atom_subset(basis, int(a)), kernels)).first;
    }
    factors.push_back(it->second);
    columns += it->second.cols();
  }
  Matrix c = Matrix::Zero(basis.nbf(), columns);
  Index col = 0;
  for (std::size_t a = 0; a < molecule.atoms.size(); ++a) {
    c.block(first[a], col, count[a], factors[a].cols()) = factors[a];
    col += factors[a].cols();
  }
  return c;
}

}  // namespace

double exact_jk_minimum_bytes(const BasisSet& basis, int threads) {
  return FourCenterJk::fixed_bytes(basis, threads);
}

std::unique_ptr<JkBuilder> make_exact_jk(const BasisSet& basis, double memory_bytes, linalg::Kernels& kernels,
                                         ExactJkPlan& plan, linalg::Comm* comm) {
  const double fixed = exact_jk_minimum_bytes(basis, omp_get_max_threads());
  if (memory_bytes < fixed) {
    throw PhaseTooLarge("SCF J/K (exact)", fixed,
                        fmt::format("the exact J/K needs {}, {} is left for it", linalg::format_bytes(fixed),
                                    linalg::format_bytes(memory_bytes)));
  }
  auto jk = std::make_unique<ExactJk>(basis, memory_bytes - fixed, &kernels, comm);
  const auto& st = jk->four().stats();
  // Over every rank's bras.
  double counts[2] = {st.integrals, st.cached_integrals};
  if (comm != nullptr) comm->sum(counts, 2);
  plan.integrals = counts[0];
  plan.cached_integrals = counts[1];
  plan.cache_bytes = st.cache_bytes;
  plan.memory_bytes = fixed + st.cache_bytes;
  if (st.cached_integrals >= st.integrals) {
    plan.storage = "semi-direct";
    plan.reason = fmt::format("all {:.3g} integrals kept in memory", st.integrals);
  } else if (st.cached_integrals == 0) {
    plan.storage = "direct";
    plan.reason = fmt::format("no memory left for the {:.3g} integrals; each build computes them", st.integrals);
  } else {
    plan.storage = "semi-direct";
    plan.reason = fmt::format("{:.3g} of {:.3g} integrals kept in memory, the rest computed each build",
                              st.cached_integrals, st.integrals);
  }
  return jk;
}

namespace {

// An overflow anywhere upstream (integrals, J/K) shows in the energy or the gradient first; diagonalising NaNs
// would fail less clearly.
void require_finite(int iteration, double energy, double rms) {
  if (!std::isfinite(energy) || !std::isfinite(rms)) {
    throw NumericalError(fmt::format("SCF iteration {}: the energy ({}) or the orbital gradient ({}) is not finite",
                                     iteration, energy, rms));
  }
}

[[noreturn]] void not_converged(const ScfOptions& options, const ScfResult& result) {
  const auto& last = result.history.back();
  throw NumericalError(fmt::format("SCF did not converge in {} iterations (last energy change {:.3e}, gradient RMS "
                                   "{:.3e}); raise scf.max_iterations or loosen scf.e_convergence/d_convergence",
                                   options.max_iterations, last.delta_energy, last.gradient_rms));
}

// J[D] and K[D] of D = c_occ c_occ^T. A spin without electrons (the beta spin of H, H2+ or Li2+) has nothing to
// build: both are zero, and the builders are not asked for products of empty matrices.
void coulomb_and_exchange(JkBuilder& jk, const Matrix& c_occ, Matrix& j, Matrix& k, bool fp32, int slot) {
  if (c_occ.cols() == 0) {
    j = Matrix::Zero(c_occ.rows(), c_occ.rows());
    k = j;
    return;
  }
  jk.compute(c_occ, j, k, fp32, slot);
}

// One spin of the SCF: its occupied count, the electrons each of its orbitals holds (2 in RHF, where one set of
// orbitals serves both spins; 1 in UHF), and its orbitals as the iterations go.
struct Spin {
  int nocc = 0;
  double electrons_per_orbital = 2.0;
  Matrix c_occ;
  Orbitals orbitals;
};

// The SCF iterations over `spins` (one for RHF, alpha and beta for UHF), from their c_occ (the guess):
// F_s = h + J[D] - K[D_s] with D = sum_s n_s D_s (n_s electrons per orbital), E = 1/2 sum_s n_s tr D_s (h + F_s),
// the orbital gradients X^T (F_s D_s S - S D_s F_s) X of all spins in one DIIS (their Fock matrices extrapolated
// with the same coefficients), each spin's orbitals from its own Fock matrix. RHF is the case of one spin with two
// electrons per orbital. Returns the energy, iterations and history; the spins' orbitals diagonalise the converged
// Fock matrices.
ScfResult iterate(const Matrix& h, const Matrix& s, const Matrix& x, double nuclear_repulsion, std::vector<Spin>& spins,
                  JkBuilder& jk, const ScfOptions& options, linalg::Kernels& kernels,
                  const std::function<void(const ScfIteration&)>& on_iteration) {
  if (options.precision == ScfPrecision::mixed && !jk.has_fp32_exchange()) {
    throw UnsupportedError("scf.precision: mixed needs the density-fitted K of the memory or scratch storage (scf.type "
                           "df); this J/K builder has no fp32 exchange");
  }
  const std::string& step = step_name(ScfStep::iterations);
  const Index nbf = h.rows();
  const auto nspin = static_cast<Index>(spins.size());
  ScfResult result;
  result.nuclear_repulsion = nuclear_repulsion;
  Diis diis(options.diis_vectors);
  std::vector<Matrix> j(spins.size()), k(spins.size()), fock(spins.size());
  double previous = 0;
  bool fp32 = options.precision == ScfPrecision::mixed;  // until the gradient falls below mixed_switch
  bool previous_fp32 = false;  // the energy change is judged between two fp64 iterations only
  for (int it = 1; it <= options.max_iterations; ++it) {
    Stopwatch clock;
    for (std::size_t i = 0; i < spins.size(); ++i) coulomb_and_exchange(jk, spins[i].c_occ, j[i], k[i], fp32, int(i));
    Matrix coulomb = spins[0].electrons_per_orbital * j[0];
    for (std::size_t i = 1; i < spins.size(); ++i) coulomb += spins[i].electrons_per_orbital * j[i];
    // Side by side, every spin's Fock matrix and orbital gradient: DIIS extrapolates them together.
    Matrix focks(nbf, nbf * nspin), errors(nbf, nbf * nspin);
    double energy = nuclear_repulsion;
    for (std::size_t i = 0; i < spins.size(); ++i) {
      fock[i] = h + coulomb - k[i];
      // D = C_occ C_occ^T (one triangle, then mirrored); the orbital gradient X^T (F D S - S D F) X, with
      // S D F = (F D S)^T: four products where the formula has six. All of them on the backend, in the timing table.
      Matrix d(nbf, nbf);
      kernels.syrk<double>(step, linalg::Uplo::lower, Trans::no, 1.0, linalg::view(spins[i].c_occ), 0.0,
                           linalg::view(d));
      d.triangularView<Eigen::StrictlyUpper>() = d.transpose();
      energy += 0.5 * spins[i].electrons_per_orbital * d.cwiseProduct(h + fock[i]).sum();
      focks.middleCols(Index(i) * nbf, nbf) = fock[i];
      errors.middleCols(Index(i) * nbf, nbf) = orbital_gradient(fock[i], d, s, x, kernels, options);
    }
    const double rms = std::sqrt(errors.squaredNorm() / double(errors.size()));
    require_finite(it, energy, rms);
    // The SAD guess is a density, not a determinant: fractional and the same for both spins, and for an atom a fixed
    // point of its own Fock matrix (its orbital gradient nearly zero). In the DIIS subspace it would carry the most
    // weight from then on and hold the iterations near the guess (the O atom's triplet and the Li atom's doublet
    // stalled so, and the H atom converged to the spin-averaged energy); its Fock matrix is diagonalised as it is,
    // as Psi4 does with its SAD iteration.
    const bool density_guess = it == 1 && options.guess == ScfGuess::sad;
    const Matrix extrapolated = density_guess ? focks : diis.extrapolate(focks, errors);
    for (std::size_t i = 0; i < spins.size(); ++i) {
      spins[i].orbitals = diagonalise(extrapolated.middleCols(Index(i) * nbf, nbf), x, kernels, &options);
      spins[i].c_occ = spins[i].orbitals.c.leftCols(spins[i].nocc);
    }

    ScfIteration line{it, energy, it == 1 ? energy : energy - previous, rms, clock.seconds(), fp32};
    result.history.push_back(line);
    if (on_iteration) on_iteration(line);
    previous = energy;
    if (fp32) {
      ++result.fp32_iterations;
      // An fp32 K is never the last word: from here on K is fp64, and convergence is judged on fp64 iterations only.
      if (rms < options.mixed_switch) fp32 = false;
      previous_fp32 = true;
      continue;
    }
    const bool energy_comparable = it > 1 && !previous_fp32;
    previous_fp32 = false;
    if (energy_comparable && std::abs(line.delta_energy) < options.e_convergence && rms < options.d_convergence) {
      // The orbitals that go on to MP2 diagonalise the converged (not extrapolated) Fock matrices.
      for (std::size_t i = 0; i < spins.size(); ++i) spins[i].orbitals = diagonalise(fock[i], x, kernels, &options);
      result.energy = energy;
      result.iterations = it;
      return result;
    }
  }
  not_converged(options, result);
}

// What every reference needs before its iterations: the one-electron matrices, the orthogonaliser and the guess
// (a factor c of the guessed density per spin, D_s = c c^T).
struct ScfStart {
  Matrix s, h, x, guess;
  double nuclear_repulsion = 0;
};

ScfStart start_scf(const Molecule& molecule, const BasisSet& basis, int most_occupied, const ScfOptions& options,
                   linalg::Kernels& kernels) {
  if (most_occupied > basis.nbf()) {
    throw InputError(fmt::format("molecule: {} occupied orbitals but only {} basis functions", most_occupied,
                                 basis.nbf()));
  }
  ScfStart st;
  st.nuclear_repulsion = nuclear_repulsion_energy(molecule);
  Stopwatch one_clock;
  st.s = overlap_matrix(basis);
  st.h = kinetic_matrix(basis) + nuclear_attraction_matrix(basis, molecule);
  kernels.record_host(step_name(ScfStep::integrals), "one_electron", one_clock.seconds(), {0, 24.0 * double(st.s.size())});
  st.x = orthogonaliser(st.s, &kernels, &options);
  Stopwatch guess_clock;
  // The core guess occupies the most occupied spin's count; each spin takes its own columns of it below.
  st.guess = options.guess == ScfGuess::core ? Matrix(diagonalise(st.h, st.x, kernels, &options).c.leftCols(most_occupied))
                                             : sad_guess(molecule, basis, kernels);
  kernels.record_host(step_name(ScfStep::guess), options.guess == ScfGuess::core ? "core" : "sad",
                      guess_clock.seconds(), {0, 0});
  return st;
}

// A spin's guess: the SAD factor as it is (every spin starts from half the atoms' density), or the core guess's
// first nocc orbitals.
Matrix spin_guess(const ScfStart& st, const ScfOptions& options, int nocc) {
  return options.guess == ScfGuess::core ? Matrix(st.guess.leftCols(nocc)) : st.guess;
}

// <S^2> = Sz (Sz + 1) + n_beta - sum_ij |<i alpha | j beta>|^2 (Szabo and Ostlund, eq. 2.271).
double s_squared(const ScfResult& r, const Matrix& s) {
  const Matrix overlap = r.mo_coefficients.leftCols(r.nocc).transpose() * s * r.mo_coefficients_beta.leftCols(r.nocc_beta);
  const double sz = 0.5 * double(r.nocc - r.nocc_beta);
  return sz * (sz + 1.0) + double(r.nocc_beta) - overlap.squaredNorm();
}

// One spin's semicanonical orbitals from orbitals `c` (AO, nbf x nmo) whose first `nocc` are that spin's occupied
// ones: `fock` (AO) diagonalised within the occupied and within the virtual orbitals, and the spin's singles term
// of each occupied orbital i, -sum_a |f_ia|^2 / (e_a - e_i).
struct Semicanonical {
  Matrix c;
  Vector eps;
  Vector singles;
};
Semicanonical semicanonical(const Matrix& c, int nocc, const Matrix& fock) {
  const Index nmo = c.cols(), nvir = nmo - nocc;
  Semicanonical out{Matrix(c.rows(), nmo), Vector(nmo), Vector::Zero(nocc)};
  auto diagonal_block = [&](Index first, Index count) {
    if (count == 0) return;
    const Matrix part = c.middleCols(first, count);
    const Eigen::SelfAdjointEigenSolver<Matrix> eig(part.transpose() * fock * part);
    out.c.middleCols(first, count) = part * eig.eigenvectors();
    out.eps.segment(first, count) = eig.eigenvalues();
  };
  diagonal_block(0, nocc);
  diagonal_block(nocc, nvir);
  const Matrix f_ov = out.c.leftCols(nocc).transpose() * fock * out.c.rightCols(nvir);
  for (Index i = 0; i < nocc; ++i)
    for (Index a = 0; a < nvir; ++a) out.singles[i] -= f_ov(i, a) * f_ov(i, a) / (out.eps[nocc + a] - out.eps[i]);
  return out;
}

}  // namespace

ScfResult run_rhf(const Molecule& molecule, const BasisSet& basis, JkBuilder& jk, const ScfOptions& options,
                  linalg::Kernels& kernels, const std::function<void(const ScfIteration&)>& on_iteration) {
  const int nocc = closed_shell_occupied(molecule);
  const ScfStart st = start_scf(molecule, basis, nocc, options, kernels);
  std::vector<Spin> spins(1);
  spins[0].nocc = nocc;
  spins[0].electrons_per_orbital = 2.0;
  spins[0].c_occ = spin_guess(st, options, nocc);
  ScfResult result = iterate(st.h, st.s, st.x, st.nuclear_repulsion, spins, jk, options, kernels, on_iteration);
  result.nocc = nocc;
  result.mo_coefficients = spins[0].orbitals.c;
  result.orbital_energies = spins[0].orbitals.eps;
  return result;
}

ScfResult run_uhf(const Molecule& molecule, int multiplicity, const BasisSet& basis, JkBuilder& jk,
                  const ScfOptions& options, linalg::Kernels& kernels,
                  const std::function<void(const ScfIteration&)>& on_iteration) {
  const auto [nalpha, nbeta] = spin_occupied(molecule, multiplicity);
  const ScfStart st = start_scf(molecule, basis, nalpha, options, kernels);
  std::vector<Spin> spins(2);
  spins[0].nocc = nalpha;
  spins[1].nocc = nbeta;
  for (auto& spin : spins) {
    spin.electrons_per_orbital = 1.0;
    spin.c_occ = spin_guess(st, options, spin.nocc);
  }
  ScfResult result = iterate(st.h, st.s, st.x, st.nuclear_repulsion, spins, jk, options, kernels, on_iteration);
  result.reference = ScfReference::uhf;
  result.nocc = nalpha;
  result.mo_coefficients = spins[0].orbitals.c;
  result.orbital_energies = spins[0].orbitals.eps;
  result.nocc_beta = nbeta;
  result.mo_coefficients_beta = spins[1].orbitals.c;
  result.orbital_energies_beta = spins[1].orbitals.eps;
  result.s_squared = s_squared(result, st.s);
  return result;
}

ScfResult run_rohf(const Molecule& molecule, int multiplicity, const BasisSet& basis, JkBuilder& jk,
                   const ScfOptions& options, linalg::Kernels& kernels,
                   const std::function<void(const ScfIteration&)>& on_iteration) {
  if (options.precision == ScfPrecision::mixed) {
    throw UnsupportedError("scf.precision: mixed is offered for RHF and UHF; ROHF runs in fp64");
  }
  const auto [nalpha, nbeta] = spin_occupied(molecule, multiplicity);
  const ScfStart st = start_scf(molecule, basis, nalpha, options, kernels);
  const std::string& step = step_name(ScfStep::iterations);
  const Index nbf = st.h.rows();
  ScfResult result;
  result.reference = ScfReference::rohf;
  result.nuclear_repulsion = st.nuclear_repulsion;
  Diis diis(options.diis_vectors);
  // The guess gives densities, not orbitals: the first iteration diagonalises the spin-averaged Fock matrix.
  Matrix c_alpha = spin_guess(st, options, nalpha), c_beta = spin_guess(st, options, nbeta);
  Matrix c;  // the orbitals in the orthonormal basis of X (columns of V, C = X V), once there are some
  Matrix j[2], k[2];
  double previous = 0;
  for (int it = 1; it <= options.max_iterations; ++it) {
    Stopwatch clock;
    coulomb_and_exchange(jk, c_alpha, j[0], k[0], false, 0);
    coulomb_and_exchange(jk, c_beta, j[1], k[1], false, 1);
    const Matrix coulomb = j[0] + j[1];
    const Matrix fock_alpha = st.h + coulomb - k[0], fock_beta = st.h + coulomb - k[1];
    const Matrix d_alpha = c_alpha * c_alpha.transpose(), d_beta = c_beta * c_beta.transpose();
    const double energy = st.nuclear_repulsion + 0.5 * d_alpha.cwiseProduct(st.h + fock_alpha).sum() +
                          0.5 * d_beta.cwiseProduct(st.h + fock_beta).sum();
    // The effective Fock matrix in the orthonormal basis: the spin average everywhere, except the coupling of
    // doubly to singly occupied orbitals (F beta) and of singly occupied to virtual ones (F alpha); its blocks
    // between the three spaces are the orbital gradient, zero at convergence (Roothaan's coupling; the converged
    // energy does not depend on the choice of the diagonal blocks).
    const Matrix fa = product(kernels, step, st.x, Trans::yes, product(kernels, step, fock_alpha, Trans::no, st.x, Trans::no), Trans::no);
    const Matrix fb = product(kernels, step, st.x, Trans::yes, product(kernels, step, fock_beta, Trans::no, st.x, Trans::no), Trans::no);
    Matrix effective = 0.5 * (fa + fb), error = Matrix::Zero(nbf, nbf);
    if (c.size() > 0) {
      const Matrix fa_mo = c.transpose() * fa * c, fb_mo = c.transpose() * fb * c;
      Matrix eff_mo = 0.5 * (fa_mo + fb_mo), gradient = Matrix::Zero(nbf, nbf);
      const Index ns = nalpha - nbeta, nv = nbf - nalpha;
      eff_mo.block(0, nbeta, nbeta, ns) = fb_mo.block(0, nbeta, nbeta, ns);
      eff_mo.block(nbeta, 0, ns, nbeta) = fb_mo.block(nbeta, 0, ns, nbeta);
      eff_mo.block(nbeta, nalpha, ns, nv) = fa_mo.block(nbeta, nalpha, ns, nv);
      eff_mo.block(nalpha, nbeta, nv, ns) = fa_mo.block(nalpha, nbeta, nv, ns);
      // The gradient: the blocks above the diagonal of the three spaces, antisymmetric.
      gradient.block(0, nbeta, nbeta, nbf - nbeta) = eff_mo.block(0, nbeta, nbeta, nbf - nbeta);
      gradient.block(nbeta, nalpha, ns, nv) = eff_mo.block(nbeta, nalpha, ns, nv);
      gradient -= Matrix(gradient.transpose());
      effective = c * eff_mo * c.transpose();
      error = c * gradient * c.transpose();
    }
    const double rms = std::sqrt(error.squaredNorm() / double(error.size()));
    require_finite(it, energy, rms);
    Matrix orth = c.size() > 0 ? diis.extrapolate(effective, error) : effective;
    Vector eps;
    symmetric_eigen(orth, eps, kernels, &options, step);
    c = orth;
    const Matrix c_ao = product(kernels, step, st.x, Trans::no, c, Trans::no);
    c_alpha = c_ao.leftCols(nalpha);
    c_beta = c_ao.leftCols(nbeta);

    ScfIteration line{it, energy, it == 1 ? energy : energy - previous, rms, clock.seconds(), false};
    result.history.push_back(line);
    if (on_iteration) on_iteration(line);
    previous = energy;
    if (it > 2 && std::abs(line.delta_energy) < options.e_convergence && rms < options.d_convergence) {
      result.energy = energy;
      result.iterations = it;
      result.nocc = nalpha;
      result.nocc_beta = nbeta;
      result.rohf_orbital_energies = eps;
      // ROHF-MBPT(2)'s orbitals: each spin's Fock matrix of the converged density, made semicanonical.
      Semicanonical alpha = semicanonical(c_ao, nalpha, fock_alpha);
      Semicanonical beta = semicanonical(c_ao, nbeta, fock_beta);
      result.singles_alpha = std::move(alpha.singles);
      result.singles_beta = std::move(beta.singles);
      result.mo_coefficients = std::move(alpha.c);
      result.orbital_energies = std::move(alpha.eps);
      result.mo_coefficients_beta = std::move(beta.c);
      result.orbital_energies_beta = std::move(beta.eps);
      result.s_squared = s_squared(result, st.s);
      return result;
    }
  }
  not_converged(options, result);
}

std::string reference_label(ScfReference reference) {
  std::string label = linalg::name_in(scf_reference_names(), reference);
  for (char& ch : label) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return label;
}

ScfResult run_scf(ScfReference reference, const Molecule& molecule, const BasisSet& basis, JkBuilder& jk,
                  const ScfOptions& options, linalg::Kernels& kernels,
                  const std::function<void(const ScfIteration&)>& on_iteration) {
  switch (reference) {
    case ScfReference::rhf: return run_rhf(molecule, basis, jk, options, kernels, on_iteration);
    case ScfReference::uhf: return run_uhf(molecule, molecule.multiplicity, basis, jk, options, kernels, on_iteration);
    case ScfReference::rohf: return run_rohf(molecule, molecule.multiplicity, basis, jk, options, kernels, on_iteration);
  }
  throw std::logic_error("run_scf: unknown reference");
}

DfMp2Input dfmp2_input_of(const ScfResult& scf, const linalg::Matrix* metric, const ThreeIndexSource* three_index) {
  DfMp2Input in{&scf.orbital_energies, scf.nocc, &scf.mo_coefficients, metric, three_index};
  if (scf.open_shell()) {
    in.orbital_energies_beta = &scf.orbital_energies_beta;
    in.nocc_beta = scf.nocc_beta;
    in.mo_coefficients_beta = &scf.mo_coefficients_beta;
    if (scf.reference == ScfReference::rohf) {
      in.singles_alpha = &scf.singles_alpha;
      in.singles_beta = &scf.singles_beta;
    }
  }
  return in;
}

}  // namespace dfmp2::chem
