// libFuzzer target: the QCSchema AtomicInput reader (app/qcschema.cpp read_qcschema_input) and, as the command line
// does on failure, the FailedOperation written from the same bytes.
#include "app/qcschema.hpp"
#include "app/report.hpp"
#include "app/yaml_file.hpp"
#include "linalg/comm.hpp"
#include "tests/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  dfmp2::fuzz::measure_default_backend_first();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = dfmp2::fuzz::as_file("input.json", data, size);
  try {
    (void)dfmp2::app::read_qcschema_input(path);
  } catch (const dfmp2::Error& e) {
    // The failure report's echo of the input: parsed again and dumped, as main() does.
    nlohmann::json input = nullptr;
    try {
      input = nlohmann::json::parse(dfmp2::app::read_json_text(path, path), nullptr, false);
    } catch (const dfmp2::InputError&) {
    }
    if (input.is_discarded()) input = nullptr;
    const auto report = dfmp2::linalg::failure_report(std::current_exception());
    (void)dfmp2::app::qcschema_failure(input, report, dfmp2::app::one_line(e.what())).dump(1);
  }
  return 0;
}
