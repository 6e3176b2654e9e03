// libFuzzer target: xyz lines (chem/molecule.cpp parse_xyz_lines), the geometry checks and the frozen-core count.
#include "chem/molecule.hpp"
#include "tests/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  dfmp2::fuzz::expect_only_input_errors([&] {
    const auto molecule = dfmp2::chem::parse_xyz_lines(text, "fuzz.xyz");
    dfmp2::chem::check_geometry(molecule, "fuzz.xyz");
    (void)dfmp2::chem::frozen_core_orbitals(molecule);
  });
  return 0;
}
