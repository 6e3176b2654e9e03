#pragma once
// One `dfmp2 INPUT.yaml` calculation: opens the integral file once, then runs DF-MP2 on every backend named in
// the input, in each precision named, in order (backend-major), each run with its own kernel log.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "app/input.hpp"
#include "chem/df_jk.hpp"
#include "chem/dfmp2.hpp"
#include "chem/dfmp2_gradient.hpp"
#include "chem/vibrations.hpp"
#include "chem/integral_file.hpp"
#include "chem/integrals.hpp"
#include "chem/scf.hpp"
#include "chem/synthetic.hpp"
#include "devices/neuron/native_pipeline.hpp"
#include "linalg/comm.hpp"
#include "linalg/kernel_log.hpp"

namespace dfmp2::app {

struct BackendRun {
  std::string backend;
  std::string details;  // Backend::details(), read after the threads were set
  chem::Precision precision = chem::Precision::fp64;
  chem::DfMp2Result result;
  std::vector<chem::DfMp2Result> ghosted;  // Reference::ghosted's, in order, from the same run
  std::optional<double> unscreened_correlation;  // with screening.compare: the same run without screening
  linalg::KernelLog log;
  double wall_seconds = 0;
  double peak_flops = 0;  // device models: Tensor Engine peak for the run's precision (Backend::peak_flops)
  // Device models, closed shells without counterpoise fragments: the device-native pipeline's prediction beside the
  // library-structure one the kernels give (devices/neuron/native_pipeline.hpp).
  std::optional<devices::neuron::NativePipeline> native;
  std::string native_absent;  // device models without one: why
  bool modelled() const;  // a device model ran at least one kernel
  // Device models: the run's time on the device, i.e. the wall time with each modelled kernel's measured host
  // time replaced by its modelled time (host steps and fallbacks keep their measured times).
  double modelled_seconds() const;
};


// One phase of the memory plan: what it holds in memory at its peak and what it keeps on scratch.
struct PhasePlan {
  std::string phase;      // "SCF J/K", "MP2 transform", ...
  std::string storage;    // "memory", "scratch", "recompute", or "" where there is no choice
  std::string blocks;     // how it is cut, e.g. "aux block 512" or "occupied block 20"
  double memory_bytes = 0;   // held by the phase at its peak, besides what is in use at the start
  double scratch_bytes = 0;  // its scratch files
  std::string reason;     // why this storage
  double measured_bytes = 0;  // the process's measured peak resident memory during the phase (0: not measured)
};

// The plan for the whole run, made before any three-index integral is computed (README "Memory plan").
struct MemoryPlan {
  double budget = 0;      // `memory`
  double baseline = 0;    // resident when the run starts (the program, its libraries, the input) + memory_allowance
  std::string scratch_folder;
  std::vector<PhasePlan> phases;
  double mp2_budget = 0;  // what DF-MP2's blocks may hold (beside the orbitals, the metric, the integral engine)
  // The blocking of each DF-MP2 run (backend and precision), made once for all ranks: run_dfmp2 reads it.
  struct Mp2Run {
    std::string backend;
    chem::Precision precision;
    chem::BlockPlan blocks;
  };
  std::vector<Mp2Run> mp2_runs;
  // An interaction energy's counterpoise calculations: what the complex and the fragments in its basis share (the
  // phases above plan them together); empty otherwise.
  std::string shared;
  const chem::BlockPlan& mp2_blocks(const std::string& backend, chem::Precision precision) const;
  double peak_resident = 0;  // measured at the end (getrusage), for the report
  // Measured peak resident memory of each part of the run (the SCF, each DF-MP2 run), where Linux lets the peak be
  // reset between parts (/proc/self/clear_refs).
  std::vector<std::pair<std::string, double>> measured;
  double planned_peak() const;
};

// With `molecule:` input: what the program computed before DF-MP2.
struct MoleculeRun {
  chem::BasisSet basis, aux_basis, jk_basis;
  chem::ScfResult scf;
  chem::DfJkPlan jk_plan;                            // DF-SCF only
  chem::ExactJkPlan exact_plan;                      // exact SCF only
  linalg::Matrix metric;                             // (P|Q) over the MP2 fitting basis
  std::unique_ptr<chem::DirectThreeIndex> ao_3index;  // (P|mn) over the MP2 fitting basis, computed as it is read
  linalg::KernelLog log;                             // integrals and SCF kernels
  std::string backend;                               // the backend the SCF ran on (the first one named)
  double scf_seconds = 0, integral_seconds = 0;
  // Per rank (rank order), per phase of chem::scf_phase_names(): what it did.
  std::vector<std::vector<linalg::PhaseStats>> ranks;
  std::optional<std::string> saved_to;               // the integral file written after the SCF
  chem::DfMp2Input dfmp2_input() const { return dfmp2_input_for(scf); }
  // The DF-MP2 input of an SCF in this run's basis (its own, or a ghosted fragment's): the metric whole when it was
  // computed, and its tiles for a metric factored on the ranks' grid.
  chem::DfMp2Input dfmp2_input_for(const chem::ScfResult& result) const {
    chem::DfMp2Input in = chem::dfmp2_input_of(result, &metric, ao_3index.get());
    in.metric_tiles = [this](linalg::DistributedMatrix& tiles) { chem::coulomb_metric_tiles(aux_basis, tiles); };
    return in;
  }
};

// A fragment of an interaction energy in the complex's basis (the counterpoise correction): the complex's basis sets,
// J/K and DF-MP2 integrals, its own electrons and orbitals. Its SCF runs after the complex's on the same J/K; its
// DF-MP2 in the same run as the complex's (chem::Mp2System), so that the metric and the integrals serve both.
struct GhostedFragment {
  std::size_t fragment = 0;  // in molecule.fragments
  chem::Molecule molecule;   // the complex, the other fragments' atoms as ghosts (chem::fragment_in_complex_basis)
  chem::ScfReference scf_reference = chem::ScfReference::rhf;  // rhf for a singlet, else the complex's
  linalg::Index nocc = 0, nocc_beta = 0;
  int nfrozen = 0;
  chem::ScfResult scf;  // once the complex's SCF has run
  double scf_seconds = 0;
  std::vector<chem::SpinSpace> mp2_spaces(linalg::Index nmo) const;
};

// The reference state DF-MP2 starts from, whichever input made it: an integral file (`integrals:`), a synthetic
// problem (`synthetic:`) or the SCF of a molecule (`molecule:`). It owns its source, says what it is (for the
// report and the results file), and is the one place DF-MP2's input is taken from (dfmp2_input()).
struct Reference {
  std::string kind;         // "integrals", "synthetic" or "molecule"
  std::string description;  // one line: the file with its form and bases, the synthetic shape and seed, the molecule
  chem::ThreeIndexForm form = chem::ThreeIndexForm::ao;
  linalg::Index nbf = 0, nmo = 0, nocc = 0, naux = 0;  // nbf 0 in MO form; open shells: nocc is alpha's
  // The SCF reference; open shells (UHF, ROHF) also have beta orbitals, nocc_beta of them occupied.
  chem::ScfReference scf_reference = chem::ScfReference::rhf;
  linalg::Index nocc_beta = 0;
  bool open_shell() const { return scf_reference != chem::ScfReference::rhf; }
  // The spaces DF-MP2 correlates (chem::SpinSpace): one, or alpha and beta; then the ghosted fragments' (their
  // systems numbered from 1).
  std::vector<chem::SpinSpace> mp2_spaces() const;
  std::optional<double> scf_energy, nuclear_repulsion_energy;
  chem::IntegralFileMetadata metadata;  // empty for synthetic problems
  int nfrozen = 0;                      // frozen core orbitals (resolve_frozen_core)
  // Interaction energies with the counterpoise correction: the fragments in this reference's basis, correlated in
  // the same DF-MP2 runs.
  std::vector<GhostedFragment> ghosted;
  std::variant<std::monostate, std::unique_ptr<chem::IntegralFile>, std::unique_ptr<chem::SyntheticProblem>,
               std::unique_ptr<MoleculeRun>>
      source;

  // The source of each kind, or nullptr.
  const chem::IntegralFile* integral_file() const;
  const chem::SyntheticProblem* synthetic() const;
  const MoleculeRun* molecule() const;
  MoleculeRun* molecule();
  // What DF-MP2 reads (for a molecule: once its SCF has run): this reference's, then every ghosted fragment's.
  chem::DfMp2Input dfmp2_input() const;
  std::vector<chem::Mp2System> mp2_systems() const;
};

// A finished calculation: the input as read, the reference, the memory plan with its measured peaks, and one run per
// backend and precision. The report and the results file read it; what ran is in `runs`.
struct Calculation;
// Interaction energies without the counterpoise correction: a fragment in its own basis, a calculation of its own.
struct OwnBasisFragment {
  std::size_t fragment = 0;
  std::unique_ptr<Calculation> calc;
};

// driver: gradient. The DF-MP2 gradient of the reference's SCF, computed after the energy runs on the SCF's backend
// in fp64 (its GEMMs logged there; the derivative integrals and the Z-vector's J/K builds run on the host), with the
// SCF's J/K set up again as planned for the orbital response.
struct GradientRun {
  chem::DfMp2Gradient result;
  std::string backend;
  linalg::KernelLog log;
  double seconds = 0;
};

// driver: hessian. The Hessian from central differences of analytic gradients (each displaced geometry a gradient
// calculation of its own, every rank taking part in each), and its harmonic analysis.
struct HessianRun {
  linalg::Matrix hessian;  // 3 natoms x 3 natoms, Eh/bohr^2
  chem::Vibrations vibrations;
  double step = 0;         // bohr
  int displacements = 0;
  double seconds = 0;
};

// Which dense factorisations run on the ranks' grid and which stay replicated (README "MPI"), for the report and
// the results file.
struct GridMatrix {
  std::string name;        // "JK metric", "MP2 metric", "SCF eigenproblems"
  linalg::Index order = 0;
  bool distributed = false;
  std::string how;         // "ELPA Cholesky, ScaLAPACK pdtrsm" or why it is replicated
};
struct Factorisations {
  std::string libraries;   // linalg::dense_libraries(); empty without ScaLAPACK
  int grid_rows = 1, grid_cols = 1;
  linalg::Index min_order = 0;
  std::vector<GridMatrix> matrices;
};
struct Calculation;
Factorisations describe_factorisations(const Calculation& calc);

struct Calculation {
  int ranks = 1;    // MPI ranks the run was spread over
  std::string mpi;  // linalg::Comm::description()
  std::vector<double> rank_peak_resident;  // each rank's peak resident memory (getrusage), in rank order
  Input input;
  Reference reference;
  MemoryPlan memory;
  std::vector<BackendRun> runs;
  std::vector<OwnBasisFragment> own_basis;  // interaction.bsse nocp or both
  std::optional<GradientRun> gradient;      // driver: gradient or hessian
  std::optional<HessianRun> hessian;        // driver: hessian
};

// An interaction energy, complex minus fragments, of one backend run's energies (Eh): SCF, the MP2 correlation and
// its parts, SCS-MP2 and the totals.
struct InteractionEnergy {
  std::string scheme;  // "CP" (fragments in the complex's basis) or "NOCP" (each in its own), Psi4's prefixes
  double scf = 0, singles = 0, opposite_spin = 0, same_spin = 0, correlation = 0, scs_correlation = 0;
  double mp2_total() const { return scf + correlation; }
  double scs_total() const { return scf + scs_correlation; }
};
// One calculation of an interaction energy (the complex, a fragment in the complex's basis or in its own), with
// its SCF and the DF-MP2 result of one run (backend and precision).
struct InteractionPart {
  std::string name;          // "complex", "fragment 2"
  std::size_t fragment = 0;  // 1-based; 0 for the complex
  bool own_basis = false;    // in its own basis (NOCP); else in the complex's
  linalg::Index nbf = 0, nalpha = 0, nbeta = 0;
  int nfrozen = 0;
  const chem::ScfResult* scf = nullptr;
  const chem::DfMp2Result* mp2 = nullptr;
  double scf_seconds = 0;    // the complex's includes the shared J/K set-up; an own-basis fragment's its integrals
  double mp2_seconds = 0;    // an own-basis fragment's DF-MP2 run (the others share the complex's run)
  double total() const { return scf->energy + mp2->correlation(); }
};
// The complex, then the fragments in its basis, then those in their own, as run `run` gave them.
std::vector<InteractionPart> interaction_parts(const Calculation& calc, std::size_t run);
// Each scheme the input asks for (CP first): the complex's energies minus those of the fragments in its basis (CP)
// or in their own (NOCP), from run `run`.
std::vector<InteractionEnergy> interaction_energies(const Calculation& calc, std::size_t run);
// Eh to kcal/mol: CODATA 2014, the constants Psi4 1.3 takes from QCElemental.
inline constexpr double kHartreeToKcalMol = 627.5094737775374;
// Debye per atomic unit of dipole moment (e a0): CODATA 2014, as Psi4 1.3 prints it.
inline constexpr double kDebyePerAtomicUnit = 2.541746451895025;

// Resident memory of this process now, and its peak so far (bytes).
double resident_bytes();
// What the plan sets aside for memory no phase accounts for: the libraries' own buffers (OpenBLAS, libint2
// engines, HDF5 caches), thread stacks, the integral file's header datasets: 64 MiB + 64 MiB per thread.
double memory_allowance(int threads);
double peak_resident_bytes();
// Samples this process's resident memory every 2 ms on a thread of its own, so that each phase's peak can be told
// apart without touching the kernel's own peak counter (which getrusage and /usr/bin/time -v read: resetting it per
// phase would make them report less than the run's true peak). Spikes shorter than the interval can be missed; the
// run's peak in the report comes from getrusage.
class ResidentSampler {
 public:
  ResidentSampler();
  ~ResidentSampler();
  ResidentSampler(const ResidentSampler&) = delete;
  ResidentSampler& operator=(const ResidentSampler&) = delete;
  // The largest resident size sampled since the previous call (or since the start), and a new interval begins.
  double take_peak();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Number of frozen core orbitals the input asks for; throws InputError when it cannot be honoured.
int resolve_frozen_core(const Input& input, const Reference& reference);

// The pieces of a run, for the entry points that assemble one themselves (dfmp2 bench runs each cell on a backend it
// keeps between repetitions): what the calculation is, without any integral, its frozen core resolved; the memory
// plan for it on these backends (their working copies count), before any three-index integral; whether a backend
// can run what the input asks (UnsupportedError naming the key, unless the host fallback can); DF-MP2's options as
// the plan sets them; and one DF-MP2 run, blocked as the plan says (with screening.compare, again unscreened, logged apart).
Reference make_reference(const Input& input);
MemoryPlan make_memory_plan(const Input& input, const Reference& reference,
                            const std::vector<linalg::Backend*>& backends, int ranks, double resident_at_start);
// The scratch folder, checked once for the whole plan: it exists, is writable, and has room for the largest phase on
// scratch (ResourceError naming the phase otherwise). Nothing to check when no phase is on scratch.
void check_scratch(const MemoryPlan& plan);
void check_backend_can_run(const Input& input, linalg::Backend& backend, linalg::Backend* fallback);
// Whether a dense matrix of `order` (the DF-SCF's JK metric, the SCF's eigenproblems) is distributed over the
// ranks' grid: linalg::order_on_grid at the input's mpi.distributed_min_order (README "MPI").
bool order_on_grid(const Input& input, linalg::Index order, int ranks);
// Whether a DF-MP2 run of `precision` over `ranks` ranks factors its metric on the ranks' grid (README "MPI").
bool metric_on_grid(const Input& input, linalg::Index naux, chem::Precision precision, int ranks);
// Whether every DF-MP2 run of the input does (then no rank computes the whole metric).
bool every_mp2_metric_on_grid(const Input& input, linalg::Index naux, int ranks);
chem::DfMp2Options dfmp2_options(const Input& input, const Reference& reference, linalg::Comm& comm);
BackendRun run_dfmp2_on(linalg::Backend& backend, linalg::Backend* fallback, chem::Precision precision,
                        const Input& input, const Reference& reference, const MemoryPlan& plan,
                        chem::DfMp2Options options);

// `progress` (may be empty) receives one line per SCF iteration and per phase as the run goes; `phase_progress`
// (may be empty) the done/total counts of the DF-MP2 phases. Both are for the terminal.
Calculation run_calculation(const Input& input, linalg::Comm& comm,
                            const std::function<void(const std::string&)>& progress = {},
                            const std::function<void(const std::string&, long long, long long)>& phase_progress = {});

}  // namespace dfmp2::app
