// The packed GEMM, SYRK and TRSM of devices/packed/packed_gemm.hpp for one instruction set, included once by each
// packed_gemm_<isa>.cpp, which first defines DFMP2_PACKED_ISA (the namespace: avx512, avx2) and, in it, Simd<T> (the
// vector type, its width and its loads, stores and FMA) and kNr (the micro-kernel's columns: the accumulators are
// 3 x kNr vectors, so 3 x 8 = 24 of AVX-512's 32 registers and 3 x 4 = 12 of AVX2's 16). Each such file is compiled
// for its instructions whatever the build's target (devices/packed/CMakeLists.txt); nothing in it runs unless the
// backend found the CPU has them.
#include "devices/packed/diagonal_solve.hpp"
#include "devices/packed/packed_gemm.hpp"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>


namespace dfmp2::devices::DFMP2_PACKED_ISA {
namespace {

using linalg::ConstMatrixViewT;
using linalg::Index;
using linalg::MatrixViewT;

// Block sizes, measured with AVX-512 on the development machine (Zen 5, 48 KiB L1d, 1 MiB L2 per core;
// bench/README.md): a kKc x kNr sliver of B (16 KiB in fp64) stays in L1 while the kMc x kKc block of A (688 KiB;
// 344 KiB with AVX2's narrower slivers) stays in L2.
constexpr Index kKc = 256;
constexpr Index kNc = 3072;
template <class T>
constexpr int kMr = 3 * Simd<T>::width;  // 24 doubles, 48 floats
template <class T>
constexpr Index kMc = 14 * kMr<T>;

// A buffer aligned for the micro-kernel's aligned loads, kept per thread between calls.
template <class T>
T* scratch(std::vector<T>& buf, std::size_t count) {
  const std::size_t pad = 64 / sizeof(T);
  if (buf.size() < count + pad) buf.resize(count + pad);
  auto p = reinterpret_cast<std::uintptr_t>(buf.data());
  return reinterpret_cast<T*>((p + 63) & ~std::uintptr_t(63));
}

// C tile (rows() x kNr, leading dimension ldc) = alpha * sum_p ap[p] bp[p]^T + beta * C, ap and bp the packed
// slivers (kMr and kNr values per p). beta == 0: C is not read. NV vectors of rows (1 to 3): a sliver's last rows,
// when fewer than kMr are real, are computed with as few vectors as hold them, not the zero padding (80 occupied
// orbitals are 3 x 24 + 8 rows: with NV always 3 a sixth of the flops went to padding).
template <class T, int NV = 3>
inline void micro_kernel(Index kc, const T* __restrict ap, const T* __restrict bp, T* c, Index ldc, T alpha, T beta) {
  using S = Simd<T>;
  using V = typename S::V;
  constexpr int w = S::width;
  V acc[NV][kNr];
#pragma GCC unroll 8
  for (int j = 0; j < kNr; ++j)
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) acc[v][j] = S::zero();
  for (Index p = 0; p < kc; ++p) {
    V a[NV];
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) a[v] = S::load(ap + v * w);
    _mm_prefetch(reinterpret_cast<const char*>(ap + 8 * kMr<T>), _MM_HINT_T0);
#pragma GCC unroll 8
    for (int j = 0; j < kNr; ++j) {
      const V b = S::set1(bp[j]);
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) acc[v][j] = S::fmadd(a[v], b, acc[v][j]);
    }
    ap += kMr<T>;
    bp += kNr;
  }
  const V va = S::set1(alpha);
  if (beta == T(0)) {
#pragma GCC unroll 8
    for (int j = 0; j < kNr; ++j)
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) S::storeu(c + j * ldc + v * w, S::mul(va, acc[v][j]));
  } else {
    const V vb = S::set1(beta);
#pragma GCC unroll 8
    for (int j = 0; j < kNr; ++j)
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) {
        T* cj = c + j * ldc + v * w;
        S::storeu(cj, S::fmadd(va, acc[v][j], S::mul(vb, S::loadu(cj))));
      }
  }
}

// The micro-kernel with as few vectors as hold `rows` (<= kMr) rows: a tile of vectors(rows) * width rows.
template <class T>
int vectors_for(Index rows) {
  return static_cast<int>((rows + Simd<T>::width - 1) / Simd<T>::width);
}
template <class T>
inline void micro_kernel_rows(Index rows, Index kc, const T* ap, const T* bp, T* c, Index ldc, T alpha, T beta) {
  switch (vectors_for<T>(rows)) {
    case 1: return micro_kernel<T, 1>(kc, ap, bp, c, ldc, alpha, beta);
    case 2: return micro_kernel<T, 2>(kc, ap, bp, c, ldc, alpha, beta);
    default: return micro_kernel<T, 3>(kc, ap, bp, c, ldc, alpha, beta);
  }
}

// Rows [i0, i0 + mc) of op(A), shared indices [p0, p0 + kc), into slivers of kMr rows: dst[s][p][r], zero-padded.
template <class T>
void pack_a(bool trans, ConstMatrixViewT<T> a, Index i0, Index mc, Index p0, Index kc, T* dst) {
  constexpr int mr = kMr<T>;
  for (Index ir = 0; ir < mc; ir += mr, dst += kc * mr) {
    const Index rows = std::min<Index>(mr, mc - ir);
    if (!trans) {
      for (Index p = 0; p < kc; ++p) {
        const T* src = a.data + (i0 + ir) + (p0 + p) * a.ld;
        T* d = dst + p * mr;
        if (rows == mr) {
          std::memcpy(d, src, sizeof(T) * mr);
        } else {
          std::copy(src, src + rows, d);
          std::fill(d + rows, d + mr, T(0));
        }
      }
    } else {  // op(A)(i, p) = A(p, i): each row i of op(A) is a contiguous column of A
      for (Index r = 0; r < rows; ++r) {
        const T* src = a.data + p0 + (i0 + ir + r) * a.ld;
        for (Index p = 0; p < kc; ++p) dst[p * mr + r] = src[p];
      }
      for (Index r = rows; r < mr; ++r)
        for (Index p = 0; p < kc; ++p) dst[p * mr + r] = T(0);
    }
  }
}

// Sliver of kNr columns [j0, j0 + kNr) of op(B), shared indices [p0, p0 + kc): dst[p][j], zero-padded.
template <class T>
void pack_b_sliver(bool trans, ConstMatrixViewT<T> b, Index p0, Index kc, Index j0, Index cols, T* dst) {
  if (!trans) {  // op(B)(p, j) = B(p, j): columns of B are contiguous in p
    for (Index j = 0; j < cols; ++j) {
      const T* src = b.data + p0 + (j0 + j) * b.ld;
      for (Index p = 0; p < kc; ++p) dst[p * kNr + j] = src[p];
    }
  } else {  // op(B)(p, j) = B(j, p): for each p the kNr values are contiguous
    for (Index p = 0; p < kc; ++p) {
      const T* src = b.data + j0 + (p0 + p) * b.ld;
      std::copy(src, src + cols, dst + p * kNr);
    }
  }
  if (cols < kNr) {
    for (Index p = 0; p < kc; ++p) std::fill(dst + p * kNr + cols, dst + (p + 1) * kNr, T(0));
  }
}

// The tiles of rows [ic, ic + mc) (A packed in ap) and columns [j_begin, j_end) of the panel starting at column jc
// (B packed in bp), with beta `bet` for this shared slice.
// `part` > 0: only tiles holding an element of the lower triangle (i >= j) are computed, < 0 the upper (i <= j),
// 0 all; the others are left as they are (a SYRK's diagonal blocks).
template <class T>
void macro_kernel(Index kc, const T* ap, const T* bp, Index ic, Index mc, Index jc, Index j_begin, Index j_end,
                  T alpha, T bet, MatrixViewT<T> c, int part) {
  constexpr int mr = kMr<T>;
  alignas(64) T tile[kMr<T> * kNr];
  for (Index jr = j_begin; jr < j_end; jr += kNr) {
    const Index cols = std::min<Index>(kNr, j_end - jr);
    const T* bs = bp + (jr - jc) * kc;  // slivers are kc * kNr each, (jr - jc) is a multiple of kNr
    for (Index ir = 0; ir < mc; ir += mr) {
      const Index rows = std::min<Index>(mr, mc - ir);
      if (part > 0 && ic + ir + rows - 1 < jr) continue;   // wholly above the diagonal
      if (part < 0 && ic + ir > jr + cols - 1) continue;   // wholly below it
      T* cc = c.data + (ic + ir) + jr * c.ld;
      const T* as = ap + ir * kc;
      if (cols == kNr && rows == vectors_for<T>(rows) * Simd<T>::width) {  // whole vectors: straight into C
        micro_kernel_rows<T>(rows, kc, as, bs, cc, c.ld, alpha, bet);
      } else {
        micro_kernel_rows<T>(rows, kc, as, bs, tile, mr, T(1), T(0));
        for (Index j = 0; j < cols; ++j) {
          for (Index i = 0; i < rows; ++i) {
            T& out = cc[i + j * c.ld];
            out = alpha * tile[i + j * mr] + (bet == T(0) ? T(0) : bet * out);
          }
        }
      }
    }
  }
}

// C = beta C (BLAS: beta == 0 sets zeros without reading C).
template <class T>
void scale(MatrixViewT<T> c, T beta) {
  for (Index j = 0; j < c.cols; ++j) {
    T* col = c.data + j * c.ld;
    if (beta == T(0)) std::fill(col, col + c.rows, T(0));
    else if (beta != T(1))
      for (Index i = 0; i < c.rows; ++i) col[i] *= beta;
  }
}

template <class T>
struct Buffers {
  std::vector<T> a, b, tile;
};
template <class T>
Buffers<T>& buffers() {
  static thread_local Buffers<T> b;
  return b;
}

template <class T>
void gemm_impl(bool ta, bool tb, T alpha, ConstMatrixViewT<T> a, ConstMatrixViewT<T> b, T beta, MatrixViewT<T> c,
               int threads, int part = 0) {
  const Index m = c.rows, n = c.cols, k = ta ? a.rows : a.cols;
  if (m == 0 || n == 0) return;
  if (alpha == T(0) || k == 0) {
    scale(c, beta);
    return;
  }
  threads = std::max(1, threads);
  // B's slice is packed once by all threads and shared; the blocks of A's rows (and, when they are too few for
  // the threads, groups of the panel's columns) are the tasks.
  std::vector<T> shared_b;
  T* bp = scratch(shared_b, static_cast<std::size_t>(kKc) * static_cast<std::size_t>(std::min(kNc, n) + kNr));
  const Index mblocks = (m + kMc<T> - 1) / kMc<T>;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    T* ap = scratch(buffers<T>().a, static_cast<std::size_t>(kKc) * static_cast<std::size_t>(kMc<T> + kMr<T>));
    for (Index jc = 0; jc < n; jc += kNc) {
      const Index nc = std::min(kNc, n - jc);
      Index groups = 1;
      while (mblocks * groups < 4 * threads && nc / (2 * groups) >= 8 * kNr) groups *= 2;
      const Index group_cols = ((nc + groups - 1) / groups + kNr - 1) / kNr * kNr;
      for (Index pc = 0; pc < k; pc += kKc) {
        const Index kc = std::min(kKc, k - pc);
        const T bet = pc == 0 ? beta : T(1);
        const Index slivers = (nc + kNr - 1) / kNr;
#pragma omp for schedule(static)
        for (Index s = 0; s < slivers; ++s) {
          pack_b_sliver<T>(tb, b, pc, kc, jc + s * kNr, std::min<Index>(kNr, nc - s * kNr), bp + s * kNr * kc);
        }
#pragma omp for schedule(dynamic)
        for (Index t = 0; t < mblocks * groups; ++t) {
          const Index ic = (t / groups) * kMc<T>, g = t % groups;
          const Index mc = std::min(kMc<T>, m - ic);
          const Index j_begin = jc + g * group_cols, j_end = std::min(jc + nc, j_begin + group_cols);
          if (j_begin >= j_end) continue;
          pack_a<T>(ta, a, ic, mc, pc, kc, ap);
          macro_kernel<T>(kc, ap, bp, ic, mc, jc, j_begin, j_end, alpha, bet, c, part);
        }
      }
    }
  }
}

// Lower (or upper) triangle of C over rows/columns [i0, i0 + size): diagonal blocks of at most kLeaf are leaves
// (computed tile by tile, skipping the tiles wholly in the other triangle), larger ones split in two halves and the
// off-diagonal rectangle between them.
constexpr Index kLeaf = 192;
struct Block {
  Index r0, c0, rows, cols;
  bool diagonal;
};
void collect(Index i0, Index size, bool lower, std::vector<Block>& out) {
  if (size <= kLeaf) {
    out.push_back({i0, i0, size, size, true});
    return;
  }
  Index h = (size / 2 + 23) / 24 * 24;
  if (h >= size) h = size / 2;
  collect(i0, h, lower, out);
  collect(i0 + h, size - h, lower, out);
  if (lower) out.push_back({i0 + h, i0, size - h, h, false});
  else out.push_back({i0, i0 + h, h, size - h, false});
}

// SYRK for a small order and a long shared dimension (the SCF's K = sum_Q X_Q X_Q^T: n = nbf, k = nocc x an
// auxiliary block): slice by slice of k, op(A)'s slice is packed once in both sliver layouts, shared by the threads,
// and every tile of the triangle is computed from the packed copies, so op(A) is read from memory once. (Cutting
// the triangle into GEMM blocks instead reads it once per block.) Tiles that cross the diagonal go through a
// buffer and only their triangle is written.
template <class T>
void syrk_sliced(bool lower, bool trans, T alpha, ConstMatrixViewT<T> a, T beta, MatrixViewT<T> c, int threads) {
  constexpr int mr = kMr<T>;
  const Index n = c.rows, k = trans ? a.rows : a.cols;
  const Index row_slivers = (n + mr - 1) / mr, col_slivers = (n + kNr - 1) / kNr;
  std::vector<T> abuf, bbuf;
  T* ap = scratch(abuf, static_cast<std::size_t>(kKc) * static_cast<std::size_t>(row_slivers * mr));
  T* bp = scratch(bbuf, static_cast<std::size_t>(kKc) * static_cast<std::size_t>(col_slivers * kNr));
  // op(A)^T as the B operand: op(B)(p, j) = op(A)(j, p), i.e. B = A with the opposite transpose flag.
  const bool b_trans = !trans;
#pragma omp parallel num_threads(std::max(1, threads)) if (threads > 1)
  {
    alignas(64) T tile[kMr<T> * kNr];
    for (Index pc = 0; pc < k; pc += kKc) {
      const Index kc = std::min(kKc, k - pc);
      const T bet = pc == 0 ? beta : T(1);
#pragma omp for schedule(static) nowait
      for (Index s = 0; s < row_slivers; ++s) pack_a<T>(trans, a, s * mr, std::min<Index>(mr, n - s * mr), pc, kc, ap + s * mr * kc);
#pragma omp for schedule(static)
      for (Index s = 0; s < col_slivers; ++s)
        pack_b_sliver<T>(b_trans, a, pc, kc, s * kNr, std::min<Index>(kNr, n - s * kNr), bp + s * kNr * kc);
#pragma omp for schedule(dynamic)
      for (Index js = 0; js < col_slivers; ++js) {
        const Index j0 = js * kNr, cols = std::min<Index>(kNr, n - j0);
        // Row slivers holding an element of the triangle in these columns.
        const Index s_begin = lower ? j0 / mr : 0, s_end = lower ? row_slivers : (j0 + cols - 1) / mr + 1;
        for (Index is = s_begin; is < s_end; ++is) {
          const Index i0 = is * mr, rows = std::min<Index>(mr, n - i0);
          const bool inside = lower ? i0 >= j0 + cols - 1 : i0 + rows - 1 <= j0;
          T* cc = c.data + i0 + j0 * c.ld;
          if (inside && cols == kNr && rows == vectors_for<T>(rows) * Simd<T>::width) {
            micro_kernel_rows<T>(rows, kc, ap + is * mr * kc, bp + js * kNr * kc, cc, c.ld, alpha, bet);
            continue;
          }
          micro_kernel_rows<T>(rows, kc, ap + is * mr * kc, bp + js * kNr * kc, tile, mr, T(1), T(0));
          for (Index j = 0; j < cols; ++j) {
            for (Index i = 0; i < rows; ++i) {
              if (lower ? i0 + i < j0 + j : i0 + i > j0 + j) continue;
              T& out = cc[i + j * c.ld];
              out = alpha * tile[i + j * mr] + (bet == T(0) ? T(0) : bet * out);
            }
          }
        }
      }
    }
  }
}

}  // namespace

template <class T>
void gemm(bool trans_a, bool trans_b, T alpha, ConstMatrixViewT<T> a, ConstMatrixViewT<T> b, T beta, MatrixViewT<T> c,
          int threads) {
  gemm_impl<T>(trans_a, trans_b, alpha, a, b, beta, c, threads);
}

template <class T>
void syrk(bool lower, bool trans, T alpha, ConstMatrixViewT<T> a, T beta, MatrixViewT<T> c, int threads) {
  const Index n = c.rows, k = trans ? a.rows : a.cols;
  if (n == 0) return;
  if (alpha == T(0) || k == 0) {  // BLAS: A is not read; only the triangle is scaled
    for (Index j = 0; j < n; ++j) {
      const Index i_begin = lower ? j : 0, i_end = lower ? n : j + 1;
      for (Index i = i_begin; i < i_end; ++i) {
        T& out = c.data[i + j * c.ld];
        out = beta == T(0) ? T(0) : beta * out;
      }
    }
    return;
  }
  // Up to this order both packed copies of a slice of op(A) (n x 256) stay in the L2 cache.
  if (n <= 1024) return syrk_sliced<T>(lower, trans, alpha, a, beta, c, threads);
  std::vector<Block> blocks;
  collect(0, n, lower, blocks);
  // op(A) rows [r0, r0 + rows) as a GEMM operand, and op(A)^T columns [c0, c0 + cols).
  auto left = [&](Index r0, Index rows) {
    return trans ? ConstMatrixViewT<T>{a.data + r0 * a.ld, k, rows, a.ld} : ConstMatrixViewT<T>{a.data + r0, rows, k, a.ld};
  };
  auto product = [&](const Block& blk, int nthreads, T* buffer) {
    // C block = alpha op(A)_rows op(A)_cols^T + beta C block; a diagonal leaf goes through `buffer` and only its
    // triangle is written back.
    const ConstMatrixViewT<T> x = left(blk.r0, blk.rows), y = left(blk.c0, blk.cols);
    if (!blk.diagonal) {
      gemm_impl<T>(trans, !trans, alpha, x, y, beta, {c.data + blk.r0 + blk.c0 * c.ld, blk.rows, blk.cols, c.ld},
                   nthreads);
      return;
    }
    gemm_impl<T>(trans, !trans, alpha, x, y, T(0), {buffer, blk.rows, blk.cols, blk.rows}, nthreads, lower ? 1 : -1);
    for (Index j = 0; j < blk.cols; ++j) {
      const Index i_begin = lower ? j : 0, i_end = lower ? blk.rows : j + 1;
      for (Index i = i_begin; i < i_end; ++i) {
        T& out = c.data[(blk.r0 + i) + (blk.c0 + j) * c.ld];
        out = buffer[i + j * blk.rows] + (beta == T(0) ? T(0) : beta * out);
      }
    }
  };
  // Blocks large enough to keep every thread busy on their own run one after the other with all threads; the
  // rest run side by side, one thread each.
  const Index big = 2 * kMc<T> * 256;
  std::vector<Block> small;
  for (const Block& blk : blocks) {
    if (!blk.diagonal && blk.rows * blk.cols >= big && threads > 1) product(blk, threads, nullptr);
    else small.push_back(blk);
  }
  std::sort(small.begin(), small.end(),
            [](const Block& x, const Block& y) { return x.rows * x.cols > y.rows * y.cols; });
#pragma omp parallel num_threads(std::max(1, threads)) if (threads > 1)
  {
    T* buffer = scratch(buffers<T>().tile, static_cast<std::size_t>(kLeaf * kLeaf));
#pragma omp for schedule(dynamic)
    for (std::size_t i = 0; i < small.size(); ++i) product(small[i], 1, buffer);
  }
}

template <class T>
void trsm(bool left, bool lower, bool trans, bool unit, T alpha, ConstMatrixViewT<T> a, MatrixViewT<T> b,
          int threads) {
  if (b.rows == 0 || b.cols == 0) return;
  if (alpha != T(1)) scale(b, alpha);  // alpha == 0: B = 0 and A is not read
  if (alpha == T(0)) return;
  const Index order = a.rows;
  constexpr Index nb = 192;
  // op(A) rows [r0, r0 + nr), columns [c0, c0 + nc) as a GEMM operand and its transpose flag.
  auto op_block = [&](Index r0, Index nr, Index c0, Index nc) {
    return trans ? ConstMatrixViewT<T>{a.data + c0 + r0 * a.ld, nc, nr, a.ld}
                 : ConstMatrixViewT<T>{a.data + r0 + c0 * a.ld, nr, nc, a.ld};
  };
  auto solve = [&](Index d0, Index size, MatrixViewT<T> blk) {
    packed::solve_diagonal_block<T>(left, lower, trans, unit, a.data + d0 + d0 * a.ld, size, a.ld, blk, threads);
  };
  // op(A) is lower triangular when A's lower triangle is read untransposed or its upper one transposed.
  const bool op_lower = lower != trans;
  const Index blocks = (order + nb - 1) / nb;
  // Left: forward over row blocks when op(A) is lower, backward when upper. Right: forward over column blocks
  // when op(A) is upper, backward when lower. Each step solves one block of B, then removes its contribution
  // from the blocks still to come with one GEMM.
  const bool forward = left ? op_lower : !op_lower;
  for (Index step = 0; step < blocks; ++step) {
    const Index blk = forward ? step : blocks - 1 - step;
    const Index d0 = blk * nb, size = std::min(nb, order - d0);
    // The blocks still to come: after this one (forward) or before it (backward).
    const Index r0 = forward ? d0 + size : 0, rest = forward ? order - d0 - size : d0;
    if (left) {
      const MatrixViewT<T> x{b.data + d0, size, b.cols, b.ld};
      solve(d0, size, x);
      if (rest > 0) {  // B[rest rows] -= op(A)[rest, block] X
        const ConstMatrixViewT<T> l = op_block(r0, rest, d0, size);
        gemm_impl<T>(trans, false, T(-1), l, x, T(1), {b.data + r0, rest, b.cols, b.ld}, threads);
      }
    } else {
      const MatrixViewT<T> x{b.data + d0 * b.ld, b.rows, size, b.ld};
      solve(d0, size, x);
      if (rest > 0) {  // B[rest columns] -= X op(A)[block, rest]
        const ConstMatrixViewT<T> u = op_block(d0, size, r0, rest);
        gemm_impl<T>(false, trans, T(-1), x, u, T(1), {b.data + r0 * b.ld, b.rows, rest, b.ld}, threads);
      }
    }
  }
}

const char* build_stamp() { return __DATE__ " " __TIME__; }

template void trsm<double>(bool, bool, bool, bool, double, ConstMatrixViewT<double>, MatrixViewT<double>, int);
template void trsm<float>(bool, bool, bool, bool, float, ConstMatrixViewT<float>, MatrixViewT<float>, int);
template void gemm<double>(bool, bool, double, ConstMatrixViewT<double>, ConstMatrixViewT<double>, double,
                           MatrixViewT<double>, int);
template void gemm<float>(bool, bool, float, ConstMatrixViewT<float>, ConstMatrixViewT<float>, float,
                          MatrixViewT<float>, int);
template void syrk<double>(bool, bool, double, ConstMatrixViewT<double>, double, MatrixViewT<double>, int);
template void syrk<float>(bool, bool, float, ConstMatrixViewT<float>, float, MatrixViewT<float>, int);

}  // namespace dfmp2::devices::DFMP2_PACKED_ISA
