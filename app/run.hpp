#pragma once
// One `dfmp2 INPUT.yaml` calculation: opens the integral file once, then runs DF-MP2 on every backend named in
// the input, in order, each with its own kernel log.
#include <memory>
#include <string>
#include <vector>

#include "app/input.hpp"
#include "chem/dfmp2.hpp"
#include "chem/integral_file.hpp"
#include "linalg/kernel_log.hpp"

namespace dfmp2::app {

struct BackendRun {
  std::string backend;
  std::string details;  // Backend::details(), read after the threads were set
  chem::DfMp2Result result;
  linalg::KernelLog log;
  double wall_seconds = 0;
};

struct Calculation {
  Input input;
  std::unique_ptr<chem::IntegralFile> integrals;
  int nfrozen = 0;
  std::vector<BackendRun> runs;
};

// Number of frozen core orbitals the input asks for; throws InputError when it cannot be honoured.
int resolve_frozen_core(const Input& input, const chem::IntegralFile& file);

Calculation run_calculation(const Input& input);

}  // namespace dfmp2::app
