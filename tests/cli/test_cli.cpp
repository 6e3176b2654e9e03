// The dfmp2 command as a user runs it: every bad input gives one line on stderr naming the file, key or
// dataset, a specific non-zero exit code, nothing on stdout, and no results file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../support/test_support.hpp"

namespace {

namespace fs = std::filesystem;
using dfmp2::testing::run_command;
using dfmp2::testing::TempDir;

const std::string kWater = std::string(DFMP2_SOURCE_DIR) + "/inputs/water-cc-pvdz.h5";

struct BadInput {
  std::string name;
  std::string yaml;     // "@none" = do not write the input file
  int exit_code;
  std::string message;  // must appear in the single stderr line
};

std::ostream& operator<<(std::ostream& os, const BadInput& b) { return os << b.name; }

class BadInputs : public ::testing::TestWithParam<BadInput> {};

TEST_P(BadInputs, OneLineNamedErrorAndNoOutput) {
  const BadInput c = GetParam();
  TempDir dir;
  std::string yaml = c.yaml;
  for (std::size_t pos; (pos = yaml.find("@water")) != std::string::npos;) yaml.replace(pos, 6, kWater);
  const std::string input = (dir.path() / "in.yaml").string();
  if (yaml != "@none") dir.file("in.yaml", yaml);
  const std::string json = (dir.path() / "out.json").string();
  const auto r = run_command(std::string(DFMP2_BINARY) + " " + input + " --json " + json, dir);
  EXPECT_EQ(r.exit_code, c.exit_code) << r.err;
  EXPECT_NE(r.err.find(c.message), std::string::npos) << "stderr: " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "stderr: " << r.err;
  EXPECT_EQ(r.err.rfind("dfmp2: error: ", 0), 0u) << r.err;
  EXPECT_TRUE(r.out.empty()) << "stdout: " << r.out;
  EXPECT_FALSE(fs::exists(json));
  for (const auto& e : fs::directory_iterator(dir.path())) {
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cli, BadInputs,
    ::testing::Values(
        BadInput{"missing_input", "@none", 2, "in.yaml: no such file"},
        BadInput{"empty_input", "", 2, "in.yaml: the input is empty"},
        BadInput{"not_a_mapping", "- integrals\n", 2, "in.yaml:1:1: expected a mapping of keys"},
        BadInput{"yaml_syntax", "integrals: @water\nbackends: [openblas\n", 2, "YAML syntax error"},
        BadInput{"unknown_key_suggested", "integrals: @water\nfroze_core: true\n", 2,
                 "in.yaml:2:1: unknown key 'froze_core' (did you mean 'frozen_core'?)"},
        BadInput{"unknown_key_listed", "integrals: @water\ncolour: blue\n", 2,
                 "unknown key 'colour' (valid keys: integrals, synthetic, molecule, basis, aux_basis, scf, save_integrals, frozen_core, backends, precision, metric, screening, memory, threads, output, device)"},
        BadInput{"duplicate_key", "integrals: @water\nthreads: 1\nthreads: 2\n", 2, "in.yaml:3:1: key 'threads' is given twice"},
        BadInput{"screening_unknown_key", "integrals: @water\nscreening: {treshold: 1e-8}\n", 2,
                 "unknown key 'screening.treshold' (did you mean 'screening.threshold'?)"},
        BadInput{"screening_bad_threshold", "integrals: @water\nscreening: {threshold: -1}\n", 2,
                 "key 'screening.threshold': expected a number >= 0, got '-1'"},
        BadInput{"screening_bad_block", "integrals: @water\nscreening: {block: 0}\n", 2,
                 "key 'screening.block': expected a block size from 1 to 4096, got '0'"},
        BadInput{"screening_bad_compare", "integrals: @water\nscreening: {compare: maybe}\n", 2,
                 "key 'screening.compare': expected true or false, got 'maybe'"},
        BadInput{"screening_bad_scalar", "integrals: @water\nscreening: lots\n", 2,
                 "key 'screening': expected true, false or a mapping {threshold, block, compare}, got 'lots'"},
        BadInput{"molecule_not_mapping", "molecule: water\nbasis: cc-pvdz\n", 2,
                 "in.yaml:1:11: key 'molecule': expected a mapping {xyz: ..., units: angstrom, charge: 0}, got 'water'"},
        BadInput{"molecule_unknown_key", "molecule: {xyz: 'He 0 0 0', unit: bohr}\nbasis: cc-pvdz\n", 2,
                 "unknown key 'molecule.unit' (did you mean 'molecule.units'?)"},
        BadInput{"molecule_xyz_and_file", "molecule: {xyz: 'He 0 0 0', file: a.xyz}\nbasis: cc-pvdz\n", 2,
                 "keys 'molecule.xyz' and 'molecule.file' exclude each other"},
        BadInput{"molecule_no_geometry", "molecule: {charge: 0}\nbasis: cc-pvdz\n", 2,
                 "key 'molecule': missing 'xyz' (inline lines) or 'file' (an .xyz file)"},
        BadInput{"molecule_file_missing", "molecule: {file: none.xyz}\nbasis: cc-pvdz\n", 2,
                 "key 'molecule.file': cannot read '"},
        BadInput{"molecule_bad_element", "molecule: {xyz: 'Qq 0 0 0'}\nbasis: cc-pvdz\n", 2,
                 "line 1: 'Qq' is not an element symbol"},
        BadInput{"molecule_bad_units", "molecule: {xyz: 'He 0 0 0', units: feet}\nbasis: cc-pvdz\n", 2,
                 "key 'molecule.units': expected angstrom or bohr, got 'feet'"},
        BadInput{"molecule_bad_charge", "molecule: {xyz: 'He 0 0 0', charge: one}\nbasis: cc-pvdz\n", 2,
                 "key 'molecule.charge': expected an integer, got 'one'"},
        BadInput{"molecule_triplet", "molecule: {xyz: 'O 0 0 0', multiplicity: 3}\nbasis: cc-pvdz\n", 2,
                 "key 'molecule.multiplicity': 3 is not supported; dfmp2 does closed-shell RHF (multiplicity 1) only"},
        BadInput{"molecule_open_shell", "molecule: {xyz: 'H 0 0 0'}\nbasis: cc-pvdz\n", 2,
                 "key 'molecule': 1 electrons (charge 0) is an open shell or empty"},
        BadInput{"molecule_missing_basis", "molecule: {xyz: 'He 0 0 0'}\n", 2, "missing key 'basis'"},
        BadInput{"basis_unknown", "molecule: {xyz: 'He 0 0 0'}\nbasis: cc-pvqz\n", 2,
                 "key 'basis': no basis set 'cc-pvqz'"},
        BadInput{"basis_missing_element", "molecule: {xyz: 'Xe 0 0 0'}\nbasis: cc-pvdz\naux_basis: cc-pvdz-ri\n", 2,
                 "has no functions for element Xe"},
        BadInput{"basis_without_molecule", "integrals: @water\nbasis: cc-pvdz\n", 2,
                 "in.yaml:2:8: key 'basis' applies to 'molecule' input only"},
        BadInput{"scf_unknown_key", "molecule: {xyz: 'He 0 0 0'}\nbasis: cc-pvdz\nscf: {typ: df}\n", 2,
                 "unknown key 'scf.typ' (did you mean 'scf.type'?)"},
        BadInput{"scf_bad_type", "molecule: {xyz: 'He 0 0 0'}\nbasis: cc-pvdz\nscf: {type: hf}\n", 2,
                 "key 'scf.type': expected df or exact, got 'hf'"},
        BadInput{"scf_bad_guess", "molecule: {xyz: 'He 0 0 0'}\nbasis: cc-pvdz\nscf: {guess: huckel}\n", 2,
                 "key 'scf.guess': expected sad or core, got 'huckel'"},
        BadInput{"scf_jk_basis_exact", "molecule: {xyz: 'He 0 0 0'}\nbasis: cc-pvdz\nscf: {type: exact, jk_basis: x}\n", 2,
                 "key 'scf.jk_basis' applies to scf type df only"},
        BadInput{"scf_bad_convergence", "molecule: {xyz: 'He 0 0 0'}\nbasis: cc-pvdz\nscf: {e_convergence: 0}\n", 2,
                 "key 'scf.e_convergence': expected a positive number, got '0'"},
        BadInput{"scf_bad_iterations", "molecule: {xyz: 'He 0 0 0'}\nbasis: cc-pvdz\nscf: {max_iterations: -3}\n", 2,
                 "key 'scf.max_iterations': expected a count >= 1, got '-3'"},
        BadInput{"save_integrals_true", "molecule: {xyz: 'He 0 0 0'}\nbasis: cc-pvdz\nsave_integrals: true\n", 2,
                 "key 'save_integrals': expected a file path or false, got 'true'"},
        BadInput{"molecule_and_integrals", "integrals: @water\nmolecule: {xyz: 'He 0 0 0'}\n", 2,
                 "keys 'integrals' and 'molecule' exclude each other"},
        BadInput{"missing_integrals", "threads: 1\n", 2,
                 "missing required key 'integrals' (path of the HDF5 integral file), 'synthetic' (a synthetic problem) or 'molecule' (with basis)"},
        BadInput{"integrals_and_synthetic", "integrals: @water\nsynthetic: small\n", 2,
                 "in.yaml:2:12: keys 'integrals' and 'synthetic' exclude each other"},
        BadInput{"synthetic_unknown_shape", "synthetic: smal\n", 2,
                 "in.yaml:1:12: key 'synthetic': unknown shape 'smal' (did you mean 'small'?) (expected one of small, medium, large)"},
        BadInput{"synthetic_unknown_key", "synthetic: {nbasis: 10, nocc: 2, naux: 20, sed: 3}\n", 2,
                 "unknown key 'synthetic.sed' (did you mean 'synthetic.seed'?)"},
        BadInput{"synthetic_missing_naux", "synthetic: {nbasis: 10, nocc: 2}\n", 2, "key 'synthetic': missing 'naux'"},
        BadInput{"synthetic_no_virtuals", "synthetic: {nbasis: 10, nocc: 10, naux: 20}\n", 2,
                 "key 'synthetic.nocc': 10 leaves no virtual orbitals (nbasis 10)"},
        BadInput{"synthetic_bad_count", "synthetic: {nbasis: ten, nocc: 2, naux: 20}\n", 2,
                 "key 'synthetic.nbasis': expected an integer >= 2, got 'ten'"},
        BadInput{"synthetic_shape_and_sizes", "synthetic: {shape: small, nocc: 2}\n", 2,
                 "give either 'shape' or 'nbasis', 'nocc' and 'naux', not both"},
        BadInput{"synthetic_frozen_core_true", "synthetic: {nbasis: 10, nocc: 2, naux: 20}\nfrozen_core: true\n", 2,
                 "key 'frozen_core': true needs the molecule"},
        BadInput{"integrals_not_found", "integrals: none.h5\n", 2, "in.yaml:1:12: key 'integrals': file '"},
        BadInput{"integrals_wrong_type", "integrals: [a, b]\n", 2, "key 'integrals': expected a file path, got a list"},
        BadInput{"frozen_core_bad", "integrals: @water\nfrozen_core: maybe\n", 2,
                 "in.yaml:2:14: key 'frozen_core': expected true, false or a number of orbitals >= 0, got 'maybe'"},
        BadInput{"frozen_core_negative", "integrals: @water\nfrozen_core: -1\n", 2, "key 'frozen_core': expected true"},
        BadInput{"frozen_core_too_many", "integrals: @water\nfrozen_core: 5\n", 2,
                 "key 'frozen_core': freezing 5 orbitals leaves none of the 5 occupied orbitals"},
        BadInput{"backends_not_list", "integrals: @water\nbackends: openblas\n", 2, "key 'backends': expected a list"},
        BadInput{"backends_empty", "integrals: @water\nbackends: []\n", 2, "key 'backends': the list is empty"},
        BadInput{"backend_unknown", "integrals: @water\nbackends: [openbals]\n", 2,
                 "in.yaml:2:12: key 'backends': unknown backend 'openbals' (did you mean 'openblas'?) (built: eigen, openblas, trn1, trn2)"},
        BadInput{"backend_twice", "integrals: @water\nbackends: [eigen, eigen]\n", 2, "backend 'eigen' is named twice"},
        BadInput{"device_without_fp64", "integrals: @water\nbackends: [openblas, trn1]\nprecision: fp64\n", 4,
                 "in.yaml: key 'precision': backend 'trn1' cannot run gemm in fp64 (needed by precision fp64); "
                 "choose another precision, or set device.host_fallback: true"},
        BadInput{"bf16_on_cpu", "integrals: @water\nbackends: [eigen]\nprecision: bf16\n", 4,
                 "in.yaml: key 'precision': backend 'eigen' has no bf16 arithmetic"},
        BadInput{"device_eigh_metric", "integrals: @water\nbackends: [trn1]\nprecision: fp32\nmetric: eigh\n", 4,
                 "in.yaml: key 'metric': backend 'trn1' cannot run eigh in fp32 (needed by precision fp32 with metric eigh)"},
        BadInput{"device_not_mapping", "integrals: @water\ndevice: trn1\n", 2,
                 "in.yaml:2:9: key 'device': expected a mapping {compile_cache, host_fallback, trn1, trn2}"},
        BadInput{"device_unknown_key", "integrals: @water\ndevice: {fallback: true}\n", 2, "in.yaml:2:10: unknown key 'device.fallback' (valid keys: compile_cache, host_fallback, trn1, trn2)"},
        BadInput{"device_param_not_number", "integrals: @water\ndevice: {trn1: {queue_depth: deep}}\n", 2,
                 "key 'device.trn1.queue_depth': expected a number >= 0, got 'deep'"},
        BadInput{"device_param_unknown", "integrals: @water\nbackends: [trn1]\nprecision: fp32\ndevice: {trn1: {warp_speed: 9}}\n", 2,
                 "in.yaml: key 'device.trn1': "},
        BadInput{"precision_map_unknown_backend", "integrals: @water\nbackends: [eigen]\nprecision: {trn1: fp32}\n", 2,
                 "key 'precision': 'trn1' is not one of the backends (eigen)"},
        BadInput{"fallback_not_bool", "integrals: @water\ndevice: {host_fallback: maybe}\n", 2,
                 "key 'device.host_fallback': expected true or false, got 'maybe'"},
        BadInput{"precision_unknown", "integrals: @water\nprecision: fp16\n", 2, "key 'precision': unknown precision 'fp16'"},
        BadInput{"precision_twice", "integrals: @water\nprecision: [fp32, fp32]\n", 2,
                 "in.yaml:2:19: key 'precision': 'fp32' is named twice"},
        BadInput{"precision_empty_list", "integrals: @water\nprecision: []\n", 2, "key 'precision': the list is empty"},
        BadInput{"metric_unknown", "integrals: @water\nmetric: cholesy\n", 2,
                 "in.yaml:2:9: key 'metric': unknown method 'cholesy' (did you mean 'cholesky'?)"},
        BadInput{"metric_unknown_subkey", "integrals: @water\nmetric: {method: eigh, treshold: 1e-8}\n", 2,
                 "unknown key 'metric.treshold' (did you mean 'metric.threshold'?)"},
        BadInput{"metric_missing_method", "integrals: @water\nmetric: {threshold: 1e-8}\n", 2,
                 "key 'metric': missing 'method'"},
        BadInput{"metric_option_for_other_method", "integrals: @water\nmetric: {method: eigh, tolerance: 1e-8}\n", 2,
                 "key 'metric.tolerance' applies to method newton-schulz only, not eigh"},
        BadInput{"metric_bad_threshold", "integrals: @water\nmetric: {method: eigh, threshold: -1}\n", 2,
                 "key 'metric.threshold': expected a positive number, got '-1'"},
        BadInput{"metric_bad_iterations", "integrals: @water\nmetric: {method: newton-schulz, max_iterations: 0}\n", 2,
                 "key 'metric.max_iterations': expected a count >= 1, got '0'"},
        BadInput{"newton_schulz_not_converged", "integrals: @water\nmetric: {method: newton-schulz, max_iterations: 3}\n", 5,
                 "metric (P|Q), newton-schulz: Newton-Schulz inverse square root did not converge in 3 iterations"},
        BadInput{"memory_bad", "integrals: @water\nmemory: lots\n", 2,
                 "key 'memory': expected a size such as '2 GiB' or '500 MB', got 'lots'"},
        BadInput{"memory_too_small", "integrals: @water\nmemory: 10 KB\n", 6, "memory: 0.00 GiB is too small"},
        BadInput{"threads_zero", "integrals: @water\nthreads: 0\n", 2, "key 'threads': expected a number of threads >= 1, got '0'"},
        BadInput{"threads_list", "integrals: @water\nthreads: [1, 2]\n", 2, "key 'threads': expected a number of threads >= 1, got a list"}));

TEST(Cli, NoArgumentsIsOneLine) {
  TempDir dir;
  const auto r = run_command(DFMP2_BINARY, dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("input is required"), std::string::npos) << r.err;
}

TEST(Cli, UnknownFlagIsOneLine) {
  TempDir dir;
  const auto r = run_command(std::string(DFMP2_BINARY) + " x.yaml --jsn out.json", dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(Cli, OutputKeyFolderMissingIsCheckedBeforeTheRun) {
  TempDir dir;
  dir.file("in.yaml", "integrals: " + kWater + "\noutput: missing/out.json\n");
  const auto r = run_command(std::string(DFMP2_BINARY) + " " + (dir.path() / "in.yaml").string(), dir);
  EXPECT_EQ(r.exit_code, 7);
  EXPECT_NE(r.err.find("folder '" + (dir.path() / "missing").string() + "' does not exist"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
}

TEST(Cli, WaterOnTwoBackendsWritesQcSchemaResults) {
  TempDir dir;
  dir.file("in.yaml", "integrals: " + kWater + "\nbackends: [openblas, eigen]\nthreads: 2\noutput: res.json\n");
  const auto r = run_command(std::string(DFMP2_BINARY) + " " + (dir.path() / "in.yaml").string(), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_NE(r.out.find("Correlation Energy        =      -0.20403345708"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Backend comparison"), std::string::npos);
  EXPECT_NE(r.out.find("pair_energy    syrk          openblas"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("pair_energy    syrk          eigen"), std::string::npos) << r.out;

  std::ifstream in(dir.path() / "res.json");
  ASSERT_TRUE(in.good());
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["schema_name"], "qcschema_output");
  EXPECT_EQ(j["driver"], "energy");
  EXPECT_EQ(j["model"]["method"], "mp2");
  EXPECT_EQ(j["model"]["basis"], "cc-pvdz");
  EXPECT_EQ(j["provenance"]["creator"], "dfmp2");
  EXPECT_TRUE(j["success"].get<bool>());
  const auto& p = j["properties"];
  EXPECT_NEAR(p["mp2_correlation_energy"].get<double>(), -0.2040334570873595, 1e-9);
  EXPECT_NEAR(p["mp2_opposite_spin_correlation_energy"].get<double>(), -0.15244021342846026, 1e-9);
  EXPECT_NEAR(p["mp2_same_spin_correlation_energy"].get<double>(), -0.05159324365889925, 1e-9);
  EXPECT_NEAR(p["mp2_total_energy"].get<double>(), -76.23080145444223, 1e-9);
  EXPECT_NEAR(p["scf_total_energy"].get<double>(), -76.02676799735487, 1e-9);
  EXPECT_NEAR(p["nuclear_repulsion_energy"].get<double>(), 9.18919322496848, 1e-9);
  EXPECT_EQ(p["return_energy"], p["mp2_total_energy"]);
  EXPECT_EQ(j["return_result"], p["mp2_total_energy"]);
  EXPECT_EQ(p["calcinfo_nbasis"], 24);
  EXPECT_EQ(p["calcinfo_nmo"], 24);
  EXPECT_EQ(p["calcinfo_nalpha"], 5);
  EXPECT_EQ(j["molecule"]["symbols"], (nlohmann::json{"O", "H", "H"}));
  const auto& backends = j["extras"]["dfmp2"]["backends"];
  ASSERT_EQ(backends.size(), 2u);
  EXPECT_EQ(backends[0]["backend"], "openblas");
  EXPECT_EQ(backends[1]["backend"], "eigen");
  EXPECT_NEAR(backends[1]["properties"]["mp2_correlation_energy"].get<double>(), p["mp2_correlation_energy"].get<double>(), 1e-12);
  EXPECT_FALSE(backends[0]["kernels"].empty());
  EXPECT_EQ(j["extras"]["dfmp2"]["input"]["backends"], (nlohmann::json{"openblas", "eigen"}));
}

// Same seed, same energy on every backend and thread count; the results file says what the problem was.
TEST(Cli, SyntheticProblemIsReproducible) {
  TempDir dir;
  double energies[2];
  for (int threads : {1, 2}) {
    dir.file("in.yaml", "synthetic: {nbasis: 40, nocc: 6, naux: 90, seed: 11}\nbackends: [openblas, eigen]\nthreads: " +
                            std::to_string(threads) + "\n");
    const auto json = (dir.path() / "out.json").string();
    const auto r = run_command(std::string(DFMP2_BINARY) + " " + (dir.path() / "in.yaml").string() + " --json " + json, dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::ifstream in(json);
    const auto j = nlohmann::json::parse(in);
    EXPECT_EQ(j["extras"]["dfmp2"]["problem"]["kind"], "synthetic");
    EXPECT_EQ(j["extras"]["dfmp2"]["problem"]["synthetic"]["seed"], 11);
    EXPECT_EQ(j["model"]["basis"], "synthetic");
    const auto& b = j["extras"]["dfmp2"]["backends"];
    const double e0 = b[0]["properties"]["mp2_correlation_energy"], e1 = b[1]["properties"]["mp2_correlation_energy"];
    EXPECT_NEAR(e0, e1, 1e-12 * std::abs(e0));
    EXPECT_LT(e0, 0.0);
    energies[threads - 1] = e0;
  }
  EXPECT_NEAR(energies[0], energies[1], 1e-12 * std::abs(energies[0]));
}

// Molecule in: the SCF prints its iterations, saves the integral file, and a rerun from that file gives the same
// energies without an SCF.
TEST(Cli, MoleculeInputSavesIntegralsForARerun) {
  TempDir dir;
  dir.file("nh3.yaml",
           "molecule:\n  xyz: |\n    N 0.0 0.0 0.1\n    H 0.0 0.94 -0.27\n    H 0.81 -0.47 -0.27\n    H -0.81 -0.47 -0.27\n"
           "basis: def2-svp\naux_basis: def2-svp-ri\nscf: {type: df, jk_basis: def2-svp-jkfit, guess: core}\n"
           "frozen_core: true\n");
  const auto json1 = (dir.path() / "first.json").string();
  const auto r = run_command(std::string(DFMP2_BINARY) + " " + (dir.path() / "nh3.yaml").string() + " --json " + json1, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("@RHF iter   1:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("SCF converged in"), std::string::npos);
  ASSERT_TRUE(fs::exists(dir.path() / "nh3.h5"));
  dir.file("rerun.yaml", "integrals: nh3.h5\nfrozen_core: true\nbackends: [eigen]\n");
  const auto json2 = (dir.path() / "second.json").string();
  const auto r2 = run_command(std::string(DFMP2_BINARY) + " " + (dir.path() / "rerun.yaml").string() + " --json " + json2, dir);
  ASSERT_EQ(r2.exit_code, 0) << r2.err;
  EXPECT_EQ(r2.out.find("@RHF"), std::string::npos);
  std::ifstream in1(json1), in2(json2);
  const auto j1 = nlohmann::json::parse(in1), j2 = nlohmann::json::parse(in2);
  EXPECT_EQ(j1["keywords"]["num_frozen_docc"], 1);
  EXPECT_EQ(j2["keywords"]["num_frozen_docc"], 1);
  EXPECT_NEAR(j1["properties"]["scf_total_energy"].get<double>(), j2["properties"]["scf_total_energy"].get<double>(), 1e-12);
  EXPECT_NEAR(j1["properties"]["mp2_correlation_energy"].get<double>(),
              j2["properties"]["mp2_correlation_energy"].get<double>(), 1e-11);
  EXPECT_EQ(j1["molecule"]["symbols"], (nlohmann::json{"N", "H", "H", "H"}));
  const auto& scf = j1["extras"]["dfmp2"]["problem"]["scf"];
  EXPECT_EQ(scf["basis"], "def2-svp");
  EXPECT_EQ(scf["jk_basis"], "def2-svp-jkfit");
  EXPECT_GT(scf["iterations"].get<int>(), 1);
  EXPECT_GT(scf["mp2_integral_seconds"].get<double>(), 0.0);
  EXPECT_FALSE(scf["kernels"].empty());
  EXPECT_FALSE(j2["extras"]["dfmp2"]["problem"].contains("scf"));
}

TEST(Cli, ScfThatDoesNotConvergeIsANumericalError) {
  TempDir dir;
  dir.file("in.yaml", "molecule: {xyz: 'Ne 0 0 0'}\nbasis: cc-pvdz\nscf: {max_iterations: 2, guess: core}\nsave_integrals: false\n");
  const auto r = run_command(std::string(DFMP2_BINARY) + " " + (dir.path() / "in.yaml").string(), dir);
  EXPECT_EQ(r.exit_code, 5);
  EXPECT_NE(r.err.find("SCF did not converge in 2 iterations"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(Cli, JsonFlagOverridesOutputKeyAndFrozenCoreTrueUsesPsi4Rule) {
  TempDir dir;
  dir.file("in.yaml", "integrals: " + kWater + "\nfrozen_core: true\noutput: ignored.json\n");
  const auto json = (dir.path() / "flag.json").string();
  const auto r = run_command(std::string(DFMP2_BINARY) + " " + (dir.path() / "in.yaml").string() + " --json " + json, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(dir.path() / "ignored.json"));
  std::ifstream in(json);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["keywords"]["num_frozen_docc"], 1);
  EXPECT_NEAR(j["properties"]["mp2_correlation_energy"].get<double>(), -0.20169626059323578, 1e-9);
}

}  // namespace

namespace {

nlohmann::json run_json(const TempDir& dir, const std::string& yaml, dfmp2::testing::CommandResult* out = nullptr) {
  dir.file("in.yaml", yaml);
  const auto json = (dir.path() / "out.json").string();
  const auto r = run_command(std::string(DFMP2_BINARY) + " " + (dir.path() / "in.yaml").string() + " --json " + json, dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (out != nullptr) *out = r;
  std::ifstream in(json);
  return nlohmann::json::parse(in);
}

}  // namespace

// A device model next to the reference in one input: the trn1 runs differ from fp64 as fp32 and bf16 arithmetic
// do (bf16 clearly more), the report has the modelled table, and the second process finds its kernels in the
// compile cache (warm: cache loads instead of compiles, and a shorter modelled time).
TEST(Cli, DeviceModelNextToTheReferenceColdThenWarm) {
  TempDir dir;
  const std::string cache = (dir.path() / "cache").string();
  const std::string yaml = "synthetic: {nbasis: 60, nocc: 8, naux: 150, seed: 3}\nbackends: [eigen, trn1]\n"
                           "precision: {eigen: fp64, trn1: [fp32, bf16]}\ndevice: {compile_cache: " + cache + "}\n";
  dfmp2::testing::CommandResult cold_out, warm_out;
  const auto cold = run_json(dir, yaml, &cold_out);
  const auto warm = run_json(dir, yaml, &warm_out);
  for (const auto* j : {&cold, &warm}) {
    const auto& b = (*j)["extras"]["dfmp2"]["backends"];
    ASSERT_EQ(b.size(), 3u);
    EXPECT_EQ(b[0]["backend"], "eigen");
    EXPECT_TRUE(b[0]["modelled_seconds"].is_null());
    const double ref = b[0]["properties"]["mp2_correlation_energy"];
    const double fp32 = b[1]["properties"]["mp2_correlation_energy"];
    const double bf16 = b[2]["properties"]["mp2_correlation_energy"];
    EXPECT_EQ(b[1]["precision"], "fp32");
    EXPECT_EQ(b[2]["precision"], "bf16");
    EXPECT_GT(std::abs(fp32 - ref), 0.0);           // not the fp64 numbers
    EXPECT_LT(std::abs(fp32 - ref), 1e-5 * std::abs(ref));
    EXPECT_GT(std::abs(bf16 - ref), 10 * std::abs(fp32 - ref));  // bf16 operands: 8 bits of mantissa, not 24
    EXPECT_LT(std::abs(bf16 - ref), 1e-2 * std::abs(ref));
    EXPECT_DOUBLE_EQ(double(b[1]["difference_from_fp64"]), fp32 - ref);  // against eigen's fp64 run
    EXPECT_GT(double(b[1]["modelled_seconds"]), 0.0);
    EXPECT_GT(double(b[1]["peak_flops"]), 1e12);
    EXPECT_GT(double(b[2]["peak_flops"]), 3.5 * double(b[1]["peak_flops"]));  // bf16 at 4x the fp32 rate
    EXPECT_EQ(b[1]["fallback_calls"], 0);
  }
  auto sum = [](const nlohmann::json& run, const char* field) {
    double s = 0;
    for (const auto& k : run["kernels"])
      if (k.contains("modelled")) s += double(k["modelled"][field]);
    return s;
  };
  const auto& c1 = cold["extras"]["dfmp2"]["backends"][1];
  const auto& w1 = warm["extras"]["dfmp2"]["backends"][1];
  EXPECT_GT(sum(c1, "compiles"), 0);
  EXPECT_EQ(sum(c1, "cache_loads"), 0);
  EXPECT_EQ(sum(w1, "compiles"), 0);
  EXPECT_EQ(sum(w1, "cache_loads"), sum(c1, "compiles"));
  EXPECT_LT(double(w1["modelled_seconds"]), double(c1["modelled_seconds"]));
  EXPECT_NE(cold_out.out.find("Modelled device time on trn1"), std::string::npos);
  EXPECT_NE(cold_out.out.find("modelled [s]"), std::string::npos);
}

// fp64 on a device model runs only when the input allows the host fallback, and then every fallback call is
// counted and shown; the energy is the host's fp64 energy.
TEST(Cli, HostFallbackIsExplicitAndCounted) {
  TempDir dir;
  dfmp2::testing::CommandResult out;
  const auto j = run_json(dir,
                          "synthetic: {nbasis: 40, nocc: 6, naux: 90, seed: 11}\nbackends: [eigen, trn1]\n"
                          "precision: fp64\ndevice: {host_fallback: true, compile_cache: false}\n",
                          &out);
  const auto& b = j["extras"]["dfmp2"]["backends"];
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0]["fallback_calls"], 0);
  EXPECT_GT(int(b[1]["fallback_calls"]), 0);
  long counted = 0;
  for (const auto& k : b[1]["kernels"]) {
    if (k["fallback"]) {
      counted += long(k["calls"]);
      EXPECT_NE(std::string(k["backend"]).find("(fallback from trn1)"), std::string::npos);
    }
  }
  EXPECT_EQ(counted, int(b[1]["fallback_calls"]));
  EXPECT_NEAR(double(b[1]["properties"]["mp2_correlation_energy"]), double(b[0]["properties"]["mp2_correlation_energy"]),
              1e-12);
  EXPECT_NE(out.out.find("host fallback: "), std::string::npos);
}

// Without `precision`, the CPU backend runs in fp64 and the device model in fp32 (it has no fp64), and the
// device's difference is taken against the CPU's fp64 run.
TEST(Cli, DeviceModelDefaultsToFp32WithoutPrecision) {
  TempDir dir;
  const auto j = run_json(dir, "synthetic: {nbasis: 40, nocc: 6, naux: 90, seed: 11}\nbackends: [eigen, trn1]\n"
                               "device: {compile_cache: false}\n");
  const auto& b = j["extras"]["dfmp2"]["backends"];
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0]["precision"], "fp64");
  EXPECT_EQ(b[1]["precision"], "fp32");
  EXPECT_EQ(b[1]["fallback_calls"], 0);
  const double diff = b[1]["difference_from_fp64"];
  EXPECT_GT(std::abs(diff), 0.0);
  EXPECT_LT(std::abs(diff), 1e-5);
}
