#pragma once
// The results file: QCSchema AtomicResult (schema_name "qcschema_output") where QCSchema has a field, this
// program's own data under extras.dfmp2. Written atomically: to a temporary file in the same folder, then renamed,
// so a failed run never leaves a half-written file.
#include <string>

#include <nlohmann/json.hpp>

#include "app/run.hpp"

namespace dfmp2::app {

nlohmann::json results_json(const Calculation& calc);

// Throws OutputError when the folder of `path` does not exist or is not writable; called before the
// calculation so a long run is not lost at the end.
void check_output_path(const std::string& path);
void write_atomically(const std::string& path, const std::string& text);

}  // namespace dfmp2::app
