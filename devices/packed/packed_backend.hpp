#pragma once
// The avx512 and avx2 backends: dfmp2's own packed GEMM (devices/packed/packed_gemm.hpp) for CPUs with AVX-512F, and
// for CPUs with AVX2 and FMA, for gemm, gemm_batched, syrk and trsm in fp64 and fp32 (trsm blocked: the diagonal
// blocks solved with Eigen, the rest updated with the packed GEMM); cholesky, eigh and SpMM through the eigen
// backend. On a CPU without the instructions a backend cannot be made (UnsupportedError), never a quiet substitute.
// Both can run on an AVX-512 CPU: the default backend is the faster measured (devices/calibration.hpp).
#include <memory>
#include <string>

#include "linalg/backend.hpp"

namespace dfmp2::devices {
std::unique_ptr<linalg::Backend> make_avx512_backend();
bool avx512_available();
std::unique_ptr<linalg::Backend> make_avx2_backend();
bool avx2_available();
// When dfmp2's own kernels were compiled (devices/calibration.hpp measures again after a rebuild).
std::string own_kernels_build();
}  // namespace dfmp2::devices
