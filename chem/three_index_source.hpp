#pragma once
// Where DF-MP2 gets its three-index integrals from. The tensor is read in blocks of auxiliary functions so a
// calculation never needs all of (P|mn) in memory at once; a file streams them from disk, an SCF (later) from
// memory.
#include <cstddef>

#include "linalg/matrix_view.hpp"

namespace dfmp2::chem {

enum class ThreeIndexForm {
  ao,  // (P|mn): naux x nbf x nbf, needs MO coefficients
  mo,  // (P|ia): naux x nocc x nvir
};

class ThreeIndexSource {
 public:
  virtual ~ThreeIndexSource() = default;
  virtual ThreeIndexForm form() const = 0;
  virtual linalg::Index naux() const = 0;
  // Doubles per auxiliary function: nbf*nbf (AO form) or nocc*nvir (MO form).
  virtual linalg::Index block_stride() const = 0;
  // Writes functions p0 .. p0+count-1 to `out` (count * block_stride doubles), each in the file's row-major
  // order: (P|mn) at out[n + nbf*m + stride*P], (P|ia) at out[a + nvir*i + stride*P].
  virtual void read_block(linalg::Index p0, linalg::Index count, double* out) const = 0;
};

}  // namespace dfmp2::chem
