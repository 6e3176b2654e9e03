#pragma once
// The significant function pairs of the packed, screened three-index tensor seen row by row, for the DF exchange
// build (chem/scf/df_jk.cpp). K = sum_{Q,i} E_Qi E_Qi^T with E_Qi[m] = sum_n B_Q[m,n] C[n,i]; only the n whose pair
// (m, n) survived screening add to row m, so each row's product runs over its own significant n and the flops follow
// the stored pairs instead of nbf^2 (the idea of Psi4's DF-K and other sparse DF exchange builds: gather, per row,
// the stored values and the occupied coefficients they meet, then one dense product).
//
// Rows with the same significant n (the functions of one shell; often those of a whole atom, since screening is by
// shell pairs) form a group and share one product: with the block of B stored auxiliary index fastest
// (`transposed` layout, one q-vector per packed pair), a group of g rows and L significant n gathers into a
// (q g) x L matrix S whose columns are g q-vectors side by side, and
//     E[:, m0 .. m0 + g)  (seen as nocc x (q g))  =  C_L^T  (nocc x L)  S^T,
// C_L^T the occupied coefficients of the L functions. The E column of function m holds (i, Q) with i fastest, the
// same order for every m, so K = E^T E is one SYRK over nocc q.
#include <cstddef>
#include <vector>

#include "linalg/matrix_view.hpp"

namespace dfmp2::chem {

struct ExchangeRowGroup {
  linalg::Index first = 0, rows = 0;  // functions [first, first + rows)
  linalg::Index partners = 0;         // significant n of each of them (the same n for all)
};

class ExchangeRows {
 public:
  // At most kMaxRows functions per group, so that a group's gathered matrix stays a few MiB.
  static constexpr linalg::Index kMaxRows = 16;

  // From the packed layout's function indices (m >= n at each packed position) over nbf functions.
  ExchangeRows(const std::vector<int>& packed_m, const std::vector<int>& packed_n, linalg::Index nbf);
  // Bytes the row lists hold for `npacked` stored pairs over nbf functions (for the memory plan).
  static double bytes(linalg::Index npacked, linalg::Index nbf);

  const std::vector<ExchangeRowGroup>& groups() const { return groups_; }
  // Elements of the largest group's gathered matrix per auxiliary function (rows x partners).
  linalg::Index max_gathered() const { return max_gathered_; }
  // Stored (m, n) entries, both triangles: the products' shared dimension summed over the rows.
  double entries() const { return double(partner_.size()); }

  // S ((q rows) x partners, see above) of `group` from a block of q auxiliary functions of B stored transposed
  // (bt[p + q x]), in element type T (float: B rounded as it is gathered); and the occupied coefficients C_L^T
  // (nocc x partners) from C^T (nocc x nbf, column n contiguous). `parallel`: on OpenMP's threads; only where the
  // GEMMs between the gathers run on them too (Backend::openmp_threads): with OpenBLAS's own threads still spinning
  // after a GEMM, a parallel gather competed with them for the cores, and on 2 cores (H2O)16's SCF took 45-50 s
  // against 16 s with the gather on the calling thread alone.
  template <class T>
  void gather_block(const ExchangeRowGroup& group, const double* bt, linalg::Index q, T* s, bool parallel) const;
  template <class T>
  void gather_occupied(const ExchangeRowGroup& group, const T* c_t, linalg::Index nocc, T* out) const;

 private:
  // Row m's significant partners partner_[row_start_[m] ..], ascending, and their packed positions.
  std::vector<linalg::Index> row_start_;
  std::vector<int> partner_;
  std::vector<linalg::Index> position_;
  std::vector<ExchangeRowGroup> groups_;
  linalg::Index max_gathered_ = 0;
};

// out[p + q x] = in[x + rows p]: a block of B from pairs-fastest (as computed and fitted) to auxiliary-fastest (as
// the exchange gathers it), x < rows, p < q.
void transpose_block(const double* in, linalg::Index rows, linalg::Index q, double* out);

}  // namespace dfmp2::chem
