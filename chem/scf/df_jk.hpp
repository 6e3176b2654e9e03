#pragma once
// Density-fitted J and K within a memory budget.
//
// The three-index tensor (P|mn) over the JK fitting basis is kept only for the shell pairs that survive Schwarz
// screening and packed over m >= n (ThreeCenterEngine's packed layout, npacked values per auxiliary function
// instead of nbf^2). Where it lives is chosen before any of it is computed (plan_df_jk):
//
//   memory     fitted B = (P|mn) L^-T held whole; each iteration streams it in blocks of auxiliary functions
//   scratch    the same B in a scratch file, fitted there in row chunks once, read block by block each iteration
//              (the next block is read while the current one is contracted)
//   recompute  nothing stored: each iteration computes (P|mn) block by block twice, once for c = (P|mn) D and the
//              half-transformed H = (P|mi) (kept, naux x nbf x nocc), once for J = (P|mn) J^-1 c; K = (L^-1 H)^T (L^-1 H)
//
// With several ranks (DfJkOptions::comm) each rank computes and keeps the auxiliary blocks of a contiguous share of
// the fitting functions (whole shells); the fitting, which mixes all of them, sends each rank a share of the rows
// (packed pairs) and back (scratch: a chunk of rows at a time); each iteration J and K are summed over the ranks.
// Recompute sends the half-transformed H from auxiliary columns to occupied rows once an iteration.
//
// `automatic` keeps B in memory when it fits; otherwise it compares the measured cost of the other two (the time
// of the first block of integrals and the scratch folder's measured write rate) over the expected iterations and
// takes the cheaper, and says why. J and K are built block by block in every case: K = sum_Q X_Q X_Q^T with
// X_Q = B_Q C_occ (B_Q unpacked to nbf x nbf), J from d_Q = B_Q . D.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chem/system/basis_set.hpp"
#include "chem/integrals/integrals.hpp"
#include "chem/scf/jk_builder.hpp"
#include "linalg/comm.hpp"
#include "linalg/dense_grid.hpp"
#include "linalg/kernels.hpp"

namespace dfmp2::chem {

enum class JkStorage { automatic, memory, scratch, recompute };
const linalg::NameTable<JkStorage>& jk_storage_names();  // the one name table
std::string jk_storage_name(JkStorage s);

struct DfJkOptions {
  JkStorage storage = JkStorage::automatic;  // `scf.jk_storage` in the input; a forced choice is not second-guessed
  double memory_bytes = 2.0 * double(1 << 30);  // what the DF-J/K may hold at its peak (each rank, every rank alike)
  std::string scratch_folder;                   // for JkStorage::scratch
  int expected_iterations = 15;                 // for the scratch/recompute cost comparison
  linalg::Comm* comm = nullptr;                 // the ranks sharing the work; none: this process alone
  // (optional) The ranks' grid (linalg/dense_grid.hpp): with several ranks and naux >= distributed_min_order the
  // metric is computed, factored and solved with on it, naux^2 / ranks per rank (README "MPI").
  linalg::DenseGrid* dense = nullptr;
  linalg::Index distributed_min_order = 0;
};

// What the DF-J/K holds and where, decided before any three-index integral is computed.
struct DfJkPlan {
  JkStorage storage = JkStorage::memory;
  linalg::Index nbf = 0, naux = 0, npacked = 0, nocc = 0;
  int ranks = 1;
  linalg::Index aux_block = 0;  // auxiliary functions contracted at once
  linalg::Index fit_rows = 0;   // scratch: rows of B fitted at once
  double memory_bytes = 0;      // peak held by the DF-J/K (on each rank)
  double scratch_bytes = 0;     // scratch file size (each rank's)
  std::string reason;           // why this storage (measured rates for an automatic choice between scratch and recompute)
};

// Bytes each storage needs at least on each of `ranks` ranks (its smallest blocks), for the memory plan and its error
// message.
double df_jk_minimum_bytes(JkStorage storage, linalg::Index nbf, linalg::Index naux, linalg::Index npacked,
                           linalg::Index nocc, linalg::Index max_shell, int ranks = 1,
                           bool distributed_factor = false);
// The fitting functions one of `ranks` ranks holds at most (its columns of B, and the products the Z-vector keeps of
// them): an even share, plus one shell (at most `max_shell` functions) where a shell straddles it.
linalg::Index df_jk_columns_per_rank(linalg::Index naux, linalg::Index max_shell, int ranks);
// Whether the DF-J/K of `naux` fitting functions over `ranks` ranks factors its metric on options.dense.
bool jk_metric_on_grid(const DfJkOptions& options, linalg::Index naux, int ranks);

// Where the DF-J/K over `engine` (its (P|mn), the JK fitting basis over the orbital basis) keeps B, and in what
// blocks, within options.memory_bytes on each rank (the same budget on every rank): decided before any three-index
// integral by rank 0 for all. `automatic` between scratch and recompute measures this machine (one block of
// integrals, the scratch folder's write rate, the metric's factorisation). Throws PhaseTooLarge when no storage
// fits. The scratch folder's space is the caller's to check (app/plan.hpp check_scratch: once for every phase).
DfJkPlan plan_df_jk(const ThreeCenterEngine& engine, const BasisSet& jk_basis, linalg::Index nocc,
                    const DfJkOptions& options);

// The DF-J/K as `plan` says: computes and fits what the plan stores. `nocc` is the number of occupied orbitals the
// SCF will pass (columns of c_occ).
std::unique_ptr<JkBuilder> make_df_jk(std::unique_ptr<ThreeCenterEngine> engine, const BasisSet& jk_basis,
                                      linalg::Index nocc, linalg::Kernels& kernels, const DfJkOptions& options,
                                      const DfJkPlan& plan);

}  // namespace dfmp2::chem
