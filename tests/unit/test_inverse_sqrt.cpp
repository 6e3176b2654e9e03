// Inverse square roots against analytic references: matrices built with known eigenvalues, on every backend.
#include <gtest/gtest.h>

#include <cmath>

#include "devices/registry.hpp"
#include "../support/test_support.hpp"
#include "linalg/errors.hpp"
#include "linalg/inverse_sqrt.hpp"

namespace {

using dfmp2::linalg::Index;
using dfmp2::linalg::MatrixT;
using dfmp2::linalg::VectorT;

// Q diag(w) Q^T with Q = I - 2 v v^T / (v^T v) (a Householder reflection: orthogonal, known in closed form).
template <class T>
MatrixT<T> with_eigenvalues(const VectorT<double>& w) {
  const Index n = w.size();
  VectorT<double> v(n);
  for (Index i = 0; i < n; ++i) v[i] = 1.0 + 0.37 * double(i) - 0.01 * double(i * i);
  const MatrixT<double> q = MatrixT<double>::Identity(n, n) - 2.0 * v * v.transpose() / v.squaredNorm();
  return (q * w.asDiagonal() * q.transpose()).cast<T>();
}

template <class T>
MatrixT<double> inverse_sqrt_reference(const VectorT<double>& w, double cutoff) {
  VectorT<double> s(w.size());
  for (Index i = 0; i < w.size(); ++i) s[i] = w[i] < cutoff ? 0.0 : 1.0 / std::sqrt(w[i]);
  return with_eigenvalues<double>(s);
}

class InverseSqrt : public ::testing::TestWithParam<std::string> {};

TEST_P(InverseSqrt, EighAndNewtonSchulzMatchTheClosedForm) {
  auto backend = dfmp2::devices::make_backend(GetParam());
  dfmp2::linalg::KernelLog log;
  dfmp2::linalg::Kernels kernels(*backend, log);
  const Index n = 37;
  VectorT<double> w(n);
  for (Index i = 0; i < n; ++i) w[i] = std::pow(10.0, -4.0 + 6.0 * double(i) / double(n - 1));  // cond 1e6
  const MatrixT<double> expected = inverse_sqrt_reference<double>(w, 0.0);

  MatrixT<double> a = with_eigenvalues<double>(w);
  const auto eigh = dfmp2::linalg::inverse_sqrt_eigh(kernels, "t", dfmp2::linalg::view(a));
  EXPECT_EQ(eigh.dropped, 0);
  EXPECT_NEAR(eigh.largest, 100.0, 1e-9);
  EXPECT_LT((a - expected).norm() / expected.norm(), 1e-10);

  MatrixT<double> b = with_eigenvalues<double>(w);
  const auto ns = dfmp2::linalg::inverse_sqrt_newton_schulz(kernels, "t", dfmp2::linalg::view(b));
  EXPECT_LT(ns.residual, 1e-10);
  EXPECT_GT(ns.iterations, 5);
  EXPECT_LT((b - expected).norm() / expected.norm(), 1e-8);

  // fp32: the same to single-precision accuracy (condition 1e3 here).
  VectorT<double> w32(n);
  for (Index i = 0; i < n; ++i) w32[i] = std::pow(10.0, -1.0 + 3.0 * double(i) / double(n - 1));
  const MatrixT<double> expected32 = inverse_sqrt_reference<double>(w32, 0.0);
  MatrixT<float> c = with_eigenvalues<float>(w32);
  dfmp2::linalg::inverse_sqrt_eigh(kernels, "t", dfmp2::linalg::view(c));
  EXPECT_LT((c.cast<double>() - expected32).norm() / expected32.norm(), 1e-4);
  MatrixT<float> d = with_eigenvalues<float>(w32);
  const auto ns32 = dfmp2::linalg::inverse_sqrt_newton_schulz(kernels, "t", dfmp2::linalg::view(d));
  EXPECT_LT(ns32.residual, 1e-4);
  EXPECT_LT((d.cast<double>() - expected32).norm() / expected32.norm(), 1e-4);

  // Every kernel ran on this backend and was logged.
  bool saw_eigh = false, saw_syrk = false, saw_gemm = false;
  for (const auto& r : log.records()) {
    saw_eigh |= r.kernel == "eigh" && r.backend == GetParam();
    saw_syrk |= r.kernel == "syrk" && r.backend == GetParam();
    saw_gemm |= r.kernel == "gemm" && r.backend == GetParam();
  }
  EXPECT_TRUE(saw_eigh && saw_syrk && saw_gemm);
}

TEST_P(InverseSqrt, EighDropsSmallEigenvaluesAndSaysHowMany) {
  auto backend = dfmp2::devices::make_backend(GetParam());
  dfmp2::linalg::KernelLog log;
  dfmp2::linalg::Kernels kernels(*backend, log);
  VectorT<double> w(6);
  w << 1e-14, 1e-12, 0.5, 1.0, 2.0, 4.0;  // two below 1e-10 x 4
  MatrixT<double> a = with_eigenvalues<double>(w);
  const auto report = dfmp2::linalg::inverse_sqrt_eigh(kernels, "t", dfmp2::linalg::view(a), 1e-10);
  EXPECT_EQ(report.dropped, 2);
  EXPECT_NEAR(report.smallest_kept, 0.5, 1e-12);
  const MatrixT<double> expected = inverse_sqrt_reference<double>(w, 4e-10);
  EXPECT_LT((a - expected).norm(), 1e-9);
}

TEST_P(InverseSqrt, NewtonSchulzFailsClearlyWhenNotConverged) {
  auto backend = dfmp2::devices::make_backend(GetParam());
  dfmp2::linalg::KernelLog log;
  dfmp2::linalg::Kernels kernels(*backend, log);
  VectorT<double> w(10);
  for (Index i = 0; i < 10; ++i) w[i] = std::pow(10.0, -6.0 + double(i) * 0.7);
  MatrixT<double> a = with_eigenvalues<double>(w);
  try {
    dfmp2::linalg::inverse_sqrt_newton_schulz(kernels, "t", dfmp2::linalg::view(a), {1e-10, 4});
    FAIL() << "expected NumericalError";
  } catch (const dfmp2::NumericalError& e) {
    EXPECT_NE(std::string(e.what()).find("did not converge in 4 iterations"), std::string::npos) << e.what();
  }
  MatrixT<double> zero = MatrixT<double>::Zero(3, 3);
  EXPECT_THROW(dfmp2::linalg::inverse_sqrt_newton_schulz(kernels, "t", dfmp2::linalg::view(zero)),
               dfmp2::NumericalError);
}

INSTANTIATE_TEST_SUITE_P(Backends, InverseSqrt, ::testing::ValuesIn(dfmp2::testing::cpu_backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
