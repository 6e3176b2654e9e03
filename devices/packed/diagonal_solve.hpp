#pragma once
// The diagonal blocks of the packed TRSM (packed_gemm.hpp), solved with Eigen. In a file of their own, compiled for
// the build's target: Eigen's templates instantiated in the per-instruction-set kernel files would be weak symbols
// compiled with AVX-512 (or AVX2), and the linker could keep those copies for every caller, on CPUs without them.
#include "linalg/matrix_view.hpp"

namespace dfmp2::devices::packed {

// B block = op(T)^-1 B block (left) or B block op(T)^-1 (right) for the order x order diagonal block T (leading
// dimension ldt) whose `lower` (or upper) triangle is read, its diagonal taken as ones when `unit`; threaded over B's
// columns (left) or rows (right).
template <class T>
void solve_diagonal_block(bool left, bool lower, bool trans, bool unit, const T* t, linalg::Index order,
                          linalg::Index ldt, linalg::MatrixViewT<T> blk, int threads);

}  // namespace dfmp2::devices::packed
