#pragma once
// How an entry point starts and finishes a run: the command line (app/main.cpp) and dfmp2.run() in Python
// (app/python/module.cpp). So both honour `memory` (the plan of run_calculation), `output` (checked before any
// work, written at the end) and the QCSchema field names in errors. `dfmp2 bench --dfmp2` (app/bench/bench.cpp),
// which keeps a backend open over repetitions, runs each cell through run_calculation's own pieces (app/run.hpp:
// make_reference, make_memory_plan, check_scratch, dfmp2_options, run_dfmp2_on) and judges its energies by the same
// rule (app/report.hpp accuracy_reference).
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "app/input.hpp"
#include "app/run.hpp"

namespace dfmp2::app {

struct PreparedRun {
  Input input;
  std::optional<std::string> output;  // the results file, if any
};

// A YAML input, or a QCSchema AtomicInput when the name ends in .json; `node_ranks` ranks on this node share the
// default memory and threads.
Input read_input_file(const std::string& path, int node_ranks = 1);

// The run of `input`: the memory in use now measured (the plan counts it against `memory`), and the results file
// (`output_override` wins over the input's `output`) checked before any work when `check_output` (with several
// ranks, rank 0 alone writes it).
PreparedRun prepare_run(Input input, const std::optional<std::string>& output_override = std::nullopt,
                        bool check_output = true);

// run_calculation over the ranks of `comm`, with the errors of a QCSchema input named by its fields
// (`field 'model.basis'`).
Calculation run_prepared(const PreparedRun& run, linalg::Comm& comm,
                         const std::function<void(const std::string&)>& progress = {},
                         const std::function<void(const std::string&, long long, long long)>& phase_progress = {});

// The results: an AtomicResult for a QCSchema input, else dfmp2's results file; written to run.output when there is
// one (atomically: never half a file).
nlohmann::json finish_run(const PreparedRun& run, const Calculation& calc);

}  // namespace dfmp2::app
