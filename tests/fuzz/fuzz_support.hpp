#pragma once
// What the libFuzzer targets share (scripts/fuzz.sh, tests/fuzz/README.md): the fuzzer's bytes as a file in a private
// folder, because the readers under test take paths (as a user's input is a file), and the one rule of every target:
// a dfmp2::Error (bad input, said in one line) is the expected answer to garbage; anything else (a crash, a sanitizer
// report, another exception, a hang) is a defect.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "devices/calibration.hpp"
#include "linalg/errors.hpp"

namespace dfmp2::fuzz {

// An input without `backends` runs on the measured default backend (devices/calibration.hpp): measured once per
// process, which under AddressSanitizer takes longer than the time one input may take. The targets that read whole
// inputs measure before the first input (in LLVMFuzzerInitialize, which the time limit does not cover).
inline void measure_default_backend_first() { (void)dfmp2::devices::machine_calibration(); }

// A folder of this process's own, made once.
inline const std::filesystem::path& work_folder() {
  static const std::filesystem::path folder = [] {
    std::string pattern = (std::filesystem::temp_directory_path() / "dfmp2-fuzz-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    return std::filesystem::path(pattern);
  }();
  return folder;
}

// The bytes as the file `name` in that folder; returns its path.
inline std::string as_file(const std::string& name, const std::uint8_t* data, std::size_t size) {
  const auto path = work_folder() / name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path.string();
}

// Runs `f`; a dfmp2::Error is the expected refusal of bad input, anything else escapes to libFuzzer.
template <class F>
void expect_only_input_errors(F&& f) {
  try {
    f();
  } catch (const dfmp2::Error&) {
  }
}

}  // namespace dfmp2::fuzz
