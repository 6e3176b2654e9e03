// libFuzzer target: a user's instance table (app/instances.cpp load_instance_table: cost.instances, README "Cost of
// a calculation"), the fuzzer's bytes as the YAML file.
#include "app/instances.hpp"
#include "tests/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = dfmp2::fuzz::as_file("instances.yaml", data, size);
  dfmp2::fuzz::expect_only_input_errors([&] {
    const auto table = dfmp2::app::load_instance_table(path);
    for (const auto& runs : {"trn1", "trn2", "cpu"}) (void)table.names(runs);
    (void)table.find(table.default_cpu);
  });
  return 0;
}
