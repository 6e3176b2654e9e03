#include <gtest/gtest.h>

#include <array>

#include <filesystem>
#include <fstream>
#include <set>

#include "../support/test_support.hpp"
#include "app/input.hpp"
#include "devices/eigen/eigen_backend.hpp"
#include "devices/openblas/openblas_backend.hpp"
#include "devices/packed/packed_backend.hpp"
#include "devices/calibration.hpp"
#include "devices/registry.hpp"
#include "linalg/bytes.hpp"
#include "linalg/errors.hpp"

namespace {

using dfmp2::app::parse_memory_size;

TEST(MemorySize, UnitsAndPlainBytes) {
  EXPECT_DOUBLE_EQ(*parse_memory_size("2 GiB"), 2.0 * 1073741824.0);
  EXPECT_DOUBLE_EQ(*parse_memory_size("500 MB"), 500e6);
  // Out of double's range is not a size (it was an internal error from std::stod).
  EXPECT_FALSE(parse_memory_size("1e400"));
  EXPECT_FALSE(parse_memory_size("1e-400"));
  EXPECT_DOUBLE_EQ(*parse_memory_size("1.5gb"), 1.5e9);
  EXPECT_DOUBLE_EQ(*parse_memory_size("1048576"), 1048576.0);
  EXPECT_DOUBLE_EQ(*parse_memory_size("64 KiB"), 65536.0);
  EXPECT_FALSE(parse_memory_size("lots"));
  EXPECT_FALSE(parse_memory_size("2 parsecs"));
  EXPECT_FALSE(parse_memory_size("0 GB"));
  EXPECT_FALSE(parse_memory_size("-1 GB"));
  EXPECT_FALSE(parse_memory_size(""));
}

TEST(Suggestions, NearestKey) {
  EXPECT_EQ(dfmp2::app::edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(dfmp2::app::edit_distance("", "abc"), 3u);
  const std::vector<std::string> keys = {"integrals", "frozen_core", "backends"};
  EXPECT_EQ(dfmp2::app::nearest("froze_core", keys), "frozen_core");
  EXPECT_EQ(dfmp2::app::nearest("backend", keys), "backends");
  EXPECT_FALSE(dfmp2::app::nearest("zzzzzz", keys));
}

// The one YAML reading layer: an enum by its name table (with the nearest name suggested), the one boolean rule,
// whole integers only, and file:line:column in every message.
TEST(YamlReader, ChoicesBooleansIntegers) {
  const dfmp2::app::YamlReader r("cfg.yaml");
  const YAML::Node doc = YAML::Load("a: mixed\nb: mixd\nc: Yes\nd: maybe\ne: 3x\nf: 7\n");
  EXPECT_EQ(r.choice(doc["a"], "a", dfmp2::chem::precision_names(), "precision"), dfmp2::chem::Precision::mixed);
  try {
    r.choice(doc["b"], "b", dfmp2::chem::precision_names(), "precision");
    FAIL() << "a misspelt name accepted";
  } catch (const dfmp2::InputError& e) {
    EXPECT_STREQ(e.what(), "cfg.yaml:2:4: key 'b': unknown precision 'mixd' (did you mean 'mixed'?) (expected one of "
                           "fp64, fp32, mixed, bf16, bf16x3)");
  }
  EXPECT_TRUE(r.boolean(doc["c"], "c"));
  EXPECT_THROW(r.boolean(doc["d"], "d"), dfmp2::InputError);
  EXPECT_THROW(r.integer(doc["e"], "e", 0), dfmp2::InputError);
  EXPECT_EQ(r.integer(doc["f"], "f", 0), 7);
  EXPECT_THROW(r.integer(doc["f"], "f", 8), dfmp2::InputError);
  // Names and enums come from one table each way.
  for (const auto& [p, name] : dfmp2::chem::precision_names()) EXPECT_EQ(dfmp2::chem::precision_name(p), name);
  for (const auto& [m, name] : dfmp2::chem::metric_names()) EXPECT_EQ(dfmp2::chem::metric_name(m), name);
}

TEST(ReadInput, DefaultsAndResolvedPaths) {
  namespace app = dfmp2::app;
  using dfmp2::chem::Precision;
  dfmp2::testing::TempDir dir;
  dir.file("ints.h5", "");
  const auto path = dir.file("in.yaml", "integrals: ints.h5\n");
  const auto in = app::read_input(path);
  EXPECT_EQ(in.path, path);
  EXPECT_EQ(in.integrals, (dir.path() / "ints.h5").string());
  EXPECT_FALSE(in.molecule);
  EXPECT_FALSE(in.synthetic);
  // The faster CPU backend on this machine, chosen at run time (devices::default_backend_choice).
  EXPECT_EQ(in.backends, std::vector<std::string>{dfmp2::devices::default_backend()});
  EXPECT_EQ(in.precisions, std::vector<Precision>{Precision::fp64});
  EXPECT_TRUE(in.backend_precisions.empty());
  EXPECT_EQ(in.metric, dfmp2::chem::MetricMethod::cholesky);
  EXPECT_EQ(in.eigh_threshold, 1e-10);
  EXPECT_EQ(in.newton_schulz.tolerance, 1e-10);
  EXPECT_EQ(in.newton_schulz.max_iterations, 100);
  EXPECT_FALSE(in.screening.enabled);
  EXPECT_EQ(in.screening.threshold, 1e-12);
  EXPECT_EQ(in.screening.block, 32);
  EXPECT_FALSE(in.screening_compare);
  EXPECT_EQ(in.frozen_core.kind, app::FrozenCore::Kind::none);
  // Half the memory available when the input is read (it moves a little between the two readings), named so.
  EXPECT_NEAR(in.memory_bytes, app::default_memory_bytes(), 0.05 * app::default_memory_bytes());
  EXPECT_NE(in.memory_text.find("(default: 50% of the"), std::string::npos) << in.memory_text;
  EXPECT_EQ(in.scratch, app::default_scratch_folder());
  EXPECT_EQ(in.scratch, std::getenv("TMPDIR") != nullptr && *std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp");
  EXPECT_EQ(in.jk_storage, dfmp2::chem::JkStorage::automatic);
  EXPECT_EQ(in.mp2_storage, dfmp2::chem::Mp2Storage::automatic);
  EXPECT_FALSE(in.save_integrals);
  EXPECT_EQ(in.threads, app::default_threads());
  EXPECT_GE(in.threads, 1);
  EXPECT_FALSE(in.output);
  EXPECT_EQ(in.device.compile_cache, app::default_compile_cache());
  EXPECT_TRUE(in.device.overrides.empty());
  EXPECT_TRUE(in.step_modes.empty());
  EXPECT_FALSE(in.host_fallback);
  EXPECT_EQ(in.basis_dir, app::default_basis_dir());
  EXPECT_EQ(in.as_read, nlohmann::json({{"integrals", "ints.h5"}}));
  // The SCF's defaults (molecule input), as the README gives them.
  const auto mol = app::read_input(dir.file("m.yaml", "molecule: {xyz: \"H 0 0 0\\nH 0 0 0.74\"}\nbasis: cc-pvdz\n"));
  EXPECT_EQ(mol.scf.type, dfmp2::chem::ScfType::df);
  EXPECT_EQ(mol.scf.e_convergence, 1e-8);
  EXPECT_EQ(mol.scf.d_convergence, 1e-8);
  EXPECT_EQ(mol.scf.max_iterations, 100);
  EXPECT_EQ(mol.scf.guess, dfmp2::chem::ScfGuess::sad);
  EXPECT_EQ(mol.scf.precision, dfmp2::chem::ScfPrecision::fp64);
  EXPECT_EQ(mol.aux_basis, "cc-pvdz-ri");
  EXPECT_EQ(mol.jk_basis, "cc-pvdz-jkfit");
  EXPECT_EQ(mol.molecule->charge, 0);
  // The fitting sets Psi4 1.3.2 picks for the bases without their own (its BasisSet.build(..., "RIFIT" / "JKFIT")).
  const std::vector<std::array<std::string, 3>> psi4_defaults = {
      {"6-31G", "cc-pvdz-ri", "cc-pvdz-jkfit"},
      {"6-31G**", "cc-pvdz-ri", "cc-pvdz-jkfit"},
      {"6-31+G*", "heavy-aug-cc-pvdz-ri", "heavy-aug-cc-pvdz-jkfit"},
      {"6-31++G**", "aug-cc-pvdz-ri", "aug-cc-pvdz-jkfit"},
      {"6-311G*", "cc-pvtz-ri", "cc-pvtz-jkfit"},
      {"6-311+G**", "heavy-aug-cc-pvtz-ri", "heavy-aug-cc-pvtz-jkfit"},
      {"6-311++G", "aug-cc-pvtz-ri", "aug-cc-pvtz-jkfit"},
      {"3-21G", "def2-qzvpp-ri", "def2-svp-jkfit"},
      {"jun-cc-pV(D+d)Z", "jun-cc-pvdz-ri", "jun-cc-pvdz-jkfit"},
      {"aug-cc-pV(D+d)Z", "aug-cc-pvdz-ri", "aug-cc-pvdz-jkfit"},
      {"aug-cc-pV(T+d)Z", "aug-cc-pvtz-ri", "aug-cc-pvtz-jkfit"},
      {"def2-SVPD", "def2-svpd-ri", "def2-svp-jkfit"},
      {"def2-TZVPD", "def2-tzvpd-ri", "def2-tzvp-jkfit"},
      {"def2-TZVPP", "def2-tzvpp-ri", "def2-tzvpp-jkfit"}};
  for (const auto& [basis, ri, jk] : psi4_defaults) {
    const auto in = app::read_input(dir.file("b.yaml", "molecule: {xyz: \"H 0 0 0\\nH 0 0 0.74\"}\nbasis: \"" + basis + "\"\n"));
    EXPECT_EQ(in.aux_basis, ri) << basis;
    EXPECT_EQ(in.jk_basis, jk) << basis;
  }
}

// The keys the parser takes (input_keys()) are the README's "Input keys" table's, no more and no fewer: the code and
// the documentation are the two places a key is listed, and they cannot drift apart.
TEST(ReadInput, ReadmeListsEveryKey) {
  std::ifstream readme(std::string(DFMP2_SOURCE_DIR) + "/README.md");
  ASSERT_TRUE(readme.good());
  std::set<std::string> documented;
  bool in_table = false;
  for (std::string line; std::getline(readme, line);) {
    if (line.rfind("### ", 0) == 0) in_table = line == "### Input keys";
    if (!in_table || line.rfind("| `", 0) != 0) continue;
    const std::size_t end = line.find('`', 3);
    documented.insert(line.substr(3, end - 3));
  }
  const auto& keys = dfmp2::app::input_keys();
  EXPECT_EQ(documented, std::set<std::string>(keys.begin(), keys.end()));
  EXPECT_EQ(keys.size(), documented.size()) << "a key listed twice in input_keys()";
}

// Every one of the top-level keys and every sub-key, each with a value other than its default, and where each
// lands in Input (three inputs: integrals, molecule and synthetic exclude each other).
TEST(ReadInput, EveryKey) {
  namespace app = dfmp2::app;
  using dfmp2::chem::Precision;
  dfmp2::testing::TempDir dir;
  dir.file("ints.h5", "");
  std::filesystem::create_directory(dir.path() / "scratch");
  std::filesystem::create_directory(dir.path() / "cache");
  std::set<std::string> covered;
  auto read = [&](const std::string& name, const std::string& yaml) {
    const auto in = app::read_input(dir.file(name, yaml));
    for (const auto& [key, value] : in.as_read.items()) covered.insert(key);
    return in;
  };
  const auto f = read("f.yaml",
                      "integrals: ints.h5\nfrozen_core: 3\nbackends: [eigen, openblas]\nprecision: [fp32, mixed]\n"
                      "metric: {method: newton-schulz, tolerance: 1e-9, max_iterations: 40}\n"
                      "screening: {threshold: 1e-11, block: 16, compare: true}\nmemory: 500 MB\nthreads: 1\n"
                      "output: out.json\nscratch: scratch\nmp2_storage: scratch\n"
                      "device: {compile_cache: cache, host_fallback: true}\n"
                      "mpi: {distributed_min_order: 500, cholesky: scalapack, eigensolver: scalapack}\n"
                      "cost: {cpu_instance: c7i.large}\nmethod: scs-mp2\nmp2_os_scale: 0.9\nmp2_ss_scale: 0.5\n");
  EXPECT_EQ(f.mp2_model.method, dfmp2::chem::Mp2Method::scs_mp2);
  EXPECT_EQ(f.mp2_model.scales().opposite_spin, 0.9);
  EXPECT_EQ(f.mp2_model.scales().same_spin, 0.5);
  const auto sos = read("sos.yaml", "integrals: ints.h5\nmethod: sos-mp2\nmp2_sos_scale: 1.2\n");
  EXPECT_EQ(sos.mp2_model.scales().opposite_spin, 1.2);
  EXPECT_EQ(sos.mp2_model.scales().same_spin, 0.0);
  EXPECT_EQ(f.distributed_min_order, 500);
  EXPECT_EQ(f.dense.cholesky, dfmp2::linalg::DenseLibrary::scalapack);
  EXPECT_EQ(f.dense.eigh, dfmp2::linalg::DenseLibrary::scalapack);
  EXPECT_EQ(f.frozen_core.kind, app::FrozenCore::Kind::count);
  EXPECT_EQ(f.frozen_core.count, 3);
  EXPECT_EQ(f.backends, (std::vector<std::string>{"eigen", "openblas"}));
  EXPECT_EQ(f.precisions, (std::vector<Precision>{Precision::fp32, Precision::mixed}));
  EXPECT_EQ(f.metric, dfmp2::chem::MetricMethod::newton_schulz);
  EXPECT_EQ(f.newton_schulz.tolerance, 1e-9);
  EXPECT_EQ(f.newton_schulz.max_iterations, 40);
  EXPECT_TRUE(f.screening.enabled);
  EXPECT_EQ(f.screening.threshold, 1e-11);
  EXPECT_EQ(f.screening.block, 16);
  EXPECT_TRUE(f.screening_compare);
  EXPECT_DOUBLE_EQ(f.memory_bytes, 500e6);
  EXPECT_EQ(f.memory_text, "500 MB");
  EXPECT_EQ(f.threads, 1);
  EXPECT_EQ(*f.output, (dir.path() / "out.json").string());
  EXPECT_EQ(f.scratch, (dir.path() / "scratch").string());
  EXPECT_EQ(f.mp2_storage, dfmp2::chem::Mp2Storage::scratch);
  EXPECT_EQ(f.device.compile_cache, (dir.path() / "cache").string());
  EXPECT_TRUE(f.host_fallback);
  EXPECT_EQ(f.as_read["frozen_core"], 3);
  EXPECT_EQ(f.as_read["memory"], "500 MB");
  // cost: CPU runs priced as the instance named, on the built-in table (README "Cost of a calculation").
  ASSERT_TRUE(f.cost.has_value());
  EXPECT_EQ(f.cost->cpu_instance, "c7i.large");
  EXPECT_EQ(f.cost->table.file, "devices/instances.yaml (built in)");
  ASSERT_NE(f.cost->table.find("trn1.2xlarge"), nullptr);
  EXPECT_EQ(f.cost->table.find("trn1.2xlarge")->slots, 2);
  EXPECT_EQ(f.cost->table.find("trn1.2xlarge")->usd_per_hour.value, 1.34375);
  ASSERT_NE(f.cost->table.find("c7i.large"), nullptr);
  EXPECT_EQ(f.cost->table.find("c7i.large")->runs, "cpu");
  EXPECT_EQ(f.cost->table.names("trn2"), std::vector<std::string>{"trn2.48xlarge"});

  dir.file("h2.xyz", "2\nhydrogen\nH 0 0 0\nH 0 0 0.74\n");
  const auto m = read("m.yaml",
                      "molecule: {file: h2.xyz, units: bohr, charge: 0, multiplicity: 1}\nbasis: cc-pvdz\n"
                      "aux_basis: cc-pvtz-ri\nscf: {type: df, jk_basis: cc-pvtz-jkfit, e_convergence: 1e-9, "
                      "d_convergence: 1e-7, max_iterations: 30, guess: core, jk_storage: scratch, precision: mixed}\n"
                      "save_integrals: h2.h5\nbackends: [eigen, trn1]\nprecision: {eigen: fp64, trn1: [fp32, bf16]}\n"
                      "metric: {method: eigh, threshold: 1e-8}\n"
                      "device: {step_precision: {transform: fp32}, trn1: {dispatch_ms: 0.5}}\n"
                      "perturb_dipole: [0.001, -0.002, 0]\n");
  EXPECT_EQ(m.scf.electric_field, (std::array<double, 3>{0.001, -0.002, 0.0}));
  EXPECT_EQ(m.molecule->atoms.size(), 2u);
  EXPECT_NEAR(m.molecule->atoms[1].z, 0.74 / dfmp2::chem::kBohrPerAngstrom, 1e-12);  // bohr, stored in angstrom
  EXPECT_EQ(m.molecule_file, (dir.path() / "h2.xyz").string());
  EXPECT_EQ(m.basis, "cc-pvdz");
  EXPECT_EQ(m.aux_basis, "cc-pvtz-ri");
  EXPECT_EQ(m.jk_basis, "cc-pvtz-jkfit");
  EXPECT_EQ(m.scf.e_convergence, 1e-9);
  EXPECT_EQ(m.scf.d_convergence, 1e-7);
  EXPECT_EQ(m.scf.max_iterations, 30);
  EXPECT_EQ(m.scf.guess, dfmp2::chem::ScfGuess::core);
  EXPECT_EQ(m.jk_storage, dfmp2::chem::JkStorage::scratch);
  EXPECT_EQ(m.scf.precision, dfmp2::chem::ScfPrecision::mixed);
  EXPECT_EQ(*m.save_integrals, (dir.path() / "h2.h5").string());
  EXPECT_EQ(m.precisions_of("eigen"), std::vector<Precision>{Precision::fp64});
  EXPECT_EQ(m.precisions_of("trn1"), (std::vector<Precision>{Precision::fp32, Precision::bf16}));
  EXPECT_EQ(m.metric, dfmp2::chem::MetricMethod::eigh);
  EXPECT_EQ(m.eigh_threshold, 1e-8);
  EXPECT_EQ(m.step_modes.at("transform"), dfmp2::linalg::MatmulMode::fp32);
  EXPECT_EQ(m.device.overrides.at("trn1").at("dispatch_ms"), 0.5);

  EXPECT_EQ(m.reference, dfmp2::chem::ScfReference::rhf);  // a singlet's default

  // An open shell: the multiplicity kept, the reference as asked, and UHF by default.
  const auto o = read("o.yaml", "molecule: {xyz: \"O 0 0 0\\nH 0 0 0.97\", multiplicity: 2}\nbasis: cc-pvdz\n"
                                "reference: rohf\n");
  EXPECT_EQ(o.molecule->multiplicity, 2);
  EXPECT_EQ(o.reference, dfmp2::chem::ScfReference::rohf);
  EXPECT_EQ(app::read_input(dir.file("u.yaml", "molecule: {xyz: \"O 0 0 0\\nO 0 0 1.2\", multiplicity: 3}\n"
                                               "basis: cc-pvdz\n")).reference,
            dfmp2::chem::ScfReference::uhf);

  // Fragments, as a list: each one's atoms, charge and multiplicity; the complex their sum (high spin).
  const auto fr = app::read_input(dir.file("fr.yaml", "molecule:\n  - {xyz: \"O 0 0 0\\nH 0 0 0.97\", multiplicity: 2}\n"
                                                      "  - {xyz: \"Na 3 0 0\", charge: 1}\nbasis: cc-pvdz\n"));
  ASSERT_EQ(fr.molecule->fragments.size(), 2u);
  EXPECT_EQ(fr.molecule->atoms.size(), 3u);
  EXPECT_EQ(fr.molecule->fragments[1].first, 2u);
  EXPECT_EQ(fr.molecule->charge, 1);
  EXPECT_EQ(fr.molecule->multiplicity, 2);
  EXPECT_EQ(fr.reference, dfmp2::chem::ScfReference::uhf);

  // Interaction energies: the schemes of `bsse` (cp by default).
  const std::string dimer = "molecule:\n  xyz: \"O 0 0 0\\nH 0 0 0.97\\nH 0.9 0 -0.3\\n--\\nHe 0 0 3\"\nbasis: cc-pvdz\n";
  for (const auto& [bsse, cp, nocp] : std::vector<std::tuple<std::string, bool, bool>>{
           {"", true, false}, {"{bsse: cp}", true, false}, {"{bsse: nocp}", false, true}, {"{bsse: both}", true, true}}) {
    const auto ie = read("ie.yaml", dimer + "interaction: " + (bsse.empty() ? "{}" : bsse) + "\n");
    ASSERT_TRUE(ie.interaction.has_value()) << bsse;
    EXPECT_EQ(ie.interaction->counterpoise, cp) << bsse;
    EXPECT_EQ(ie.interaction->uncorrected, nocp) << bsse;
  }
  EXPECT_FALSE(read("no_ie.yaml", dimer).interaction.has_value());

  // The driver: energy by default, gradient and hessian for a closed-shell molecule.
  const std::string water = "molecule:\n  xyz: \"O 0 0 0\\nH 0 0 0.97\\nH 0.9 0 -0.3\"\nbasis: cc-pvdz\n";
  EXPECT_EQ(read("energy.yaml", water).driver, app::Driver::energy);
  EXPECT_EQ(read("gradient.yaml", water + "driver: gradient\n").driver, app::Driver::gradient);
  EXPECT_EQ(read("hessian.yaml", water + "driver: hessian\n").driver, app::Driver::hessian);
  // driver: properties with every `properties` sub-key: points in angstrom (the default) or bohr, the Molden paths
  // resolved beside the input.
  dir.file("grid.dat", "0 0 3\n# a comment\n\n1.5 -2 0.25\n");
  const auto pr = read("properties.yaml", water + "driver: properties\nproperties: {origin: [0.5, 0, -1], "
                                          "esp_points: grid.dat, esp_units: bohr, esp_charges: {dipole: true, "
                                          "density: 2.5}, molden: no.molden, scf_molden: scf.molden}\n");
  EXPECT_EQ(pr.driver, app::Driver::properties);
  EXPECT_EQ(pr.properties.origin, (std::array<double, 3>{0.5, 0.0, -1.0}));
  ASSERT_EQ(pr.properties.esp_points.size(), 2u);
  EXPECT_EQ(pr.properties.esp_points[1], (std::array<double, 3>{1.5, -2.0, 0.25}));
  EXPECT_TRUE(pr.properties.esp_charges);
  EXPECT_TRUE(pr.properties.esp_charges_dipole);
  EXPECT_EQ(pr.properties.esp_density, 2.5);
  EXPECT_EQ(*pr.properties.molden, (dir.path() / "no.molden").string());
  EXPECT_EQ(*pr.properties.scf_molden, (dir.path() / "scf.molden").string());
  const auto angstrom = read("angstrom.yaml", water + "driver: properties\nproperties: {esp_points: grid.dat}\n");
  EXPECT_NEAR(angstrom.properties.esp_points[0][2], 3.0 * dfmp2::chem::kBohrPerAngstrom, 1e-12);
  EXPECT_FALSE(angstrom.properties.esp_charges);
  // external_charges: [q, x, y, z] in e and angstrom, kept in bohr for the SCF.
  const auto embedded = read("embedded.yaml", water + "external_charges: [[-0.834, 1.5, 0, -2.0], [0.417, 0.5, 0, -3.5]]\n");
  ASSERT_EQ(embedded.scf.external_charges.size(), 2u);
  EXPECT_EQ(embedded.scf.external_charges[1].first, 0.417);
  EXPECT_NEAR(embedded.scf.external_charges[0].second[2], -2.0 * dfmp2::chem::kBohrPerAngstrom, 1e-12);
  // A basis series and key cbs: the run's own basis is the correlation series' largest, every basis once.
  const auto series = read("cbs.yaml", "molecule: {xyz: \"O 0 0 0\\nH 0 0.76 0.59\\nH 0 -0.76 0.59\"}\n"
                                       "basis: cc-pv[tq]z\ncbs:\n  scf_basis: cc-pv[dtq]z\n  corl_scheme: "
                                       "corl_xtpl_helgaker_2\n  corl_alpha: 3.1\n  scf_scheme: scf_xtpl_helgaker_3\n");
  ASSERT_TRUE(series.cbs.has_value());
  EXPECT_EQ(series.basis, "cc-pvqz");
  EXPECT_EQ(series.aux_basis, "cc-pvqz-ri");
  EXPECT_EQ(series.cbs->all.names, (std::vector<std::string>{"cc-pvdz", "cc-pvtz", "cc-pvqz"}));
  EXPECT_EQ(series.cbs->corl.zetas, (std::vector<int>{3, 4}));
  EXPECT_EQ(series.cbs->scf_scheme, dfmp2::chem::CbsScheme::scf_xtpl_helgaker_3);
  EXPECT_EQ(*series.cbs->corl_alpha, 3.1);

  const auto s = read("s.yaml", "synthetic: {nbasis: 40, nocc: 6, naux: 90, seed: 11}\n");
  EXPECT_EQ(s.synthetic->nbasis, 40);
  EXPECT_EQ(s.synthetic->nocc, 6);
  EXPECT_EQ(s.synthetic->naux, 90);
  EXPECT_EQ(s.synthetic->seed, 11u);
  EXPECT_EQ(app::read_input(dir.file("n.yaml", "synthetic: {shape: medium, seed: 7}\n")).synthetic_name, "medium");

  // The test covers the README's every key.
  for (const auto& key : app::input_keys()) EXPECT_TRUE(covered.count(key)) << "key '" << key << "' not read here";
  EXPECT_EQ(app::input_keys().size(), 31u);
}

TEST(ReadInput, PrecisionListAndMetricMapping) {
  using dfmp2::chem::Precision;
  dfmp2::testing::TempDir dir;
  dir.file("ints.h5", "");
  const auto in = dfmp2::app::read_input(dir.file(
      "in.yaml", "integrals: ints.h5\nprecision: [mixed, fp64]\nmetric: {method: newton-schulz, tolerance: 1e-9, "
                 "max_iterations: 40}\n"));
  EXPECT_EQ(in.precisions, (std::vector<Precision>{Precision::mixed, Precision::fp64}));
  EXPECT_EQ(in.metric, dfmp2::chem::MetricMethod::newton_schulz);
  EXPECT_DOUBLE_EQ(in.newton_schulz.tolerance, 1e-9);
  EXPECT_EQ(in.newton_schulz.max_iterations, 40);
  const auto eigh = dfmp2::app::read_input(dir.file("e.yaml", "integrals: ints.h5\nmetric: {method: eigh, threshold: 1e-8}\nprecision: fp32\n"));
  EXPECT_EQ(eigh.metric, dfmp2::chem::MetricMethod::eigh);
  EXPECT_DOUBLE_EQ(eigh.eigh_threshold, 1e-8);
  EXPECT_EQ(eigh.precisions, std::vector<Precision>{Precision::fp32});
  EXPECT_EQ(dfmp2::app::read_input(dir.file("s.yaml", "integrals: ints.h5\nmetric: eigh\n")).metric,
            dfmp2::chem::MetricMethod::eigh);
}

TEST(ReadInput, FrozenCoreTrueIsPsi4Rule) {
  dfmp2::testing::TempDir dir;
  dir.file("ints.h5", "");
  const auto in = dfmp2::app::read_input(dir.file("in.yaml", "integrals: ints.h5\nfrozen_core: true\n"));
  EXPECT_EQ(in.frozen_core.kind, dfmp2::app::FrozenCore::Kind::psi4_rule);
}

TEST(Bytes, FormattedWithAUnitThatShowsThem) {
  using dfmp2::linalg::format_bytes;
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1000), "1000 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(15.0 * 1048576), "15.0 MiB");
  EXPECT_EQ(format_bytes(150.0 * 1073741824), "150 GiB");
  EXPECT_EQ(format_bytes(2.0 * 1099511627776.0), "2.00 TiB");
}

}  // namespace

// The default backend is the fastest of this machine's calibration (devices/calibration.hpp), which names every
// built CPU backend with its rate, and says so.
TEST(DefaultBackend, IsTheFastestOfTheCalibration) {
  const auto& c = dfmp2::devices::machine_calibration();
  std::vector<std::string> calibrated;
  for (const auto& r : c.rates) {
    calibrated.push_back(r.backend);
    EXPECT_GT(r.gflops, 0) << r.backend;
  }
  std::vector<std::string> cpu;
  for (const auto& name : dfmp2::devices::built_backends())
    if (!dfmp2::devices::is_device_model(name)) cpu.push_back(name);
  EXPECT_EQ(calibrated, cpu);
  const auto& choice = dfmp2::devices::default_backend_choice();
  EXPECT_EQ(choice.name, dfmp2::devices::fastest(c.rates).backend) << choice.reason;
  for (const auto& r : c.rates) EXPECT_LE(dfmp2::devices::fastest(c.rates).seconds, r.seconds);
  EXPECT_NE(choice.reason.find(dfmp2::devices::calibration_summary(c)), std::string::npos) << choice.reason;
  EXPECT_NE(c.key.find("kernels " + dfmp2::devices::openblas_kernel_set()), std::string::npos) << c.key;
}
