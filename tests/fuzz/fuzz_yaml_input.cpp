// libFuzzer target: the YAML input reader (app/input.cpp read_input), as `dfmp2 input.yaml` runs it.
#include "app/input.hpp"
#include "tests/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  dfmp2::fuzz::measure_default_backend_first();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = dfmp2::fuzz::as_file("input.yaml", data, size);
  dfmp2::fuzz::expect_only_input_errors([&] { (void)dfmp2::app::read_input(path); });
  return 0;
}
