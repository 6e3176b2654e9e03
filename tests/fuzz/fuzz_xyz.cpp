// libFuzzer target: xyz lines (chem/system/molecule.cpp parse_xyz_lines) with Psi4's fragment and ghost syntax, the
// completion of the fragments' charges and multiplicities (given a complex's charge and multiplicity or not, from
// the first bytes), the geometry checks and the frozen-core count.
#include <fuzzer/FuzzedDataProvider.h>

#include <optional>

#include "chem/system/molecule.hpp"
#include "tests/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider fdp(data, size);
  const auto maybe = [&](int low, int high) {
    return fdp.ConsumeBool() ? std::optional<int>(fdp.ConsumeIntegralInRange<int>(low, high)) : std::nullopt;
  };
  const std::optional<int> charge = maybe(-1000, 1000), multiplicity = maybe(1, 1001);
  const std::string text = fdp.ConsumeRemainingBytesAsString();
  dfmp2::fuzz::expect_only_input_errors([&] {
    auto molecule = dfmp2::chem::parse_xyz_lines(text, "fuzz.xyz");
    dfmp2::chem::check_geometry(molecule, "fuzz.xyz");
    dfmp2::chem::fill_charges_and_multiplicities(molecule, charge, multiplicity);
    (void)dfmp2::chem::spin_occupied(molecule, molecule.multiplicity);
    (void)dfmp2::chem::frozen_core_orbitals(molecule);
  });
  return 0;
}
