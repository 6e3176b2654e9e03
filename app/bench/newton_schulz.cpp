#include "app/bench/newton_schulz.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <utility>

namespace dfmp2::app::bench {

NsComparison compare_newton_schulz(std::string backend, std::string precision, std::vector<NsPoint> points) {
  NsComparison c;
  c.backend = std::move(backend);
  c.precision = std::move(precision);
  c.points = std::move(points);
  std::vector<linalg::Index> failed;
  for (const auto& p : c.points)
    if (p.ns_failed) failed.push_back(p.size);
  const std::string failed_note =
      failed.empty() ? std::string() : fmt::format("; Newton-Schulz did not converge at N = {}", fmt::join(failed, ", "));
  std::vector<NsPoint> valid;
  for (const auto& p : c.points)
    if (!p.ns_failed && std::isfinite(p.ratio()) && p.ratio() > 0) valid.push_back(p);
  if (valid.empty()) {
    c.verdict = "no size where both ran" + failed_note;
    return c;
  }
  const linalg::Index largest = valid.back().size;
  std::vector<bool> faster;
  for (const auto& p : valid) faster.push_back(p.ratio() < 1.0);
  // First index from which Newton-Schulz is faster at every larger measured size.
  std::size_t from = valid.size();
  while (from > 0 && faster[from - 1]) --from;
  if (from == 0) {
    c.verdict = fmt::format("Newton-Schulz is faster at every size measured (N = {} .. {})", valid.front().size, largest);
  } else if (from < valid.size()) {
    const NsPoint& lo = valid[from - 1];
    const NsPoint& hi = valid[from];
    c.crossover_low = lo.size;
    c.crossover_high = hi.size;
    const double x0 = std::log(double(lo.size)), x1 = std::log(double(hi.size));
    const double y0 = std::log(lo.ratio()), y1 = std::log(hi.ratio());
    c.crossover_estimate = std::exp(x0 - y0 * (x1 - x0) / (y1 - y0));
    c.verdict = fmt::format("Newton-Schulz overtakes eigh between N = {} and N = {} (about N = {:.0f}, log-log "
                            "interpolation) and stays faster up to N = {}",
                            lo.size, hi.size, *c.crossover_estimate, largest);
  } else {
    const bool ever = std::find(faster.begin(), faster.end(), true) != faster.end();
    c.verdict = fmt::format("Newton-Schulz does not overtake eigh up to N = {}{}", largest,
                            ever ? " (it is faster at some smaller size only)" : "");
    if (valid.size() >= 2) {
      // Trend: least-squares fit of log(ratio) against log(N) over every size where both ran.
      double sx = 0, sy = 0, sxx = 0, sxy = 0;
      const double m = double(valid.size());
      for (const auto& p : valid) {
        const double x = std::log(double(p.size)), y = std::log(p.ratio());
        sx += x, sy += y, sxx += x * x, sxy += x * y;
      }
      const double slope = (m * sxy - sx * sy) / (m * sxx - sx * sx);
      const double intercept = (sy - slope * sx) / m;
      constexpr double kHorizon = 16;  // extrapolate at most this factor beyond the largest size
      const std::string fit = fmt::format("ratio ~ N^{:.2f} (fit over N = {} .. {})", slope, valid.front().size, largest);
      if (slope < 0 && std::exp(-intercept / slope) <= kHorizon * double(largest)) {
        c.crossover_estimate = std::exp(-intercept / slope);
        c.extrapolated = true;
        c.verdict += fmt::format("; {}, which would reach 1 near N = {:.0f} (extrapolated, not measured)", fit,
                                 *c.crossover_estimate);
      } else if (slope < 0) {
        c.verdict += fmt::format("; {}, falling too slowly to reach 1 below N = {:.0f} even if the trend held", fit,
                                 kHorizon * double(largest));
      } else {
        c.verdict += fmt::format("; {}, not falling with N", fit);
      }
    }
  }
  c.verdict += failed_note;
  return c;
}

std::string newton_schulz_text(const std::vector<NsComparison>& comparisons, double condition) {
  if (comparisons.empty()) return {};
  std::string out = fmt::format(
      "\nNewton-Schulz vs eigh for J^-1/2 (SPD operand: {}); ratio = t(invsqrt_ns) / t(invsqrt_eigh), median wall "
      "times; < 1: Newton-Schulz is faster. t(eigh) is the eigh kernel alone ('-' if not in --ops).\n",
      condition > 0 ? fmt::format("condition {:g}", condition) : std::string("R R^T/n + I"));
  auto s = [](double x) { return std::isfinite(x) ? fmt::format("{:.4g}", x) : std::string("-"); };
  auto q = [](double x) { return std::isfinite(x) ? fmt::format("{:.2f}", x) : std::string("-"); };
  for (const auto& c : comparisons) {
    out += fmt::format("\n  {} {}\n    {:>6} {:>12} {:>14} {:>9} {:>12}\n", c.backend, c.precision, "N", "t(NS) s",
                       "t(inv eigh) s", "ratio", "t(eigh) s");
    for (const auto& p : c.points) {
      out += fmt::format("    {:>6} {:>12} {:>14} {:>9} {:>12}\n", p.size, p.ns_failed ? "failed" : s(p.t_ns),
                         s(p.t_eigh), p.ns_failed ? "-" : q(p.ratio()), s(p.t_eigh_kernel));
    }
    out += fmt::format("    => {}\n", c.verdict);
  }
  return out;
}

nlohmann::json newton_schulz_json(const std::vector<NsComparison>& comparisons) {
  auto num = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); };
  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : comparisons) {
    nlohmann::json points = nlohmann::json::array();
    for (const auto& p : c.points) {
      points.push_back({{"size", p.size},
                        {"invsqrt_ns_s", p.ns_failed ? nlohmann::json(nullptr) : num(p.t_ns)},
                        {"invsqrt_eigh_s", num(p.t_eigh)},
                        {"eigh_s", num(p.t_eigh_kernel)},
                        {"ratio", p.ns_failed ? nlohmann::json(nullptr) : num(p.ratio())},
                        {"ns_failed", p.ns_failed}});
    }
    out.push_back({{"backend", c.backend},
                   {"precision", c.precision},
                   {"points", points},
                   {"verdict", c.verdict},
                   {"crossover_low", c.crossover_low ? nlohmann::json(*c.crossover_low) : nlohmann::json(nullptr)},
                   {"crossover_high", c.crossover_high ? nlohmann::json(*c.crossover_high) : nlohmann::json(nullptr)},
                   {"crossover_estimate", c.crossover_estimate ? num(*c.crossover_estimate) : nlohmann::json(nullptr)},
                   {"extrapolated", c.extrapolated}});
  }
  return out;
}

}  // namespace dfmp2::app::bench
