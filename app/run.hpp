#pragma once
// One `dfmp2 INPUT.yaml` calculation and what it gives: the reference (app/reference.cpp), the memory plan
// (app/plan.hpp), one DF-MP2 run per backend and precision, interaction energies, the gradient and the Hessian.
// run_calculation (app/run.cpp) runs the stages the input asks for (app/stage.hpp).
#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "app/input.hpp"
#include "app/plan.hpp"
#include "app/resident.hpp"
#include "chem/scf/scf.hpp"
#include "chem/mp2/mp2.hpp"
#include "chem/gradient/gradient.hpp"
#include "chem/properties/properties.hpp"
#include "chem/io/io.hpp"
#include "chem/integrals/integrals.hpp"
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
  // driver: gradient: the run whose energy the gradient differentiates (energy_from_gradient, app/stage.hpp) has no
  // DF-MP2 run of its own: its energies are the gradient's amplitude pass's, its time the gradient step's, and its
  // kernels are in the gradient's table (the log here stays empty).
  bool energy_from_gradient = false;
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


// With `molecule:` input: what the program computed before DF-MP2.
struct MoleculeRun {
  chem::BasisSet basis, aux_basis, jk_basis;
  chem::ScfResult scf;
  chem::DfJkPlan jk_plan;                            // DF-SCF only
  chem::DfJkPlan gradient_jk_plan;                   // the same for the gradient's orbital response (app/gradient_stage.cpp)
  // driver: gradient, when the plan holds the SCF's J/K through DF-MP2: the SCF's J/K, handed to the gradient.
  bool keep_scf_jk = false;
  std::unique_ptr<chem::JkBuilder> scf_jk;
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
  std::vector<chem::SpinSpace> mp2_spaces(int system, linalg::Index nmo) const;
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
  // Occupied orbitals of the beta electrons, whatever the reference (RHF's are its doubly occupied ones).
  linalg::Index beta_occupied() const { return open_shell() ? nocc_beta : nocc; }
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
// SCF's J/K (kept from the SCF, or set up again as planned) for the orbital response.
struct GradientRun {
  chem::DfMp2Gradient result;  // the atoms' rows only
  // Among point charges (external_charges): the total energy's gradient with respect to each charge's position
  // (Eh/bohr, one row per charge).
  linalg::Matrix charge_gradient;
  std::string backend;
  linalg::KernelLog log;
  double seconds = 0;
};

// driver: properties: what the SCF's density, DF-MP2's unrelaxed and its relaxed density give (chem/properties), from
// the densities of the gradient stage run without its derivative integrals (app/properties_stage.cpp).
struct PropertiesRun {
  std::array<double, 3> origin{};  // of the multipoles, bohr
  chem::DensityProperties scf, unrelaxed, relaxed;
  // properties.esp_points: the electrostatic potential (Eh/e) of the SCF and the relaxed density at the points (bohr).
  std::vector<double> esp_scf, esp_relaxed;
  // properties.esp_charges: the charges fitted to each density's potential on the Merz-Kollman shells.
  std::vector<std::array<double, 3>> fit_points;  // bohr
  std::vector<double> fit_potential_scf, fit_potential_relaxed;
  std::optional<chem::FittedCharges> fitted_scf, fitted_relaxed;
  double seconds = 0;
};

// driver: gradient or hessian with `interaction` (bsse cp or both): the gradient of the counterpoise-corrected total
// energy E_AB(AB) - sum_k E_k(AB) + sum_k E_k(k) and that energy (the method's), from the complex's gradient and
// each fragment's calculation (app/counterpoise_gradient.cpp).
struct CounterpoiseGradient {
  struct Part {
    std::string name;         // "fragment 1 in the complex's basis", "fragment 1 in its own basis"
    double sign = 0;          // -1 in the complex's basis, +1 in its own
    double energy = 0;        // its total energy (Eh)
    linalg::Matrix gradient;  // in the complex's atoms (natoms x 3, Eh/bohr)
    int scf_iterations = 0;
    bool from_energy_orbitals = false;  // its SCF started from the orbitals the energy stages converged in its basis
  };
  std::vector<Part> parts;
  linalg::Matrix gradient;  // natoms x 3, Eh/bohr
  double energy = 0;
  double seconds = 0;       // the fragments' calculations
};

// driver: hessian. The Hessian from central differences of analytic gradients (each displaced geometry a gradient
// calculation of its own, spread over the ranks, each displaced calculation on one rank), and its harmonic analysis.
struct HessianRun {
  linalg::Matrix hessian;  // 3 natoms x 3 natoms, Eh/bohr^2
  chem::Vibrations vibrations;
  double step = 0;         // bohr
  int displacements = 0;
  // Each displaced geometry's SCF iterations, from the undisplaced orbitals (its guess), in displacement order.
  std::vector<int> scf_iterations;
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

// An interaction energy, complex minus fragments (chem/mp2/interaction.hpp).
using chem::InteractionEnergy;

// A basis-set extrapolation (input.cbs; app/cbs_stage.cpp): the calculation of each smaller basis, run after the
// largest basis's (the run's own), and the limits by the input's schemes, of the first backend's energies.
struct CbsRun {
  struct Basis {
    std::string name;
    int zeta = 0;
    std::unique_ptr<Calculation> calc;  // null for the run's own basis
    double scf = 0, correlation = 0;    // the SCF total energy and the method's correlation energy
  };
  std::vector<Basis> bases;  // every basis of either series, smallest first, the run's own last
  double scf = 0, correlation = 0;  // the limits: the SCF stage's and the correlation stage's
  double total() const { return scf + correlation; }
  // driver: gradient: the SCF stage's limit of the SCF gradients plus the correlation stage's of (total - SCF).
  std::optional<linalg::Matrix> gradient, scf_gradient;
  // With `interaction`: each scheme's interaction energy at the limit (its SCF part by the SCF stage's scheme, its
  // correlation parts by the correlation stage's).
  std::vector<InteractionEnergy> interaction;
  double seconds = 0;  // the smaller bases' calculations
};

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
  std::optional<CounterpoiseGradient> counterpoise;  // driver: gradient or hessian with interaction
  // The gradient the run returns: the counterpoise-corrected one with `interaction`, else the gradient stage's.
  const linalg::Matrix& returned_gradient() const {
    return counterpoise ? counterpoise->gradient : gradient->result.gradient;
  }
  std::optional<HessianRun> hessian;        // driver: hessian
  std::optional<PropertiesRun> properties;  // driver: properties
  std::optional<CbsRun> cbs;                // a basis series: the extrapolation
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
  double total(chem::SpinScales s = {}) const { return scf->energy + mp2->correlation(s); }
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

// Number of frozen core orbitals the input asks for; throws InputError when it cannot be honoured.
int resolve_frozen_core(const Input& input, const Reference& reference);

// The pieces of a run, for the entry points that assemble one themselves (dfmp2 bench runs each cell on a backend it
// keeps between repetitions): what the calculation is, without any integral, its frozen core resolved; the memory
// plan for it on these backends (their working copies count), before any three-index integral; whether a backend
// can run what the input asks (UnsupportedError naming the key, unless the host fallback can); DF-MP2's options as
// the plan sets them; and one DF-MP2 run, blocked as the plan says (with screening.compare, again unscreened, logged apart).
// make_memory_plan holds the rows planned without any integral: the SCF's matrices (molecule input) and DF-MP2's.
Reference make_reference(const Input& input);
MemoryPlan make_memory_plan(const Input& input, const Reference& reference,
                            const std::vector<linalg::Backend*>& backends, int ranks, double resident_at_start);
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
// The memory plan run_calculation would run `input` with (every stage planned, nothing run): a ResourceError with the
// one line of within_memory when it cannot fit.
MemoryPlan plan_calculation(const Input& input, linalg::Comm& comm);
// A basis series (input.cbs): every basis's calculation, smallest first, the largest the one returned, with its
// CbsRun (app/cbs_run.cpp); run_calculation comes here for a series.
Calculation run_cbs_calculation(const Input& input, linalg::Comm& comm,
                                const std::function<void(const std::string&)>& progress,
                                const std::function<void(const std::string&, long long, long long)>& phase_progress);
Calculation run_calculation(const Input& input, linalg::Comm& comm,
                            const std::function<void(const std::string&)>& progress = {},
                            const std::function<void(const std::string&, long long, long long)>& phase_progress = {});

}  // namespace dfmp2::app
