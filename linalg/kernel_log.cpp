#include "linalg/kernel_log.hpp"

#include <algorithm>
#include <utility>

namespace dfmp2::linalg {

void KernelLog::add(const std::string& step, const std::string& kernel, const std::string& backend,
                    double seconds, const Cost& cost, const std::string& dtype, const ModelledTime* model,
                    bool fallback) {
  auto it = std::find_if(records_.begin(), records_.end(), [&](const KernelRecord& r) {
    return r.step == step && r.kernel == kernel && r.backend == backend && r.dtype == dtype;
  });
  if (it == records_.end()) {
    KernelRecord r;
    r.step = step;
    r.kernel = kernel;
    r.backend = backend;
    r.dtype = dtype;
    r.fallback = fallback;
    records_.push_back(std::move(r));
    it = records_.end() - 1;
  }
  it->calls += 1;
  it->seconds += seconds;
  it->flops += cost.flops;
  it->bytes += cost.bytes;
  if (model != nullptr) {
    it->modelled = true;
    it->model += *model;
  }
}

double KernelLog::wall_with_modelled_kernels(double wall_seconds) const {
  double t = wall_seconds;
  for (const auto& r : records_)
    if (r.modelled) t += r.model.total - r.seconds;
  return t;
}

bool KernelLog::any_modelled() const {
  for (const auto& r : records_)
    if (r.modelled) return true;
  return false;
}

double KernelLog::modelled_seconds() const { return modelled_sum().total; }

ModelledTime KernelLog::modelled_sum(const std::string& step) const {
  ModelledTime sum;
  for (const auto& r : records_)
    if (r.modelled && (step.empty() || r.step == step)) sum += r.model;
  return sum;
}

long KernelLog::fallback_calls() const {
  long n = 0;
  for (const auto& r : records_)
    if (r.fallback) n += r.calls;
  return n;
}

double KernelLog::total_seconds() const {
  double total = 0;
  for (const auto& r : records_) total += r.seconds;
  return total;
}

}  // namespace dfmp2::linalg
