#pragma once
// Inside the SCF room (chem/scf/): what its files share. The iterations (scf.cpp), the guess (guess.cpp), the
// orbitals' linear algebra (orbitals.cpp) and the J/K builders (exact_jk.cpp, df_jk.cpp, df_jk_plan.cpp). Not
// included outside chem/scf/.
#include <Eigen/Dense>
#include <deque>
#include <string>
#include <vector>

#include "chem/integrals/integrals.hpp"
#include "chem/scf/scf.hpp"
#include "linalg/kernels.hpp"

namespace dfmp2::chem::scf_detail {

using linalg::Index;
using linalg::Matrix;
using linalg::Stopwatch;
using linalg::Trans;
using linalg::Vector;

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
  void use_kernels(linalg::Kernels& kernels) override { kernels_ = &kernels; }
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

struct Orbitals {
  Matrix c;
  Vector eps;
};

// The eigenvalues and eigenvectors (in place) of the symmetric `a`: the backend's eigh on every rank, or on the
// ranks' grid when `options` gives one and the order reaches its limit (the vectors gathered, so every rank has the
// same bits either way).
void symmetric_eigen(Matrix& a, Vector& eps, linalg::Kernels& kernels, const ScfOptions* options,
                     const std::string& step);
// Symmetric orthogonaliser X = S^-1/2 (its eigenproblem on the ranks' grid when `options` gives one and the order
// reaches its limit).
Matrix orthogonaliser(const Matrix& s, linalg::Kernels* kernels = nullptr, const ScfOptions* options = nullptr);
using linalg::product;  // op(A) op(B) through the backend, in the kernel table
// The orbital gradient DIIS extrapolates with: X^T (F D S - S D F) X, in the orthonormal basis.
Matrix orbital_gradient(const Matrix& fock, const Matrix& d, const Matrix& s, const Matrix& x, linalg::Kernels& kernels,
                        const ScfOptions& options);
// The orbitals of `fock` (AO) in the orthonormal basis of X: C = X C', F' C' = C' eps with F' = X^T F X.
Orbitals diagonalise(const Matrix& fock, const Matrix& x, linalg::Kernels& kernels,
                     const ScfOptions* options = nullptr);
// Superposition of atomic densities, as a factor c with D = c c^T (one block of columns per atom).
Matrix sad_guess(const Molecule& molecule, const BasisSet& basis, linalg::Kernels& kernels);

}  // namespace dfmp2::chem::scf_detail
