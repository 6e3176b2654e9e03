#pragma once
// The YAML input of `dfmp2 INPUT.yaml`. Its keys are listed once in code (`input_keys()`, app/input.cpp) and
// documented once, with type, default and meaning, in the README's "Input keys" table; ReadInput.ReadmeListsEveryKey
// (tests/unit/test_input.cpp) fails when the two lists differ. Each key's field in `Input` below says what it holds.
#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chem/cbs/cbs.hpp"
#include "chem/scf/scf.hpp"
#include "chem/mp2/mp2.hpp"
#include "devices/device_options.hpp"
#include "devices/registry.hpp"
#include "app/instances.hpp"
#include "app/yaml_reader.hpp"  // edit_distance, nearest

namespace dfmp2::app {

struct FrozenCore {
  enum class Kind { none, psi4_rule, count } kind = Kind::none;
  int count = 0;  // for Kind::count
};

// The defaults of the keys that depend on the machine or the environment, in one place: Input's members start
// from them, so an Input built in code gets the same defaults as a YAML file that leaves the key out.
double available_memory_bytes();       // MemAvailable of /proc/meminfo, else physical memory
// memory: half of MemAvailable (/proc/meminfo), shared by the `node_ranks` ranks on this node; how the report names it.
double default_memory_bytes(int node_ranks = 1);
std::string default_memory_text(int node_ranks = 1);
std::string default_scratch_folder();  // scratch: $TMPDIR, else /tmp
int available_cores();                 // the limit of threads: the cores this process may run on (its CPU affinity)
int default_threads(int node_ranks = 1);  // threads: those cores, shared with the other ranks on the node
// mpi.distributed_min_order: matrices of order 3,000 and more are factored on the ranks' grid. Below it the
// replicated factor costs at most 72 MB per rank, and on two ranks of this machine the distributed Cholesky and
// eigensolver only break even near order 2,000 (bench/README.md "Distributed factorisations").
inline constexpr linalg::Index kDefaultDistributedMinOrder = 3000;
// mpi.cholesky and mpi.eigensolver: ELPA for both where the build has it (its Cholesky and its one-stage solver were
// the faster at orders 2,000-4,000 here), else ScaLAPACK's.
linalg::DenseOptions default_dense_options();
std::string default_compile_cache();   // device.compile_cache: $XDG_CACHE_HOME/dfmp2/neuron, else ~/.cache/...
std::string default_basis_dir();       // the basis set library: $DFMP2_BASIS_DIR's folders, then library_basis_dir()
std::string library_basis_dir();       // the library that came with the program (source tree, or <prefix>/share)
// The fitting set (`kind` "ri" or "jkfit") Psi4 1.3.2 takes for orbital basis `basis` when none is named.
std::string default_fitting(const std::string& basis, const std::string& kind);
// Where the running program is (the dfmp2 executable, or the Python module's shared object): an installed program
// finds its basis library from there. Called by main() and by the module when it loads.
void set_program_location(const std::string& path);

// Key `interaction`: the interaction energy of the molecule's fragments, counterpoise-corrected (cp: each fragment in
// the complex's basis, the other fragments' atoms as ghosts), uncorrected (nocp: each in its own basis), or both.
struct InteractionOptions {
  bool counterpoise = true;  // bsse cp or both
  bool uncorrected = false;  // bsse nocp or both
};

// Key `driver`: what the run returns, as QCSchema names it.
// hessian: the Hessian by central differences of analytic gradients, with harmonic frequencies and normal modes.
// What the run returns: the energy, its gradient, its Hessian, or the MP2 densities' properties (README "Properties").
enum class Driver { energy, gradient, hessian, properties };
inline const linalg::NameTable<Driver>& driver_names() {
  static const linalg::NameTable<Driver> t = {{Driver::energy, "energy"},
                                              {Driver::gradient, "gradient"},
                                              {Driver::hessian, "hessian"},
                                              {Driver::properties, "properties"}};
  return t;
}

// Key `cost` (README "Cost of a calculation"): the instance table the runs are priced on, and the instance CPU
// runs are priced as.
struct CostSettings {
  InstanceTable table;
  std::string cpu_instance;
};

// A basis-set extrapolation (README "Basis-set extrapolation"): `basis` as a series (cc-pv[dt]z) and key `cbs`.
// The run is the largest basis's calculation (`Input::basis`), with one of its own for each smaller basis.
struct CbsOptions {
  chem::BasisSeries scf, corl;  // the SCF's series (by default the correlation's largest) and the correlation's
  chem::CbsScheme scf_scheme = chem::CbsScheme::xtpl_highest_1;
  chem::CbsScheme corl_scheme = chem::CbsScheme::corl_xtpl_helgaker_2;
  std::optional<double> scf_alpha, corl_alpha;  // the schemes' defaults when not given
  chem::BasisSeries all;  // every basis either takes, ascending; the largest is Input::basis
};

struct Input {
  std::string path;       // the YAML file as given
  std::string integrals;  // resolved path of the HDF5 file (empty with `synthetic`)
  std::optional<chem::SyntheticShape> synthetic;
  std::string synthetic_name;  // the named shape, if one was used
  // With `molecule`: the program computes integrals and runs RHF itself.
  std::optional<chem::Molecule> molecule;
  std::string molecule_source;  // "molecule.xyz" (inline) or the resolved .xyz path
  std::string molecule_file;    // the resolved .xyz path with molecule.file, else empty
  std::string basis, aux_basis, jk_basis;
  bool jk_basis_given = false;  // scf.jk_basis named (else <basis>-jkfit, blended with the universal set)
  std::optional<CbsOptions> cbs;  // a basis series: the basis sets and schemes of the extrapolation
  chem::ScfReference reference = chem::ScfReference::rhf;  // key `reference`, or its default for the multiplicity
  std::string basis_dir = default_basis_dir();  // the basis set library
  chem::ScfOptions scf;
  std::optional<std::string> save_integrals;  // resolved path; empty optional = do not save
  FrozenCore frozen_core;
  std::optional<InteractionOptions> interaction;
  Driver driver = Driver::energy;
  // Key `properties` (driver: properties; README "MP2 properties"): what beyond the multipoles, charges and natural
  // orbitals the run gives.
  struct PropertiesOptions {
    std::array<double, 3> origin{};               // of the multipoles, bohr
    std::vector<std::array<double, 3>> esp_points;  // bohr: the electrostatic potential's, from esp_points
    std::string esp_points_file;                  // as resolved; empty: none
    bool esp_charges = false;                     // charges fitted to the potential on Merz-Kollman shells
    bool esp_charges_dipole = false;              // ... with the density's dipole held too
    double esp_density = 1.0;                     // points per angstrom^2 of the shells
    std::optional<std::string> molden, scf_molden;  // resolved paths of the Molden files to write
  } properties;
  // The input's list; without the key, the default backend (devices::default_backend(), measured on first use, so
  // an input that names its backends never waits for the calibration).
  std::vector<std::string> backends;
  std::vector<chem::Precision> precisions = {chem::Precision::fp64};
  // precision as a mapping: the precisions per backend (a backend not named runs in `precisions`).
  std::map<std::string, std::vector<chem::Precision>> backend_precisions;
  const std::vector<chem::Precision>& precisions_of(const std::string& backend) const {
    const auto it = backend_precisions.find(backend);
    return it == backend_precisions.end() ? precisions : it->second;
  }
  chem::MetricMethod metric = chem::MetricMethod::cholesky;
  double eigh_threshold = linalg::kDefaultEighThreshold;
  linalg::NewtonSchulzOptions newton_schulz;
  chem::ScreeningOptions screening;
  bool screening_compare = false;  // also run unscreened and report the energy change
  double memory_bytes = default_memory_bytes();
  std::string memory_text = default_memory_text();
  // What the process holds before the calculation (the program, its libraries, the input), measured by the
  // caller (main() does; 0 when a program builds the Input itself): the memory plan counts it against `memory`.
  double resident_at_start = 0;
  std::string scratch = default_scratch_folder();  // folder for scratch files
  chem::JkStorage jk_storage = chem::JkStorage::automatic;      // scf.jk_storage
  chem::Mp2Storage mp2_storage = chem::Mp2Storage::automatic;   // mp2_storage
  chem::Mp2Model mp2_model;  // method, mp2_os_scale, mp2_ss_scale, mp2_sos_scale (app/mp2_options.hpp)
  int threads = default_threads();
  // Key `mpi` (README "MPI"): matrices of this order or more (the metrics, the SCF's eigenproblem) are factored on
  // the ranks' grid when there are several ranks and the build has ScaLAPACK; the library for each factorisation.
  linalg::Index distributed_min_order = kDefaultDistributedMinOrder;
  linalg::DenseOptions dense = default_dense_options();
  std::optional<std::string> output;  // resolved path
  // Device models (key `device`): compile cache folder, parameter overrides; host_fallback lets ops a device
  // cannot run go to the host backend (counted in the report) instead of stopping the run.
  devices::DeviceOptions device{.overrides = {}, .compile_cache = default_compile_cache()};
  // device.step_precision: operand format per DF-MP2 step of bf16 and bf16x3 runs (chem::step_matmul_modes).
  std::map<std::string, linalg::MatmulMode> step_modes;
  bool host_fallback = false;
  // Priced runs: with `cost: true` or a mapping, and by default when a device model runs; none with `cost: false`.
  std::optional<CostSettings> cost;
  nlohmann::json as_read;             // the input as read, for the results file
  std::optional<nlohmann::json> qcschema;  // a QCSchema AtomicInput as read (app/qcschema.hpp), else none
};

// The top-level keys of a YAML input, in the order the README lists them.
const std::vector<std::string>& input_keys();

// Reads and checks the whole input; throws InputError (or UnsupportedError for a backend or precision that this
// build cannot run) with a one-line message naming the file, line:column and key.
// `node_ranks`: the ranks on this node, which share the default `memory` and `threads`.
Input read_input(const std::string& path, int node_ranks = 1);
// The same from a mapping already read (a YAML file's, or one translated from a QCSchema AtomicInput: app/qcschema.hpp),
// its messages placed by `ctx`.
Input input_from_mapping(const YAML::Node& root, const YamlReader& ctx, int node_ranks = 1);

// Parses a size such as "2 GiB", "500 MB", "1.5GB" or "1048576" (bytes); nullopt when it is not one.
std::optional<double> parse_memory_size(const std::string& text);



}  // namespace dfmp2::app
