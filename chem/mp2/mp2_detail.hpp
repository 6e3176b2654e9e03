#pragma once
// Inside the mp2 room (chem/mp2/): what the kernel (dfmp2.cpp) and the pair energies (pair_energy.cpp) share. Not
// included outside chem/mp2/.
#include <string>

#include "linalg/kernels.hpp"
#include "linalg/matrix_view.hpp"

namespace dfmp2::chem::mp2_detail {

using linalg::ConstMatrixViewT;
using linalg::Index;
using linalg::Matrix;
using linalg::MatrixT;
using linalg::MatrixViewT;
using linalg::Stopwatch;
using linalg::Trans;
using linalg::Vector;
using linalg::VectorT;

// The name of element type T, as the kernel log records it.
template <class T>
std::string dtype() {
  return std::string(linalg::dtype_name(linalg::dtype_of<T>()));
}

}  // namespace dfmp2::chem::mp2_detail
