#pragma once
// The OpenBLAS backend: BLAS through CBLAS, Cholesky through LAPACKE, threads through OpenBLAS's own pool.
#include <memory>

#include "linalg/backend.hpp"

#include <string>

#include "devices/vector_width.hpp"

namespace dfmp2::devices {
std::unique_ptr<linalg::Backend> make_openblas_backend();
// The kernel set OpenBLAS chose at run time (openblas_get_corename(): from the CPU, or OPENBLAS_CORETYPE) and the
// vector instructions its DGEMM kernel uses.
std::string openblas_kernel_set();
VectorWidth openblas_vector_width();
// The vector instructions of an OpenBLAS x86-64 kernel set by name (case-insensitive); SSE2 for a name it does not
// know.
VectorWidth vector_width_of_kernel_set(std::string name);
}
