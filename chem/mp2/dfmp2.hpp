#pragma once
// Density-fitted MP2 for a closed-shell (RHF) or an open-shell (UHF, semicanonical ROHF) reference.
//
//   1. metric      J = L L^T (cholesky), or J^-1/2 by eigendecomposition (eigh) or Newton-Schulz iteration
//   2. transform   A[ia,P] = sum_mn C_mi C_na (P|mn)                (gemm, gemm_batched), streamed over blocks of P
//   3. fitting     B = A L^-T (trsm) or B = A J^-1/2 (gemm), so that B B^T = A J^-1 A^T
//   4. pairs       for occupied blocks I >= J: G = B_I B_J^T          (syrk when I == J, gemm otherwise)
//                  then E_os += (ia|jb)^2 / D, E_ss += (ia|jb)[(ia|jb) - (ib|ja)] / D, D = e_i + e_j - e_a - e_b
//
// Precision: fp64 does everything in double; fp32 everything in float (energy sums included); mixed runs the
// GEMMs of steps 2 and 4 in float and the metric, the fitting and the energy sums in double. bf16 and bf16x3 are
// fp32 runs on a device model as its users would run them: the pair-energy products (most of the flops) use the
// Tensor Engine's bf16 operands, or its three-pass bf16x3 split (linalg::MatmulMode), accumulated in fp32; the
// transformation runs one grade higher (bf16x3 for bf16, fp32 for bf16x3), because the fitting amplifies its
// rounding; the metric factor and the fitting stay fp32, because the Coulomb metric of a real fitting basis is far
// too ill-conditioned for bf16's 8-bit significand. DfMp2Options::step_modes may override a step explicitly.
//
// Open shells (DF-UMP2): the steps run on every spin's orbitals (SpinSpace), whose rows are stacked in A and B (the
// alpha rows, then the beta rows); the pairs are those of each spin, giving the same-spin energy of that spin
// (E_aa = 1/2 sum (ia|jb)[(ia|jb) - (ib|ja)] / D over alpha orbitals, the same for beta), and the pairs of a beta
// block with an alpha block, giving the opposite-spin energy E_ab = sum (ia|jb)^2 / D (i, a alpha; j, b beta).
// RHF is the one-space case: both spins alike, E_os and E_ss as above.
//
// Several references in one run (Mp2System; an interaction energy's complex and its fragments in the complex's
// basis, which share the basis, the fitting basis and so the integrals and the metric): every system's spaces are
// stacked in A and B, the metric is factored once and each block of integrals read once, and only the block pairs
// within a system are formed, so each system gets the energies a run of its own would give.
//
// A row of A and B is one (i, a) pair with the virtual index fastest (row a + nvir*i), so the rows of one
// occupied block are contiguous. An occupied block pair is a self-contained unit of work: given B and the
// orbital energies, block_pair_energy() needs nothing else, so the pair list can be handed out to workers.
#include <functional>
#include <map>
#include <utility>
#include <string>
#include <vector>

#include "chem/integrals/three_index_source.hpp"
#include "linalg/comm.hpp"
#include "linalg/dense_grid.hpp"
#include "linalg/inverse_sqrt.hpp"
#include "linalg/kernels.hpp"
#include "linalg/name_table.hpp"

namespace dfmp2::chem {

enum class Precision { fp64, fp32, mixed, bf16, bf16x3 };
enum class MetricMethod { cholesky, eigh, newton_schulz };
// Where the transformed and fitted tensor (nact nvir x naux) lives: in memory, or in a scratch file laid out by
// occupied block (each block's rows contiguous), transformed into it, fitted block by block in place, and read back
// block by block by the pair loop (the next block read while the current pair is computed), as Psi4's disk-based
// DF-MP2 does. `automatic`: memory when it fits.
enum class Mp2Storage { automatic, memory, scratch };
// Each enum's names, in one table that both the input parser and the report read (an enum is never cast from a
// list position).
const linalg::NameTable<Precision>& precision_names();
const linalg::NameTable<MetricMethod>& metric_names();
const linalg::NameTable<Mp2Storage>& mp2_storage_names();
std::string precision_name(Precision p);
// The DF-MP2 steps, in pipeline order, as the kernel log, the timing tables and the device precisions name them
// (step_name): one name table, so no caller spells a step itself.
enum class Mp2Step { metric, transform, fitting, pair_energy };
const linalg::NameTable<Mp2Step>& mp2_step_names();
const std::string& step_name(Mp2Step step);
// The same steps as phases of the run: the memory plan's rows, the progress lines, the communicator's traffic and
// the per-rank table ("MP2 metric", "MP2 transform", "MP2 fitting", "MP2 pair energies").
const std::string& mp2_phase_name(Mp2Step step);
// The host work DF-MP2 logs beside the backend's ops (KernelLog kernel names, under backend "host").
inline constexpr const char* kRead3IndexKernel = "read_3index";  // transform: reading a block of (P|mn) or (P|ia)
inline constexpr const char* kPairReduceKernel = "pair_reduce";  // pair energies: the reduction over (ia|jb)
// The names of the steps whose float products a device runs in a MatmulMode: all four, in pipeline order.
const std::vector<std::string>& matmul_steps();
// The operand format of each step in a run of `precision` (bf16: transform bf16x3, pair_energy bf16; bf16x3:
// pair_energy bf16x3; everything else fp32), then `overrides` (step -> mode); fp32 throughout for every other
// precision (overrides ignored).
std::map<std::string, linalg::MatmulMode> step_matmul_modes(Precision precision,
                                                            const std::map<std::string, linalg::MatmulMode>& overrides);
std::string metric_name(MetricMethod m);
std::string mp2_storage_name(Mp2Storage s);

// Block screening of the AO three-index integrals: (P|mn) of one batch of auxiliary functions, as an
// nbf x (nbf * batch) matrix, is cut into block x block tiles; a tile whose largest |(P|mn)| is not above
// `threshold` is dropped (its largest element is the tightest Schwarz-type bound on the tile the stored integrals
// give), and the first transformation step becomes a BSR SpMM that skips the dropped tiles.
struct ScreeningOptions {
  bool enabled = false;
  double threshold = 1e-12;
  linalg::Index block = 32;
};

struct ScreeningReport {
  bool enabled = false;
  double threshold = 0;    // as run
  linalg::Index block = 0;  // tile size, as run
  long long blocks_kept = 0;
  long long blocks_total = 0;
};

struct DfMp2Options {
  int nfrozen = 0;  // lowest occupied orbitals left out of the correlation treatment
  Precision precision = Precision::fp64;
  MetricMethod metric = MetricMethod::cholesky;
  double eigh_threshold = linalg::kDefaultEighThreshold;  // relative to the largest metric eigenvalue
  linalg::NewtonSchulzOptions newton_schulz;
  ScreeningOptions screening;  // AO-form integrals only
  // bf16 and bf16x3 runs: steps whose operand format differs from the default (step_matmul_modes).
  std::map<std::string, linalg::MatmulMode> step_modes;
  std::string scratch_folder = "/tmp";  // for scratch storage, checked by the planner (its space, writable)
  // (optional) Told after each block of the transformation and each occupied block pair: phase, done, total.
  std::function<void(const std::string&, long long, long long)> progress;
  // (optional) Told when a step ends (the memory plan measures each phase's peak resident memory with it).
  std::function<void(Mp2Step)> phase_done;
  // The ranks the run is spread over (linalg/comm.hpp); none: this process alone. Every rank calls run_dfmp2 with
  // the same input and options.
  linalg::Comm* comm = nullptr;
  // (optional) The dense factorisations distributed over the ranks (linalg/dense_grid.hpp). With it, a Cholesky
  // metric of order >= distributed_min_order in an fp64 run is factored and solved on the grid
  // (distributed_metric): each rank then holds naux^2 / ranks of the factor instead of all of it.
  linalg::DenseGrid* dense = nullptr;
  linalg::Index distributed_min_order = 0;
};

// Whether the metric factor and the fitting of a run of `naux` fitting functions over `ranks` ranks are distributed
// (README "MPI"): linalg::order_on_grid, a Cholesky metric, and an fp64 fitting on an
// fp64 tensor (ScaLAPACK's solves are fp64 here; other precisions keep the replicated factor).
// `min_order`: DfMp2Options::distributed_min_order. (The run also needs DfMp2Options::dense.)
bool distributed_metric(MetricMethod metric, Precision precision, linalg::Index naux, int ranks,
                        linalg::Index min_order);

struct PairEnergy {
  double opposite_spin = 0;
  double same_spin = 0;
  PairEnergy& operator+=(const PairEnergy& o) {
    opposite_spin += o.opposite_spin;
    same_spin += o.same_spin;
    return *this;
  }
};

// Which electrons a space's orbitals hold: both spins (a closed-shell reference's one space) or one of them (an
// open shell's alpha and beta spaces, UHF or semicanonical ROHF).
enum class SpaceSpin { both, alpha, beta };

// The orbitals of one system and spin that DF-MP2 correlates. Its rows of A and B are nact x nvir.
struct SpinSpace {
  linalg::Index nocc = 0, nact = 0, nvir = 0;
  int system = 0;  // the reference it belongs to (Mp2System), when one run correlates several
  SpaceSpin spin = SpaceSpin::both;
  linalg::Index rows() const { return nact * nvir; }
  linalg::Index nfrozen() const { return nocc - nact; }
  bool operator==(const SpinSpace&) const = default;
};
// The spaces of one system, as every run stacks them: one of both spins (closed shell), or alpha then beta
// (`open_shell`), each with the same `nfrozen` core orbitals frozen, over `nmo` orbitals.
std::vector<SpinSpace> system_spaces(int system, bool open_shell, linalg::Index nmo, linalg::Index nfrozen,
                                     linalg::Index nocc_alpha, linalg::Index nocc_beta);

// What a block pair contributes: a closed-shell space's pair gives its opposite- and same-spin parts from one formula;
// a pair within one spin's space only a same-spin part (half the closed-shell formula's); a pair of the alpha and the
// beta space of one system only an opposite-spin part.
enum class PairKind { closed_shell, same_spin, opposite_spin };

// Active occupied orbitals [i0, i1) of space space_i x [j0, j1) of space space_j (indices into the run's stacked
// spaces), counted from the space's first active orbital. Within a space i0 >= j0; across spaces space_i > space_j
// (a beta block with an alpha block).
struct OccupiedBlockPair {
  linalg::Index i0, i1, j0, j1;
  int space_i = 0, space_j = 0;
  PairKind kind = PairKind::closed_shell;
  bool same_space() const { return space_i == space_j; }
  bool diagonal() const { return same_space() && i0 == j0; }
};

// How the work is cut to stay within memory (per rank: `memory` is each rank's).
//
// The tensors live by occupied block: block I holds the (i1 - i0) nvir rows of its orbitals, contiguous, for some
// range of auxiliary columns. The transformation writes every block's rows of the rank's own auxiliary columns (the
// A store); with several ranks one redistribution sends each block to the rank that holds it (the B store), which
// fits it; on one rank the A store is the B store and is fitted in place. In memory or in a scratch file (storage).
struct BlockPlan {
  Mp2Storage storage = Mp2Storage::memory;  // memory or scratch (never automatic)
  linalg::Index aux_block = 0;       // auxiliary functions transformed at once
  linalg::Index fit_rows = 0;        // rows of a block fitted at once (GEMM fitting, or fitting in another precision)
  linalg::Index occupied_block = 0;  // active occupied orbitals per block (pairs, storage, fitting)
  int ranks = 1;                     // the ranks planned for
  double fixed_bytes = 0;            // held throughout: metric factor, orbitals
  double peak_bytes = 0;             // the largest of the phases below
  double scratch_bytes = 0;          // the scratch files (scratch storage), this rank's
  // Per phase, everything the phase holds at its peak (the fixed part included), for the memory plan's table.
  double metric_bytes = 0, transform_bytes = 0, fitting_bytes = 0, pair_bytes = 0;
  // The spaces it was made for, in the order their rows are stacked (run_dfmp2 runs it on those only).
  std::vector<SpinSpace> spaces;
};

// Picks the storage and block sizes so the working set of each of `ranks` ranks stays under `memory_bytes`; throws
// ResourceError when even the smallest blocks do not fit, naming the phase and what is needed. `working_copies`: what
// the backend allocates per call beyond its operands (working_copies_of), counted in every phase; with copies, the
// fitting runs in row chunks so that they are copies of a chunk, not of a whole block. `aux_unit`: the largest
// block of auxiliary functions the source cannot cut (a shell; ThreeIndexSource::largest_block(1)).
// `spaces`: one SpinSpace (RHF) or two (UHF, ROHF); both spins' tensors are held at once. `distributed_factor`: the
// metric factor is distributed over the ranks (distributed_metric), naux^2 / ranks each (twice while it is laid out
// for the solves), and the fitting holds one padded block more.
BlockPlan plan_blocks(ThreeIndexForm form, linalg::Index nbf, const std::vector<SpinSpace>& spaces,
                      linalg::Index naux, double memory_bytes, Precision precision = Precision::fp64,
                      MetricMethod metric = MetricMethod::cholesky, bool screening = false,
                      Mp2Storage storage = Mp2Storage::automatic, double working_copies = 0, int ranks = 1,
                      linalg::Index aux_unit = 1, bool distributed_factor = false);
// A closed-shell reference's plan: one space of nact of nocc orbitals and nvir virtual ones.
inline BlockPlan plan_blocks(ThreeIndexForm form, linalg::Index nbf, linalg::Index nocc, linalg::Index nact,
                             linalg::Index nvir, linalg::Index naux, double memory_bytes,
                             Precision precision = Precision::fp64, MetricMethod metric = MetricMethod::cholesky,
                             bool screening = false, Mp2Storage storage = Mp2Storage::automatic,
                             double working_copies = 0, int ranks = 1, linalg::Index aux_unit = 1) {
  return plan_blocks(form, nbf, {SpinSpace{nocc, nact, nvir}}, naux, memory_bytes, precision, metric, screening,
                     storage, working_copies, ranks, aux_unit);
}

// Who does what in one DF-MP2 run over `ranks` ranks (README "MPI"):
//   transform   the auxiliary blocks are cut from whole units of the source (shells) and given to the ranks in
//               contiguous runs of about naux / ranks functions; each rank transforms its own
//   storage     occupied blocks (every space's, alpha then beta) are held in contiguous runs of about equal counts
//   pairs       every block pair I >= J of one system over the blocks in that order; largest first, each goes to
//               whichever of its holders has less work so far (a tie: I's holder when I + J is odd, else J's),
//               unless another rank has less work than that by more than the pair's cost: that rank computes it,
//               fetching both blocks (so ranks that hold no block compute pairs too). A diagonal pair is half a
//               GEMM; one block is fetched for each pair whose blocks two ranks hold
// The energies are summed over every pair in `pairs` order on every rank, so they do not depend on the rank count.
struct Mp2Layout {
  int ranks = 1, rank = 0;
  std::vector<std::pair<linalg::Index, linalg::Index>> aux_blocks;  // [p0, p1), every rank's, in order
  std::vector<int> aux_rank;                                        // who transforms each
  std::vector<linalg::Index> col0;  // per rank its first auxiliary column, col0[ranks] = naux
  linalg::Index occupied_block = 1;                                 // active occupied orbitals per block
  std::vector<std::pair<linalg::Index, linalg::Index>> occupied;    // active occupied blocks [i0, i1) of their space
  std::vector<int> occupied_spin;                                   // the space of each
  std::vector<int> occupied_rank;                                   // who holds each
  std::vector<OccupiedBlockPair> pairs;                             // every block pair, I-major
  std::vector<std::pair<linalg::Index, linalg::Index>> pair_blocks; // the blocks (I, J) of each
  std::vector<int> pair_rank;                                       // who computes each
  double predicted_imbalance = 1.0;  // the busiest rank's pair cost over the mean (the schedule's prediction)
  long long pairs_away = 0;          // pairs computed by a rank that holds neither block (both fetched)
  linalg::Index columns(int r) const { return col0[static_cast<std::size_t>(r) + 1] - col0[static_cast<std::size_t>(r)]; }
  // Relative cost of a pair (a diagonal pair is half a GEMM).
  static double pair_cost(const OccupiedBlockPair& p);
};
// `spaces`: the spaces whose rows are stacked, in order (their active orbitals and the system of each).
Mp2Layout make_layout(const ThreeIndexSource& source, linalg::Index aux_block, const std::vector<SpinSpace>& spaces,
                      linalg::Index occupied_block, int ranks, int rank);
// The largest Backend::working_copies over the operand formats a run of `precision` uses on `backend`.
double working_copies_of(const linalg::Backend& backend, Precision precision,
                         const std::map<std::string, linalg::MatmulMode>& step_modes);

// Block pairs I >= J over `nact` active occupied orbitals in blocks of `block`.
std::vector<OccupiedBlockPair> occupied_block_pairs(linalg::Index nact, linalg::Index block);

// SCS-MP2 (Grimme, J. Chem. Phys. 118, 9095 (2003)): the correlation energy as 6/5 of the opposite-spin part
// plus 1/3 of the same-spin part.
inline constexpr double kScsOppositeSpinScale = 6.0 / 5.0;
inline constexpr double kScsSameSpinScale = 1.0 / 3.0;

// SOS-MP2 (Jung et al., J. Chem. Phys. 121, 9793 (2004)): 1.3 of the opposite-spin part, none of the same-spin one.
inline constexpr double kSosOppositeSpinScale = 1.3;

// The scales of the two spin components in a correlation energy c_os E_os + c_ss E_ss: MP2 (1, 1), SCS-MP2 (6/5, 1/3),
// SOS-MP2 (1.3, 0), or a user's pair.
struct SpinScales {
  double opposite_spin = 1.0, same_spin = 1.0;
};

// The energy a run returns and differentiates (README "Spin-component scaling"), as Psi4 names the methods.
enum class Mp2Method { mp2, scs_mp2, sos_mp2 };
const linalg::NameTable<Mp2Method>& mp2_method_names();  // mp2, scs-mp2, sos-mp2
struct Mp2Model {
  Mp2Method method = Mp2Method::mp2;
  // SCS-MP2's scales (Psi4's mp2_os_scale, mp2_ss_scale): scs-mp2's energy, and the SCS lines every run reports.
  SpinScales scs{kScsOppositeSpinScale, kScsSameSpinScale};
  double sos = kSosOppositeSpinScale;  // mp2_sos_scale: sos-mp2's opposite-spin scale
  SpinScales scales() const {
    return method == Mp2Method::scs_mp2 ? scs : method == Mp2Method::sos_mp2 ? SpinScales{sos, 0.0} : SpinScales{};
  }
  // The method as Psi4's variables name it: "MP2", "SCS-MP2", "SOS-MP2".
  std::string label() const;
};

struct DfMp2Result {
  double opposite_spin = 0;
  double same_spin = 0;  // alpha-alpha plus beta-beta
  double same_spin_alpha = 0, same_spin_beta = 0;  // RHF: half of same_spin each
  // ROHF-MBPT(2): the singles term of the active semicanonical orbitals (DfMp2Input::singles_alpha); 0 otherwise.
  double singles = 0;
  // As Psi4 reports them: the singles term is part of the correlation energy and of the SCS one.
  double correlation() const { return singles + opposite_spin + same_spin; }
  // The scaled correlation energy: singles + c_os E_os + c_ss E_ss (singles unscaled, as in Psi4's SCS lines).
  double correlation(SpinScales s) const { return singles + s.opposite_spin * opposite_spin + s.same_spin * same_spin; }

  bool unrestricted = false;  // two spin spaces; nact and nvir are the alpha ones, the _beta ones the others
  linalg::Index nfrozen = 0, nact = 0, nvir = 0, naux = 0;
  linalg::Index nact_beta = 0, nvir_beta = 0;
  Precision precision = Precision::fp64;
  MetricMethod metric = MetricMethod::cholesky;
  std::map<std::string, linalg::MatmulMode> step_modes;  // operand format of each step (step_matmul_modes)
  double eigh_threshold = 0;                 // metric eigh: the relative threshold as run
  linalg::InverseSqrtReport metric_report;  // eigh / newton-schulz only
  ScreeningReport screening;
  BlockPlan plan;
  linalg::Index block_pairs = 0;
  double pair_imbalance = 1.0;  // the pair schedule's predicted max / mean cost per rank (Mp2Layout)
  long long pairs_away = 0;     // block pairs computed by a rank holding neither block
  // Per rank (rank order), per step (mp2_step_names order): what it did. One entry on one rank.
  std::vector<std::vector<linalg::PhaseStats>> ranks;
};

// Step 4 for one block pair of the fitted tensor B (nact*nvir x naux, element type W); sums in Acc.
// `workspace` is resized as needed and may be reused across calls.
template <class W, class Acc = double>
PairEnergy block_pair_energy(const OccupiedBlockPair& pair, const linalg::MatrixT<W>& fitted,
                             const linalg::Vector& eps_active_occ, const linalg::Vector& eps_vir,
                             linalg::Kernels& kernels, linalg::MatrixT<W>& workspace);
// The same with the two blocks given: b_i holds the rows of occupied block I ((i1 - i0) nvir x naux), b_j those of J.
template <class W, class Acc = double>
PairEnergy block_pair_energy(const OccupiedBlockPair& pair, linalg::ConstMatrixViewT<W> b_i,
                             linalg::ConstMatrixViewT<W> b_j, const linalg::Vector& eps_active_occ,
                             const linalg::Vector& eps_vir, linalg::Kernels& kernels, linalg::MatrixT<W>& workspace);
// The opposite-spin energy of a block pair of two spaces: sum (ia|jb)^2 / (e_i + e_j - e_a - e_b) over i, a of
// space space_i (block b_i, its energies eps_occ_i and eps_vir_i) and j, b of space space_j.
template <class W, class Acc = double>
double opposite_spin_pair_energy(const OccupiedBlockPair& pair, linalg::ConstMatrixViewT<W> b_i,
                                 linalg::ConstMatrixViewT<W> b_j, const linalg::Vector& eps_occ_i,
                                 const linalg::Vector& eps_vir_i, const linalg::Vector& eps_occ_j,
                                 const linalg::Vector& eps_vir_j, linalg::Kernels& kernels,
                                 linalg::MatrixT<W>& workspace);

// The blocking of a run of `options.precision` on `backend` for a caller that holds the input already (tests,
// benchmarks): plan_blocks with the input's sizes. The program plans every run before its SCF, from the reference's
// sizes (app/mp2_stage.cpp plan_dfmp2).
BlockPlan plan_for(const DfMp2Input& input, const DfMp2Options& options, const linalg::Backend& backend,
                   double memory_bytes, Mp2Storage storage = Mp2Storage::automatic, int ranks = 1);

// DF-MP2 cut as `plan` says (plan_blocks: the same plan on every rank, made for `options.comm`'s rank count; its
// scratch folder checked by the planner).
DfMp2Result run_dfmp2(const DfMp2Input& input, const BlockPlan& plan, const DfMp2Options& options,
                      linalg::Kernels& kernels);

// One of several references correlated in one run: its orbitals and its frozen core (each fragment of an
// interaction energy freezes its own atoms' core orbitals).
struct Mp2System {
  DfMp2Input input;
  int nfrozen = 0;
};
// The spaces of `systems`, in the order their rows are stacked: what plan_blocks is given for them.
std::vector<SpinSpace> mp2_spaces(const std::vector<Mp2System>& systems);
// Every system's energies, in order, from one run over all their spaces (see the top of this file). The systems share
// the first one's metric and three-index source; options.nfrozen is not read (each system has its own). The shared
// fields of the results (plan, ranks, block_pairs, metric_report, screening) describe the one run.
std::vector<DfMp2Result> run_dfmp2(const std::vector<Mp2System>& systems, const BlockPlan& plan,
                                   const DfMp2Options& options, linalg::Kernels& kernels);

}  // namespace dfmp2::chem
