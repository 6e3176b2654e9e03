// dfmp2 INPUT.yaml [--json FILE]
// dfmp2 bench [--ops LIST --sizes LIST | --dfmp2 SHAPES | --trace FILE | --calibration] ... (bench/README.md)
//
// Exit codes (README "Errors"): 0 success, 2 input, 3 integral file, 4 unsupported backend/precision/op,
// 5 numerical failure, 6 not enough memory, 7 cannot write results, 70 internal error (a bug: please report).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>

#include "app/bench/bench.hpp"
#include "app/cost.hpp"
#include "app/instances.hpp"
#include "app/input.hpp"
#include "app/prepare.hpp"
#include "app/progress.hpp"
#include "app/qcschema.hpp"
#include "app/report.hpp"
#include "app/results.hpp"
#include "app/yaml_file.hpp"
#include "app/run.hpp"
#include "chem/io/io.hpp"
#include "devices/registry.hpp"
#include "linalg/comm.hpp"
#include "linalg/dense_grid.hpp"
#include "linalg/errors.hpp"

namespace {

namespace bench = dfmp2::app::bench;

void print_error(const char* prefix, std::string_view message, const char* suffix = "") {
  std::fflush(stdout);
  std::fprintf(stderr, "dfmp2: %s%s%s\n", prefix, dfmp2::app::one_line(message).c_str(), suffix);
  std::fflush(stderr);
}

// Text for standard output, written now: a full disk or a closed pipe is an OutputError naming the reason, not a
// run that ends in exit 0 with nothing written.
void write_standard_output(const std::string& text) {
  errno = 0;
  if (std::fputs(text.c_str(), stdout) < 0 || std::fflush(stdout) != 0) {
    throw dfmp2::OutputError(fmt::format("cannot write to standard output: {}",
                                         errno != 0 ? std::strerror(errno) : "a write failed"));
  }
}

// With several ranks the line names the rank that failed: "dfmp2: error: rank 2: ...".
std::string error_prefix(const dfmp2::linalg::FailureReport& r, int rank, int ranks) {
  return ranks > 1 ? fmt::format("{}rank {}: ", r.prefix, rank) : r.prefix;
}
void print_report(const dfmp2::linalg::FailureReport& r, int rank, int ranks) {
  print_error(error_prefix(r, rank, ranks).c_str(), r.message, r.suffix.c_str());
}

// The FailedOperation of a QCSchema run that failed: the line the command line prints for `error` (which failed rank
// it names, as print_report would), the AtomicInput as read (null when it is not JSON). Best effort: when even this
// file cannot be written, the printed line is all there is. Never when the error is about the output itself (exit 7:
// it is not writable, or it is a file the run reads, the input among them), and never over the input file.
void write_failed_operation(const std::string& input_path, const std::string& output, std::exception_ptr error) {
  const int ranks = dfmp2::linalg::world().size();
  dfmp2::linalg::FailureReport report = dfmp2::linalg::failure_report(error);
  if (report.exit_code == dfmp2::OutputError("").exit_code()) return;
  std::error_code ec;
  if (std::filesystem::equivalent(input_path, output, ec)) return;
  int rank = 0;
  try {
    std::rethrow_exception(error);
  } catch (const dfmp2::linalg::RankFailure& e) {
    rank = e.failed_rank();
  } catch (...) {
  }
  const std::string line = "dfmp2: " + error_prefix(report, rank, ranks) + dfmp2::app::one_line(report.message) + report.suffix;
  try {
    nlohmann::json input = nullptr;
    try {
      // read_json_text refuses what a recursive parser or dump could not survive (nesting, bytes not UTF-8).
      input = nlohmann::json::parse(dfmp2::app::read_json_text(input_path, input_path), nullptr, false);
    } catch (const dfmp2::InputError&) {
    }
    if (input.is_discarded()) input = nullptr;
    dfmp2::app::write_atomically(output, dfmp2::app::qcschema_failure(input, report, line).dump(1) + "\n");
  } catch (...) {
  }
}

int run_input(const std::string& input_path, const std::optional<std::string>& output);

// The flags of `dfmp2 bench`, as given (strings for the lists, checked by bench::validate with the flag's name).
struct BenchFlags {
  std::string ops, sizes, densities, backends, precision, dfmp2, trace, config;
  bench::BenchOptions options;
  bool calibration = false;
};

CLI::App* add_bench(CLI::App& cli, BenchFlags& f) {
  CLI::App* b = cli.add_subcommand(
      "bench", "kernel, DF-MP2 and trace benchmarks on any backend, device models included (bench/README.md)");
  auto& o = f.options;
  b->add_option("--ops", f.ops,
                "kernels, comma-separated: gemm, gemm_df, gemm_batched, syrk, trsm, trsm_left, cholesky, eigh, "
                "invsqrt_eigh, invsqrt_ns, random, spmm_csr, spmm_bsr (default gemm,syrk,trsm)")
      ->option_text("LIST");
  b->add_option("--sizes", f.sizes, "sizes n of the kernels, comma-separated (default 256,512,1024)")->option_text("LIST");
  b->add_option("--density,--densities", f.densities, "spmm_csr/spmm_bsr densities (default 0.01,0.1)")
      ->option_text("LIST");
  b->add_option("--backends", f.backends, "backends, comma-separated: eigen, openblas, avx2, avx512, trn1, trn2 (default: the fastest CPU backend here, measured)")
      ->option_text("LIST");
  b->add_option("--precision", f.precision,
                "fp64, fp32, bf16, bf16x3 (dfmp2 mode also mixed), comma-separated (default fp64; fp32 with a device model)")
      ->option_text("LIST");
  b->add_option("--dfmp2", f.dfmp2, "DF-MP2 end to end on synthetic shapes: small, medium, large")->option_text("SHAPES");
  b->add_option("--trace", f.trace, "run the kernel calls of a trace file (YAML)")->option_text("FILE");
  b->add_flag("--calibration", f.calibration, "the device models against the published trn1 measurements");
  b->add_option("--config", f.config, "read settings from the 'bench:' section of a YAML file (flags win)")
      ->option_text("FILE");
  b->add_option("--warmup", o.warmup, "untimed calls (or runs, passes) before the timed ones; the first is cold (default 1)");
  b->add_option("--repeat", o.repeat, "timed calls (or runs, passes) (default 5)");
  b->add_option("--threads", o.threads, "threads for the backends (default: all cores)");
  b->add_option("--batch-count", o.batch_count, "gemm_batched: problems per call (default 16)");
  b->add_option("--bsr-block", o.bsr_block, "spmm_bsr: block size (default 32)");
  b->add_option("--seed", o.seed, "Philox seed of the random operands");
  b->add_option("--condition", o.condition,
                "cholesky, eigh, invsqrt_*: condition number of the SPD operand (default: R R^T/n + I, about 5)");
  b->add_flag("--allow-fallback", o.allow_fallback, "mark unsupported op/precision/backend cells instead of failing");
  b->add_option("--compile-cache", o.compile_cache,
                "device models: persistent compile cache folder (default: a fresh temporary one, so cold is cold)")
      ->option_text("DIR");
  b->add_option("--csv", o.csv, "write the table as CSV")->option_text("FILE");
  b->add_option("--json", o.json, "write the table and settings as JSON")->option_text("FILE");
  b->add_option("--svg", o.svg, "draw time against size per backend, log-log (kernels and dfmp2 modes)")
      ->option_text("FILE");
  return b;
}

int run_bench(CLI::App& b, BenchFlags& f) {
  auto& o = f.options;
  auto given = [&](const char* flag) { return b.count(flag) > 0; };
  std::vector<std::string> keys;
  const std::pair<const char*, const char*> flag_keys[] = {
      {"--ops", "ops"},           {"--sizes", "sizes"},           {"--density", "densities"},
      {"--backends", "backends"}, {"--precision", "precision"},   {"--dfmp2", "dfmp2"},
      {"--trace", "trace"},       {"--calibration", "calibration"}, {"--warmup", "warmup"},
      {"--repeat", "repeat"},     {"--threads", "threads"},       {"--batch-count", "batch_count"},
      {"--bsr-block", "bsr_block"}, {"--seed", "seed"},           {"--allow-fallback", "allow_fallback"},
      {"--condition", "condition"},
      {"--compile-cache", "compile_cache"}, {"--csv", "csv"},     {"--json", "json"},
      {"--svg", "svg"}};
  for (const auto& [flag, key] : flag_keys)
    if (given(flag)) keys.emplace_back(key);
  const int modes = int(given("--ops")) + int(given("--dfmp2")) + int(given("--trace")) + int(f.calibration);
  if (modes > 1) throw dfmp2::InputError("--ops, --dfmp2, --trace and --calibration exclude each other");
  if (modes == 1) keys.emplace_back("mode");
  if (given("--ops")) o.ops = bench::split_list(f.ops), o.mode = bench::Mode::kernels;
  if (given("--dfmp2")) o.shapes = bench::split_list(f.dfmp2), o.mode = bench::Mode::dfmp2;
  if (given("--trace")) o.trace_path = f.trace, o.mode = bench::Mode::trace;
  if (f.calibration) o.mode = bench::Mode::calibration;
  if (given("--sizes")) o.sizes = bench::parse_sizes("--sizes", bench::split_list(f.sizes));
  if (given("--density")) o.densities = bench::parse_densities("--density", bench::split_list(f.densities));
  if (given("--backends")) o.backends = bench::split_list(f.backends);
  if (given("--precision")) o.precisions = bench::split_list(f.precision), o.precisions_given = true;
  if (given("--repeat") && o.repeat < 1) throw dfmp2::InputError(fmt::format("--repeat: expected a count >= 1, got '{}'", o.repeat));
  if (given("--threads") && o.threads < 1) throw dfmp2::InputError(fmt::format("--threads: expected a number of threads >= 1, got '{}'", o.threads));
  if (given("--config")) bench::read_bench_config(f.config, keys, o);
  // Defaults for what neither the flags nor the config gave.
  if (o.mode == bench::Mode::kernels && o.ops.empty()) o.ops = {"gemm", "syrk", "trsm"};
  if (o.sizes.empty()) o.sizes = {256, 512, 1024};
  if (o.densities.empty()) o.densities = {0.01, 0.1};
  if (o.backends.empty()) o.backends = {dfmp2::devices::default_backend()};
  return bench::run_bench(o);
}

// `dfmp2 --version`: the version, whether this build has MPI, and its distributed factorisations' libraries.
std::string version_text() {
  const std::string mpi = dfmp2::linalg::mpi_library();
  if (mpi.empty()) return fmt::format("{} (built without MPI (DFMP2_MPI=OFF): one rank only)", DFMP2_VERSION);
  const std::string dense = dfmp2::linalg::dense_libraries();
  return fmt::format("{} (MPI: {}; distributed factorisations: {})", DFMP2_VERSION, mpi,
                     dense.empty() ? "none, built without ScaLAPACK (DFMP2_SCALAPACK=OFF): replicated on every rank"
                                   : dense);
}

int run(int argc, char** argv) {
  dfmp2::linalg::Comm& comm = dfmp2::linalg::world();
  const bool rank0 = comm.rank() == 0;  // only rank 0 prints and writes the results file
  CLI::App cli{"dfmp2: density-fitted MP2 energies on interchangeable linear-algebra backends", "dfmp2"};
  cli.set_version_flag("--version", version_text());
  std::string input_path;
  std::string json_path;
  // Not ->required(): `dfmp2 bench ...` has no input; without the subcommand its absence is checked below.
  cli.add_option("input", input_path, "YAML input file (see README, 'Input keys')");
  cli.add_option("--json", json_path, "write the results (QCSchema JSON) to FILE; overrides the input's 'output'")
      ->option_text("FILE");
  bool print_instances = false;
  cli.add_flag("--instances", print_instances,
               "print the built-in instance table (prices and power, README 'Cost of a calculation'), to start a copy "
               "from");
  BenchFlags bench_flags;
  CLI::App* bench_cmd = add_bench(cli, bench_flags);
  try {
    cli.parse(argc, argv);
    if (print_instances) {
      if (*bench_cmd || !input_path.empty()) throw CLI::ValidationError("--instances", "takes no input file");
      if (!json_path.empty()) {
        throw CLI::ValidationError("--instances", "prints the table to standard output and writes no results file "
                                                  "(--json); redirect it: dfmp2 --instances > my-instances.yaml");
      }
      if (rank0) write_standard_output(dfmp2::app::builtin_instances_yaml());
      return 0;
    }
    if (!*bench_cmd && input_path.empty()) throw CLI::RequiredError("input");
  } catch (const CLI::CallForHelp& e) {
    return rank0 ? cli.exit(e) : 0;
  } catch (const CLI::CallForVersion& e) {
    return rank0 ? cli.exit(e) : 0;
  } catch (const CLI::ParseError& e) {
    // Every rank parses the same command line (all ranks fail alike): rank 0 says so.
    if (rank0) print_error("error: ", e.what(), " (run 'dfmp2 --help')");
    return dfmp2::InputError("").exit_code();
  }
  if (*bench_cmd) {
    if (!input_path.empty() || !json_path.empty()) {
      throw dfmp2::InputError("'dfmp2 bench' takes no input file; its flags come after 'bench'");
    }
    return run_bench(*bench_cmd, bench_flags);
  }
  if (!dfmp2::app::is_qcschema_path(input_path)) {
    return run_input(input_path, json_path.empty() ? std::nullopt : std::optional<std::string>(json_path));
  }
  // A QCSchema AtomicInput: its AtomicResult, or on any error a FailedOperation, goes to --json or beside it.
  const std::string output = json_path.empty() ? dfmp2::app::qcschema_default_output(input_path) : json_path;
  try {
    return run_input(input_path, output);
  } catch (...) {
    if (rank0) write_failed_operation(input_path, output, std::current_exception());
    throw;
  }
}

// Reads the input and runs it; `output` (may be empty) overrides the input's `output`.
int run_input(const std::string& input_path, const std::optional<std::string>& output) {
  dfmp2::linalg::Comm& comm = dfmp2::linalg::world();
  const bool rank0 = comm.rank() == 0;
  // Each rank reads the input itself (a rank that cannot makes every rank stop: Comm::checked); rank 0 alone
  // writes the results, so it alone checks where.
  dfmp2::app::PreparedRun run;
  comm.checked([&] {
    run = dfmp2::app::prepare_run(dfmp2::app::read_input_file(input_path, comm.node_ranks()), output, rank0);
  });
  // An input without `backends` runs on the measured default (devices/calibration.hpp); with several ranks on rank
  // 0's, so that every rank runs the same kernels and gets the same bits (ranks on other nodes measure their own
  // machine, and two backends within noise of each other can come out either way).
  if (comm.size() > 1 && !run.input.as_read.contains("backends")) {
    std::string name = rank0 ? run.input.backends.front() : std::string();
    std::uint64_t length = name.size();
    comm.broadcast(&length, sizeof(length), 0);
    name.resize(static_cast<std::size_t>(length));
    comm.broadcast(name.data(), name.size(), 0);
    run.input.backends = {name};
  }

  // Long phases (the SCF, the DF-MP2 transformation and pair loop) report as they go, from rank 0; the results are
  // printed at the end, in one piece.
  dfmp2::app::Progress progress(stdout);
  std::function<void(const std::string&)> say;
  std::function<void(const std::string&, long long, long long)> phase_progress;
  if (rank0) {
    say = [&](const std::string& line) {
      progress.finish();
      std::fputs((line + "\n").c_str(), stdout);
      std::fflush(stdout);
    };
    phase_progress = [&](const std::string& phase, long long done, long long total) {
      progress.update(phase, done, total);
    };
  }
  const dfmp2::app::Calculation calc = dfmp2::app::run_prepared(run, comm, say, phase_progress);
  progress.finish();
  if (!rank0) return 0;
  std::string text = dfmp2::app::format_header(calc);
  if (calc.reference.molecule()) text += dfmp2::app::format_scf(calc);
  for (const auto& r : calc.runs) {
    text += dfmp2::app::format_energies(calc, r);
    if (r.energy_from_gradient) continue;  // its kernels are in the gradient's table
    text += dfmp2::app::format_kernel_table(r);
    text += dfmp2::app::format_rank_table(
        fmt::format("DF-MP2 per rank; pair schedule: predicted imbalance {:.3f}, {} of {} block pairs on a rank holding "
                    "neither block", r.result.pair_imbalance, r.result.pairs_away, r.result.block_pairs),
        dfmp2::app::mp2_rank_phases(), r.result.ranks);
  }
  if (calc.runs.size() > 1) text += dfmp2::app::format_comparison(calc);
  text += dfmp2::app::format_cost_table(calc);
  text += dfmp2::app::format_interaction(calc);
  text += dfmp2::app::format_gradient(calc);
  text += dfmp2::app::format_hessian(calc);
  text += dfmp2::app::format_properties(calc);
  text += dfmp2::app::format_cbs(calc);
  dfmp2::app::finish_run(run, calc);
  if (run.output) text += fmt::format("\n  results written to {}\n", *run.output);
  write_standard_output(text);
  return 0;
}

// Runs the program on this rank and turns any error into its one line and exit code (README "Errors"). With several
// ranks: an error agreed through Comm::checked is printed by the lowest failing rank only, and every rank ends with
// its code; any other error either happened on every rank alike (they all arrive here within a grace period, and
// rank 0 prints it) or on some ranks only, while others wait in a collective for them: then this rank prints its
// line and ends every rank (MPI_Abort). Either way, never a hang.
int run_reporting_errors(int argc, char** argv) {
  namespace linalg = dfmp2::linalg;
  linalg::Comm& comm = linalg::world();
  try {
    return run(argc, argv);
  } catch (const linalg::RankFailure& e) {
    if (e.reports()) print_report(e.report(), e.failed_rank(), e.ranks());
    return e.exit_code();
  } catch (...) {
    const linalg::FailureReport report = linalg::failure_report(std::current_exception());
    if (comm.size() == 1) {
      print_report(report, 0, 1);
      return report.exit_code;
    }
    constexpr double kGraceSeconds = 20;
    if (comm.all_arrive_within(kGraceSeconds)) {
      if (comm.rank() == 0) print_report(report, 0, comm.size());
      return report.exit_code;
    }
    print_report(report, comm.rank(), comm.size());
    linalg::abort_world(report.exit_code);
  }
}

}  // namespace

int main(int argc, char** argv) {
  dfmp2::chem::remove_temporary_files_on_signals();
  // /proc/self/exe, not argv[0]: a program found on PATH has no folder in argv[0].
  std::error_code ec;
  dfmp2::app::set_program_location(std::filesystem::read_symlink("/proc/self/exe", ec).string());
  // A file-size limit (ulimit -f) must end a write with an error naming the file (EFBIG), not kill the process
  // with SIGXFSZ and leave scratch files behind.
  std::signal(SIGXFSZ, SIG_IGN);
  try {
    dfmp2::linalg::init_world(&argc, &argv);
  } catch (const dfmp2::linalg::RankFailure& e) {  // a build without MPI started as several ranks: rank 0 says so
    if (e.reports()) print_error(e.report().prefix.c_str(), e.report().message, e.report().suffix.c_str());
    return e.exit_code();
  } catch (...) {
    const auto report = dfmp2::linalg::failure_report(std::current_exception());
    print_error(report.prefix.c_str(), report.message, report.suffix.c_str());
    return report.exit_code;
  }
  int code = run_reporting_errors(argc, argv);
  // What went to standard output (the report, --instances, --help) reached it, or the run says it did not: a full
  // disk or a closed pipe must not end in exit 0 with nothing written.
  errno = 0;
  if (code == 0 && (std::fflush(stdout) != 0 || std::ferror(stdout) != 0)) {
    const int error = errno;
    print_error("error: ", fmt::format("cannot write to standard output: {}",
                                       error != 0 ? std::strerror(error) : "a write failed"));
    code = dfmp2::OutputError("").exit_code();
  }
  dfmp2::linalg::finalize_world();
  return code;
}
