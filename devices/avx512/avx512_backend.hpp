#pragma once
// The avx512 backend: dfmp2's own packed GEMM for CPUs with AVX-512F (devices/avx512/packed_gemm.hpp) for gemm,
// gemm_batched, syrk and trsm in fp64 and fp32 (trsm blocked: the diagonal blocks solved with Eigen, the rest
// updated with the packed GEMM); cholesky, eigh and SpMM through the eigen backend. On a CPU
// without AVX-512F it cannot be made (UnsupportedError), never a quiet substitute.
#include <memory>

#include "linalg/backend.hpp"

namespace dfmp2::devices {
std::unique_ptr<linalg::Backend> make_avx512_backend();
bool avx512_available();
// When dfmp2's own kernels were compiled (devices/calibration.hpp measures again after a rebuild).
std::string own_kernels_build();
}
