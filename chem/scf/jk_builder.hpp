#pragma once
// What the SCF iterations ask of a J/K build, and the exact (four-centre) builder. The density-fitted builder is in
// chem/scf/df_jk.hpp; both are made by the SCF stage from the input's scf.type (README "SCF").
#include <array>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "chem/scf/rotation_response.hpp"
#include "chem/system/basis_set.hpp"
#include "linalg/comm.hpp"
#include "linalg/kernels.hpp"
#include "linalg/matrix_view.hpp"

namespace dfmp2::chem {

class JkBuilder {
 public:
  virtual ~JkBuilder() = default;
  // J[D] and K[D] for D = C_occ diag(weights) C_occ^T; `c_occ` columns already carry sqrt(weight). With
  // fp32_exchange, K is built in fp32 (only by a builder whose has_fp32_exchange() is true; the SCF asks first).
  // `density` numbers the densities an SCF builds from each iteration (UHF: 0 alpha, 1 beta): a builder that keeps
  // state from one build to the next (the exact J/K's incremental builds) keeps it per density.
  virtual void compute(const linalg::Matrix& c_occ, linalg::Matrix& j, linalg::Matrix& k, bool fp32_exchange = false,
                       int density = 0) = 0;
  virtual bool has_fp32_exchange() const { return false; }
  // J[M] and K[M] of a symmetric M that need not be a density: a gradient's orbital response (the MP2 density, the
  // Z-vector's trial vectors) is indefinite. This default splits M by its eigenvalues into C+ C+^T - C- C-^T and
  // builds each part with compute() in chunks of at most max_columns() orbitals (the SCF's occupied count, which
  // its memory plan allows), as density kResponseDensity so that a builder's per-density state of the SCF is kept.
  virtual void compute_symmetric(const linalg::Matrix& m, linalg::Matrix& j, linalg::Matrix& k);
  virtual linalg::Index max_columns() const { return std::numeric_limits<linalg::Index>::max(); }
  // J[M] and K[M] C for a symmetric M and a block of orbitals C: what a gradient's orbital response reads of the
  // Fock matrix's change (its products with the occupied orbitals). The DF builder with a stored tensor does it in
  // one pass over B (K[M] C = sum_Q B_Q M (B_Q C)); this default is compute_symmetric's K times C.
  virtual void compute_response(const linalg::Matrix& m, const linalg::Matrix& c, linalg::Matrix& j,
                                linalg::Matrix& kc);
  // C_v^T G[M] C_o, G[M] = 4 J[M] - 2 K[M], for M = (C_v z C_o^T + C_o z^T C_v^T) / 2, an occupied-virtual
  // rotation z's change of the density: what each iteration of a gradient's Z-vector applies (nv x no). A builder
  // with a rotation_source (the DF builder with a stored tensor) keeps what the gradient's plan allows
  // (keep_rotation_products) from its first call and then needs one pass over B per call, or none
  // (chem/scf/rotation_response.hpp); otherwise, each call is compute_response's J and K C_o. Its products are
  // logged under the J/K's step.
  virtual linalg::Matrix rotation_hessian(const linalg::Matrix& c_vir, const linalg::Matrix& c_occ,
                                          const linalg::Matrix& z, linalg::Kernels& kernels);
  // After a rotation_hessian call, the two-electron part of that operator's diagonal (nv x no) where the products it
  // kept give it cheaply (`mo` kept, RotationResponse::diagonal); else empty.
  virtual linalg::Matrix rotation_hessian_diagonal();
  // C_o^T G[M] C_o (no x no) for M = C R C^T, R with the occupied-virtual block r_vo (nv x no, and its mirror) and the
  // occupied block r_oo (no x no, symmetric): what the energy-weighted density reads of the Z-vector's rotations.
  // From rotation_hessian's products while they are kept for these orbitals (RotationResponse::occupied_response),
  // instead of a pass over B; else compute_response's.
  virtual linalg::Matrix occupied_rotation_response(const linalg::Matrix& c_vir, const linalg::Matrix& c_occ,
                                                    const linalg::Matrix& r_vo, const linalg::Matrix& r_oo,
                                                    linalg::Kernels& kernels);
  // C^T G[M] C_o ((no + nv) x no, occupied rows first) for M = C_o p_oo C_o^T + C_v p_vv C_v^T, the unrelaxed
  // density's response that the Z-vector's right-hand side reads. Where rotation_hessian will keep b_vv for these
  // orbitals (`mo`), the products are made here and it is formed from them (RotationResponse::unrelaxed_response);
  // else compute_response's.
  virtual linalg::Matrix unrelaxed_response(const linalg::Matrix& c_vir, const linalg::Matrix& c_occ,
                                            const linalg::Matrix& p_oo, const linalg::Matrix& p_vv,
                                            linalg::Kernels& kernels);
  // The same operator for an open shell's (UHF's) two spins s = alpha, beta, each with its orbitals and rotations z[s]:
  // C^s_v^T (2 J[M^a + M^b] - 2 K[M^s]) C^s_o, M^s = (C^s_v z^s C^s_o^T + transpose) / 2, the spins coupled through J.
  // With both spins' products kept (keep_rotation_products with two sets), from them: each spin's 4 J - 2 K as
  // rotation_hessian's, and the other half of J from the kept b_vo; otherwise two response builds.
  virtual std::array<linalg::Matrix, 2> unrestricted_rotation_hessian(const std::array<const linalg::Matrix*, 2>& c_vir,
                                                                      const std::array<const linalg::Matrix*, 2>& c_occ,
                                                                      const std::array<linalg::Matrix, 2>& z,
                                                                      linalg::Kernels& kernels);
  // After an unrestricted_rotation_hessian call, its two-electron diagonal for each spin, (ai|ai) - (aa|ii), where the
  // kept products give it (`mo`); else empty.
  virtual std::array<linalg::Matrix, 2> unrestricted_rotation_hessian_diagonal(
      const std::array<const linalg::Matrix*, 2>& c_vir, const std::array<const linalg::Matrix*, 2>& c_occ);
  // Frees what rotation_hessian keeps between calls (the Z-vector is solved).
  virtual void release_response() { release_rotations(); }
  // What rotation_hessian may keep between calls: none, when the gradient's memory plan has no room for them; and for
  // how many sets of orbitals at once (2: an open shell's spins; a set asked for beyond them replaces the kept ones).
  virtual void keep_rotation_products(RotationProducts kept, int sets = 1) {
    rotation_products_ = kept;
    kept_sets_ = sets;
  }
  // The kernels its products run on and are logged in from now on: a J/K kept from the SCF for a gradient logs the
  // gradient's builds in the gradient's table.
  virtual void use_kernels(linalg::Kernels& kernels) = 0;
  static constexpr int kResponseDensity = 2;

 protected:
  // What a builder that can keep the Z-vector's products in the orbitals' basis provides: this rank's fitting
  // functions, one pass over its fitted B_Q unpacked to nbf x nbf squares, the kernels the products run on, and
  // `on_ranks`, which runs this rank's work so that an error on any rank is raised on every one and then sums `out`
  // over the ranks.
  struct RotationSource {
    linalg::Index naux = 0;
    RotationResponse::Squares pass;
    linalg::Kernels* kernels = nullptr;
    std::function<void(const std::function<void()>& work, linalg::Matrix& out)> on_ranks;
  };
  // None (this default): every product through compute_response. Asked on the first rotation_hessian call for
  // another set of orbitals (`c_occ`'s columns).
  virtual std::optional<RotationSource> rotation_source(const linalg::Matrix& c_occ) {
    (void)c_occ;
    return std::nullopt;
  }
  RotationProducts rotation_products_ = RotationProducts::mo;
  int kept_sets_ = 1;

 private:
  // rotation_hessian's kept products for these orbitals, set up (not yet made) from rotation_source if there is one;
  // null when none can be kept.
  RotationResponse* kept_products_for(const linalg::Matrix& c_vir, const linalg::Matrix& c_occ);
  void release_rotations();
  // left^T (4 J[M] - 2 K[M]) C_o through compute_response.
  linalg::Matrix response_between(const linalg::Matrix& left, const linalg::Matrix& m, const linalg::Matrix& c_occ,
                                   linalg::Kernels& kernels);
  // rotation_hessian's kept products, from source_ (one set of orbitals, or an open shell's two), and the last used.
  std::array<std::unique_ptr<RotationResponse>, 2> rotations_;
  RotationResponse* last_ = nullptr;
  RotationSource source_;
};

// Density-fitted J/K within a memory budget: chem/scf/df_jk.hpp.

// What the exact J/K holds, decided before any four-centre integral is computed.
struct ExactJkPlan {
  std::string storage;          // "semi-direct" (some or all integrals kept; `reason` says how many) or "direct"
  double memory_bytes = 0;      // peak held: shell pairs, accumulators, the integral cache
  double cache_bytes = 0;       // of which the integral cache
  double integrals = 0;         // integrals of the unique quartets that pass the Schwarz screening
  double cached_integrals = 0;  // of which kept in memory
  std::string reason;
};

// Exact J/K from four-centre integrals (chem/integrals/integrals.hpp FourCenterJk), integral-direct or semi-direct: the
// integrals that fit in `memory_bytes` beside the J/K's own matrices are computed on the first build and reused.
// Builds after the first are incremental: J[D] = J[D_prev] + J[D - D_prev], the same for K, so the density
// screening skips most quartets near convergence; every kExactFullBuildEvery builds J and K are rebuilt from D.
// Throws PhaseTooLarge when `memory_bytes` cannot hold the J/K's fixed part.
inline constexpr int kExactFullBuildEvery = 8;
// With `comm`, the bra shell pairs are shared among the ranks (each caches its own within `memory_bytes`) and J and
// K are summed over them; `plan` then counts every rank's integrals.
std::unique_ptr<JkBuilder> make_exact_jk(const BasisSet& basis, double memory_bytes, linalg::Kernels& kernels,
                                         ExactJkPlan& plan, linalg::Comm* comm = nullptr);
// What make_exact_jk needs at least (no cache), for the memory plan.
double exact_jk_minimum_bytes(const BasisSet& basis, int threads);

}  // namespace dfmp2::chem
