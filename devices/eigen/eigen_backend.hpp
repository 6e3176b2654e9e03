#pragma once
// The reference backend: every op written with Eigen's own expressions, no external BLAS. Other backends are
// checked against it, so it favours obvious code over speed.
#include <memory>

#include "linalg/backend.hpp"


namespace dfmp2::devices {
std::unique_ptr<linalg::Backend> make_eigen_backend();
}
