// `dfmp2 bench` as a user runs it: tables, CSV, JSON and SVG files, the device models' modelled times, the shipped
// trace, and one-line errors with their exit codes. No test asserts an absolute time, only presence and ratios.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include "../support/test_support.hpp"
#include "app/bench/newton_schulz.hpp"

namespace {

namespace fs = std::filesystem;
using dfmp2::testing::run_command;
using dfmp2::testing::TempDir;

const std::string kBench = std::string(DFMP2_BINARY) + " bench";

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// CSV without quoted commas (what the kernel table writes): header and rows as string vectors.
std::vector<std::vector<std::string>> read_csv(const fs::path& p) {
  std::vector<std::vector<std::string>> out;
  std::istringstream in(slurp(p));
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cells;
    std::string cell;
    bool quoted = false;
    for (const char c : line) {
      if (c == '"') {
        quoted = !quoted;
      } else if (c == ',' && !quoted) {
        cells.push_back(cell);
        cell.clear();
      } else {
        cell += c;
      }
    }
    cells.push_back(cell);
    out.push_back(cells);
  }
  return out;
}

void expect_one_line_error(const dfmp2::testing::CommandResult& r, int code, const std::string& message) {
  EXPECT_EQ(r.exit_code, code) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.rfind("dfmp2: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(Bench, KernelTableCsvAndJsonOnCpuBackends) {
  TempDir dir;
  const auto csv = dir.path() / "out.csv";
  const auto json = dir.path() / "out.json";
  const auto r = run_command(kBench + " --ops gemm,syrk,trsm,cholesky --sizes 64,96 --backends eigen,openblas "
                                      "--precision fp64 --repeat 2 --threads 1 --csv " + csv.string() + " --json " +
                                 json.string(),
                             dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("GFLOP/s"), std::string::npos) << r.out;

  const auto rows = read_csv(csv);
  ASSERT_FALSE(rows.empty());
  const auto& header = rows[0];
  auto col = [&](const std::string& name) {
    const auto it = std::find(header.begin(), header.end(), name);
    EXPECT_NE(it, header.end()) << name;
    return static_cast<std::size_t>(it - header.begin());
  };
  for (const char* c : {"op", "shape", "size", "backend", "precision", "median_s", "min_s", "max_s", "gflops",
                        "model_cold_s", "model_warm_s"})
    col(c);
  EXPECT_EQ(rows.size(), 1u + 4 * 2 * 2);  // op x size x backend
  std::set<std::string> cells;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    EXPECT_GT(std::stod(rows[i][col("gflops")]), 0.0);
    EXPECT_LE(std::stod(rows[i][col("min_s")]), std::stod(rows[i][col("median_s")]));
    EXPECT_LE(std::stod(rows[i][col("median_s")]), std::stod(rows[i][col("max_s")]));
    EXPECT_TRUE(rows[i][col("model_warm_s")].empty());  // CPU backends have no model
    cells.insert(rows[i][col("op")] + "/" + rows[i][col("size")] + "/" + rows[i][col("backend")]);
  }
  EXPECT_EQ(cells.size(), 16u);

  const auto doc = nlohmann::json::parse(slurp(json));
  EXPECT_EQ(doc["mode"], "kernels");
  ASSERT_EQ(doc["rows"].size(), 16u);
  for (const auto& row : doc["rows"]) {
    EXPECT_GT(row["gflops"].get<double>(), 0.0);
    EXPECT_EQ(row["precision"], "fp64");
  }
}

TEST(Bench, DeviceModelColdAboveWarmWithBreakdown) {
  TempDir dir;
  const auto json = dir.path() / "trn1.json";
  const auto r = run_command(kBench + " --ops gemm,syrk --sizes 64,128 --backends trn1 --precision fp32 --repeat 2 "
                                      "--threads 1 --json " + json.string(),
                             dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Device models: modelled time per call"), std::string::npos) << r.out;
  const auto doc = nlohmann::json::parse(slurp(json));
  ASSERT_EQ(doc["rows"].size(), 4u);
  for (const auto& row : doc["rows"]) {
    EXPECT_EQ(row["backend"], "trn1");
    const double cold = row["model_cold_s"].get<double>(), warm = row["model_warm_s"].get<double>();
    EXPECT_GT(cold, warm) << row.dump();
    EXPECT_GT(warm, 0.0);
    EXPECT_GT(row["cold_compile_s"].get<double>(), 0.0);
    EXPECT_EQ(row["warm_compile_s"].get<double>(), 0.0);
    for (const char* part : {"warm_dispatch_s", "warm_transfer_s", "warm_dma_s", "warm_compute_s", "warm_host_s"})
      EXPECT_TRUE(row[part].is_number()) << part;
    EXPECT_GT(row["warm_dispatch_s"].get<double>() + row["warm_compute_s"].get<double>(), 0.0);
    EXPECT_GT(row["model_tflops"].get<double>(), 0.0);
  }
}

TEST(Bench, Bf16OnEigenIsUnsupported) {
  TempDir dir;
  const auto r = run_command(kBench + " --ops gemm --sizes 64 --backends eigen --precision bf16", dir);
  expect_one_line_error(r, 4, "backend 'eigen' has no bf16 arithmetic");
}

TEST(Bench, AllowFallbackMarksTheCell) {
  TempDir dir;
  const auto csv = dir.path() / "f.csv";
  const auto r = run_command(kBench + " --ops gemm --sizes 64 --backends eigen,trn1 --precision fp64 --repeat 1 "
                                      "--allow-fallback --csv " + csv.string(),
                             dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string text = slurp(csv);
  EXPECT_NE(text.find("trn1,fp64,unsupported"), std::string::npos) << text;
  EXPECT_NE(text.find("eigen,fp64,ok"), std::string::npos) << text;
}

// The metric step's question (Newton-Schulz against eigh for J^-1/2), asked of the kernels mode's own cells: a
// section in the text report and "newton_schulz" in the JSON, with each ratio the quotient of the two cells' medians.
TEST(Bench, NewtonSchulzAgainstEighFromTheSameRun) {
  TempDir dir;
  const auto json = dir.path() / "ns.json";
  const auto r = run_command(kBench + " --ops eigh,invsqrt_eigh,invsqrt_ns --sizes 32,64 --backends eigen "
                                      "--precision fp64 --repeat 2 --threads 1 --condition 1e3 --json " + json.string(),
                             dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Newton-Schulz vs eigh for J^-1/2 (SPD operand: condition 1000)"), std::string::npos) << r.out;
  const auto doc = nlohmann::json::parse(slurp(json));
  EXPECT_EQ(doc["settings"]["condition"], 1000.0);
  ASSERT_EQ(doc["newton_schulz"].size(), 1u);
  const auto& c = doc["newton_schulz"][0];
  EXPECT_EQ(c["backend"], "eigen");
  ASSERT_EQ(c["points"].size(), 2u);
  std::map<std::pair<std::string, long>, double> median;
  for (const auto& row : doc["rows"]) median[{row["op"], row["size"].get<long>()}] = row["median_s"];
  for (const auto& p : c["points"]) {
    const long n = p["size"];
    const double ns = median[{"invsqrt_ns", n}], eigh = median[{"invsqrt_eigh", n}];
    EXPECT_DOUBLE_EQ(p["ratio"].get<double>(), ns / eigh);
    EXPECT_DOUBLE_EQ(p["eigh_s"].get<double>(), (median[{"eigh", n}]));
  }
  EXPECT_FALSE(c["verdict"].get<std::string>().empty());
  // Without both inverse square roots there is no comparison.
  const auto only = run_command(kBench + " --ops eigh --sizes 32 --backends eigen --repeat 1 --threads 1", dir);
  ASSERT_EQ(only.exit_code, 0) << only.err;
  EXPECT_EQ(only.out.find("Newton-Schulz vs eigh"), std::string::npos);
}

// The verdict's cases on made-up timings: a crossing between two sizes (interpolated inside the bracket), faster
// everywhere, never with a falling trend (extrapolated), and a failed size named and left out.
TEST(Bench, NewtonSchulzVerdicts) {
  using dfmp2::app::bench::compare_newton_schulz;
  const double nan = std::nan("");
  auto c = compare_newton_schulz("b", "fp64", {{100, 2.0, 1.0, nan, false}, {200, 1.5, 1.0, nan, false},
                                              {400, 0.5, 1.0, nan, false}, {800, 0.25, 1.0, nan, false}});
  ASSERT_TRUE(c.crossover_low && c.crossover_high);
  EXPECT_EQ(*c.crossover_low, 200);
  EXPECT_EQ(*c.crossover_high, 400);
  EXPECT_GT(*c.crossover_estimate, 200);
  EXPECT_LT(*c.crossover_estimate, 400);
  EXPECT_FALSE(c.extrapolated);
  EXPECT_NE(c.verdict.find("between N = 200 and N = 400"), std::string::npos) << c.verdict;

  c = compare_newton_schulz("b", "fp64", {{100, 0.5, 1.0, nan, false}, {200, 0.4, 1.0, nan, false}});
  EXPECT_NE(c.verdict.find("faster at every size measured"), std::string::npos) << c.verdict;

  // ratio = 4, 2: halves per doubling, reaches 1 at N = 400 (within 16x of the largest size).
  c = compare_newton_schulz("b", "fp64", {{100, 4.0, 1.0, nan, false}, {200, 2.0, 1.0, nan, false},
                                          {300, nan, 1.0, nan, true}});
  EXPECT_TRUE(c.extrapolated);
  EXPECT_NEAR(*c.crossover_estimate, 400.0, 1e-6);
  EXPECT_NE(c.verdict.find("did not converge at N = 300"), std::string::npos) << c.verdict;
}

TEST(Bench, BadConditionIsAnInputError) {
  TempDir dir;
  expect_one_line_error(run_command(kBench + " --ops eigh --sizes 32 --backends eigen --condition 0.5", dir), 2,
                        "--condition: expected a condition number > 1");
}

TEST(Bench, UnknownOpNamesItAndListsValidOnes) {
  TempDir dir;
  const auto r = run_command(kBench + " --ops gemm,gemv --sizes 64 --backends eigen", dir);
  expect_one_line_error(r, 2, "--ops: unknown kernel 'gemv' (valid: gemm, gemm_df, gemm_batched, syrk");
}

TEST(Bench, BadSizeIsAnInputError) {
  TempDir dir;
  expect_one_line_error(run_command(kBench + " --ops gemm --sizes 64,abc --backends eigen", dir), 2,
                        "--sizes: expected sizes from 1 to 65536, got 'abc'");
  expect_one_line_error(run_command(kBench + " --ops gemm --sizes 0 --backends eigen", dir), 2, "--sizes");
}

TEST(Bench, UnknownBackendAndExclusiveModes) {
  TempDir dir;
  expect_one_line_error(run_command(kBench + " --ops gemm --sizes 64 --backends cuda", dir), 2,
                        "--backends: unknown backend 'cuda'");
  expect_one_line_error(run_command(kBench + " --ops gemm --dfmp2 small", dir), 2, "exclude each other");
}

TEST(Bench, UnwritableCsvIsAnOutputErrorAndLeavesNoFile) {
  TempDir dir;
  const auto missing = dir.path() / "no_such_folder" / "out.csv";
  expect_one_line_error(run_command(kBench + " --ops gemm --sizes 64 --backends eigen --csv " + missing.string(), dir),
                        7, "cannot write");
  EXPECT_FALSE(fs::exists(missing));
  // A folder that exists but is not writable (skipped as root, who may write anywhere).
  const auto locked = dir.path() / "locked";
  fs::create_directory(locked);
  ::chmod(locked.c_str(), 0555);
  if (::access(locked.c_str(), W_OK) != 0) {
    const auto r = run_command(kBench + " --ops gemm --sizes 64 --backends eigen --csv " + (locked / "o.csv").string(), dir);
    expect_one_line_error(r, 7, "not writable");
    EXPECT_TRUE(fs::is_empty(locked));
  }
  ::chmod(locked.c_str(), 0755);
}

TEST(Bench, Dfmp2SmallMatchesTheMainCommand) {
  TempDir dir;
  const auto json = dir.path() / "b.json";
  const auto r = run_command(kBench + " --dfmp2 small --backends eigen --precision fp64 --warmup 0 --repeat 1 "
                                      "--threads 1 --json " + json.string(),
                             dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* step : {"metric", "transform", "fitting", "pair_energy"})
    EXPECT_NE(r.out.find(step), std::string::npos) << r.out;
  const auto doc = nlohmann::json::parse(slurp(json));
  ASSERT_EQ(doc["rows"].size(), 1u);
  const auto& row = doc["rows"][0];
  for (const char* step : {"metric_s", "transform_s", "fitting_s", "pair_energy_s"})
    EXPECT_GT(row[step].get<double>(), 0.0) << step;
  const double bench_energy = row["correlation_energy"].get<double>();

  dir.file("in.yaml", "synthetic: small\nbackends: [eigen]\nthreads: 1\n");
  const auto out = dir.path() / "main.json";
  const auto m = run_command(std::string(DFMP2_BINARY) + " " + (dir.path() / "in.yaml").string() + " --json " +
                                 out.string(),
                             dir);
  ASSERT_EQ(m.exit_code, 0) << m.err;
  const auto main_doc = nlohmann::json::parse(slurp(out));
  const double main_energy = main_doc["properties"]["mp2_correlation_energy"].get<double>();
  EXPECT_NEAR(bench_energy, main_energy, 1e-10);
}

TEST(Bench, Dfmp2ModelledOnTrn1) {
  TempDir dir;
  const auto json = dir.path() / "t.json";
  const auto r = run_command(kBench + " --dfmp2 small --backends trn1 --warmup 1 --repeat 1 --threads 1 --json " +
                                 json.string(),
                             dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto row = nlohmann::json::parse(slurp(json))["rows"][0];
  EXPECT_EQ(row["precision"], "fp32");
  EXPECT_GT(row["model_cold_s"].get<double>(), row["model_warm_s"].get<double>());
  EXPECT_LT(row["correlation_energy"].get<double>(), 0.0);
}

// A bf16 or bf16x3 energy is never shown without its error: against fp64 when run, else the same backend's fp32.
TEST(Bench, Dfmp2LowPrecisionEnergiesCarryTheirError) {
  TempDir dir;
  const auto json = dir.path() / "p.json";
  const auto r = run_command(kBench + " --dfmp2 small --backends trn1 --precision fp32,bf16,bf16x3 --warmup 0 "
                                      "--repeat 1 --threads 1 --json " + json.string(),
                             dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("(trn1 fp32)"), std::string::npos) << r.out;
  const auto rows = nlohmann::json::parse(slurp(json))["rows"];
  ASSERT_EQ(rows.size(), 3u);
  const double fp32 = rows[0]["correlation_energy"].get<double>();
  for (int i : {1, 2}) {
    EXPECT_EQ(rows[i]["error_against"], "trn1 fp32");
    const double err = rows[i]["correlation_error"].get<double>();
    EXPECT_NEAR(err, rows[i]["correlation_energy"].get<double>() - fp32, 1e-12);
    EXPECT_GT(std::abs(err), 0.0);
  }
  EXPECT_LT(std::abs(rows[2]["correlation_error"].get<double>()), std::abs(rows[1]["correlation_error"].get<double>()));
}

TEST(Bench, ShippedTraceOnTrn1ShowsThePublishedTime) {
  TempDir dir;
  const auto json = dir.path() / "trace.json";
  const std::string trace = std::string(DFMP2_SOURCE_DIR) + "/bench/traces/dfmp2_small_published.yaml";
  const auto r = run_command(kBench + " --trace " + trace + " --backends trn1 --repeat 1 --threads 1 --json " +
                                 json.string(),
                             dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("published trn1 0.091 s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ratio model/published"), std::string::npos) << r.out;
  const auto doc = nlohmann::json::parse(slurp(json));
  EXPECT_EQ(doc["published"]["seconds"].get<double>(), 0.091);
  const double model = doc["published"]["model_warm_s"].get<double>();
  EXPECT_GT(model, 0.0);
  EXPECT_NEAR(doc["published"]["ratio_model_to_published"].get<double>(), model / 0.091, 1e-9);
  // One row per entry and a total; every entry modelled.
  ASSERT_EQ(doc["rows"].size(), 7u);
  double sum = 0;
  for (std::size_t i = 0; i < 6; ++i) sum += doc["rows"][i]["model_warm_s"].get<double>();
  // The rows and the total are medians over passes of a deterministic model; allow their rounding only.
  EXPECT_NEAR(doc["rows"][6]["model_warm_s"].get<double>(), sum, 1e-9 + 1e-4 * sum);
}

TEST(Bench, TraceErrorsNameFileAndEntry) {
  TempDir dir;
  const auto bad = dir.file("bad.yaml", "trace:\n  - {op: gemm, m: 4, n: 4}\n");
  expect_one_line_error(run_command(kBench + " --trace " + bad + " --backends eigen", dir), 2,
                        "bad.yaml:2:5: trace[1]: op gemm needs key 'k'");
  const auto unknown = dir.file("unknown.yaml", "trace:\n  - {op: gemm, m: 4, n: 4, k: 4, tranza: t}\n");
  expect_one_line_error(run_command(kBench + " --trace " + unknown + " --backends eigen", dir), 2, "unknown key 'tranza'");
}

TEST(Bench, SvgHasAPolylinePerBackend) {
  TempDir dir;
  const auto svg = dir.path() / "chart.svg";
  const auto r = run_command(kBench + " --ops gemm --sizes 32,64 --backends eigen,trn1 --precision fp32 --repeat 1 "
                                      "--threads 1 --svg " + svg.string(),
                             dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string text = slurp(svg);
  EXPECT_EQ(text.rfind("<svg", 0), 0u);
  EXPECT_NE(text.find("</svg>"), std::string::npos);
  std::size_t polylines = 0;
  for (std::size_t p = 0; (p = text.find("<polyline", p)) != std::string::npos; ++p) ++polylines;
  EXPECT_EQ(polylines, 2u);
  EXPECT_NE(text.find("gemm eigen fp32"), std::string::npos);
  EXPECT_NE(text.find("gemm trn1 fp32 (modelled)"), std::string::npos);
}

TEST(Bench, ConfigFileSectionAndFlagsWin) {
  TempDir dir;
  const auto cfg = dir.file("bench.yaml", "bench:\n  ops: [gemm, random]\n  sizes: [32]\n  backends: [eigen]\n"
                                          "  precision: fp64\n  repeat: 1\n  csv: cfg.csv\n");
  const auto r = run_command(kBench + " --config " + cfg + " --sizes 48", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto rows = read_csv(dir.path() / "cfg.csv");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_NE(slurp(dir.path() / "cfg.csv").find("48x48x48"), std::string::npos);
  EXPECT_NE(r.out.find("Msample/s"), std::string::npos) << r.out;
  const auto bad = dir.file("bad.yaml", "bench:\n  opz: [gemm]\n");
  expect_one_line_error(run_command(kBench + " --config " + bad, dir), 2, "bad.yaml:2:3: unknown key 'bench.opz'");
}

TEST(Bench, HelpAndMainCommandStillWork) {
  TempDir dir;
  const auto help = run_command(kBench + " --help", dir);
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--ops"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--trace"), std::string::npos) << help.out;
  const auto none = run_command(DFMP2_BINARY, dir);
  expect_one_line_error(none, 2, "input is required");
}

}  // namespace
