#pragma once
// Inside the integrals room (chem/integrals/): libint2 and what its files share of it. The only header that
// includes <libint2.hpp> (about 25 s of compile time per file that includes it): integrals.cpp (libint2 glue,
// one-electron, metric and three-centre integrals), derivatives.cpp and four_centre.cpp include it, nothing else.
//
// Conventions (see chem/integrals/integrals.hpp): libint2 returns each shell set row-major over the functions of its
// shells in the order they are passed (for the two-centre and three-centre Coulomb integrals the unit shell
// contributes a dimension of 1). Shells with l < 2 are passed to libint2 as cartesian, so p functions are x, y, z
// (as in Psi4 and the .gbs convention); shells with l >= 2 are pure or cartesian as the basis says.
#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <limits>
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

#include "chem/integrals/integrals.hpp"
#include "linalg/errors.hpp"

namespace dfmp2::chem::libint_support {

using libint2::BraKet;
using libint2::Operator;

// The threads a parallel region of the integral code runs on (at least one).
inline int thread_count() { return std::max(1, omp_get_max_threads()); }

// One copy of an engine per OpenMP thread: a libint2 engine keeps its scratch and results inside, so threads cannot
// share one. Inside a parallel region each thread takes its own with mine().
class EnginePool {
 public:
  EnginePool() = default;
  explicit EnginePool(const libint2::Engine& proto, int threads = thread_count())
      : engines_(static_cast<std::size_t>(threads), proto) {}
  libint2::Engine& mine() { return engines_[static_cast<std::size_t>(omp_get_thread_num())]; }
  int size() const { return static_cast<int>(engines_.size()); }

 private:
  std::vector<libint2::Engine> engines_;
};

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

// The basis in libint2's terms (libint2 initialised on first use); std::invalid_argument for a malformed shell.
LibintBasis to_libint(const BasisSet& basis);

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

libint2::Engine make_coulomb_engine(const char* what, BraKet braket, std::size_t max_nprim, int max_l);
// An engine of first derivatives of the Coulomb integrals over `braket` (the metric's xs_xs, the four-centre xx_xx).
libint2::Engine make_coulomb_derivative_engine(const char* what, BraKet braket, std::size_t max_nprim, int max_l);
// A gradient's contributions kept per shell (so that threads may compute them in any order) summed in shell order:
// the same bits for any thread count.
linalg::Matrix sum_in_shell_order(const std::vector<linalg::Matrix>& by_shell, linalg::Index natoms);

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
linalg::Matrix one_body_matrix(const LibintBasis& b, const libint2::Engine& proto, std::size_t component = 0);

// Shell pairs (s1 >= s2) of one basis with libint2's precomputed primitive-pair data and the Schwarz factor
// sqrt(max (ab|ab)) over the functions a, b of the pair.
struct ShellPairs {
  std::vector<std::pair<int, int>> pairs;     // (s1, s2), s1 >= s2
  std::vector<libint2::ShellPair> data;       // parallel to pairs
  std::vector<double> schwarz;                // parallel to pairs
  double max_schwarz = 0;
};

double ln_engine_precision();
ShellPairs make_shell_pairs(const LibintBasis& b);

}  // namespace dfmp2::chem::libint_support
