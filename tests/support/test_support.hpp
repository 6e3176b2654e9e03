#pragma once
// Helpers shared by the test programs: temporary folders, running the dfmp2 binary, random problems.
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>
#include <sys/wait.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "chem/integrals/three_index_source.hpp"
#include "devices/registry.hpp"
#include "linalg/matrix_view.hpp"

namespace dfmp2::testing {

// The built backends with fp64 arithmetic (eigen, openblas): the ones the fp64 test suites run on. The device
// models (trn1, trn2) have no fp64; tests/devices/ covers them.
inline std::vector<std::string> cpu_backends() {
  std::vector<std::string> out;
  for (const auto& name : dfmp2::devices::built_backends()) {
    if (dfmp2::devices::make_backend(name)->supports(dfmp2::linalg::Op::gemm, dfmp2::linalg::DType::fp64)) {
      out.push_back(name);
    }
  }
  return out;
}

// A fresh folder under the system temp folder, removed with its contents at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "dfmp2-test-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name, const std::string& text) const {
    const auto p = path_ / name;
    std::ofstream(p) << text;
    return p.string();
  }

 private:
  std::filesystem::path path_;
};

struct CommandResult {
  int exit_code = -1;
  std::string out, err;
};

// Runs a shell command line, capturing stdout and stderr separately.
inline CommandResult run_command(const std::string& command, const TempDir& scratch) {
  const auto out = scratch.path() / "stdout.txt";
  const auto err = scratch.path() / "stderr.txt";
  const std::string line = command + " >" + out.string() + " 2>" + err.string() + " </dev/null";
  const int status = std::system(line.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  auto slurp = [](const std::filesystem::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// A dfmp2 run of `yaml` (written as in.yaml in `dir`) that must succeed: its results file and its report.
struct FinishedRun {
  nlohmann::json json;
  std::string report;
};
inline FinishedRun run_input(const TempDir& dir, const std::string& yaml) {
  dir.file("in.yaml", yaml);
  const auto json = (dir.path() / "out.json").string();
  const auto r = run_command(std::string(DFMP2_BINARY) + " " + (dir.path() / "in.yaml").string() + " --json " + json,
                             dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(json);
  return {nlohmann::json::parse(in), r.out};
}

// An in-memory three-index source in the file's order, for tests that need no HDF5 file.
class MemorySource final : public chem::ThreeIndexSource {
 public:
  MemorySource(chem::ThreeIndexForm form, linalg::Index naux, linalg::Index stride)
      : form_(form), naux_(naux), stride_(stride), data_(static_cast<std::size_t>(naux * stride)) {}
  chem::ThreeIndexForm form() const override { return form_; }
  linalg::Index naux() const override { return naux_; }
  linalg::Index block_stride() const override { return stride_; }
  void read_block(linalg::Index p0, linalg::Index count, double* out) const override {
    std::copy_n(data_.data() + p0 * stride_, count * stride_, out);
  }
  std::vector<double>& data() { return data_; }

 private:
  chem::ThreeIndexForm form_;
  linalg::Index naux_, stride_;
  std::vector<double> data_;
};

}  // namespace dfmp2::testing
