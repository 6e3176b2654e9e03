#include "app/prepare.hpp"

#include "app/qcschema.hpp"
#include "app/results.hpp"
#include "linalg/errors.hpp"

namespace dfmp2::app {

Input read_input_file(const std::string& path, int node_ranks) {
  return is_qcschema_path(path) ? read_qcschema_input(path, node_ranks) : read_input(path, node_ranks);
}

PreparedRun prepare_run(Input input, const std::optional<std::string>& output_override, bool check_output) {
  PreparedRun run;
  input.resident_at_start = resident_bytes();
  run.output = output_override ? output_override : input.output;
  if (check_output) check_output_paths(input, run.output);
  run.input = std::move(input);
  return run;
}

Calculation run_prepared(const PreparedRun& run, linalg::Comm& comm, const std::function<void(const std::string&)>& progress,
                         const std::function<void(const std::string&, long long, long long)>& phase_progress) {
  if (!run.input.qcschema) return run_calculation(run.input, comm, progress, phase_progress);
  try {
    return run_calculation(run.input, comm, progress, phase_progress);
  } catch (const InputError& e) {  // found after reading (a basis set name, frozen_core): QCSchema's names
    throw in_qcschema_names(e);
  } catch (const UnsupportedError& e) {
    throw in_qcschema_names(e);
  }
}

nlohmann::json finish_run(const PreparedRun& run, const Calculation& calc) {
  nlohmann::json results = run.input.qcschema ? qcschema_result(calc) : results_json(calc);
  write_molden_files(calc);
  if (run.output) write_atomically(*run.output, results.dump(1) + "\n");
  return results;
}

}  // namespace dfmp2::app
