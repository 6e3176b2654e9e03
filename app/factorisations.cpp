// Which dense factorisations run on the ranks' grid and which stay replicated (README "MPI"): the predicates the
// stages plan with, and their description for the report and the results file.
#include <fmt/format.h>

#include "app/run.hpp"

namespace dfmp2::app {

bool order_on_grid(const Input& input, linalg::Index order, int ranks) {
  return linalg::order_on_grid(order, ranks, input.distributed_min_order);
}

bool metric_on_grid(const Input& input, linalg::Index naux, chem::Precision precision, int ranks) {
  return chem::distributed_metric(input.metric, precision, naux, ranks, input.distributed_min_order);
}

Factorisations describe_factorisations(const Calculation& calc) {
  const Input& input = calc.input;
  const Reference& r = calc.reference;
  Factorisations f;
  f.libraries = linalg::dense_libraries();
  std::tie(f.grid_rows, f.grid_cols) = linalg::grid_shape(calc.ranks);
  f.min_order = input.distributed_min_order;
  // The library that serves each matrix, and why when it is not the one asked for (linalg::dense_library_for).
  const auto served = [&](linalg::DenseLibrary asked, linalg::Index n, const char* what) {
    const std::string fallback = linalg::dense_library_fallback(asked, n, f.grid_rows, f.grid_cols);
    return fmt::format("{} {}{}", linalg::dense_library_name(linalg::dense_library_for(asked, n, f.grid_rows, f.grid_cols)),
                       what, fallback.empty() ? "" : " (" + fallback + ")");
  };
  const auto cholesky = [&](linalg::Index n) { return served(input.dense.cholesky, n, "Cholesky, ScaLAPACK pdtrsm"); };
  auto replicated = [&](linalg::Index order) -> std::string {
    if (calc.ranks == 1) return "one rank";
    if (f.libraries.empty()) return "this build has no ScaLAPACK";
    return fmt::format("order {} below mpi.distributed_min_order {}", order, input.distributed_min_order);
  };
  if (const MoleculeRun* m = r.molecule()) {
    if (input.scf.type == chem::ScfType::df) {
      const linalg::Index n = m->jk_basis.nbf();
      const bool on = order_on_grid(input, n, calc.ranks);
      f.matrices.push_back({"JK metric", n, on, on ? cholesky(n) : replicated(n)});
    }
    const bool on = order_on_grid(input, r.nbf, calc.ranks);
    f.matrices.push_back({"SCF eigenproblems", r.nbf, on,
                          on ? served(input.dense.eigh, r.nbf, "eigensolver") : replicated(r.nbf)});
  }
  for (const std::string& backend : input.backends) {
    for (const chem::Precision precision : input.precisions_of(backend)) {
      const bool on = metric_on_grid(input, r.naux, precision, calc.ranks);
      std::string why = on ? cholesky(r.naux) : replicated(r.naux);
      if (!on && calc.ranks > 1 && !f.libraries.empty() && r.naux >= input.distributed_min_order)
        why = input.metric != chem::MetricMethod::cholesky
                  ? fmt::format("metric {} has no distributed form", chem::metric_name(input.metric))
                  : fmt::format("precision {}: the grid's solves are fp64", chem::precision_name(precision));
      f.matrices.push_back({fmt::format("MP2 metric ({} {})", backend, chem::precision_name(precision)), r.naux, on, why});
    }
  }
  return f;
}

bool every_mp2_metric_on_grid(const Input& input, linalg::Index naux, int ranks) {
  for (const std::string& backend : input.backends)
    for (const chem::Precision precision : input.precisions_of(backend))
      if (!metric_on_grid(input, naux, precision, ranks)) return false;
  return true;
}

}  // namespace dfmp2::app
