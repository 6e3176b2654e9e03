// dfmp2 INPUT.yaml [--json FILE]
//
// Exit codes (README "Errors"): 0 success, 2 input, 3 integral file, 4 unsupported backend/precision/op,
// 5 numerical failure, 6 not enough memory, 7 cannot write results, 70 internal error (a bug: please report).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <iostream>

#include "app/input.hpp"
#include "app/progress.hpp"
#include "app/report.hpp"
#include "app/results.hpp"
#include "app/run.hpp"
#include "linalg/errors.hpp"

namespace {

int run(int argc, char** argv) {
  CLI::App cli{"dfmp2: density-fitted MP2 energies on interchangeable linear-algebra backends", "dfmp2"};
  cli.set_version_flag("--version", DFMP2_VERSION);
  std::string input_path;
  std::string json_path;
  cli.add_option("input", input_path, "YAML input file (see README, 'Input keys')")->required();
  cli.add_option("--json", json_path, "write the results (QCSchema JSON) to FILE; overrides the input's 'output'")
      ->option_text("FILE");
  try {
    cli.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return cli.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return cli.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "dfmp2: error: %s (run 'dfmp2 --help')\n", e.what());
    return dfmp2::InputError("").exit_code();
  }

  const dfmp2::app::Input input = dfmp2::app::read_input(input_path);
  std::optional<std::string> output = input.output;
  if (!json_path.empty()) output = json_path;
  if (output) dfmp2::app::check_output_path(*output);

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
  if (calc.molecule) text += dfmp2::app::format_scf(calc);
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
  try {
    return run(argc, argv);
  } catch (const dfmp2::Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "dfmp2: error: %s\n", e.what());
    return e.exit_code();
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "dfmp2: error: out of memory; lower 'memory' or use a machine with more\n");
    return dfmp2::ResourceError("").exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dfmp2: internal error: %s (this is a bug; please report it)\n", e.what());
    return 70;
  }
}
