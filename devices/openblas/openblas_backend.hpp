#pragma once
// The OpenBLAS backend: BLAS through CBLAS, Cholesky through LAPACKE, threads through OpenBLAS's own pool.
#include <memory>

#include "linalg/backend.hpp"

namespace dfmp2::devices {
std::unique_ptr<linalg::Backend> make_openblas_backend();
}
