// The backends of a run: made, and checked against what the input asks of them, before any work is done.
#include <fmt/format.h>

#include "app/stage.hpp"
#include "devices/registry.hpp"
#include "linalg/errors.hpp"

namespace dfmp2::app {

namespace {

// The ops DF-MP2 will call with these options, each with the element types it needs (chem/mp2/dfmp2.hpp).
std::vector<std::pair<linalg::Op, linalg::DType>> required_ops(const Input& input, chem::Precision precision) {
  using linalg::DType;
  using linalg::Op;
  std::vector<Op> ops = {Op::gemm, Op::gemm_batched, Op::syrk};
  switch (input.metric) {
    case chem::MetricMethod::cholesky: ops.insert(ops.end(), {Op::cholesky, Op::trsm}); break;
    case chem::MetricMethod::eigh: ops.push_back(Op::eigh); break;
    case chem::MetricMethod::newton_schulz: break;  // GEMMs only
  }
  if (input.screening.enabled) ops.push_back(Op::spmm);
  std::vector<DType> types;
  switch (precision) {
    case chem::Precision::fp64: types = {DType::fp64}; break;
    case chem::Precision::fp32:
    case chem::Precision::bf16:
    case chem::Precision::bf16x3: types = {DType::fp32}; break;
    case chem::Precision::mixed: types = {DType::fp32, DType::fp64}; break;
  }
  std::vector<std::pair<Op, DType>> out;
  for (DType t : types)
    for (Op op : ops) out.emplace_back(op, t);
  return out;
}

}  // namespace

void check_backend_can_run(const Input& input, linalg::Backend& backend, linalg::Backend* fallback) {
  for (const chem::Precision precision : input.precisions_of(backend.name())) {
    for (const auto& [step, mode] : chem::step_matmul_modes(precision, input.step_modes)) {
      if (backend.supports_matmul_mode(mode)) continue;
      throw UnsupportedError(input.path, "precision", fmt::format("{{key}}: backend '{}' has no {} arithmetic ({} is for the device "
                                         "models trn1 and trn2; use fp64, fp32 or mixed)", backend.name(), linalg::matmul_mode_name(mode), chem::precision_name(precision)));
    }
    for (const auto& [op, dtype] : required_ops(input, precision)) {
      if (backend.supports(op, dtype)) continue;
      if (fallback != nullptr && fallback->supports(op, dtype)) continue;  // allowed, and counted in the report
      const bool metric_op = op == linalg::Op::eigh || op == linalg::Op::cholesky || op == linalg::Op::trsm;
      throw UnsupportedError(input.path, metric_op ? "metric" : "precision", fmt::format("{{key}}: backend '{}' cannot run {} in {} (needed by precision {}{}); choose another {}, or set "
          "device.host_fallback: true to run such ops on the host", backend.name(), linalg::op_name(op), linalg::dtype_name(dtype), chem::precision_name(precision), metric_op ? fmt::format(" with metric {}", chem::metric_name(input.metric)) : std::string(), metric_op ? "metric" : "precision"));
    }
  }
}

std::vector<linalg::Backend*> Backends::named_list() const {
  std::vector<linalg::Backend*> out;
  for (const auto& b : named) out.push_back(b.get());
  return out;
}

// Every backend made, and checked against what the input asks of it (an element type, bf16, an op of the chosen
// metric), so that one that cannot run stops the run before any work is done. The SCF is fp64 throughout: it runs on
// the first named backend with fp64 arithmetic, or on the default CPU backend when the list holds only device models.
Backends make_backends(const Input& input) {
  Backends b;
  for (const auto& name : input.backends) {
    try {
      b.named.push_back(devices::make_backend(name, input.device));
    } catch (const InputError& e) {  // a device parameter override the model does not know
      throw InputError(input.path, "device." + name, std::string("{key}: ") + e.what());
    }
    b.named.back()->set_threads(input.threads);
  }
  if (input.host_fallback) {
    b.fallback = devices::make_backend(devices::default_backend());
    b.fallback->set_threads(input.threads);
  }
  for (const auto& backend : b.named) check_backend_can_run(input, *backend, b.fallback.get());
  for (const auto& backend : b.named) {
    if (b.scf == nullptr && backend->supports(linalg::Op::gemm, linalg::DType::fp64) &&
        backend->supports(linalg::Op::eigh, linalg::DType::fp64)) {
      b.scf = backend.get();
    }
  }
  if (b.scf == nullptr && input.molecule) {
    b.scf_own = devices::make_backend(devices::default_backend());
    b.scf_own->set_threads(input.threads);
    b.scf = b.scf_own.get();
  }
  return b;
}

}  // namespace dfmp2::app
