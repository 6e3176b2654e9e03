// libFuzzer target: the backend calibration's cache file as calibrate() reads it back (devices/calibration.cpp
// read_calibration_cache), for a key of the shape calibration_key() writes. Half the inputs start with the header and
// that key, so the fuzzer reaches the rate lines. Any answer is acceptable but a crash, a sanitizer report or an
// exception: a damaged file is measured again, never an error.
#include <fuzzer/FuzzedDataProvider.h>

#include "devices/calibration.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider fdp(data, size);
  const std::string key = "cpu AMD EPYC (family 25, model 1)\nbackend eigen: Eigen 3.4.0\nbackend openblas: OpenBLAS "
                          "0.3.21 Zen; 2 threads\nown kernels built avx2\nshapes gemmtn:768x768x512\n";
  const bool keyed = fdp.ConsumeBool();
  const std::string text = (keyed ? dfmp2::devices::kCalibrationCacheHeader + key : std::string()) +
                           fdp.ConsumeRemainingBytesAsString();
  for (const auto& r : dfmp2::devices::read_calibration_cache(text, key)) {
    if (!(r.gflops > 0) || !(r.seconds > 0) || r.backend.empty()) __builtin_trap();  // only valid rates come back
  }
  return 0;
}
