#pragma once
// The metric step's question, asked of the kernels mode's own measurements: where does Newton-Schulz overtake eigh
// for J^-1/2, if it does, on this machine? For each backend and precision that ran both `invsqrt_ns` and
// `invsqrt_eigh`, ratio = t(invsqrt_ns) / t(invsqrt_eigh) (median wall times of the same run) at each size, then a
// verdict: the two sizes between which Newton-Schulz becomes faster and stays faster at every larger size (with a
// log-log interpolation of where the ratio crosses 1), "faster at every size measured", or "does not overtake up to
// N" with the trend of a least-squares fit of log ratio against log N (its crossing is quoted, marked extrapolated,
// only within 16x the largest size). Sizes where Newton-Schulz failed (did not converge) are named and left out.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "linalg/matrix_view.hpp"

namespace dfmp2::app::bench {

// One size: the median times (NaN when the op did not run there) and whether Newton-Schulz failed.
struct NsPoint {
  linalg::Index size = 0;
  double t_ns = 0, t_eigh = 0, t_eigh_kernel = 0;  // invsqrt_ns, invsqrt_eigh, eigh alone
  bool ns_failed = false;
  double ratio() const { return t_ns / t_eigh; }
};

struct NsComparison {
  std::string backend, precision;
  std::vector<NsPoint> points;
  std::string verdict;
  std::optional<linalg::Index> crossover_low, crossover_high;  // NS slower at low, faster at high and above
  std::optional<double> crossover_estimate;                     // where log-log interpolation puts ratio = 1
  bool extrapolated = false;                                    // the estimate is a trend, not a measured bracket
};

// The verdict over the points of one backend and precision (sizes ascending).
NsComparison compare_newton_schulz(std::string backend, std::string precision, std::vector<NsPoint> points);

// The section of the text report and the JSON value ("newton_schulz") of a set of comparisons.
std::string newton_schulz_text(const std::vector<NsComparison>& comparisons, double condition);
nlohmann::json newton_schulz_json(const std::vector<NsComparison>& comparisons);

}  // namespace dfmp2::app::bench
