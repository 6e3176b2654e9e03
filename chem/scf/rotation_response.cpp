// The Z-vector's products from a DF J/K's fitted tensor, in the orbitals' basis (chem/scf/rotation_response.hpp).
#include "chem/scf/rotation_response.hpp"

#include <algorithm>
#include <stdexcept>

namespace dfmp2::chem {

using linalg::ConstMatrixView;
using linalg::Index;
using linalg::Matrix;
using linalg::MatrixView;
using linalg::Trans;

namespace {
// Fitting functions whose half-transformed B_Q are held at once in a pass: the pass's work stays small beside the
// kept products (nbf nv kChunk doubles), and a batch of this many is already as fast per flop as a larger one.
constexpr Index kChunk = 16;
// Fitting functions per chunk of unrelaxed_response's p_vv terms: its three nv x no x chunk buffers stay within a
// third of an iteration's own work (nv no naux).
Index response_chunk(Index naux) { return std::clamp<Index>(naux / 3, 1, 64); }

// Blocks of `width` columns side by side (one per fitting function), one under the other instead: then a sum over
// the fitting functions of b^Q X_Q, with the b^Q side by side, is one GEMM.
Matrix restacked(const Matrix& side, Index width) {
  const Index rows = side.rows(), count = side.cols() / width;
  Matrix out(rows * count, width);
  for (Index p = 0; p < count; ++p) out.middleRows(p * rows, rows) = side.middleCols(p * width, width);
  return out;
}
}  // namespace

const char* rotation_products_name(RotationProducts kept) {
  switch (kept) {
    case RotationProducts::none: return "none";
    case RotationProducts::occupied: return "occupied";
    case RotationProducts::mo: return "mo";
  }
  return "?";
}

double rotation_products_bytes(RotationProducts kept, Index nbf, Index nocc, Index nvir, Index naux) {
  if (kept == RotationProducts::none) return 0.0;
  const double no = double(nocc), nv = double(nvir), n = double(naux), chunk = double(std::min(kChunk, naux));
  const double occupied = n * (no * no + nv * no);
  const double pass = chunk * double(nbf) * std::max(nv, no + nv * no / double(nbf) + no);
  // Beside the pass's work, an iteration's (and the occupied response's) no x (no naux) products side by side and
  // restacked.
  const double restacked = 2.0 * n * no * no;
  if (kept == RotationProducts::occupied) return 8.0 * (occupied + pass + restacked);
  // b_vv and b_oo reordered beside them; while an iteration runs, b_vv^Q z for every Q (nv no naux); the unrelaxed
  // response's chunk buffers after its restacked products.
  const double response = 3.0 * nv * no * double(response_chunk(naux));
  return 8.0 * (occupied + n * (nv * nv + no * no) + std::max(pass, n * nv * no) + std::max(restacked, response));
}

RotationResponse::RotationResponse(RotationProducts kept, const Matrix& c_vir, const Matrix& c_occ, Index naux,
                                   linalg::Kernels& kernels, std::string step)
    : kept_(kept), c_vir_(c_vir), c_occ_(c_occ), nbf_(c_occ.rows()), no_(c_occ.cols()), nv_(c_vir.cols()),
      naux_(naux), kernels_(kernels), step_(std::move(step)) {
  if (kept_ == RotationProducts::none) throw std::logic_error("RotationResponse: nothing to keep");
  oo_.assign(static_cast<std::size_t>(naux_ * no_ * no_), 0.0);
  vo_.assign(static_cast<std::size_t>(naux_ * nv_ * no_), 0.0);
  if (kept_ == RotationProducts::mo) vv_.assign(static_cast<std::size_t>(naux_ * nv_ * nv_), 0.0);
}

void RotationResponse::pass_block(const double* squares, Index q, Index first, bool making, const Matrix* l,
                                  Matrix* k1) {
  const Index square = nbf_ * nbf_;
  for (Index c0 = 0; c0 < q; c0 += kChunk) {
    const Index qc = std::min(kChunk, q - c0), p0 = first + c0;
    // B_Q C for every Q of the chunk in one GEMM: the B_Q are symmetric, so side by side and transposed they are the
    // B_Q one under the other, and the product is (nbf qc) x ncol, row Q nbf + m. Then C'^T (B_Q C) for each Q,
    // batched over those rows, side by side.
    const ConstMatrixView side{squares + c0 * square, nbf_, nbf_ * qc, nbf_};
    auto stacked = [&](const Matrix& c, double* out) {
      kernels_.gemm<double>(step_, Trans::yes, Trans::no, 1.0, side, linalg::view(c), 0.0,
                            MatrixView{out, nbf_ * qc, c.cols(), nbf_ * qc});
    };
    auto project = [&](const Matrix& left, const double* rows, Index ncol, double* out) {
      kernels_.gemm_batched<double>(step_, Trans::yes, Trans::no, qc, {0, nbf_, left.cols() * ncol}, 1.0,
                                    linalg::view(left), ConstMatrixView{rows, nbf_, ncol, nbf_ * qc}, 0.0,
                                    MatrixView{out, left.cols(), ncol, left.cols()});
    };
    if (making) {
      work_.resize(static_cast<std::size_t>(nbf_ * std::max(nv_, no_) * qc));
      stacked(c_occ_, work_.data());
      project(c_occ_, work_.data(), no_, oo_.data() + p0 * no_ * no_);
      project(c_vir_, work_.data(), no_, vo_.data() + p0 * nv_ * no_);
      if (kept_ == RotationProducts::mo) {
        stacked(c_vir_, work_.data());
        project(c_vir_, work_.data(), nv_, vv_.data() + p0 * nv_ * nv_);
      }
    }
    if (l != nullptr) {
      // B_Q L stacked, (nbf qc) x no, is read as nbf x (qc no) with column Q + qc j; with the chunk's b_oo^Q(j, i)
      // at row Q + qc j, sum_Q (B_Q L) b_oo^Q is one GEMM, added to `k1` in the AO basis (C_v^T once at the end).
      work_.resize(static_cast<std::size_t>((nbf_ + no_) * no_ * qc));
      double* oo = work_.data() + nbf_ * no_ * qc;
      stacked(*l, work_.data());
      for (Index i = 0; i < no_; ++i)
        for (Index j = 0; j < no_; ++j)
          for (Index p = 0; p < qc; ++p)
            oo[(p + qc * j) + qc * no_ * i] = oo_[static_cast<std::size_t>(((p0 + p) * no_ + i) * no_ + j)];
      kernels_.gemm<double>(step_, Trans::no, Trans::no, 1.0, ConstMatrixView{work_.data(), nbf_, qc * no_, nbf_},
                            ConstMatrixView{oo, qc * no_, no_, qc * no_}, 1.0, linalg::view(*k1));
    }
  }
}

Matrix RotationResponse::diagonal(double coulomb) const {
  // (A rank without fitting functions has made nothing and gives zeros, as its share of each product.)
  if (kept_ != RotationProducts::mo || !(made_ || naux_ == 0)) return Matrix();
  Matrix d = Matrix::Zero(nv_, no_);
#pragma omp parallel for
  for (Index i = 0; i < no_; ++i)
    for (Index q = 0; q < naux_; ++q) {
      const double* ai = vo_.data() + (q * no_ + i) * nv_;
      const double* vv = vv_.data() + q * nv_ * nv_;
      const double ii = oo_[static_cast<std::size_t>((q * no_ + i) * no_ + i)];
      for (Index a = 0; a < nv_; ++a) d(a, i) += coulomb * ai[a] * ai[a] - vv[a * nv_ + a] * ii;
    }
  return d;
}

Matrix RotationResponse::occupied_response(const Matrix& r_vo, const Matrix& r_oo) {
  Matrix out = Matrix::Zero(no_, no_);
  if (naux_ == 0) return out;
  if (!made_) throw std::logic_error("RotationResponse::occupied_response before the products are made");
  const ConstMatrixView vo_flat{vo_.data(), nv_ * no_, naux_, nv_ * no_}, oo_flat{oo_.data(), no_ * no_, naux_, no_ * no_};
  const ConstMatrixView vo_side{vo_.data(), nv_, no_ * naux_, nv_}, oo_side{oo_.data(), no_, no_ * naux_, no_};
  // J: d = 2 vo_flat^T r_vo + oo_flat^T r_oo, then 4 sum_Q d_Q b^Q_oo.
  Matrix d(naux_, 1);
  kernels_.gemm<double>(step_, Trans::yes, Trans::no, 2.0, vo_flat, ConstMatrixView{r_vo.data(), nv_ * no_, 1, nv_ * no_},
                        0.0, linalg::view(d));
  kernels_.gemm<double>(step_, Trans::yes, Trans::no, 1.0, oo_flat, ConstMatrixView{r_oo.data(), no_ * no_, 1, no_ * no_},
                        1.0, linalg::view(d));
  kernels_.gemm<double>(step_, Trans::no, Trans::no, 4.0, oo_flat, linalg::view(d), 0.0,
                        MatrixView{out.data(), no_ * no_, 1, no_ * no_});
  // K: with a side-by-side product X_Q (no x no each) restacked one under the other, sum_Q b^Q_oo X_Q is one GEMM.
  Matrix side(no_, no_ * naux_), k = Matrix::Zero(no_, no_);
  auto add_oo_times = [&](double alpha) {
    kernels_.gemm<double>(step_, Trans::no, Trans::no, alpha, oo_side, linalg::view(restacked(side, no_)), 1.0,
                          linalg::view(k));
  };
  kernels_.gemm<double>(step_, Trans::yes, Trans::no, 1.0, linalg::view(r_vo), vo_side, 0.0, linalg::view(side));
  add_oo_times(1.0);  // sum_Q b_oo U_Q
  k = (k + k.transpose()).eval();
  kernels_.gemm<double>(step_, Trans::no, Trans::no, 1.0, linalg::view(r_oo), oo_side, 0.0, linalg::view(side));
  add_oo_times(1.0);  // sum_Q b_oo r_oo b_oo
  out -= 2.0 * k;
  return out;
}

void RotationResponse::pass(const Squares& squares, const Matrix* l, Matrix* k1_ao) {
  Index first = 0;  // the block's first fitting function among this rank's
  squares([&](const double* block, Index q) {
    pass_block(block, q, first, !made_, l, k1_ao);
    first += q;
  });
  if (first != naux_) throw std::logic_error("RotationResponse: a pass over another number of fitting functions");
  if (!made_ && kept_ == RotationProducts::mo) {
    oo_by_q_.resize(naux_ * no_, no_);
    for (Index p = 0; p < naux_; ++p)
      for (Index i = 0; i < no_; ++i)
        for (Index j = 0; j < no_; ++j)
          oo_by_q_(p + naux_ * j, i) = oo_[static_cast<std::size_t>((p * no_ + i) * no_ + j)];
  }
  made_ = true;
}

void RotationResponse::make(const Squares& squares) {
  if (!made_ && naux_ > 0) pass(squares, nullptr, nullptr);
}

Matrix RotationResponse::unrelaxed_response(const Matrix& p_oo, const Matrix& p_vv) {
  Matrix out = Matrix::Zero(no_ + nv_, no_);
  if (naux_ == 0) return out;
  if (!made_ || kept_ != RotationProducts::mo)
    throw std::logic_error("RotationResponse::unrelaxed_response without the products b_vv among them");
  const ConstMatrixView oo_flat{oo_.data(), no_ * no_, naux_, no_ * no_}, vo_flat{vo_.data(), nv_ * no_, naux_, nv_ * no_};
  const ConstMatrixView oo_side{oo_.data(), no_, no_ * naux_, no_}, vo_side{vo_.data(), nv_, no_ * naux_, nv_};
  // J: d_Q = b^Q_oo . p_oo + b^Q_vv . p_vv, then 4 sum_Q d_Q b^Q_oo and 4 sum_Q d_Q b^Q_vo.
  Matrix d(naux_, 1), j_oo(no_, no_), j_vo(nv_, no_);
  kernels_.gemm<double>(step_, Trans::yes, Trans::no, 1.0, oo_flat,
                        ConstMatrixView{p_oo.data(), no_ * no_, 1, no_ * no_}, 0.0, linalg::view(d));
  kernels_.gemm<double>(step_, Trans::yes, Trans::no, 1.0, ConstMatrixView{vv_.data(), nv_ * nv_, naux_, nv_ * nv_},
                        ConstMatrixView{p_vv.data(), nv_ * nv_, 1, nv_ * nv_}, 1.0, linalg::view(d));
  kernels_.gemm<double>(step_, Trans::no, Trans::no, 4.0, oo_flat, linalg::view(d), 0.0,
                        MatrixView{j_oo.data(), no_ * no_, 1, no_ * no_});
  kernels_.gemm<double>(step_, Trans::no, Trans::no, 4.0, vo_flat, linalg::view(d), 0.0,
                        MatrixView{j_vo.data(), nv_ * no_, 1, nv_ * no_});
  // K's p_oo terms: W_Q = p_oo b^Q_oo side by side, restacked one under the other: sum_Q b^Q_oo W_Q, b^Q_vo W_Q.
  Matrix k_oo(no_, no_), k_vo(nv_, no_);
  {
    Matrix side(no_, no_ * naux_);
    kernels_.gemm<double>(step_, Trans::no, Trans::no, 1.0, linalg::view(p_oo), oo_side, 0.0, linalg::view(side));
    const Matrix stacked = restacked(side, no_);
    kernels_.gemm<double>(step_, Trans::no, Trans::no, 1.0, oo_side, linalg::view(stacked), 0.0, linalg::view(k_oo));
    kernels_.gemm<double>(step_, Trans::no, Trans::no, 1.0, vo_side, linalg::view(stacked), 0.0, linalg::view(k_vo));
  }
  // K's p_vv terms, a chunk of fitting functions at a time (rotation_products_bytes counts its buffers):
  // Y_Q = p_vv b^Q_vo, then sum_Q b^Q_vv Y_Q and sum_Q b^Q_vo^T Y_Q with Y and b_vo restacked one under the other.
  const Index chunk = response_chunk(naux_);
  Matrix y(nv_, no_ * chunk), y_stacked(nv_ * chunk, no_), vo_stacked(nv_ * chunk, no_);
  for (Index q0 = 0; q0 < naux_; q0 += chunk) {
    const Index qc = std::min(chunk, naux_ - q0);
    const double* vo_q0 = vo_.data() + q0 * nv_ * no_;
    kernels_.gemm<double>(step_, Trans::no, Trans::no, 1.0, linalg::view(p_vv), ConstMatrixView{vo_q0, nv_, no_ * qc, nv_},
                          0.0, MatrixView{y.data(), nv_, no_ * qc, nv_});
    for (Index p = 0; p < qc; ++p) {
      y_stacked.middleRows(p * nv_, nv_) = y.middleCols(p * no_, no_);
      vo_stacked.middleRows(p * nv_, nv_) = Eigen::Map<const Matrix>(vo_q0 + p * nv_ * no_, nv_, no_);
    }
    const ConstMatrixView ys{y_stacked.data(), nv_ * qc, no_, nv_ * chunk};
    kernels_.gemm<double>(step_, Trans::no, Trans::no, 1.0, ConstMatrixView{vv_.data() + q0 * nv_ * nv_, nv_, nv_ * qc, nv_},
                          ys, 1.0, linalg::view(k_vo));
    kernels_.gemm<double>(step_, Trans::yes, Trans::no, 1.0, ConstMatrixView{vo_stacked.data(), nv_ * qc, no_, nv_ * chunk},
                          ys, 1.0, linalg::view(k_oo));
  }
  out.topRows(no_) = j_oo - 2.0 * k_oo;
  out.bottomRows(nv_) = j_vo - 2.0 * k_vo;
  return out;
}

Matrix RotationResponse::apply(const Matrix& z, const Squares& squares) {
  Matrix out = Matrix::Zero(nv_, no_), k1 = Matrix::Zero(nv_, no_);
  if (naux_ == 0) return out;
  const bool occupied = kept_ == RotationProducts::occupied;
  if (!made_ || occupied) {
    const Matrix l = occupied ? linalg::product(kernels_, step_, c_vir_, Trans::no, z, Trans::no) : Matrix();
    Matrix k1_ao = occupied ? Matrix::Zero(nbf_, no_) : Matrix();
    pass(squares, occupied ? &l : nullptr, &k1_ao);
    if (occupied) k1 = linalg::product(kernels_, step_, c_vir_, Trans::yes, k1_ao, Trans::no);
  }
  if (kept_ == RotationProducts::mo) {
    // A_Q = b_vv^Q z for every Q in one GEMM: the b_vv^Q are symmetric, so side by side and transposed they are
    // stacked, and A is (nv naux) x no, which read as nv x (naux no) has column Q + naux j. Then
    // sum_Q A_Q b_oo^Q = A oo_by_q, oo_by_q((Q + naux j), i) = b_oo^Q(j, i).
    work_.resize(static_cast<std::size_t>(nv_ * no_ * naux_));
    kernels_.gemm<double>(step_, Trans::yes, Trans::no, 1.0, ConstMatrixView{vv_.data(), nv_, nv_ * naux_, nv_},
                          linalg::view(z), 0.0, MatrixView{work_.data(), nv_ * naux_, no_, nv_ * naux_});
    kernels_.gemm<double>(step_, Trans::no, Trans::no, 1.0, ConstMatrixView{work_.data(), nv_, naux_ * no_, nv_},
                          linalg::view(oo_by_q_), 0.0, linalg::view(k1));
  }
  // J: d_Q = b^Q_vo . z, then 4 sum_Q d_Q b^Q_vo (the b_vo side by side are an (nv no) x naux matrix).
  const ConstMatrixView vo_flat{vo_.data(), nv_ * no_, naux_, nv_ * no_};
  Matrix d(naux_, 1);
  kernels_.gemm<double>(step_, Trans::yes, Trans::no, 1.0, vo_flat, ConstMatrixView{z.data(), nv_ * no_, 1, nv_ * no_},
                        0.0, linalg::view(d));
  kernels_.gemm<double>(step_, Trans::no, Trans::no, 4.0, vo_flat, linalg::view(d), 0.0,
                        MatrixView{out.data(), nv_ * no_, 1, nv_ * no_});
  // K's second half: V_Q = z^T b^Q_vo side by side, restacked one under the other, then sum_Q b^Q_vo V_Q.
  Matrix v_side(no_, no_ * naux_);
  kernels_.gemm<double>(step_, Trans::yes, Trans::no, 1.0, linalg::view(z),
                        ConstMatrixView{vo_.data(), nv_, no_ * naux_, nv_}, 0.0, linalg::view(v_side));
  kernels_.gemm<double>(step_, Trans::no, Trans::no, -1.0, ConstMatrixView{vo_.data(), nv_, no_ * naux_, nv_},
                        linalg::view(restacked(v_side, no_)), 1.0, linalg::view(out));
  // - 2 K = -(k1 + the second half).
  out -= k1;
  return out;
}

Matrix RotationResponse::coulomb_coefficients(const Matrix& z) {
  Matrix d = Matrix::Zero(naux_, 1);
  if (naux_ == 0) return d;
  kernels_.gemm<double>(step_, Trans::yes, Trans::no, 1.0, ConstMatrixView{vo_.data(), nv_ * no_, naux_, nv_ * no_},
                        ConstMatrixView{z.data(), nv_ * no_, 1, nv_ * no_}, 0.0, linalg::view(d));
  return d;
}

Matrix RotationResponse::coulomb(const Matrix& d) {
  Matrix out = Matrix::Zero(nv_, no_);
  if (naux_ == 0) return out;
  kernels_.gemm<double>(step_, Trans::no, Trans::no, 1.0, ConstMatrixView{vo_.data(), nv_ * no_, naux_, nv_ * no_},
                        linalg::view(d), 0.0, MatrixView{out.data(), nv_ * no_, 1, nv_ * no_});
  return out;
}

}  // namespace dfmp2::chem
