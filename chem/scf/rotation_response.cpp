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
  if (kept == RotationProducts::occupied) return 8.0 * (occupied + pass);
  // b_vv beside them, and while an iteration runs, b_vv^Q z for every Q (nv no naux).
  return 8.0 * (occupied + n * nv * nv + std::max(pass, n * nv * no));
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
    const ConstMatrixView s{squares + c0 * square, nbf_, nbf_, nbf_};
    if (making) {
      // X_Q = B_Q C_o, then b_oo = C_o^T X_Q and b_vo = C_v^T X_Q for the chunk's Q side by side.
      work_.resize(static_cast<std::size_t>(nbf_ * std::max(nv_, no_) * qc));
      kernels_.gemm_batched<double>(step_, Trans::no, Trans::no, qc, {square, 0, nbf_ * no_}, 1.0, s,
                                    linalg::view(c_occ_), 0.0, MatrixView{work_.data(), nbf_, no_, nbf_});
      const ConstMatrixView x{work_.data(), nbf_, no_ * qc, nbf_};
      kernels_.gemm<double>(step_, Trans::yes, Trans::no, 1.0, linalg::view(c_occ_), x, 0.0,
                            MatrixView{oo_.data() + p0 * no_ * no_, no_, no_ * qc, no_});
      kernels_.gemm<double>(step_, Trans::yes, Trans::no, 1.0, linalg::view(c_vir_), x, 0.0,
                            MatrixView{vo_.data() + p0 * nv_ * no_, nv_, no_ * qc, nv_});
      if (kept_ == RotationProducts::mo) {
        kernels_.gemm_batched<double>(step_, Trans::no, Trans::no, qc, {square, 0, nbf_ * nv_}, 1.0, s,
                                      linalg::view(c_vir_), 0.0, MatrixView{work_.data(), nbf_, nv_, nbf_});
        kernels_.gemm<double>(step_, Trans::yes, Trans::no, 1.0, linalg::view(c_vir_),
                              ConstMatrixView{work_.data(), nbf_, nv_ * qc, nbf_}, 0.0,
                              MatrixView{vv_.data() + p0 * nv_ * nv_, nv_, nv_ * qc, nv_});
      }
    }
    if (l != nullptr) {
      // A_Q = C_v^T (B_Q L) side by side; then sum_Q A_Q b_oo^Q is one GEMM, since the b_oo^Q are symmetric and
      // so stacked one under the other are the side-by-side b_oo transposed.
      work_.resize(static_cast<std::size_t>((nbf_ + nv_) * no_ * qc));
      double* a = work_.data() + nbf_ * no_ * qc;
      kernels_.gemm_batched<double>(step_, Trans::no, Trans::no, qc, {square, 0, nbf_ * no_}, 1.0, s,
                                    linalg::view(*l), 0.0, MatrixView{work_.data(), nbf_, no_, nbf_});
      kernels_.gemm<double>(step_, Trans::yes, Trans::no, 1.0, linalg::view(c_vir_),
                            ConstMatrixView{work_.data(), nbf_, no_ * qc, nbf_}, 0.0,
                            MatrixView{a, nv_, no_ * qc, nv_});
      kernels_.gemm<double>(step_, Trans::no, Trans::yes, 1.0, ConstMatrixView{a, nv_, no_ * qc, nv_},
                            ConstMatrixView{oo_.data() + p0 * no_ * no_, no_, no_ * qc, no_}, 1.0,
                            linalg::view(*k1));
    }
  }
}

Matrix RotationResponse::apply(const Matrix& z, const Squares& squares) {
  Matrix out = Matrix::Zero(nv_, no_), k1 = Matrix::Zero(nv_, no_);
  if (naux_ == 0) return out;
  const bool occupied = kept_ == RotationProducts::occupied;
  if (!made_ || occupied) {
    const Matrix l = occupied ? linalg::product(kernels_, step_, c_vir_, Trans::no, z, Trans::no) : Matrix();
    Index first = 0;  // the block's first fitting function among this rank's
    squares([&](const double* block, Index q) {
      pass_block(block, q, first, !made_, occupied ? &l : nullptr, &k1);
      first += q;
    });
    if (first != naux_) throw std::logic_error("RotationResponse: a pass over another number of fitting functions");
    made_ = true;
  }
  if (kept_ == RotationProducts::mo) {
    // A_Q = b_vv^Q z side by side, then sum_Q A_Q b_oo^Q as above.
    work_.resize(static_cast<std::size_t>(nv_ * no_ * naux_));
    kernels_.gemm_batched<double>(step_, Trans::no, Trans::no, naux_, {nv_ * nv_, 0, nv_ * no_}, 1.0,
                                  ConstMatrixView{vv_.data(), nv_, nv_, nv_}, linalg::view(z), 0.0,
                                  MatrixView{work_.data(), nv_, no_, nv_});
    kernels_.gemm<double>(step_, Trans::no, Trans::yes, 1.0, ConstMatrixView{work_.data(), nv_, no_ * naux_, nv_},
                          ConstMatrixView{oo_.data(), no_, no_ * naux_, no_}, 0.0, linalg::view(k1));
  }
  // J: d_Q = b^Q_vo . z, then 4 sum_Q d_Q b^Q_vo (the b_vo side by side are an (nv no) x naux matrix).
  const ConstMatrixView vo_flat{vo_.data(), nv_ * no_, naux_, nv_ * no_};
  Matrix d(naux_, 1);
  kernels_.gemm<double>(step_, Trans::yes, Trans::no, 1.0, vo_flat, ConstMatrixView{z.data(), nv_ * no_, 1, nv_ * no_},
                        0.0, linalg::view(d));
  kernels_.gemm<double>(step_, Trans::no, Trans::no, 4.0, vo_flat, linalg::view(d), 0.0,
                        MatrixView{out.data(), nv_ * no_, 1, nv_ * no_});
  // K's second half: V_Q = z^T b^Q_vo side by side, restacked one under the other, then sum_Q b^Q_vo V_Q.
  Matrix v_side(no_, no_ * naux_), v_stacked(no_ * naux_, no_);
  kernels_.gemm<double>(step_, Trans::yes, Trans::no, 1.0, linalg::view(z),
                        ConstMatrixView{vo_.data(), nv_, no_ * naux_, nv_}, 0.0, linalg::view(v_side));
  for (Index p = 0; p < naux_; ++p) v_stacked.middleRows(p * no_, no_) = v_side.middleCols(p * no_, no_);
  kernels_.gemm<double>(step_, Trans::no, Trans::no, -1.0, ConstMatrixView{vo_.data(), nv_, no_ * naux_, nv_},
                        linalg::view(v_stacked), 1.0, linalg::view(out));
  // - 2 K = -(k1 + the second half).
  out -= k1;
  return out;
}

}  // namespace dfmp2::chem
