#pragma once
// What the DF-MP2 gradient's files share (chem/gradient/dfmp2_gradient.hpp has the method): its orbital spaces, its
// kernel-log step, and its three-index tensors by block of active occupied orbitals, held in memory or on scratch as
// its plan says, as the energy holds its own (chem/mp2/occupied_blocks.hpp):
//
//   fitted_integrals  B = (P|ia) L^-T and B_oo = (P|ji) L^-T for the active i, one row per (i a) or (i j), one
//                     column per auxiliary function (so a block's auxiliary slab is one contiguous span)
//   amplitude_pass    the pair amplitudes of each active k with every active i, block by block, and from them the
//                     energy, the unrelaxed density's blocks, y_vv, y_ov, the metric's V and Gamma = G L^-1
//   read_gamma        Gamma for a slab of auxiliary functions across the blocks, for the passes over AO integrals
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chem/gradient/dfmp2_gradient.hpp"
#include "chem/io/block_store.hpp"
#include "linalg/kernels.hpp"

namespace dfmp2::chem::gradient_detail {

using linalg::Index;
using linalg::Kernels;
using linalg::Matrix;
using linalg::Vector;

inline const std::string kStep = "mp2_gradient";

// The orbital spaces, in the SCF's order: frozen [0, nf), active [nf, no), virtual [no, nmo).
struct Spaces {
  Index nf = 0, no = 0, na = 0, nv = 0, nmo = 0;
  Matrix c, c_occ, c_act, c_vir;
  Vector e;
};

// The blocks of active orbitals, [i0, i1) counted from the first active one, as the plan cuts them.
std::vector<std::pair<Index, Index>> active_blocks(Index nactive, Index block);

using Store = BlockStore<double>;

struct FittedIntegrals {
  Matrix factor;  // the RI metric's Cholesky factor L (lower triangle)
  std::vector<std::pair<Index, Index>> blocks;
  std::unique_ptr<Store> ov, oo;  // rows (i a) and (i j) of each block
};
FittedIntegrals fitted_integrals(const BasisSet& ri, const BasisSet& basis, const Spaces& s,
                                 const DfMp2GradientPlan& plan, const std::string& scratch_folder, Kernels& kernels);

struct AmplitudePass {
  double opposite_spin = 0, same_spin = 0;
  Matrix p_oo, p_vv;  // na x na, nv x nv
  Matrix y_vv, y_ov;  // 4 sum (P|ib) Gamma^P_ia: nv x nv (row b, column a); 4 sum (P|ji) Gamma^P_ia: no x nv
  Matrix v;           // L^-T (B^T G) L^-1, symmetrised: naux x naux
  std::unique_ptr<Store> gamma;  // Gamma = G L^-1 in the blocks of f, rows (k a)
};
// Consumes f's tensors (released when the pass ends); keeps its factor.
AmplitudePass amplitude_pass(FittedIntegrals& f, const Spaces& s, const DfMp2GradientPlan& plan,
                             const std::string& scratch_folder, Kernels& kernels);

// Gamma^P for P in [p0, p0 + np) into `out`, (na nv) x np: column P is Gamma^P as nv x na (row a, column i).
void read_gamma(const Store& gamma, const std::vector<std::pair<Index, Index>>& blocks, Index nv, Index p0, Index np,
                double* out);

}  // namespace dfmp2::chem::gradient_detail
