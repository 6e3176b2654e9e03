#pragma once
// The results file: QCSchema AtomicResult (schema_name "qcschema_output") where QCSchema has a field, this
// program's own data under extras.dfmp2. Written atomically: to a temporary file in the same folder, then renamed,
// so a failed run never leaves a half-written file.
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "app/run.hpp"

namespace dfmp2::app {

nlohmann::json results_json(const Calculation& calc);
// driver: properties: its entries of the results file (app/results_properties.cpp).
void add_properties(const Calculation& calc, nlohmann::json& j);
// A basis series: the limits (app/results_cbs.cpp).
void add_cbs(const Calculation& calc, nlohmann::json& j);
// driver: properties: the Molden files properties.molden and properties.scf_molden asked for, each written whole.
void write_molden_files(const Calculation& calc);
// The gradient's (or the relaxed density's) steps and their seconds, in order.
nlohmann::json step_seconds(const chem::DfMp2Gradient& g);

// Throws OutputError (naming `key`) when `path` cannot be written: its folder does not exist or is not writable,
// or it is a folder or some other non-regular file. Called before any work, so a long run is not lost at the end.
void check_output_path(const std::string& path, const std::string& key = "output");
// Every file a `dfmp2 INPUT` run will write (the results file `output`, `save_integrals`): each checked as above,
// and none of them may be another of them or a file the run reads (the input, the integral or molecule file).
void check_output_paths(const Input& input, const std::optional<std::string>& output);
// Writes to a temporary beside `path` and renames it into place (chem/io/temporary_files.hpp); OutputError naming
// `key` when it cannot.
void write_atomically(const std::string& path, const std::string& text, const std::string& key = "output");

}  // namespace dfmp2::app
