#pragma once
// What `dfmp2` prints: a header describing the problem, per backend the energy block (in the layout of Psi4's
// DF-MP2 output) and the kernel timing table, and with several backends a comparison table.
#include <string>

#include "app/run.hpp"

namespace dfmp2::app {

std::string format_header(const Calculation& calc);
std::string format_energies(const Calculation& calc, const BackendRun& run);
std::string format_kernel_table(const BackendRun& run);
std::string format_comparison(const Calculation& calc);

}  // namespace dfmp2::app
