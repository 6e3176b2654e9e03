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
#include <array>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chem/gradient/dfmp2_gradient.hpp"
#include "chem/gradient/scf_gradient.hpp"
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
  std::string spin;  // "" (closed shell), "-alpha" or "-beta": in the names of its scratch files
};

// The blocks of active orbitals, [i0, i1) counted from the first active one, as the plan cuts them.
std::vector<std::pair<Index, Index>> active_blocks(Index nactive, Index block);

using Store = BlockStore<double>;

// The ranks that share the gradient's work (README "MPI"): its work items (blocks of orbitals, blocks of auxiliary
// functions) dealt to them, what each rank computes of a sum summed over them. Without a communicator, this process
// does all of it.
struct Ranks {
  linalg::Comm* comm = nullptr;
  int size() const { return comm != nullptr ? comm->size() : 1; }
  int rank() const { return comm != nullptr ? comm->rank() : 0; }
  int owner(Index k) const { return static_cast<int>(k % size()); }
  bool mine(Index k) const { return comm == nullptr || owner(k) == comm->rank(); }
  // A scratch file's name for this rank (several ranks may share a folder, and a pid on different nodes).
  std::string file_name(const std::string& what) const {
    return size() > 1 ? what + "-r" + std::to_string(comm->rank()) : what;
  }
  void sum(double* data, Index count) const;
  void sum(Matrix& m) const { sum(m.data(), m.size()); }
  // Local work between the collectives: if it fails on one rank, every rank stops (linalg::Comm::checked).
  template <class Work>
  void checked(Work&& work) const {
    if (comm != nullptr) comm->checked(work);
    else work();
  }
};

// A store with `per_orbital` rows for each orbital of each block (or of the blocks `ids` only), `naux` columns: in
// memory (`separate`: an allocation per block, for a store that changes shape), or in a scratch file in
// `*scratch_folder` when it is given.
std::unique_ptr<Store> make_store(const std::vector<std::pair<Index, Index>>& blocks, Index per_orbital, Index naux,
                                  const std::string* scratch_folder, const std::string& what,
                                  const std::vector<Index>* ids = nullptr, bool separate = false);

// With several ranks, a three-index tensor lives in two shapes (README "MPI"), each rank holding its share of either:
//   by blocks    the whole rows of the blocks of occupied orbitals it holds (block K by rank K % ranks): for the
//                fits, the pair amplitudes and the metric's densities, whose sums run over all the fitting functions
//   by columns   a run of auxiliary functions across every block: for the passes over AO integrals, which compute
//                (P|mn) once for each P
// and goes from one to the other in rounds of one block per holder (columns_to_blocks, blocks_to_columns). One rank
// holds both whole: the same store.
//
// The auxiliary functions by rank: the AO blocks `ranges` (whole shells, ThreeCenterEngine::blocks) dealt as
// contiguous runs, rank r's columns [first(r), first(r) + count(r)); `mine` its own AO blocks.
struct AuxColumns {
  std::vector<std::pair<Index, Index>> mine;
  std::vector<Index> col0;  // one more than there are ranks: col0[r] is rank r's first column
  Index first(int r) const { return col0[static_cast<std::size_t>(r)]; }
  Index count(int r) const { return col0[static_cast<std::size_t>(r) + 1] - first(r); }
};
AuxColumns aux_columns(const std::vector<std::pair<Index, Index>>& ranges, Index naux, const Ranks& ranks);
// The blocks this rank holds of `count` (those K with K % ranks its rank), in order.
std::vector<Index> held_blocks(Index count, const Ranks& ranks);
// From `columns` (this rank's auxiliary columns of every block) to `held` (the whole blocks this rank holds), one
// round per block a rank holds; each block handed to `use` (to be fitted in place) as soon as it is whole, then kept.
// The columns of each round's blocks are released as they leave (separate blocks: the two shapes together hold
// about the larger one).
void columns_to_blocks(Store& columns, const AuxColumns& aux, Store& held,
                       const std::function<void(linalg::MatrixView)>& use, const Ranks& ranks);
// From `held` back to a store of this rank's auxiliary columns of every block of `blocks` (`per_orbital` rows per
// orbital; named after `what`, in `*scratch_folder` when given), the same rounds the other way, each held block
// released as it leaves.
std::unique_ptr<Store> blocks_to_columns(Store& held, const std::vector<std::pair<Index, Index>>& blocks,
                                         Index per_orbital, const AuxColumns& aux, const std::string* scratch_folder,
                                         const std::string& what, const Ranks& ranks);
// update(block) on each of the first `count` blocks in turn, in place in memory or read, updated and written back
// (one rank's whole store).
void update_blocks(Store& store, Index count, const std::function<void(linalg::MatrixView)>& update);

struct FittedIntegrals {
  Matrix factor;  // the RI metric's Cholesky factor L (lower triangle)
  std::vector<std::pair<Index, Index>> blocks;
  AuxColumns aux;                 // the RI basis's columns by rank
  std::unique_ptr<Store> ov, oo;  // rows (i a) and (i j) of each block this rank holds, whole
};
FittedIntegrals fitted_integrals(const BasisSet& ri, const BasisSet& basis, const Spaces& s,
                                 const DfMp2GradientPlan& plan, const std::string& scratch_folder, const Ranks& ranks,
                                 Kernels& kernels);

struct AmplitudePass {
  double opposite_spin = 0, same_spin = 0;
  Matrix p_oo, p_vv;  // na x na, nv x nv
  Matrix y_vv, y_ov;  // 4 sum (P|ib) Gamma^P_ia: nv x nv (row b, column a); 4 sum (P|ji) Gamma^P_ia: no x nv
  Matrix v;           // L^-T (B^T G) L^-1, symmetrised: naux x naux
  Matrix p_oo_opposite;  // an open shell's: the other spin's P_ij from these rows' opposite-spin pairs
  AuxColumns aux;     // f's
  std::unique_ptr<Store> gamma;  // Gamma = G L^-1 in the blocks of f, rows (k a): this rank's columns (aux)
};
// An open shell's (UHF) pass for one spin: the other spin's fitted integrals and orbitals, the columns of its
// opposite-spin pairs; keep_b keeps this pass's B (released otherwise) for the other spin's pass.
struct OppositeSpin {
  FittedIntegrals* f = nullptr;
  const Spaces* s = nullptr;
  bool keep_b = false;
};
// Consumes f's tensors (released when the pass ends, but B with opposite->keep_b); keeps its factor. The densities, y
// and Gamma are those of the energy c_os E_os + c_ss E_ss (`scales`); an open shell's are each spin's own, halved
// (T = T_uhf / 2, gradient_blocks.cpp's PairKind), so that the closed shell's formulas read for each spin give its
// part, and its opposite_spin counts E_os once from each spin's pass (the caller takes the mean).
AmplitudePass amplitude_pass(FittedIntegrals& f, const Spaces& s, const DfMp2GradientPlan& plan, SpinScales scales,
                             const OppositeSpin* opposite, const std::string& scratch_folder, const Ranks& ranks,
                             Kernels& kernels);

// The orbital spaces of one set of orbitals (c, e: the SCF's, one spin's for an open shell), `nocc` occupied of
// which `nfrozen` frozen.
Spaces spaces_of(const Matrix& c, const Vector& e, int nocc, int nfrozen, const std::string& spin);
// L M R^T: a matrix taken from one orbital basis to another (MO blocks to AO, say).
Matrix sandwich(Kernels& kernels, const Matrix& left, const Matrix& m, const Matrix& right);
// Y's active columns (C^T Yo, nmo x na): 4 sum_P (P|pb) Gamma^P_ib for every orbital p, through the AO integrals.
Matrix active_lagrangian(const BasisSet& ri, const BasisSet& basis, const AmplitudePass& amp, const Spaces& s,
                         const Ranks& ranks, Kernels& kernels);
// sum_P d(P|mn)/dR (4 C_i Gamma^P_ia C_a^T, symmetrised): the three-index integrals' explicit part.
Matrix three_index_gradient(const BasisSet& ri, const BasisSet& basis, Index natoms, const AmplitudePass& amp,
                            const Spaces& s, const Ranks& ranks);
// A z = rhs by preconditioned conjugate gradients (A symmetric positive definite: a stable SCF's orbital Hessian),
// to max |residual| below `convergence`; the preconditioner `diagonal`, or after the first product sharper()'s where
// it gives one (non-empty). Its iterations and last residual in `out`; NumericalError if it does not converge.
Matrix conjugate_gradient(const std::function<Matrix(const Matrix&)>& apply, const Matrix& rhs, const Matrix& diagonal,
                          const std::function<Matrix()>& sharper, double convergence, DfMp2Gradient& out);
// e_a - e_i, nv x no.
Matrix orbital_energy_differences(const Spaces& s);
// The frozen-active rotations z_Ij = -(X_Ij - X_jI) / (e_I - e_j) (nf x na) from X = dE/dU.
Matrix frozen_rotations(const Matrix& x, const Spaces& s);
// The relaxed density's rotations (MO, symmetric): z/2 in the occupied-virtual blocks, z_frozen/2 in the
// frozen-active ones.
Matrix relaxed_rotations(const Matrix& z, const Matrix& z_frozen, const Spaces& s);
// The energy-weighted density W (MO) from X, the Z-vector, the frozen-active rotations and `occupied_response`,
// C_o^T G[C R C^T] C_o for the relaxed rotations R (the Fock matrix's response, times 2, in the occupied block).
Matrix energy_weighted_density(const Matrix& x, const Matrix& z, const Matrix& z_frozen,
                               const Matrix& occupied_response, const Spaces& s);

// The separable part (the SCF gradient's form with `correction`, chem/gradient/scf_gradient.hpp) added to
// out.gradient, the SCF's own gradient in out.scf_gradient (unless in.derivatives is false), and the SCF, unrelaxed
// and relaxed densities and the dipoles in out; `spins` the SCF's occupied orbitals (one doubly occupied set, or alpha
// and beta), `unrelaxed` the amplitudes' AO density correction (a closed shell's: one, the whole; else each spin's).
void add_separable(const DfMp2GradientInput& in, const std::vector<const Spaces*>& spins,
                   const DensityCorrection& correction, const std::vector<Matrix>& unrelaxed, DfMp2Gradient& out,
                   Kernels& kernels);
// An open shell's two spins (alpha, beta).
template <class T>
using Spins = std::array<T, 2>;
// An open shell's spaces: the SCF's alpha and beta orbitals (ROHF: its semicanonical ones), `nfrozen` of each frozen.
Spins<Spaces> open_shell_spaces(const ScfResult& scf, int nfrozen);
// G^s[M] C^s_o = (2 J[M^a + M^b] - 2 K[M^s]) C^s_o for both spins (symmetric AO M^s): one J/K response build per
// spin (uhf_dfmp2_gradient.cpp).
Spins<Matrix> spin_fock_response(JkBuilder& jk, const Spins<Matrix>& m, const Spins<Spaces>& s, Kernels& kernels);
// Steps 1 and 2 of an open shell's gradient (UHF and ROHF-MBPT(2) alike): each spin's amplitude pass with both
// spins' B, X's parts from the integrals in x, the explicit three-index and metric terms in out.gradient, the
// energies in out; Gamma released. `lap` names each step as it ends.
Spins<AmplitudePass> open_shell_explicit_terms(const DfMp2GradientInput& in, const Spins<Spaces>& s,
                                               const Ranks& ranks, Spins<Matrix>& x, DfMp2Gradient& out,
                                               const std::function<void(const char*)>& lap, Kernels& kernels);

}  // namespace dfmp2::chem::gradient_detail
