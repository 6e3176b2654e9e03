#pragma once
// What the DF-MP2 gradient's files share (chem/gradient/dfmp2_gradient.hpp has the method): its orbital spaces, its
// kernel-log step, and its three-index tensors by block of active occupied orbitals, held in memory or on scratch as
// its plan says, as the energy holds its own (chem/mp2/occupied_blocks.hpp):
//
//   fitted_integrals  B = (P|ia) L^-T and B_oo = (P|ji) L^-T for the active i, one row per (i a) or (i j), one
//                     column per auxiliary function (so a block's auxiliary slab is one contiguous span)
//   amplitude_pass    the pair amplitudes of each active k with every active i, block by block, and from them the
//                     energy, the unrelaxed density's blocks, y_vv, y_ov, the metric's V and Gamma = G L^-1
//
// (A slab of auxiliary functions across a store's blocks, as the passes over AO integrals read Gamma, is
// BlockStore::read_slab.)
// The SCF-like separable part (scf_gradient.cpp) keeps its fitted half-transformed integrals in the same stores.
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chem/gradient/dfmp2_gradient.hpp"
#include "chem/io/block_store.hpp"
#include "linalg/comm.hpp"
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

// The ranks that share the gradient's work (README "MPI"): its work items (blocks of orbitals, blocks of auxiliary
// functions, auxiliary shells) dealt in turn, item k to rank k % ranks; what each rank computes of a sum is summed
// over them, and a store's block made by one rank is sent to the others (every rank holds the gradient's stores
// whole, as the plan counts them). Without a communicator, this process does all of it.
struct Ranks {
  linalg::Comm* comm = nullptr;
  int size() const { return comm != nullptr ? comm->size() : 1; }
  int owner(Index k) const { return static_cast<int>(k % size()); }
  bool mine(Index k) const { return comm == nullptr || owner(k) == comm->rank(); }
  linalg::Share share() const { return comm != nullptr ? linalg::Share{comm->rank(), comm->size()} : linalg::Share{}; }
  // A scratch file's name for this rank (several ranks may share a folder, and a pid on different nodes).
  std::string file_name(const std::string& what) const {
    return size() > 1 ? what + "-r" + std::to_string(comm->rank()) : what;
  }
  void sum(double* data, Index count) const;
  void sum(Matrix& m) const { sum(m.data(), m.size()); }
  void broadcast(double* data, Index count, int owner) const;
  // Block b of `store` from the rank that made it (owner(b)) to the others; on scratch through `buffer`.
  void share_block(Store& store, Index b, std::vector<double>& buffer) const;
  // Local work between the collectives: if it fails on one rank, every rank stops (linalg::Comm::checked).
  template <class Work>
  void checked(Work&& work) const {
    if (comm != nullptr) comm->checked(work);
    else work();
  }
};

// A store with `per_orbital` rows for each orbital of each block, one column per auxiliary function: in memory, or
// in a scratch file in `*scratch_folder` when it is given.
std::unique_ptr<Store> make_store(const std::vector<std::pair<Index, Index>>& blocks, Index per_orbital, Index naux,
                                  const std::string* scratch_folder, const std::string& what);
// update(block) on each of the first `count` blocks in turn, in place in memory or read, updated and written back;
// each block by its owner among `ranks`, then sent to the others.
void update_blocks(Store& store, Index count, const std::function<void(linalg::MatrixView)>& update,
                   const Ranks& ranks = {});

struct FittedIntegrals {
  Matrix factor;  // the RI metric's Cholesky factor L (lower triangle)
  std::vector<std::pair<Index, Index>> blocks;
  std::unique_ptr<Store> ov, oo;  // rows (i a) and (i j) of each block
};
FittedIntegrals fitted_integrals(const BasisSet& ri, const BasisSet& basis, const Spaces& s,
                                 const DfMp2GradientPlan& plan, const std::string& scratch_folder, const Ranks& ranks,
                                 Kernels& kernels);

struct AmplitudePass {
  double opposite_spin = 0, same_spin = 0;
  Matrix p_oo, p_vv;  // na x na, nv x nv
  Matrix y_vv, y_ov;  // 4 sum (P|ib) Gamma^P_ia: nv x nv (row b, column a); 4 sum (P|ji) Gamma^P_ia: no x nv
  Matrix v;           // L^-T (B^T G) L^-1, symmetrised: naux x naux
  std::unique_ptr<Store> gamma;  // Gamma = G L^-1 in the blocks of f, rows (k a)
};
// Consumes f's tensors (released when the pass ends); keeps its factor.
AmplitudePass amplitude_pass(FittedIntegrals& f, const Spaces& s, const DfMp2GradientPlan& plan,
                             const std::string& scratch_folder, const Ranks& ranks, Kernels& kernels);

}  // namespace dfmp2::chem::gradient_detail
