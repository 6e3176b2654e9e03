#pragma once
// The Z-vector's products from a DF J/K's fitted tensor B (chem/scf/df_jk.hpp): for occupied-virtual rotations z
// (nv x no), C_v^T G[M] C_o with G[M] = 4 J[M] - 2 K[M] and M = (C_v z C_o^T + C_o z^T C_v^T) / 2, the orbital
// Hessian's two-electron part that every iteration of a gradient's Z-vector applies (JkBuilder::rotation_hessian).
//
// In the orbitals' basis, with b^Q_pq = (C_p^T B_Q C_q) and d_Q = sum_ai b^Q_ai z_ai (= B_Q . M):
//   C_v^T J[M] C_o = sum_Q d_Q b^Q_vo
//   C_v^T K[M] C_o = 1/2 sum_Q [ (C_v^T B_Q C_v z) b^Q_oo + b^Q_vo (z^T b^Q_vo) ]
// so with b_oo and b_vo kept (naux (no^2 + nv no), RotationProducts::occupied) an iteration needs B only for
// sum_Q (B_Q (C_v z)) b^Q_oo (in the AO basis, C_v^T once at the end): one pass over the unpacked B_Q, about
// 2 nbf^2 no naux flops; with b_vv kept too (naux nv^2 more, RotationProducts::mo) it needs no pass over B at all,
// about 2 nv^2 no naux flops in two large GEMMs. Both are made in the first call's pass over B, for the orbitals of
// that call. Making b_vv costs about 2 nbf^2 nv naux flops more, about one iteration of `occupied` per nv / no; the
// iterations repay it in flops when nv is well below nbf, and in the unpacking of B's packed pairs (nbf^2 naux
// elements a pass) that `mo` does once.
#include <functional>
#include <string>
#include <vector>

#include "linalg/kernels.hpp"

namespace dfmp2::chem {

// What a DF J/K keeps between the Z-vector's iterations (JkBuilder::keep_rotation_products): as much as the
// gradient's memory plan allows.
enum class RotationProducts {
  none,      // nothing: every iteration is a full response build (compute_response)
  occupied,  // b^Q_oo and b^Q_vo: every iteration one pass over B
  mo,        // b^Q_vv, b^Q_oo and b^Q_vo: no pass over B after the first
};
const char* rotation_products_name(RotationProducts kept);

// Bytes kept for `naux` fitting functions (each rank: its share of them), and the most a pass needs beside them.
double rotation_products_bytes(RotationProducts kept, linalg::Index nbf, linalg::Index nocc, linalg::Index nvir,
                               linalg::Index naux);

class RotationResponse {
 public:
  using Index = linalg::Index;
  // One pass over this rank's fitted B: visit(squares, q) for each block, q unpacked nbf x nbf B_Q side by side.
  using SquareVisitor = std::function<void(const double* squares, Index q)>;
  using Squares = std::function<void(const SquareVisitor&)>;

  RotationResponse(RotationProducts kept, const linalg::Matrix& c_vir, const linalg::Matrix& c_occ, Index naux,
                   linalg::Kernels& kernels, std::string step);
  bool made_for(const linalg::Matrix& c_vir, const linalg::Matrix& c_occ) const {
    return c_vir.size() == c_vir_.size() && c_occ.size() == c_occ_.size() && c_vir == c_vir_ && c_occ == c_occ_;
  }
  // This rank's share of C_v^T G[M] C_o (its auxiliary functions'; the caller sums over the ranks).
  linalg::Matrix apply(const linalg::Matrix& z, const Squares& squares);
  // From the made products: J[M]'s fitted coefficients d_Q = b^Q_vo . z for a rotation z (this rank's Q), and
  // sum_Q d_Q b^Q_vo = C_v^T J[M'] C_o for another set's coefficients d (an open shell's other spin).
  linalg::Matrix coulomb_coefficients(const linalg::Matrix& z);
  linalg::Matrix coulomb(const linalg::Matrix& d);
  // Makes the kept products now (one pass over B), if they are not made yet.
  void make(const Squares& squares);
  // This rank's share of C^T G[M] C_o ((no + nv) x no, occupied rows first) for M = C_o p_oo C_o^T + C_v p_vv C_v^T,
  // an unrelaxed density, from the made products with b_vv (`mo`): J from d_Q = b^Q_oo . p_oo + b^Q_vv . p_vv; K's
  // occupied rows sum_Q b^Q_oo p_oo b^Q_oo + b^Q_vo^T p_vv b^Q_vo, its virtual rows sum_Q b^Q_vo p_oo b^Q_oo +
  // b^Q_vv p_vv b^Q_vo. About 4 nv^2 no naux flops, against a J/K build's pass over B (6 nbf^2 no naux and the
  // unpacking).
  linalg::Matrix unrelaxed_response(const linalg::Matrix& p_oo, const linalg::Matrix& p_vv);
  // This rank's share of the two-electron part of the orbital Hessian's diagonal, [C_v^T G[M] C_o]_ai for z = e_ai:
  // 3 (ai|ai) - (aa|ii) = sum_Q 3 (b^Q_ai)^2 - b^Q_aa b^Q_ii (the Z-vector's preconditioner). Empty unless the
  // products are made and b_vv is among them (`mo`).
  // (`coulomb` 1: an open shell's spin-diagonal part, (ai|ai) - (aa|ii), JkBuilder::unrestricted_rotation_hessian.)
  linalg::Matrix diagonal(double coulomb = 3.0) const;
  // This rank's share of C_o^T G[M] C_o for M = C R C^T whose R has the occupied-virtual block r_vo (nv x no, and its
  // mirror) and the occupied block r_oo (no x no, symmetric), from the kept products alone (made, either kind):
  //   C_o^T J[M] C_o = sum_Q d_Q b^Q_oo,  d_Q = 2 b^Q_vo . r_vo + b^Q_oo . r_oo
  //   C_o^T K[M] C_o = sum_Q [ b^Q_oo r_oo b^Q_oo + U_Q^T b^Q_oo + b^Q_oo U_Q ],  U_Q = r_vo^T b^Q_vo
  // about 4 nv no^2 naux flops, where a J/K build would pass over B.
  linalg::Matrix occupied_response(const linalg::Matrix& r_vo, const linalg::Matrix& r_oo);

 private:
  // One pass over B: the products made if they are not yet; with `l`, k1_ao accumulated as pass_block says.
  void pass(const Squares& squares, const linalg::Matrix* l, linalg::Matrix* k1_ao);
  // The block of q fitting functions from `first` on: `making`, its b_oo, b_vo (and b_vv) into the kept tensors;
  // with `l` = C_v z, sum_Q C_v^T B_Q L b_oo^Q added to `k1`.
  void pass_block(const double* squares, Index q, Index first, bool making, const linalg::Matrix* l,
                  linalg::Matrix* k1);

  RotationProducts kept_;
  linalg::Matrix c_vir_, c_occ_;
  Index nbf_, no_, nv_, naux_;
  bool made_ = false;                      // the kept products are in place
  std::vector<double> vv_, oo_, vo_;       // side by side: nv x (nv naux), no x (no naux), nv x (no naux)
  linalg::Matrix oo_by_q_;                 // (mo) b_oo^Q(j, i) at row Q + naux j, column i
  std::vector<double> work_;
  linalg::Kernels& kernels_;
  std::string step_;
};

}  // namespace dfmp2::chem
