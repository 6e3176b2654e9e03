// dfmp2 INPUT.yaml [--json FILE]
// dfmp2 bench [--ops LIST --sizes LIST | --dfmp2 SHAPES | --trace FILE | --calibration] ... (bench/README.md)
//
// Exit codes (README "Errors"): 0 success, 2 input, 3 integral file, 4 unsupported backend/precision/op,
// 5 numerical failure, 6 not enough memory, 7 cannot write results, 70 internal error (a bug: please report).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <csignal>
#include <cstdio>
#include <iostream>

#include "app/bench/bench.hpp"
#include "app/input.hpp"
#include "app/progress.hpp"
#include "app/report.hpp"
#include "app/results.hpp"
#include "app/run.hpp"
#include "chem/temporary_files.hpp"
#include "devices/registry.hpp"
#include "linalg/errors.hpp"

namespace {

namespace bench = dfmp2::app::bench;

// Every error is one line (README "Errors"), whatever the input put into the message: a key or a file name with a
// newline or a terminal escape in it is shown escaped, and a message grown huge by a pasted value is cut.
std::string one_line(std::string_view message) {
  constexpr std::size_t kMaxLength = 2000;
  std::string out;
  for (const char c : message) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (u < 0x20 || u == 0x7f) out += fmt::format("\\x{:02x}", u);
    else out += c;
    if (out.size() > kMaxLength) {
      out += " [...]";
      break;
    }
  }
  return out;
}

void print_error(const char* prefix, std::string_view message, const char* suffix = "") {
  std::fflush(stdout);
  std::fprintf(stderr, "dfmp2: %s%s%s\n", prefix, one_line(message).c_str(), suffix);
}

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
  b->add_option("--backends", f.backends, "backends, comma-separated: eigen, openblas, trn1, trn2 (default: the faster CPU backend here, chosen at run time)")
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

int run(int argc, char** argv) {
  CLI::App cli{"dfmp2: density-fitted MP2 energies on interchangeable linear-algebra backends", "dfmp2"};
  cli.set_version_flag("--version", DFMP2_VERSION);
  std::string input_path;
  std::string json_path;
  // Not ->required(): `dfmp2 bench ...` has no input; without the subcommand its absence is checked below.
  cli.add_option("input", input_path, "YAML input file (see README, 'Input keys')");
  cli.add_option("--json", json_path, "write the results (QCSchema JSON) to FILE; overrides the input's 'output'")
      ->option_text("FILE");
  BenchFlags bench_flags;
  CLI::App* bench_cmd = add_bench(cli, bench_flags);
  try {
    cli.parse(argc, argv);
    if (!*bench_cmd && input_path.empty()) throw CLI::RequiredError("input");
  } catch (const CLI::CallForHelp& e) {
    return cli.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return cli.exit(e);
  } catch (const CLI::ParseError& e) {
    print_error("error: ", e.what(), " (run 'dfmp2 --help')");
    return dfmp2::InputError("").exit_code();
  }
  if (*bench_cmd) {
    if (!input_path.empty() || !json_path.empty()) {
      throw dfmp2::InputError("'dfmp2 bench' takes no input file; its flags come after 'bench'");
    }
    return run_bench(*bench_cmd, bench_flags);
  }

  dfmp2::app::Input input = dfmp2::app::read_input(input_path);
  input.resident_at_start = dfmp2::app::resident_bytes();
  std::optional<std::string> output = input.output;
  if (!json_path.empty()) output = json_path;
  dfmp2::app::check_output_paths(input, output);

  // Long phases (the SCF, the DF-MP2 transformation and pair loop) report as they go; the results are printed at
  // the end, in one piece.
  dfmp2::app::Progress progress(stdout);
  const dfmp2::app::Calculation calc = dfmp2::app::run_calculation(
      input,
      [&](const std::string& line) {
        progress.finish();
        std::fputs((line + "\n").c_str(), stdout);
        std::fflush(stdout);
      },
      [&](const std::string& phase, long long done, long long total) { progress.update(phase, done, total); });
  progress.finish();
  std::string text = dfmp2::app::format_header(calc);
  if (calc.reference.molecule()) text += dfmp2::app::format_scf(calc);
  for (const auto& r : calc.runs) {
    text += dfmp2::app::format_energies(calc, r);
    text += dfmp2::app::format_kernel_table(r);
  }
  if (calc.runs.size() > 1) text += dfmp2::app::format_comparison(calc);
  if (output) {
    dfmp2::app::write_atomically(*output, dfmp2::app::results_json(calc).dump(1) + "\n");
    text += fmt::format("\n  results written to {}\n", *output);
  }
  std::fputs(text.c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  dfmp2::chem::remove_temporary_files_on_signals();
  // A file-size limit (ulimit -f) must end a write with an error naming the file (EFBIG), not kill the process
  // with SIGXFSZ and leave scratch files behind.
  std::signal(SIGXFSZ, SIG_IGN);
  try {
    return run(argc, argv);
  } catch (const dfmp2::Error& e) {
    print_error("error: ", e.what());
    return e.exit_code();
  } catch (const std::bad_alloc&) {
    print_error("error: ", "out of memory; lower 'memory' or use a machine with more");
    return dfmp2::ResourceError("").exit_code();
  } catch (const std::exception& e) {
    print_error("internal error: ", e.what(), " (this is a bug; please report it)");
    return 70;
  }
}
