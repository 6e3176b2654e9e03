#pragma once
// Where DF-MP2 gets its three-index integrals from. The tensor is read in blocks of auxiliary functions so a
// calculation never needs all of (P|mn) in memory at once: a file streams them from disk, a synthetic problem
// generates them, molecule input computes them with libint2 as they are read (DirectThreeIndex).
#include <cstddef>
#include <utility>
#include <vector>

#include "linalg/dense_grid.hpp"
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
  // The blocks [start, end) of at most `max_functions` functions (at least one) that read_block() takes best: equal
  // cuts by default; whole auxiliary shells for a source that computes integrals.
  virtual std::vector<std::pair<linalg::Index, linalg::Index>> blocks(linalg::Index max_functions) const {
    std::vector<std::pair<linalg::Index, linalg::Index>> out;
    const linalg::Index step = max_functions < 1 ? 1 : max_functions;
    for (linalg::Index p0 = 0; p0 < naux(); p0 += step) out.emplace_back(p0, p0 + step < naux() ? p0 + step : naux());
    return out;
  }
  // The largest block blocks() can return for `max_functions` (more than it when one shell is larger).
  virtual linalg::Index largest_block(linalg::Index max_functions) const { return max_functions < 1 ? 1 : max_functions; }
};

}  // namespace dfmp2::chem

#include <algorithm>
#include <functional>
#include <vector>

namespace dfmp2::chem {

// What DF-MP2 reads from a reference (chem/mp2/dfmp2.hpp): orbitals, the metric and a source of three-index
// integrals. Each kind of reference (IntegralFile, SyntheticProblem, the SCF of a molecule) makes its own with
// dfmp2_input(); the views stay valid as long as the reference does.
struct DfMp2Input {
  const linalg::Vector* orbital_energies = nullptr;  // nmo, ascending; open shells: the alpha orbitals'
  linalg::Index nocc = 0;                            // doubly occupied; open shells: alpha occupied
  const linalg::Matrix* mo_coefficients = nullptr;   // nbf x nmo; needed for AO-form sources only
  const linalg::Matrix* metric = nullptr;            // naux x naux
  const ThreeIndexSource* three_index = nullptr;
  // Open shells (UHF, semicanonical ROHF): the beta orbitals, as the alpha ones above. AO-form sources only.
  const linalg::Vector* orbital_energies_beta = nullptr;
  linalg::Index nocc_beta = 0;
  const linalg::Matrix* mo_coefficients_beta = nullptr;
  // ROHF-MBPT(2): the singles term of each occupied orbital of each spin (ScfResult::singles_alpha); the run sums the
  // active orbitals' into DfMp2Result::singles. None: no singles term.
  const linalg::Vector* singles_alpha = nullptr;
  const linalg::Vector* singles_beta = nullptr;
  // (optional) This rank's tiles of the metric on the ranks' grid, computed without the whole (molecule input):
  // a run whose metric is factored on the grid then needs no `metric` (chem/mp2/dfmp2.hpp distributed_metric).
  std::function<void(linalg::DistributedMatrix&)> metric_tiles = nullptr;
  bool unrestricted() const { return orbital_energies_beta != nullptr; }
};

// AO-form integrals held in memory (as the integral code computes them), in the file's order.
class InMemoryThreeIndex final : public ThreeIndexSource {
 public:
  InMemoryThreeIndex(std::vector<double> data, linalg::Index naux, linalg::Index nbf)
      : data_(std::move(data)), naux_(naux), nbf_(nbf) {}
  ThreeIndexForm form() const override { return ThreeIndexForm::ao; }
  linalg::Index naux() const override { return naux_; }
  linalg::Index block_stride() const override { return nbf_ * nbf_; }
  void read_block(linalg::Index p0, linalg::Index count, double* out) const override {
    std::copy_n(data_.data() + p0 * nbf_ * nbf_, count * nbf_ * nbf_, out);
  }
  const std::vector<double>& data() const { return data_; }

 private:
  std::vector<double> data_;
  linalg::Index naux_, nbf_;
};

}  // namespace dfmp2::chem
