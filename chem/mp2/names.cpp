// DF-MP2's names (precisions, metrics, storage, steps and their phases) and what follows from them for a backend:
// each step's matmul mode, the backend's working copies, whether the metric is factored on the ranks' grid.
#include "chem/mp2/dfmp2.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "linalg/errors.hpp"

namespace dfmp2::chem {

using linalg::Index;

const linalg::NameTable<Precision>& precision_names() {
  static const linalg::NameTable<Precision> t = {{Precision::fp64, "fp64"},
                                                                    {Precision::fp32, "fp32"},
                                                                    {Precision::mixed, "mixed"},
                                                                    {Precision::bf16, "bf16"},
                                                                    {Precision::bf16x3, "bf16x3"}};
  return t;
}

const linalg::NameTable<MetricMethod>& metric_names() {
  static const linalg::NameTable<MetricMethod> t = {
      {MetricMethod::cholesky, "cholesky"}, {MetricMethod::eigh, "eigh"}, {MetricMethod::newton_schulz, "newton-schulz"}};
  return t;
}

const linalg::NameTable<Mp2Storage>& mp2_storage_names() {
  static const linalg::NameTable<Mp2Storage> t = {
      {Mp2Storage::automatic, "auto"}, {Mp2Storage::memory, "memory"}, {Mp2Storage::scratch, "scratch"}};
  return t;
}

const linalg::NameTable<Mp2Method>& mp2_method_names() {
  static const linalg::NameTable<Mp2Method> t = {
      {Mp2Method::mp2, "mp2"}, {Mp2Method::scs_mp2, "scs-mp2"}, {Mp2Method::sos_mp2, "sos-mp2"}};
  return t;
}

std::string Mp2Model::label() const {
  std::string out = linalg::name_in(mp2_method_names(), method);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return char(std::toupper(c)); });
  return out;
}

std::string precision_name(Precision p) { return linalg::name_in(precision_names(), p); }
std::string metric_name(MetricMethod m) { return linalg::name_in(metric_names(), m); }
std::string mp2_storage_name(Mp2Storage s) { return linalg::name_in(mp2_storage_names(), s); }

const linalg::NameTable<Mp2Step>& mp2_step_names() {
  static const linalg::NameTable<Mp2Step> t = {{Mp2Step::metric, "metric"},
                                                                  {Mp2Step::transform, "transform"},
                                                                  {Mp2Step::fitting, "fitting"},
                                                                  {Mp2Step::pair_energy, "pair_energy"}};
  return t;
}

const std::string& step_name(Mp2Step step) {
  for (const auto& [s, name] : mp2_step_names())
    if (s == step) return name;
  throw std::logic_error("step_name: unknown step");
}

const std::string& mp2_phase_name(Mp2Step step) {
  static const linalg::NameTable<Mp2Step> t = {{Mp2Step::metric, "MP2 metric"},
                                               {Mp2Step::transform, "MP2 transform"},
                                               {Mp2Step::fitting, "MP2 fitting"},
                                               {Mp2Step::pair_energy, "MP2 pair energies"}};
  for (const auto& [s, name] : t)
    if (s == step) return name;
  throw std::logic_error("mp2_phase_name: unknown step");
}

const std::vector<std::string>& matmul_steps() {
  static const std::vector<std::string> steps = linalg::names_of(mp2_step_names());
  return steps;
}

std::map<std::string, linalg::MatmulMode> step_matmul_modes(Precision precision,
                                                            const std::map<std::string, linalg::MatmulMode>& overrides) {
  using linalg::MatmulMode;
  // Measured on water and methane (bench/README.md, "Device precisions"): operand rounding in the transformation
  // is amplified by the fitting (B = A L^-T: the inverse metric factor magnifies any error of A that is not in
  // the metric's well-conditioned span), so a bf16 transformation gives correlation energies wrong by more than
  // 100 % (water 1.9, methane 10.7 relative) even with an fp32 metric and fitting, and a bf16x3 one errors 700x
  // fp32's. The pair energies only square and sum (ia|jb): bf16 there costs about 1e-4 relative. Hence:
  //   bf16    transform bf16x3, pair energies bf16 (1.3e-5 and 1.6e-4 relative on water and methane);
  //   bf16x3  transform fp32, pair energies bf16x3 (8e-7 and 1.2e-6 relative);
  // metric and fitting fp32 in both. device.step_precision overrides any step explicitly.
  std::map<std::string, MatmulMode> modes;
  const bool device = precision == Precision::bf16 || precision == Precision::bf16x3;
  for (const auto& step : matmul_steps()) modes[step] = MatmulMode::fp32;
  if (precision == Precision::bf16) {
    modes[step_name(Mp2Step::transform)] = MatmulMode::bf16x3;
    modes[step_name(Mp2Step::pair_energy)] = MatmulMode::bf16;
  } else if (precision == Precision::bf16x3) {
    modes[step_name(Mp2Step::pair_energy)] = MatmulMode::bf16x3;
  }
  if (device)
    for (const auto& [step, mode] : overrides) modes[step] = mode;
  return modes;
}

double working_copies_of(const linalg::Backend& backend, Precision precision,
                         const std::map<std::string, linalg::MatmulMode>& step_modes) {
  double copies = 0;
  for (const auto& [step, mode] : step_matmul_modes(precision, step_modes))
    copies = std::max(copies, backend.working_copies(mode));
  return copies;
}

bool distributed_metric(MetricMethod metric, Precision precision, Index naux, int ranks, Index min_order) {
  return linalg::order_on_grid(naux, ranks, min_order) && metric == MetricMethod::cholesky &&
         precision == Precision::fp64;
}


}  // namespace dfmp2::chem
