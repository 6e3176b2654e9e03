#include "linalg/kernel_log.hpp"

#include <algorithm>

namespace dfmp2::linalg {

void KernelLog::add(const std::string& step, const std::string& kernel, const std::string& backend,
                    double seconds, const Cost& cost, const std::string& dtype) {
  auto it = std::find_if(records_.begin(), records_.end(), [&](const KernelRecord& r) {
    return r.step == step && r.kernel == kernel && r.backend == backend && r.dtype == dtype;
  });
  if (it == records_.end()) {
    records_.push_back({step, kernel, backend, dtype});
    it = records_.end() - 1;
  }
  it->calls += 1;
  it->seconds += seconds;
  it->flops += cost.flops;
  it->bytes += cost.bytes;
}

double KernelLog::total_seconds() const {
  double total = 0;
  for (const auto& r : records_) total += r.seconds;
  return total;
}

}  // namespace dfmp2::linalg
