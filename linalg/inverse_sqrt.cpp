#include "linalg/inverse_sqrt.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "linalg/errors.hpp"

namespace dfmp2::linalg {

std::string eigh_threshold_problem(double relative_threshold) {
  if (!std::isfinite(relative_threshold) || relative_threshold <= 0) {
    return fmt::format("expected a positive number below 1, such as 1e-10, got {}", relative_threshold);
  }
  if (relative_threshold >= 1) {
    return fmt::format("{} would drop every eigenvalue of the metric (it is relative to the largest); expected a "
                       "number below 1, such as 1e-10",
                       relative_threshold);
  }
  return {};
}

std::string newton_schulz_problem(const NewtonSchulzOptions& options) {
  if (!std::isfinite(options.tolerance) || options.tolerance <= 0) {
    return fmt::format("tolerance: expected a positive number, got {}", options.tolerance);
  }
  if (options.max_iterations < 1 || options.max_iterations > kMaxNewtonSchulzIterations) {
    return fmt::format("max_iterations: expected a count from 1 to {}, got {}", kMaxNewtonSchulzIterations,
                       options.max_iterations);
  }
  return {};
}

template <class T>
InverseSqrtReport inverse_sqrt_eigh(Kernels& kernels, const std::string& step, MatrixViewT<T> a,
                                    double relative_threshold) {
  InverseSqrtReport report;
  report.method = "eigh";
  const Index n = a.rows;
  if (n == 0) return report;
  VectorT<T> w(n);
  kernels.eigh(step, a, w.data());

  Stopwatch scale_clock;
  report.largest = double(w[n - 1]);
  if (!(report.largest > 0)) {
    throw NumericalError(fmt::format("inverse square root: largest eigenvalue {:.3e} is not positive", report.largest));
  }
  const double cutoff = relative_threshold * report.largest;
  MatrixT<T> scaled(n, n);  // W = V diag(w^-1/4), dropped columns zero
  report.smallest_kept = report.largest;
  for (Index k = 0; k < n; ++k) {
    const double value = double(w[k]);
    if (value < cutoff) {
      scaled.col(k).setZero();
      ++report.dropped;
      continue;
    }
    report.smallest_kept = std::min(report.smallest_kept, value);
    const T factor = T(std::pow(value, -0.25));
    for (Index i = 0; i < n; ++i) scaled(i, k) = a(i, k) * factor;
  }
  kernels.record_host(step, "eigh_scale", scale_clock.seconds(), {double(n) * double(n), 2.0 * sizeof(T) * n * n},
                      std::string(dtype_name(dtype_of<T>())));
  if (report.dropped == n) {  // the inverse square root would be zero, and so would every energy after it
    throw NumericalError(fmt::format("inverse square root: the threshold {:.3e} x the largest eigenvalue {:.3e} drops "
                                     "all {} eigenvalues",
                                     relative_threshold, report.largest, n));
  }

  kernels.syrk(step, Uplo::lower, Trans::no, T(1), view(scaled), T(0), a);
  for (Index j = 0; j < n; ++j)
    for (Index i = 0; i < j; ++i) a(i, j) = a(j, i);  // mirror the lower triangle
  return report;
}

template <class T>
InverseSqrtReport inverse_sqrt_newton_schulz(Kernels& kernels, const std::string& step, MatrixViewT<T> a,
                                             const NewtonSchulzOptions& options) {
  InverseSqrtReport report;
  report.method = "newton-schulz";
  const Index n = a.rows;
  if (n == 0) return report;
  // fp32 cannot reach residuals much below its epsilon times a factor that grows with the condition number: at
  // condition 1e5 the residual stalls between 1e-5 and 2e-5 (measured with the
  // former bench_ops; now `dfmp2 bench --ops invsqrt_ns --condition 1e5`), so 1e-4 is the floor.
  const double tolerance =
      std::max(options.tolerance, std::is_same_v<T, float> ? 1e-4 : 0.0);

  double frobenius = 0;
  for (Index j = 0; j < n; ++j)
    for (Index i = 0; i < n; ++i) frobenius += double(a(i, j)) * double(a(i, j));
  frobenius = std::sqrt(frobenius);
  if (!(frobenius > 0) || !std::isfinite(frobenius)) {
    throw NumericalError("Newton-Schulz inverse square root: the matrix is zero or not finite");
  }

  MatrixT<T> y(n, n), z = MatrixT<T>::Identity(n, n), t(n, n), next(n, n);
  for (Index j = 0; j < n; ++j)
    for (Index i = 0; i < n; ++i) y(i, j) = T(double(a(i, j)) / frobenius);

  double residual = std::numeric_limits<double>::infinity();
  double previous = residual;
  for (int it = 1; it <= options.max_iterations; ++it) {
    kernels.gemm(step, Trans::no, Trans::no, T(1), view(z), view(y), T(0), view(t));  // t = Z Y
    double sum = 0;
    for (Index j = 0; j < n; ++j) {
      for (Index i = 0; i < n; ++i) {
        const double e = (i == j ? 1.0 : 0.0) - double(t(i, j));
        sum += e * e;
        t(i, j) = T(0.5 * ((i == j ? 3.0 : 0.0) - double(t(i, j))));  // t = (3I - Z Y) / 2
      }
    }
    residual = std::sqrt(sum / double(n));
    report.iterations = it;
    report.residual = residual;
    if (!std::isfinite(residual) || (it > 5 && residual > 10.0 * previous && residual > 1.0)) {
      throw NumericalError(fmt::format(
          "Newton-Schulz inverse square root diverged at iteration {} (residual {:.3e}); use metric: eigh", it,
          residual));
    }
    if (residual < tolerance) break;
    previous = residual;
    kernels.gemm(step, Trans::no, Trans::no, T(1), view(y), view(t), T(0), view(next));  // Y T
    y.swap(next);
    kernels.gemm(step, Trans::no, Trans::no, T(1), view(t), view(z), T(0), view(next));  // T Z
    z.swap(next);
  }
  if (!(residual < tolerance)) {
    throw NumericalError(fmt::format(
        "Newton-Schulz inverse square root did not converge in {} iterations (residual {:.3e}, tolerance {:.1e}); "
        "raise max_iterations or the tolerance, or use metric: eigh",
        options.max_iterations, residual, tolerance));
  }
  // The last T was computed from converged Z, Y; Z itself is the answer: A^-1/2 = Z / sqrt(s).
  const double scale = 1.0 / std::sqrt(frobenius);
  for (Index j = 0; j < n; ++j)
    for (Index i = 0; i < n; ++i) a(i, j) = T(double(z(i, j)) * scale);
  return report;
}

template InverseSqrtReport inverse_sqrt_eigh<double>(Kernels&, const std::string&, MatrixViewT<double>, double);
template InverseSqrtReport inverse_sqrt_eigh<float>(Kernels&, const std::string&, MatrixViewT<float>, double);
template InverseSqrtReport inverse_sqrt_newton_schulz<double>(Kernels&, const std::string&, MatrixViewT<double>,
                                                              const NewtonSchulzOptions&);
template InverseSqrtReport inverse_sqrt_newton_schulz<float>(Kernels&, const std::string&, MatrixViewT<float>,
                                                             const NewtonSchulzOptions&);

}  // namespace dfmp2::linalg
