#pragma once
// Inverse square roots of a symmetric positive (semi)definite matrix, built from backend ops so they run, and are
// timed, on any backend:
//   eigh           A = V diag(w) V^T; A^-1/2 = W W^T with W = V diag(w^-1/4) (one SYRK). Eigenvalues below
//                  `relative_threshold` x the largest are dropped (a pseudo-inverse), as Psi4's
//                  DF_FITTING_CONDITION does; the report says how many.
//   newton-schulz  the coupled iteration Y <- Y T, Z <- T Z, T = (3I - Z Y) / 2, from Y = A / s, Z = I, which
//                  converges to Y = (A/s)^1/2, Z = (A/s)^-1/2 when the spectrum of A/s lies in (0, 1]
//                  (s = the Frobenius norm of A ensures that). GEMMs only. Stops when ||I - Z Y||_F / sqrt(n)
//                  < tolerance; a NumericalError when it has not after max_iterations or when it diverges.
#include <string>

#include "linalg/kernels.hpp"

namespace dfmp2::linalg {

struct InverseSqrtReport {
  std::string method;  // "eigh" or "newton-schulz"
  Index dropped = 0;              // eigh: eigenvalues dropped
  double smallest_kept = 0;       // eigh: smallest eigenvalue kept
  double largest = 0;             // eigh: largest eigenvalue
  int iterations = 0;             // newton-schulz
  double residual = 0;            // newton-schulz: final ||I - Z Y||_F / sqrt(n)
};

struct NewtonSchulzOptions {
  double tolerance = 1e-10;  // on ||I - Z Y||_F / sqrt(n); fp32 runs floor this at 1e-4
  int max_iterations = 100;
};

inline constexpr double kDefaultEighThreshold = 1e-10;
inline constexpr int kMaxNewtonSchulzIterations = 100000;

// What is wrong with a setting, for the input reader and the Python module to prefix with the key or argument
// (empty when it is fine): the eigh threshold is relative to the largest eigenvalue, so it must lie in (0, 1) (at 1
// or above at most the largest would be kept); the Newton-Schulz tolerance is a positive finite number, its
// iterations 1 to kMaxNewtonSchulzIterations.
std::string eigh_threshold_problem(double relative_threshold);
std::string newton_schulz_problem(const NewtonSchulzOptions& options);

// On return `a` (n x n, full storage) holds A^-1/2 (both triangles).
template <class T>
InverseSqrtReport inverse_sqrt_eigh(Kernels& kernels, const std::string& step, MatrixViewT<T> a,
                                    double relative_threshold = kDefaultEighThreshold);

template <class T>
InverseSqrtReport inverse_sqrt_newton_schulz(Kernels& kernels, const std::string& step, MatrixViewT<T> a,
                                             const NewtonSchulzOptions& options = {});

}  // namespace dfmp2::linalg
