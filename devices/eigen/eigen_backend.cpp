#include "devices/eigen/eigen_backend.hpp"

#include <fmt/format.h>

#include <Eigen/Cholesky>
#include <Eigen/Core>

#include "linalg/errors.hpp"

namespace dfmp2::devices {
namespace {

using linalg::ConstMatrixView;
using linalg::Diag;
using linalg::eigen_map;
using linalg::Index;
using linalg::MatrixView;
using linalg::Side;
using linalg::Trans;
using linalg::Uplo;

// C = alpha * P + beta * C with BLAS semantics: when beta is 0, C is not read (it may hold NaN); when alpha is
// 0, the operands of P are not read.
template <class Product>
void update(MatrixView c, double alpha, const Product& product, double beta) {
  auto cm = eigen_map(c);
  if (alpha == 0.0) {
    if (beta == 0.0) cm.setZero();
    else if (beta != 1.0) cm *= beta;
    return;
  }
  if (beta == 0.0) {
    cm.noalias() = alpha * product;
  } else {
    if (beta != 1.0) cm *= beta;
    cm.noalias() += alpha * product;
  }
}

void gemm_one(Trans ta, Trans tb, double alpha, ConstMatrixView a, ConstMatrixView b, double beta, MatrixView c) {
  const auto am = eigen_map(a);
  const auto bm = eigen_map(b);
  if (ta == Trans::no && tb == Trans::no) update(c, alpha, am * bm, beta);
  if (ta == Trans::yes && tb == Trans::no) update(c, alpha, am.transpose() * bm, beta);
  if (ta == Trans::no && tb == Trans::yes) update(c, alpha, am * bm.transpose(), beta);
  if (ta == Trans::yes && tb == Trans::yes) update(c, alpha, am.transpose() * bm.transpose(), beta);
}

template <int Mode>
void scale_triangle(MatrixView c, double beta) {
  auto tri = eigen_map(c).triangularView<Mode>();
  if (beta == 0.0) {
    tri.setZero();
  } else if (beta != 1.0) {
    tri *= beta;
  }
}


class EigenBackend final : public linalg::Backend {
 public:
  std::string name() const override { return "eigen"; }
  std::string details() const override {
    return fmt::format("Eigen {}.{}.{}; {}; {} threads", EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION,
                       Eigen::SimdInstructionSetsInUse(), Eigen::nbThreads());
  }
  bool supports(linalg::Op) const override { return true; }
  void set_threads(int threads) override {
    if (threads > 0) Eigen::setNbThreads(threads);
  }

  void gemm(Trans ta, Trans tb, double alpha, ConstMatrixView a, ConstMatrixView b, double beta,
            MatrixView c) override {
    gemm_one(ta, tb, alpha, a, b, beta, c);
  }

  void gemm_batched(Trans ta, Trans tb, Index count, const linalg::BatchStrides& s, double alpha,
                    ConstMatrixView a, ConstMatrixView b, double beta, MatrixView c) override {
    for (Index i = 0; i < count; ++i) {
      ConstMatrixView ai{a.data + i * s.a, a.rows, a.cols, a.ld};
      ConstMatrixView bi{b.data + i * s.b, b.rows, b.cols, b.ld};
      MatrixView ci{c.data + i * s.c, c.rows, c.cols, c.ld};
      gemm_one(ta, tb, alpha, ai, bi, beta, ci);
    }
  }

  void syrk(Uplo uplo, Trans trans, double alpha, ConstMatrixView a, double beta, MatrixView c) override {
    const auto am = eigen_map(a);
    auto cm = eigen_map(c);
    if (alpha == 0.0) {  // BLAS: A is not read
      if (uplo == Uplo::lower) scale_triangle<Eigen::Lower>(c, beta);
      else scale_triangle<Eigen::Upper>(c, beta);
      return;
    }
    if (uplo == Uplo::lower) {
      scale_triangle<Eigen::Lower>(c, beta);
      if (trans == Trans::no) cm.selfadjointView<Eigen::Lower>().rankUpdate(am, alpha);
      else cm.selfadjointView<Eigen::Lower>().rankUpdate(am.transpose(), alpha);
    } else {
      scale_triangle<Eigen::Upper>(c, beta);
      if (trans == Trans::no) cm.selfadjointView<Eigen::Upper>().rankUpdate(am, alpha);
      else cm.selfadjointView<Eigen::Upper>().rankUpdate(am.transpose(), alpha);
    }
  }

  void trsm(Side side, Uplo uplo, Trans trans, Diag diag, double alpha, ConstMatrixView a,
            MatrixView b) override {
    auto bm = eigen_map(b);
    if (alpha == 0.0) {  // BLAS: X = 0, and neither A nor B is read
      bm.setZero();
      return;
    }
    if (alpha != 1.0) bm *= alpha;
    const auto am = eigen_map(a);
    // op(A) is lower when A is lower and not transposed, or upper and transposed.
    const bool op_lower = (uplo == Uplo::lower) == (trans == Trans::no);
    const bool unit = diag == Diag::unit;
    auto solve = [&](const auto& opa) {
      if (op_lower && !unit) dispatch(opa.template triangularView<Eigen::Lower>(), side, bm);
      if (op_lower && unit) dispatch(opa.template triangularView<Eigen::UnitLower>(), side, bm);
      if (!op_lower && !unit) dispatch(opa.template triangularView<Eigen::Upper>(), side, bm);
      if (!op_lower && unit) dispatch(opa.template triangularView<Eigen::UnitUpper>(), side, bm);
    };
    if (trans == Trans::no) solve(am);
    else solve(am.transpose());
  }

  void cholesky(Uplo uplo, MatrixView a) override {
    using Ref = Eigen::Ref<Eigen::MatrixXd, 0, Eigen::OuterStride<>>;
    auto am = eigen_map(a);
    Ref ref(am);
    bool ok = true;
    if (uplo == Uplo::lower) {
      Eigen::LLT<Ref, Eigen::Lower> llt(ref);  // factorises in place
      ok = llt.info() == Eigen::Success;
    } else {
      Eigen::LLT<Ref, Eigen::Upper> llt(ref);
      ok = llt.info() == Eigen::Success;
    }
    if (!ok) throw NumericalError("matrix is not positive definite (Eigen LLT failed)");
  }

 private:
  template <class Tri, class B>
  static void dispatch(const Tri& tri, Side side, B& b) {
    if (side == Side::left) tri.solveInPlace(b);
    else tri.template solveInPlace<Eigen::OnTheRight>(b);
  }
};

}  // namespace

std::unique_ptr<linalg::Backend> make_eigen_backend() { return std::make_unique<EigenBackend>(); }

}  // namespace dfmp2::devices
