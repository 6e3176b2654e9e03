// The dfmp2 command as a user runs it: every bad input gives one line on stderr naming the file, key or
// dataset, a specific non-zero exit code, nothing on stdout, and no results file.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>
#include <unistd.h>

#include <csignal>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../support/test_support.hpp"
#include "app/input.hpp"
#include "devices/calibration.hpp"
#include "devices/registry.hpp"

namespace {

namespace fs = std::filesystem;
using dfmp2::testing::run_command;
using dfmp2::testing::TempDir;

const std::string kWater = std::string(DFMP2_SOURCE_DIR) + "/inputs/water-cc-pvdz.h5";

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

// Without `backends` the run says which CPU backend was chosen at run time and why, in the report and the results
// file; with `backends` it says nothing of a default.
TEST(Cli, DefaultBackendIsChosenAtRunTimeAndSaysWhy) {
  TempDir dir;
  const auto json = (dir.path() / "out.json").string();
  dir.file("in.yaml", "synthetic: {nbasis: 30, nocc: 5, naux: 70, seed: 3}\n");
  auto r = run_command(std::string(DFMP2_BINARY) + " " + (dir.path() / "in.yaml").string() + " --json " + json, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto& choice = dfmp2::devices::default_backend_choice();
  EXPECT_NE(r.out.find("  default      " + choice.name + " (the fastest measured: "), std::string::npos) << r.out;
  const auto& calibration = dfmp2::devices::machine_calibration();
  for (const auto& rate : calibration.rates)  // every CPU backend's figure, as this process measured or read it
    EXPECT_NE(r.out.find(fmt::format("{} {:.1f}", rate.backend, rate.gflops)), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  run          backends " + choice.name + " "), std::string::npos) << r.out;
  {
    std::ifstream in(json);
    const auto j = nlohmann::json::parse(in);
    EXPECT_EQ(j["extras"]["dfmp2"]["default_backend"]["name"], choice.name);
    EXPECT_EQ(j["extras"]["dfmp2"]["default_backend"]["reason"], choice.reason);
    const auto& rates = j["extras"]["dfmp2"]["default_backend"]["calibration"]["rates"];
    ASSERT_EQ(rates.size(), calibration.rates.size());
    for (std::size_t i = 0; i < rates.size(); ++i) {
      EXPECT_EQ(rates[i]["backend"], calibration.rates[i].backend);
      EXPECT_NEAR(rates[i]["gflops"].get<double>(), calibration.rates[i].gflops, 1e-4 * calibration.rates[i].gflops);
    }
    EXPECT_EQ(j["extras"]["dfmp2"]["backends"][0]["backend"], choice.name);
  }
  dir.file("in.yaml", "synthetic: {nbasis: 30, nocc: 5, naux: 70, seed: 3}\nbackends: [eigen]\n");
  r = run_command(std::string(DFMP2_BINARY) + " " + (dir.path() / "in.yaml").string() + " --json " + json, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("  default  "), std::string::npos) << r.out;
  std::ifstream in(json);
  EXPECT_FALSE(nlohmann::json::parse(in)["extras"]["dfmp2"].contains("default_backend"));
}

// Molecule in: the SCF prints its iterations, saves the integral file, and a rerun from that file gives the same
// energies without an SCF.
TEST(Cli, MoleculeInputSavesIntegralsForARerun) {
  TempDir dir;
  dir.file("nh3.yaml",
           "molecule:\n  xyz: |\n    N 0.0 0.0 0.1\n    H 0.0 0.94 -0.27\n    H 0.81 -0.47 -0.27\n    H -0.81 -0.47 -0.27\n"
           "basis: def2-svp\naux_basis: def2-svp-ri\nscf: {type: df, jk_basis: def2-svp-jkfit, guess: core}\n"
           "frozen_core: true\nsave_integrals: true\n");
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

// scf.precision: mixed builds K in fp32 while the orbital gradient is large, then in fp64: the converged SCF and MP2
// energies are the fp64 run's within the convergence criteria, the early iterations say so, and the SCF kernel
// table holds the fp32 exchange.
TEST(Cli, MixedPrecisionScfConvergesToTheFp64Energy) {
  TempDir dir;
  const std::string waters = "molecule:\n  xyz: |\n    O 0 0 0.11779\n    H 0 0.755453 -0.471161\n"
                             "    H 0 -0.755453 -0.471161\n    O 0 0 3.11779\n    H 0 0.755453 2.528839\n"
                             "    H 0 -0.755453 2.528839\nbasis: cc-pvdz\naux_basis: cc-pvdz-ri\n";
  nlohmann::json results[2];
  std::string outputs[2];
  for (int mixed = 0; mixed < 2; ++mixed) {
    dir.file("in.yaml", waters + (mixed ? "scf: {precision: mixed}\n" : ""));
    const auto json = (dir.path() / "out.json").string();
    const auto r = run_command(std::string(DFMP2_BINARY) + " " + (dir.path() / "in.yaml").string() + " --json " + json, dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    outputs[mixed] = r.out + r.err;
    std::ifstream in(json);
    results[mixed] = nlohmann::json::parse(in);
  }
  const auto& scf = results[1]["extras"]["dfmp2"]["problem"]["scf"];
  EXPECT_EQ(scf["precision"], "mixed");
  EXPECT_GT(scf["fp32_iterations"].get<int>(), 0);
  EXPECT_LT(scf["fp32_iterations"].get<int>(), scf["iterations"].get<int>()) << "the last iterations are fp64";
  EXPECT_EQ(results[0]["extras"]["dfmp2"]["problem"]["scf"]["fp32_iterations"], 0);
  const double e64 = results[0]["properties"]["scf_total_energy"], emix = results[1]["properties"]["scf_total_energy"];
  EXPECT_NEAR(emix, e64, 1e-8);
  EXPECT_NEAR(results[1]["properties"]["mp2_correlation_energy"].get<double>(),
              results[0]["properties"]["mp2_correlation_energy"].get<double>(), 1e-8);
  EXPECT_NE(outputs[1].find("(fp32 K)"), std::string::npos) << outputs[1];
  EXPECT_EQ(outputs[0].find("(fp32 K)"), std::string::npos);
  bool fp32_exchange_logged = false;
  for (const auto& k : scf["kernels"])
    fp32_exchange_logged |= k["step"] == "scf_jk" && k["kernel"] == "gemm" && k["dtype"] == "fp32";
  EXPECT_TRUE(fp32_exchange_logged) << scf["kernels"].dump();
}

// The exact SCF keeps its integrals in memory when they fit (semi-direct), builds J and K incrementally after the
// first iteration, and says so in the memory plan, the JSON and the timing table. Its energies against Psi4 are
// the validation decks' and the live Psi4 tier's.
TEST(Cli, ExactScfIsSemiDirectAndIncremental) {
  TempDir dir;
  dir.file("in.yaml", "molecule:\n  xyz: |\n    O 0 0 0.11779\n    H 0 0.755453 -0.471161\n"
                      "    H 0 -0.755453 -0.471161\n    O 0 0 3.11779\n    H 0 0.755453 2.528839\n"
                      "    H 0 -0.755453 2.528839\nbasis: cc-pvdz\naux_basis: cc-pvdz-ri\nscf: {type: exact}\n"
                      "save_integrals: false\n");
  const auto json = (dir.path() / "out.json").string();
  const auto r = run_command(std::string(DFMP2_BINARY) + " " + (dir.path() / "in.yaml").string() + " --json " + json, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(json);
  const auto j = nlohmann::json::parse(in);
  const auto& scf = j["extras"]["dfmp2"]["problem"]["scf"];
  EXPECT_EQ(scf["jk_storage"], "semi-direct");
  EXPECT_GT(scf["exact_integrals"].get<double>(), 0.0);
  EXPECT_EQ(scf["exact_cached_integrals"], scf["exact_integrals"]);
  int full = 0, delta = 0;
  for (const auto& k : scf["kernels"]) {
    if (k["step"] != "scf_jk") continue;
    if (k["kernel"] == "exact_jk_full") full += k["calls"].get<int>();
    if (k["kernel"] == "exact_jk_delta") delta += k["calls"].get<int>();
  }
  const int iterations = scf["iterations"].get<int>();
  EXPECT_EQ(full + delta, iterations) << scf["kernels"].dump();
  EXPECT_EQ(full, (iterations + 7) / 8) << "a full build every 8";
  bool planned = false;
  for (const auto& ph : j["extras"]["dfmp2"]["memory_plan"]["phases"])
    planned |= ph["phase"] == "SCF J/K" && ph["storage"] == "semi-direct";
  EXPECT_TRUE(planned);
  EXPECT_NE(r.out.find("SCF J/K: exact, semi-direct"), std::string::npos) << r.out;
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
  // The two predictions: the library structure's per step (its kernels' modelled seconds) beside the device-native
  // one, which has no per-call copies or host passes and so comes out below it here.
  EXPECT_NE(warm_out.out.find("Two predictions on trn1"), std::string::npos);
  EXPECT_TRUE(warm["extras"]["dfmp2"]["backends"][0]["native_pipeline"].is_null());  // eigen: none
  const auto& native = w1["native_pipeline"];
  ASSERT_TRUE(native.is_object());
  ASSERT_EQ(native["steps"].size(), 4u);
  double library = 0, native_total = 0;
  for (const auto& step : native["steps"]) {
    library += double(step["library_seconds"]);
    native_total += double(step["seconds"]);
    EXPECT_FALSE(std::string(step["bottleneck"]).empty());
  }
  EXPECT_NEAR(library, sum(w1, "seconds"), 1e-9 * library);
  EXPECT_NEAR(native_total, double(native["seconds"]), 1e-12);
  EXPECT_LT(native_total, library);
  EXPECT_NE(cold_out.out.find("modelled [s]"), std::string::npos);
}

// The cost of a calculation, from a user's instance table with round figures: $3600 an hour is a dollar a second, and
// 3600 W at a PUE of 1 a kWh per hour. Each device run is priced on every instance that runs its model, with its
// modelled seconds (compiles counted apart); the CPU run on the named CPU instance with its measured seconds and the
// share of the instance its threads took; a model no instance runs is named as not priced.
TEST(Cli, CostOfACalculationFollowsTheInstanceTable) {
  TempDir dir;
  dir.file("prices.yaml",
           "pue: {value: 1.0, source: test, date: 2026-01-01}\n"
           "defaults: {cpu: small}\n"
           "instances:\n"
           "  one-core: {runs: trn1, neuron_cores: 1, hardware: h, price: {usd_per_hour: 3600, pricing: on-demand, "
           "region: r, source: s, date: 2026-01-01}, power: {watts: 3600, source: s, date: 2026-01-01}}\n"
           "  four-cores: {runs: trn1, neuron_cores: 4, hardware: h, price: {usd_per_hour: 7200, pricing: on-demand, "
           "region: r, source: s, date: 2026-01-01}, power: {watts: 1800, source: s, date: 2026-01-01}}\n"
           "  small: {runs: cpu, cores: 1, hardware: h, price: {usd_per_hour: 1, pricing: on-demand, region: r, "
           "source: s, date: 2026-01-01}, power: {watts: 10, source: s, date: 2026-01-01}}\n"
           "  big: {runs: cpu, cores: 4, hardware: h, price: {usd_per_hour: 36, pricing: on-demand, region: r, "
           "source: s, date: 2026-01-01}, power: {watts: 100, source: s, date: 2026-01-01}}\n");
  dfmp2::testing::CommandResult out;
  const auto j = run_json(dir,
                          "synthetic: {nbasis: 60, nocc: 8, naux: 150, seed: 3}\nbackends: [eigen, trn1, trn2]\n"
                          "threads: 1\ndevice: {compile_cache: false}\n"
                          "cost: {instances: prices.yaml, cpu_instance: big}\n",
                          &out);
  const auto& backends = j["extras"]["dfmp2"]["backends"];
  const auto& cost = j["extras"]["dfmp2"]["cost"];
  ASSERT_TRUE(cost.is_object());
  EXPECT_EQ(cost["cpu_instance"], "big");
  EXPECT_EQ(cost["threads"], 1);
  const auto& rows = cost["rows"];
  ASSERT_EQ(rows.size(), 3u);  // eigen on big; trn1 on one-core and four-cores; trn2 on none

  const auto& cpu = rows[0];
  EXPECT_EQ(cpu["backend"], "eigen");
  EXPECT_EQ(cpu["instance"], "big");
  EXPECT_EQ(cpu["time"], "measured");
  EXPECT_TRUE(cpu["compile_seconds"].is_null());
  const double wall = backends[0]["wall_time_seconds"];
  EXPECT_DOUBLE_EQ(double(cpu["seconds"]), wall);
  EXPECT_DOUBLE_EQ(double(cpu["share_of_instance"]), 0.25);  // 1 thread of 4 cores
  EXPECT_DOUBLE_EQ(double(cpu["instances_alone"]), 1.0);
  EXPECT_NEAR(double(cpu["usd_alone"]), wall * 0.01, 1e-15);
  EXPECT_NEAR(double(cpu["usd_per_calculation"]), wall * 0.0025, 1e-15);
  EXPECT_NEAR(double(cpu["kwh_alone"]), wall * 100 / 3600 / 1000, 1e-15);

  double compile = 0;
  for (const auto& k : backends[1]["kernels"])
    if (k.contains("modelled")) compile += double(k["modelled"]["seconds"]) > 0 ? double(k["modelled"]["compile"]) : 0;
  const double modelled = backends[1]["modelled_seconds"];
  for (const auto& [row, price, slots, watts] :
       {std::tuple{rows[1], 3600.0, 1.0, 3600.0}, std::tuple{rows[2], 7200.0, 4.0, 1800.0}}) {
    EXPECT_EQ(row["backend"], "trn1");
    EXPECT_EQ(row["time"], "modelled");
    EXPECT_DOUBLE_EQ(double(row["seconds"]), modelled);
    EXPECT_GT(compile, 0.0);  // no compile cache: every kernel compiled
    EXPECT_NEAR(double(row["compile_seconds"]), compile, 1e-12 * compile);
    EXPECT_DOUBLE_EQ(double(row["share_of_instance"]), 1 / slots);
    EXPECT_NEAR(double(row["usd_alone"]), modelled * price / 3600, 1e-12 * modelled * price);
    EXPECT_NEAR(double(row["usd_per_calculation"]), modelled * price / 3600 / slots, 1e-12 * modelled * price);
    EXPECT_NEAR(double(row["kwh_alone"]), modelled * watts / 3600 / 1000, 1e-12 * modelled * watts);
    EXPECT_NEAR(double(row["kwh_per_calculation"]), modelled * watts / 3600 / 1000 / slots, 1e-12 * modelled * watts);
  }
  EXPECT_EQ(rows[1]["instance"], "one-core");
  EXPECT_EQ(rows[2]["instance"], "four-cores");
  ASSERT_EQ(cost["unpriced"].size(), 1u);
  EXPECT_EQ(cost["unpriced"][0]["run"], "trn2 fp32");
  EXPECT_NE(std::string(cost["unpriced"][0]["reason"]).find("runs trn2"), std::string::npos);
  EXPECT_EQ(cost["instances"]["four-cores"]["usd_per_hour"], 7200.0);

  // A CPU run on more cores than the instance has: alone, the whole instances it needs; per calculation, its share.
  if (dfmp2::app::available_cores() >= 2) {
    const auto wide = run_json(dir, "synthetic: {nbasis: 60, nocc: 8, naux: 150, seed: 3}\nbackends: [eigen]\n"
                                    "threads: 2\ncost: {instances: prices.yaml, cpu_instance: small}\n");
    const auto& row = wide["extras"]["dfmp2"]["cost"]["rows"][0];
    const double seconds = row["seconds"];
    EXPECT_DOUBLE_EQ(double(row["share_of_instance"]), 2.0);
    EXPECT_DOUBLE_EQ(double(row["instances_alone"]), 2.0);
    EXPECT_NEAR(double(row["usd_alone"]), 2 * seconds / 3600, 1e-15);
    EXPECT_NEAR(double(row["usd_per_calculation"]), 2 * seconds / 3600, 1e-15);
  }
  EXPECT_NE(out.out.find("==> Cost of a calculation <=="), std::string::npos);
  EXPECT_NE(out.out.find("not priced: no instance in"), std::string::npos);
  EXPECT_NE(backends[2]["details"].get<std::string>().find("that no published measurement checks (none of a trn2"),
            std::string::npos);
}

// Without `cost`, runs are priced when a device model runs (on the built-in table) and not otherwise; `cost: false`
// prices nothing; `cost: true` prices CPU runs too, as the table's default CPU instance.
TEST(Cli, CostOfACalculationByDefault) {
  TempDir dir;
  const std::string problem = "synthetic: {nbasis: 40, nocc: 5, naux: 100, seed: 1}\ndevice: {compile_cache: false}\n";
  const auto device = run_json(dir, problem + "backends: [eigen, trn1]\n");
  const auto& cost = device["extras"]["dfmp2"]["cost"];
  ASSERT_TRUE(cost.is_object());
  EXPECT_EQ(cost["instances_file"], "devices/instances.yaml (built in)");
  ASSERT_EQ(cost["rows"].size(), 3u);  // eigen on c7a.large; trn1 on trn1.2xlarge and trn1.32xlarge
  EXPECT_EQ(cost["rows"][0]["instance"], "c7a.large");
  EXPECT_EQ(cost["rows"][1]["instance"], "trn1.2xlarge");
  EXPECT_EQ(cost["rows"][2]["instance"], "trn1.32xlarge");
  EXPECT_EQ(cost["instances"]["trn1.2xlarge"]["usd_per_hour"], 1.34375);
  EXPECT_FALSE(std::string(cost["instances"]["trn1.2xlarge"]["price_source"]).empty());

  EXPECT_TRUE(run_json(dir, problem + "backends: [eigen]\n")["extras"]["dfmp2"]["cost"].is_null());
  EXPECT_TRUE(run_json(dir, problem + "backends: [eigen, trn1]\ncost: false\n")["extras"]["dfmp2"]["cost"].is_null());
  // `dfmp2 --instances` prints the built-in table; a copy of it, named by cost.instances, prices the same.
  const auto printed = run_command(std::string(DFMP2_BINARY) + " --instances", dir);
  ASSERT_EQ(printed.exit_code, 0) << printed.err;
  dir.file("copy.yaml", printed.out);
  const auto copy = run_json(dir, problem + "backends: [eigen, trn1]\ncost: {instances: copy.yaml}\n");
  const auto& copied = copy["extras"]["dfmp2"]["cost"];
  EXPECT_EQ(copied["instances_file"], (dir.path() / "copy.yaml").string());
  EXPECT_EQ(copied["instances"], cost["instances"]);
  const auto cpu = run_json(dir, problem + "backends: [eigen]\ncost: true\n");
  ASSERT_EQ(cpu["extras"]["dfmp2"]["cost"]["rows"].size(), 1u);
  EXPECT_EQ(cpu["extras"]["dfmp2"]["cost"]["rows"][0]["instance"], "c7a.large");
}

// The device runs of the precision tests: eigen fp64 beside trn1 in fp32, bf16 and bf16x3, no compile cache.
constexpr const char* kDevicePrecisionRuns =
    "backends: [eigen, trn1]\nprecision: {eigen: fp64, trn1: [fp32, bf16, bf16x3]}\ndevice: {compile_cache: false}\n";

// The relative error of each trn1 run's correlation energy (fp32, bf16, bf16x3) against the first run's (fp64).
std::array<double, 3> device_errors(const nlohmann::json& backends) {
  const double ref = backends[0]["properties"]["mp2_correlation_energy"];
  std::array<double, 3> out{};
  for (std::size_t i = 0; i < 3; ++i)
    out[i] = std::abs((double(backends[i + 1]["properties"]["mp2_correlation_energy"]) - ref) / ref);
  return out;
}

// Device precisions on real molecules (the committed water and methane files, whose Coulomb metrics are as
// ill-conditioned as real fitting bases make them): bf16 within 1e-3 of the correlation energy, bf16x3 within ten
// times fp32's error level (the larger fp32 relative error of the two molecules: fp32 on water happens to land
// at 2e-8, far below its usual level, see bench/README.md), and each low-precision energy printed with its error.
TEST(Cli, DevicePrecisionsOnMoleculesWithinTheirBounds) {
  TempDir dir;
  struct Errors {
    double fp32, bf16, bf16x3;
  };
  std::vector<Errors> errors;
  for (const char* mol : {"water", "methane"}) {
    dfmp2::testing::CommandResult out;
    const auto j = run_json(dir,
                            "integrals: " + std::string(DFMP2_SOURCE_DIR) + "/inputs/" + mol + "-cc-pvdz.h5\n" +
                                kDevicePrecisionRuns,
                            &out);
    const auto& b = j["extras"]["dfmp2"]["backends"];
    ASSERT_EQ(b.size(), 4u);
    const double ref = b[0]["properties"]["mp2_correlation_energy"];
    const auto [fp32, bf16, bf16x3] = device_errors(b);
    errors.push_back({fp32, bf16, bf16x3});
    EXPECT_EQ(b[2]["matmul_operands"]["metric"], "fp32");
    EXPECT_EQ(b[2]["matmul_operands"]["fitting"], "fp32");
    EXPECT_EQ(b[2]["matmul_operands"]["pair_energy"], "bf16");
    EXPECT_EQ(b[3]["matmul_operands"]["pair_energy"], "bf16x3");
    EXPECT_EQ(b[2]["error"]["against"], "eigen fp64");
    EXPECT_DOUBLE_EQ(double(b[2]["error"]["correlation_energy"]),
                     double(b[2]["properties"]["mp2_correlation_energy"]) - ref);
    // The text report: every bf16/bf16x3 section states its error, and the comparison table names the reference.
    std::size_t lines = 0;
    for (std::size_t at = out.out.find("error of this precision: "); at != std::string::npos;
         at = out.out.find("error of this precision: ", at + 1))
      ++lines;
    EXPECT_EQ(lines, 2u);
    EXPECT_NE(out.out.find("against eigen fp64"), std::string::npos);
  }
  const double fp32_level = std::max(errors[0].fp32, errors[1].fp32);
  for (const auto& e : errors) {
    EXPECT_LT(e.bf16, 1e-3);
    EXPECT_GT(e.bf16, e.bf16x3) << "bf16x3 is the accurate mode";
    EXPECT_LT(e.bf16x3, 10 * fp32_level) << "fp32 level " << fp32_level;
  }
}

// The device models run the open-shell pair energies too (the hydroxyl radical in aug-cc-pVDZ, UHF and ROHF): each
// precision's error against fp64 printed, within the closed-shell bounds; ROHF's singles term comes from the fp64
// SCF and is the same in every run. The errors move from run to run (the threaded SCF's orbitals differ by its
// convergence, and bf16 rounding is not smooth in them): measured over five runs, fp32 4e-8 to 7e-7, bf16 3e-5 to
// 7e-4, bf16x3 2e-7 to 1.6e-6 relative; the bounds leave room for that.
TEST(Cli, DevicePrecisionsOnARadical) {
  TempDir dir;
  for (const std::string reference : {"uhf", "rohf"}) {
    SCOPED_TRACE(reference);
    dfmp2::testing::CommandResult out;
    const auto j = run_json(dir,
                            "molecule: {units: angstrom, multiplicity: 2, xyz: \"O 0 0 0\\nH 0 0 0.97\"}\n"
                            "basis: aug-cc-pvdz\nreference: " + reference + "\n" + kDevicePrecisionRuns,
                            &out);
    const auto& b = j["extras"]["dfmp2"]["backends"];
    ASSERT_EQ(b.size(), 4u);
    const auto [fp32, bf16, bf16x3] = device_errors(b);
    EXPECT_LT(fp32, 1e-5);
    EXPECT_LT(bf16, 2e-3);
    EXPECT_LT(bf16x3, 1e-5) << "bf16x3 is the accurate mode";
    EXPECT_GT(bf16, 0.0);
    for (int i = 1; i < 4; ++i) {
      EXPECT_EQ(double(b[i]["properties"]["mp2_singles_energy"]), double(b[0]["properties"]["mp2_singles_energy"]));
      EXPECT_EQ(b[i]["error"]["against"], "eigen fp64");
    }
    if (reference == "rohf") EXPECT_LT(double(b[0]["properties"]["mp2_singles_energy"]), -1e-3);
    EXPECT_NE(out.out.find("error of this precision: "), std::string::npos);
    EXPECT_NE(out.out.find("Modelled device time on trn1"), std::string::npos);
    // No device-native prediction for an open shell, and the report and results say why.
    EXPECT_TRUE(b[0]["native_pipeline"].is_null());
    EXPECT_EQ(b[1]["native_pipeline"]["absent"], "made for closed shells only");
    EXPECT_NE(out.out.find("device-native prediction: none, made for closed shells only"), std::string::npos);
  }
}

// Without any fp64 run, a bf16 energy is judged against the fp32 run; an all-bf16 transformation must be asked for
// explicitly (device.step_precision) and shows its (large) error.
TEST(Cli, Bf16ErrorAgainstFp32AndExplicitAllBf16) {
  TempDir dir;
  dfmp2::testing::CommandResult out;
  const auto j = run_json(dir,
                          "integrals: " + kWater +
                              "\nbackends: [trn1]\nprecision: [fp32, bf16]\n"
                              "device: {compile_cache: false, step_precision: {transform: bf16, metric: bf16}}\n",
                          &out);
  const auto& b = j["extras"]["dfmp2"]["backends"];
  ASSERT_EQ(b.size(), 2u);
  EXPECT_TRUE(b[0]["error"].is_null());
  EXPECT_EQ(b[1]["error"]["against"], "trn1 fp32");
  EXPECT_EQ(b[1]["matmul_operands"]["transform"], "bf16");
  EXPECT_EQ(b[1]["matmul_operands"]["metric"], "bf16");
  const double fp32 = b[0]["properties"]["mp2_correlation_energy"];
  EXPECT_GT(std::abs(double(b[1]["error"]["correlation_energy"])), 1e-2 * std::abs(fp32))
      << "a bf16 transformation is amplified by the fitting";
  EXPECT_NE(out.out.find("matmul operands: metric bf16, transform bf16, fitting fp32, pair_energy bf16"),
            std::string::npos);
  EXPECT_NE(out.out.find("against trn1 fp32"), std::string::npos);
}

// A bf16 run with nothing to compare with says so instead of printing a bare energy.
TEST(Cli, Bf16AloneSaysItsErrorIsUnknown) {
  TempDir dir;
  dfmp2::testing::CommandResult out;
  const auto j = run_json(dir, "integrals: " + kWater + "\nbackends: [trn1]\nprecision: bf16x3\ndevice: {compile_cache: false}\n",
                          &out);
  EXPECT_TRUE(j["extras"]["dfmp2"]["backends"][0]["error"].is_null());
  EXPECT_NE(out.out.find("error of this precision: unknown (no fp64 or fp32 run"), std::string::npos) << out.out;
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

namespace dfmp2_signal_tests {

namespace fs = std::filesystem;
using dfmp2::testing::TempDir;

// Six waters on a 3 angstrom grid in cc-pVDZ: the saved integral file is about 60 MB, so writing it takes long
// enough (about a second) to be interrupted while its temporary exists.
std::string water_hexamer() {
  std::string xyz;
  for (int i = 0; i < 6; ++i) {
    const double x = 3.0 * (i % 3), y = 3.0 * (i / 3);
    xyz += fmt::format("O {} {} 0.1178\nH {} {} -0.4712\nH {} {} -0.4712\n", x, y, x, y + 0.7555, x, y - 0.7555);
  }
  return xyz;
}

bool has_temporary(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) return true;
  return false;
}

class InterruptedSave : public ::testing::TestWithParam<int> {};

// SIGINT and SIGTERM while the integral file is being written: the process ends by the signal (so the shell sees
// 128 + signal) and removes its temporary; nothing half-written is left beside the input.
TEST_P(InterruptedSave, LeavesNoTemporary) {
  const int sig = GetParam();
  TempDir dir;
  dir.file("w6.xyz", water_hexamer());
  dir.file("in.yaml", "molecule: {file: w6.xyz}\nbasis: cc-pvdz\nsave_integrals: w6.h5\n");
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (chdir(dir.path().c_str()) != 0) _exit(99);
    std::freopen("stdout.txt", "w", stdout);
    std::freopen("stderr.txt", "w", stderr);
    execl(DFMP2_BINARY, DFMP2_BINARY, "in.yaml", static_cast<char*>(nullptr));
    _exit(98);
  }
  // Wait (up to 120 s) for the temporary to appear, then interrupt at once.
  bool seen = false;
  int status = 0;
  for (int i = 0; i < 120000 && !seen; ++i) {
    if (has_temporary(dir.path())) {
      seen = true;
      kill(pid, sig);
      break;
    }
    if (waitpid(pid, &status, WNOHANG) == pid) break;  // finished before we saw it
    usleep(1000);
  }
  if (seen) {
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
  }
  ASSERT_TRUE(seen) << "the run ended before its temporary was seen; the test molecule is too small for this machine";
  EXPECT_TRUE(WIFSIGNALED(status)) << "status " << status;
  if (WIFSIGNALED(status)) {
    EXPECT_EQ(WTERMSIG(status), sig);
  }
  EXPECT_FALSE(has_temporary(dir.path()));
  EXPECT_FALSE(fs::exists(dir.path() / "w6.h5"));
}

INSTANTIATE_TEST_SUITE_P(Cli, InterruptedSave, ::testing::Values(SIGINT, SIGTERM),
                         [](const auto& info) { return info.param == SIGINT ? "sigint" : "sigterm"; });

// A temporary left by a run that was killed with SIGKILL (which no program can catch) is another process's: a
// later run neither reads it nor trips over it, and writes its own file.
TEST(Cli, StaleTemporaryOfAKilledRunIsIgnored) {
  TempDir dir;
  dir.file("out.json.tmp.1", "{\"half\": ");
  dir.file("in.yaml", "synthetic: {nbasis: 12, nocc: 3, naux: 30}\noutput: out.json\n");
  const auto r = dfmp2::testing::run_command(std::string(DFMP2_BINARY) + " " + (dir.path() / "in.yaml").string(), dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(dir.path() / "out.json");
  EXPECT_FALSE(nlohmann::json::parse(in, nullptr, false).is_discarded());
  EXPECT_TRUE(fs::exists(dir.path() / "out.json.tmp.1"));  // not ours to remove
}

}  // namespace dfmp2_signal_tests

namespace {

// A basis file named in the input (any case of the .gbs ending) is found beside the input, not beside the current
// folder: `basis: MY.GBS` in sub/in.yaml run from the parent folder is sub/MY.GBS.
TEST(Cli, BasisFileOfAnyCaseIsRelativeToTheInput) {
  TempDir dir;
  fs::create_directories(dir.path() / "sub");
  fs::copy_file(fs::path(DFMP2_SOURCE_DIR) / "inputs/basis/sto-3g.gbs", dir.path() / "sub/MY.GBS");
  dir.file("sub/in.yaml", "molecule: {xyz: \"O 0 0 0.117790\\nH 0 0.755453 -0.471161\\nH 0 -0.755453 -0.471161\"}\n"
                          "basis: MY.GBS\naux_basis: def2-qzvpp-ri\nscf: {jk_basis: def2-svp-jkfit}\nthreads: 1\n");
  const auto r = run_command("cd " + dir.path().string() + " && " + DFMP2_BINARY + " sub/in.yaml", dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("MY.GBS"), std::string::npos) << r.out;
}

}  // namespace
