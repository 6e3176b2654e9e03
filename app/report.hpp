#pragma once
// What `dfmp2` prints: a header describing the problem, per backend the energy block (in the layout of Psi4's
// DF-MP2 output) and the kernel timing table, and with several backends a comparison table.
#include <optional>
#include <string>
#include <string_view>

#include "app/run.hpp"

namespace dfmp2::app {

// One line on what of an integral file was verified by checksums as it was read (docs/integral-file-format.md).
// An error message as the one line every error prints (README "Errors"): control characters and bytes that are not
// UTF-8 shown escaped (\n, \x1b, \xff), so the line is valid UTF-8 and a valid JSON string for a FailedOperation;
// cut after 2000 characters.
std::string one_line(std::string_view message);

std::string integrity_summary(const chem::IntegralFile& file);
std::string format_header(const Calculation& calc);
std::string format_energies(const Calculation& calc, const BackendRun& run);
std::string format_kernel_table(const BackendRun& run);
std::string format_kernel_table(const std::string& title, const linalg::KernelLog& log, double wall_seconds);
// Device backends: the modelled time per kernel with its breakdown, achieved TFLOPS and share of peak.
std::string format_modelled_table(const BackendRun& run);
// Device backends with a device-native prediction (BackendRun::native): per step the library-structure modelled
// seconds beside the native ones, the bottleneck, the share of the Tensor Engine's peak and the parts.
std::string format_native_table(const BackendRun& run);
// The modelled seconds of a run's kernels in one DF-MP2 step (library structure).
double library_step_seconds(const BackendRun& run, const std::string& step);
// With `molecule:` input: the RHF summary and the integral/SCF kernel table.
std::string format_scf(const Calculation& calc);
std::string format_comparison(const Calculation& calc);
// With `interaction:`: the fragments, every calculation's SCF and MP2 energies (first run), what the complex and the
// fragments in its basis shared, and per run each scheme's interaction energies in Eh and kcal/mol.
std::string format_interaction(const Calculation& calc);
// driver: gradient: the MP2 and SCF gradients, the dipole moments, the Z-vector and the steps' times.
std::string format_gradient(const Calculation& calc);
// driver: gradient and hessian (app/report_derivatives.cpp). hessian: the harmonic frequencies, reduced masses,
// normal modes and the displaced SCFs' iterations.
std::string format_hessian(const Calculation& calc);
// driver: properties: `==> Properties <==` (app/report_properties.cpp).
std::string format_properties(const Calculation& calc);
// A basis series: each basis's energies, the schemes and the limits (app/report_cbs.cpp).
std::string format_cbs(const Calculation& calc);
// With several ranks: per phase the seconds on each rank (min, mean, max), the imbalance (max / mean), the flops of
// all ranks, the bytes each rank sent and received (the largest), the messages and the longest wait.
std::string format_rank_table(const std::string& title, const std::vector<std::string>& phases,
                              const std::vector<std::vector<linalg::PhaseStats>>& ranks);
// The DF-MP2 steps' names as the rank tables give them (mp2_step_names).
const std::vector<std::string>& mp2_rank_phases();
// The fp64 run of `backend` in this calculation, if there is one (for differences from fp64).
const BackendRun* fp64_run(const Calculation& calc, const std::string& backend);
// The fp64 run a run's energy is compared with: the same backend's, else the first fp64 run of any backend.
// The rules below over any list of runs, each named by backend and precision (a calculation's runs, or `dfmp2
// bench`'s runs of one shape): the index of the reference, if there is one.
struct RunKey {
  std::string backend;
  chem::Precision precision;
};
std::optional<std::size_t> fp64_reference(const std::vector<RunKey>& runs, std::size_t run);
std::optional<std::size_t> accuracy_reference(const std::vector<RunKey>& runs, std::size_t run);
const BackendRun* fp64_reference(const Calculation& calc, const BackendRun& run);
// The run a run's accuracy is judged against: none for an fp64 run; else its fp64 reference (fp64_reference);
// else, for a run in a lower precision than fp32 (bf16, bf16x3), the same backend's fp32 run, else the first fp32
// run; else nullptr. A bf16 or bf16x3 energy is never printed without its error when one exists.
const BackendRun* accuracy_reference(const Calculation& calc, const BackendRun& run);
// "eigen fp64", say.
std::string run_label(const BackendRun& run);

}  // namespace dfmp2::app
