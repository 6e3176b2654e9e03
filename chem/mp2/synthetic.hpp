#pragma once
// Synthetic DF-MP2 problems for benchmarks: random orbitals, orbital energies, metric and AO three-index
// integrals of a given shape, in the sizes of the published Trainium DF-MP2 benchmark (small, medium, large).
//
// Everything is a pure function of (shape, seed): each quantity is read from its own Philox stream of the seed
// (linalg/random.hpp) by element index, so the numbers do not depend on the thread count or on how the work is
// cut. The three-index tensor is never stored: read_block() generates the requested auxiliary functions.
//
//   C       (nbasis x nbasis)  C(m, p) = z_1[m + nbasis p] / sqrt(nbasis)                        stream 1, normal
//   eps     (nbasis)           occupied i < nocc: -2 + 1.8 u_2[i], sorted ascending              stream 2, uniform
//                              virtual  a >= nocc: 0.1 + 2.9 u_2[a], sorted ascending
//   metric  (naux x naux)      J = R R^T / naux + I, R(p, k) = z_3[k + naux p]                   stream 3, normal
//                              (each J(p, q), q <= p, is one dot product of rows p and q of R, mirrored)
//   (P|mn)  (naux x nbasis^2)  (P|mn) = (P|nm) = sqrt(3 v) (2 u_4[P npair + m(m+1)/2 + n] - 1), m >= n,
//                              npair = nbasis(nbasis+1)/2, v = 1 / (nvir sqrt(8 nocc naux))      stream 4, uniform
// z_s[k] and u_s[k] are element k of PhiloxStream(seed, s).normal / .uniform.
// (P|mn) has mean 0 and variance v, chosen so that the MP2 correlation energy is of a molecule's order, -0.02 to
// -0.04 Eh per occupied orbital (E_corr scales as nocc^2 nvir^2 naux v^2; "small" gives -0.52 Eh), so that absolute
// energy errors (of fp32 arithmetic, say) read as they would for a molecule. It is uniform rather than normal
// because it is regenerated on every read (the "read_3index" time of a benchmark) and Box-Muller costs about four
// times as much per element as a uniform.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "chem/integrals/three_index_source.hpp"
#include "linalg/matrix_view.hpp"

namespace dfmp2::chem {

struct SyntheticShape {
  linalg::Index nbasis = 0;  // basis functions = molecular orbitals
  linalg::Index nocc = 0;    // doubly occupied orbitals; nvir = nbasis - nocc
  linalg::Index naux = 0;    // auxiliary functions
  std::uint64_t seed = 0;
  linalg::Index nvir() const { return nbasis - nocc; }
};

inline constexpr std::uint64_t kDefaultSyntheticSeed = 20240901;

// Philox stream ids of the four quantities (see the table above).
inline constexpr std::uint64_t kSyntheticStreamCoefficients = 1;
inline constexpr std::uint64_t kSyntheticStreamOrbitalEnergies = 2;
inline constexpr std::uint64_t kSyntheticStreamMetric = 3;
inline constexpr std::uint64_t kSyntheticStreamThreeIndex = 4;

// "small" (128, 16, 384), "medium" (512, 64, 1536), "large" (768, 96, 2304), each with kDefaultSyntheticSeed;
// nullopt for any other name.
std::optional<SyntheticShape> named_synthetic_shape(const std::string& name);
// The names named_synthetic_shape() knows, smallest first.
std::vector<std::string> synthetic_shape_names();

// Throws InputError unless nbasis >= 2, 1 <= nocc < nbasis and naux >= 1.
void validate_synthetic_shape(const SyntheticShape& shape);

// AO-form (P|mn), generated block by block (OpenMP threads over the rows of the requested functions).
class SyntheticThreeIndex final : public ThreeIndexSource {
 public:
  // Needs nocc for the scale v; does not validate the shape.
  explicit SyntheticThreeIndex(const SyntheticShape& shape);

  ThreeIndexForm form() const override { return ThreeIndexForm::ao; }
  linalg::Index naux() const override { return naux_; }
  linalg::Index block_stride() const override { return nbasis_ * nbasis_; }
  void read_block(linalg::Index p0, linalg::Index count, double* out) const override;

  linalg::Index nbasis() const { return nbasis_; }
  // One element (P|mn), as read_block() writes it.
  double value(linalg::Index p, linalg::Index m, linalg::Index n) const;
  // Variance v of the elements.
  double variance() const { return scale_ * scale_ / 3.0; }

 private:
  linalg::Index nbasis_, naux_;
  std::uint64_t seed_;
  double scale_;
};

class SyntheticProblem {
 public:
  // Generates C, the orbital energies and the metric (O(naux^3) work for the metric); (P|mn) stays lazy.
  explicit SyntheticProblem(const SyntheticShape& shape);

  const SyntheticShape& shape() const { return shape_; }
  linalg::Index nbasis() const { return shape_.nbasis; }
  linalg::Index nocc() const { return shape_.nocc; }
  linalg::Index nvir() const { return shape_.nvir(); }
  linalg::Index naux() const { return shape_.naux; }

  const linalg::Matrix& mo_coefficients() const { return c_; }
  const linalg::Vector& orbital_energies() const { return eps_; }
  const linalg::Matrix& metric() const { return metric_; }
  const SyntheticThreeIndex& three_index() const { return three_index_; }
  DfMp2Input dfmp2_input() const { return {&eps_, nocc(), &c_, &metric_, &three_index_}; }

 private:
  SyntheticShape shape_;
  linalg::Matrix c_;
  linalg::Vector eps_;
  linalg::Matrix metric_;
  SyntheticThreeIndex three_index_;
};

}  // namespace dfmp2::chem
