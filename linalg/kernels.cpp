#include "linalg/kernels.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "linalg/errors.hpp"

namespace dfmp2::linalg {

Backend& Kernels::require(const std::string& step, Op op, DType dtype) {
  if (backend_.supports(op, dtype)) return backend_;
  // Allowed by the input; recorded as a fallback so the report counts it.
  if (fallback_ != nullptr && fallback_->supports(op, dtype)) return *fallback_;
  throw UnsupportedError(unsupported_message(backend_, op, dtype, dtype_label(step, dtype)) +
                         (fallback_ == nullptr ? "" : " (nor does the host fallback)"));
}

std::string Kernels::dtype_label(const std::string& step, DType dtype) const {
  if (dtype == DType::fp32) return matmul_mode_name(matmul_mode(step));
  return std::string(dtype_name(dtype));
}

namespace {
void require_mode(const Backend& backend, MatmulMode mode) {
  if (!backend.supports_matmul_mode(mode)) {
    throw UnsupportedError(fmt::format("backend '{}' has no {} arithmetic (bf16 and bf16x3 are for the device "
                                       "models trn1 and trn2; use precision fp32 or fp64)",
                                       backend.name(), matmul_mode_name(mode)));
  }
}
}  // namespace

void Kernels::set_matmul_mode(MatmulMode mode) {
  require_mode(backend_, mode);
  mode_ = mode;
}

void Kernels::set_step_matmul_mode(const std::string& step, MatmulMode mode) {
  require_mode(backend_, mode);
  step_modes_[step] = mode;
}

MatmulMode Kernels::matmul_mode(const std::string& step) const {
  const auto it = step_modes_.find(step);
  return it == step_modes_.end() ? mode_ : it->second;
}

void Kernels::record(const std::string& step, const Backend& ran_on, const std::string& kernel, DType dtype,
                     double seconds, const Cost& cost, const CallFacet& facet) {
  const bool fallback = &ran_on != &backend_;
  // A fallback ran at the host backend's own precision: bf16 and bf16x3 apply to the device only.
  const std::string label = fallback ? std::string(dtype_name(dtype)) : dtype_label(step, dtype);
  const std::string who = fallback ? fmt::format("{} (fallback from {})", ran_on.name(), backend_.name())
                                   : backend_.name();
  log_.add(step, kernel, who, seconds, cost, label, facet.modelled ? &*facet.modelled : nullptr, fallback);
}

void Kernels::record_host(const std::string& step, const std::string& kernel, double seconds, const Cost& cost,
                          const std::string& dtype) {
  log_.add(step, kernel, "host", seconds, cost, dtype);
}

}  // namespace dfmp2::linalg
