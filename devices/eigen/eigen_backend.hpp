#pragma once
// The reference backend: every op written with Eigen's own expressions, no external BLAS. Other backends are
// checked against it, so it favours obvious code over speed.
#include <memory>

#include "linalg/backend.hpp"

#include "devices/vector_width.hpp"

namespace dfmp2::devices {
std::unique_ptr<linalg::Backend> make_eigen_backend();
// The vector instructions Eigen was compiled to use in this binary (-march=native or the x86-64 baseline).
VectorWidth eigen_vector_width();
}
