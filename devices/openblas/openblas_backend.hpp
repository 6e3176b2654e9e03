#pragma once
// The OpenBLAS backend: BLAS through CBLAS, Cholesky through LAPACKE, threads through OpenBLAS's own pool.
#include <memory>

#include "linalg/backend.hpp"

#include <string>


namespace dfmp2::devices {
std::unique_ptr<linalg::Backend> make_openblas_backend();
// The kernel set OpenBLAS chose at run time (openblas_get_corename(): from the CPU, or OPENBLAS_CORETYPE).
std::string openblas_kernel_set();
}
