#include "chem/gradient/dfmp2_gradient.hpp"

#include <fmt/format.h>

#include <Eigen/Cholesky>
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "chem/integrals/integrals.hpp"
#include "chem/gradient/scf_gradient.hpp"
#include "linalg/errors.hpp"

namespace dfmp2::chem {

using linalg::ConstMatrixView;
using linalg::Index;
using linalg::Kernels;
using linalg::Matrix;
using linalg::MatrixView;
using linalg::Stopwatch;
using linalg::Trans;
using linalg::Vector;

namespace {

const std::string kStep = "mp2_gradient";
// Auxiliary functions whose AO integrals (P|mn) are computed and contracted at once.
constexpr Index kAuxBlock = 64;

// The orbital spaces, in the SCF's order: frozen [0, nf), active [nf, no), virtual [no, nmo).
struct Spaces {
  Index nf = 0, no = 0, na = 0, nv = 0, nmo = 0;
  Matrix c, c_occ, c_act, c_vir;
  Vector e;
};

Spaces spaces_of(const ScfResult& scf, int nfrozen) {
  Spaces s;
  s.c = scf.mo_coefficients;
  s.e = scf.orbital_energies;
  s.nmo = s.c.cols();
  s.no = scf.nocc;
  s.nf = nfrozen;
  s.na = s.no - s.nf;
  s.nv = s.nmo - s.no;
  s.c_occ = s.c.leftCols(s.no);
  s.c_act = s.c.middleCols(s.nf, s.na);
  s.c_vir = s.c.rightCols(s.nv);
  return s;
}

// Every dense product of the gradient goes through the run's backend and into its kernel table under kStep.
using linalg::product;

// L M R^T: a matrix taken from one orbital basis to another (MO blocks to AO, say).
Matrix sandwich(Kernels& kernels, const Matrix& left, const Matrix& m, const Matrix& right) {
  return product(kernels, kStep, product(kernels, kStep, left, Trans::no, m, Trans::no), Trans::no, right, Trans::yes);
}

// G[M] C_o, G[M] = 4 J[M] - 2 K[M]: the change of the Fock matrix (times 2) for a symmetric change M of C_o C_o^T,
// times the occupied orbitals: all the orbital response reads of it.
Matrix fock_response(JkBuilder& jk, const Matrix& m, const Matrix& c_occ, Kernels& kernels) {
  Matrix j, kc;
  jk.compute_response(m, c_occ, j, kc);
  kernels.gemm<double>(kStep, Trans::no, Trans::no, 4.0, linalg::view(j), linalg::view(c_occ), -2.0, linalg::view(kc));
  return kc;
}

// B = L^-1 (P|ia) for every occupied i (the frozen ones too: the frozen-active Lagrangian reads them), column
// i nv + a, and L^-1 (P|ij) for the occupied pairs, column j no + i; L the metric's Cholesky factor.
struct FittedIntegrals {
  Matrix factor;
  Matrix ov, oo;
};

FittedIntegrals fitted_integrals(const BasisSet& ri, const BasisSet& basis, const Spaces& s, Kernels& kernels) {
  FittedIntegrals f;
  f.factor = coulomb_metric(ri);  // then its Cholesky factor L, in the lower triangle (the solves read only that)
  try {
    kernels.cholesky(kStep, linalg::Uplo::lower, linalg::view(f.factor));
  } catch (const NumericalError& e) {
    throw NumericalError(fmt::format("DF-MP2 gradient: the RI metric of '{}': {}", ri.name, e.what()));
  }
  const Index naux = f.factor.rows(), nbf = basis.nbf();
  f.ov.resize(naux, s.no * s.nv);
  f.oo.resize(naux, s.no * s.no);
  const ThreeCenterEngine engine(ri, basis);
  std::vector<double> block;
  for (const auto& range : engine.blocks(kAuxBlock)) {
    const Index p0 = range.first, p1 = range.second;  // plain locals: clang refuses structured bindings in OpenMP regions
    const Index np = p1 - p0;
    block.resize(static_cast<std::size_t>(np * nbf * nbf));
    engine.compute_square(p0, p1, block.data());
    // The block's (P|mn) side by side are nbf x (nbf np); symmetric in m and n, so (P|mn) C_o for every P of the
    // block is one GEMM with the block transposed: `half`, (nbf np) x no, row P nbf + n.
    Matrix half(nbf * np, s.no);
    kernels.gemm<double>(kStep, Trans::yes, Trans::no, 1.0, ConstMatrixView{block.data(), nbf, nbf * np, nbf},
                         linalg::view(s.c_occ), 0.0, linalg::view(half));
    // Then C_v^T and C_o^T times each P's nbf rows of it, batched: one nv x no and one no x no matrix per P.
    const ConstMatrixView half_p{half.data(), nbf, s.no, nbf * np};
    Matrix ai(s.nv * s.no, np), ij(s.no * s.no, np);
    kernels.gemm_batched<double>(kStep, Trans::yes, Trans::no, np, {0, nbf, s.nv * s.no}, 1.0, linalg::view(s.c_vir),
                                 half_p, 0.0, MatrixView{ai.data(), s.nv, s.no, s.nv});
    kernels.gemm_batched<double>(kStep, Trans::yes, Trans::no, np, {0, nbf, s.no * s.no}, 1.0, linalg::view(s.c_occ),
                                 half_p, 0.0, MatrixView{ij.data(), s.no, s.no, s.no});
    f.ov.middleRows(p0, np) = ai.transpose();
    f.oo.middleRows(p0, np) = ij.transpose();
  }
  for (Matrix* m : {&f.ov, &f.oo})
    kernels.trsm(kStep, linalg::Side::left, linalg::Uplo::lower, Trans::no, linalg::Diag::non_unit, 1.0,
                 linalg::view(f.factor), linalg::view(*m));
  return f;
}

// Step 1: the pair amplitudes of each active k with every active i, t_ki^ab in t(a, i nv + b), which give the
// energy, the unrelaxed density's blocks and the three-index amplitudes G^Q_ka = sum_ib T_ki^ab B^Q_ib.
struct Amplitudes {
  Matrix g;           // naux x (na nv), column k nv + a
  Matrix p_oo, p_vv;  // na x na, nv x nv
  double opposite_spin = 0, same_spin = 0;
};

Amplitudes amplitudes(const FittedIntegrals& f, const Spaces& s, Kernels& kernels) {
  const Index naux = f.ov.rows(), na = s.na, nv = s.nv;
  Amplitudes a;
  a.g.resize(naux, na * nv);
  a.p_oo = Matrix::Zero(na, na);
  a.p_vv = Matrix::Zero(nv, nv);
  const ConstMatrixView b_act{f.ov.data() + s.nf * nv * naux, naux, na * nv, naux};
  Matrix integrals(nv, na * nv), t(nv, na * nv), tt(nv, na * nv);
  const Vector e_act = s.e.segment(s.nf, na), e_vir = s.e.tail(nv);
  for (Index k = 0; k < na; ++k) {
    kernels.gemm(kStep, Trans::yes, Trans::no, 1.0, b_act.block(0, k * nv, naux, nv), b_act, 0.0,
                 linalg::view(integrals));
    double os = 0, ss = 0;
#pragma omp parallel for reduction(+ : os, ss)
    for (Index i = 0; i < na; ++i) {
      for (Index b = 0; b < nv; ++b)
        for (Index x = 0; x < nv; ++x)
          t(x, i * nv + b) = integrals(x, i * nv + b) / (e_act(k) + e_act(i) - e_vir(x) - e_vir(b));
      for (Index b = 0; b < nv; ++b) {
        for (Index x = 0; x < nv; ++x) {
          const double kab = integrals(x, i * nv + b), tab = t(x, i * nv + b), tba = t(b, i * nv + x);
          tt(x, i * nv + b) = 2.0 * tab - tba;
          os += kab * tab;
          ss += kab * (tab - tba);
        }
      }
    }
    a.opposite_spin += os;
    a.same_spin += ss;
    kernels.gemm(kStep, Trans::no, Trans::yes, 1.0, b_act, linalg::view(tt), 0.0,
                 MatrixView{a.g.data() + k * nv * naux, naux, nv, naux});
    kernels.gemm(kStep, Trans::no, Trans::yes, 2.0, linalg::view(t), linalg::view(tt), 1.0, linalg::view(a.p_vv));
    kernels.gemm(kStep, Trans::yes, Trans::no, -2.0, ConstMatrixView{t.data(), nv * nv, na, nv * nv},
                 ConstMatrixView{tt.data(), nv * nv, na, nv * nv}, 1.0, linalg::view(a.p_oo));
  }
  return a;
}

// Steps 2 and 3 from the fitted integrals: the blocks of Y = 4 (P|qr) Gamma^P that the fitted (P|ia) and (P|ij)
// give (q occupied or r occupied), and the metric's V = L^-T (B G^T) L^-1.
struct FittedLagrangian {
  Matrix y_oo, y_vv, y_ov;  // no x na, nv x nv (row b, column a), no x nv
  Matrix v;                 // naux x naux
};

FittedLagrangian fitted_lagrangian(const FittedIntegrals& f, const Amplitudes& a, const Spaces& s, Kernels& kernels) {
  const Index naux = f.ov.rows(), na = s.na, nv = s.nv, no = s.no, nf = s.nf;
  FittedLagrangian l;
  l.y_oo.resize(no, na);
  kernels.gemm<double>(kStep, Trans::yes, Trans::no, 4.0, ConstMatrixView{f.ov.data(), naux * nv, no, naux * nv},
                       ConstMatrixView{a.g.data(), naux * nv, na, naux * nv}, 0.0, linalg::view(l.y_oo));
  l.y_vv = Matrix::Zero(nv, nv);
  l.y_ov = Matrix::Zero(no, nv);
  for (Index i = 0; i < na; ++i) {
    const ConstMatrixView g_i{a.g.data() + i * nv * naux, naux, nv, naux};
    kernels.gemm(kStep, Trans::yes, Trans::no, 4.0, ConstMatrixView{f.ov.data() + (nf + i) * nv * naux, naux, nv, naux},
                 g_i, 1.0, linalg::view(l.y_vv));
    kernels.gemm(kStep, Trans::yes, Trans::no, 4.0, ConstMatrixView{f.oo.data() + (nf + i) * no * naux, naux, no, naux},
                 g_i, 1.0, linalg::view(l.y_ov));
  }
  l.v.resize(naux, naux);
  kernels.gemm(kStep, Trans::no, Trans::yes, 1.0, ConstMatrixView{f.ov.data() + nf * nv * naux, naux, na * nv, naux},
               linalg::view(a.g), 0.0, linalg::view(l.v));
  l.v = 0.5 * (l.v + l.v.transpose()).eval();
  kernels.trsm(kStep, linalg::Side::left, linalg::Uplo::lower, Trans::yes, linalg::Diag::non_unit, 1.0,
               linalg::view(f.factor), linalg::view(l.v));
  kernels.trsm(kStep, linalg::Side::right, linalg::Uplo::lower, Trans::no, linalg::Diag::non_unit, 1.0,
               linalg::view(f.factor), linalg::view(l.v));
  return l;
}

// Y's virtual-active block, 4 sum_P (P|ab) Gamma^P_ib, through the AO integrals (the fitted (P|ab) are never
// formed): Yo = 4 sum_P (P|mn) (C_v Gamma^P^T) and Y_vo = C_v^T Yo. `gamma_t` holds Gamma^P in column P as nv x na.
Matrix virtual_active_lagrangian(const BasisSet& ri, const BasisSet& basis, const Matrix& gamma_t, const Spaces& s,
                                 Kernels& kernels) {
  const Index nbf = basis.nbf();
  const ThreeCenterEngine engine(ri, basis);
  Matrix yo = Matrix::Zero(nbf, s.na);
  std::vector<double> block;
  for (const auto& range : engine.blocks(kAuxBlock)) {
    const Index p0 = range.first, p1 = range.second;  // plain locals: clang refuses structured bindings in OpenMP regions
    const Index np = p1 - p0;
    block.resize(static_cast<std::size_t>(np * nbf * nbf));
    engine.compute_square(p0, p1, block.data());
    // C_v Gamma^P for the block's P in one GEMM (the Gamma^P are side by side in gamma_t's columns), then stacked
    // P above P as (nbf np) x na, so that sum_P (P|mn) (C_v Gamma^P) is one GEMM with the block's integrals as
    // nbf x (nbf np), n fastest within each P.
    Matrix side(nbf, s.na * np);
    kernels.gemm<double>(kStep, Trans::no, Trans::no, 1.0, linalg::view(s.c_vir),
                         ConstMatrixView{gamma_t.col(p0).data(), s.nv, s.na * np, s.nv}, 0.0, linalg::view(side));
    Matrix back(nbf * np, s.na);
    for (Index p = 0; p < np; ++p) back.middleRows(p * nbf, nbf) = side.middleCols(p * s.na, s.na);
    kernels.gemm<double>(kStep, Trans::no, Trans::no, 4.0, ConstMatrixView{block.data(), nbf, nbf * np, nbf},
                         linalg::view(back), 1.0, linalg::view(yo));
  }
  return product(kernels, kStep, s.c_vir, Trans::yes, yo, Trans::no);
}

// Step 4: (e_a - e_i) z_ai + [C_v^T G[Z] C_o]_ai = rhs_ai by conjugate gradients preconditioned with the
// orbital-energy differences, to max |residual| kZvectorConvergence. The operator is symmetric positive definite for
// a stable RHF. The gradient is first order in the residual with a small prefactor: on benzene cc-pVDZ, 1e-8 moves
// it by 2.0e-10 Eh/bohr from the 1e-10 result (1e-7: 2.0e-9), at two fewer iterations.
constexpr double kZvectorConvergence = 1e-8;
Matrix solve_zvector(JkBuilder& jk, const Spaces& s, const Matrix& rhs, DfMp2Gradient& out, Kernels& kernels) {
  const Matrix delta = s.e.tail(s.nv).replicate(1, s.no) - s.e.head(s.no).transpose().replicate(s.nv, 1);
  auto apply = [&](const Matrix& z) {
    Matrix j, kc;
    jk.compute_rotation_response(product(kernels, kStep, s.c_vir, Trans::no, z, Trans::no), s.c_occ, j, kc);
    kernels.gemm<double>(kStep, Trans::no, Trans::no, 4.0, linalg::view(j), linalg::view(s.c_occ), -2.0,
                         linalg::view(kc));
    Matrix applied = delta.cwiseProduct(z);
    kernels.gemm<double>(kStep, Trans::yes, Trans::no, 1.0, linalg::view(s.c_vir), linalg::view(kc), 1.0,
                         linalg::view(applied));
    return applied;
  };
  Matrix z = rhs.cwiseQuotient(delta);
  Matrix r = rhs - apply(z);
  Matrix p = r.cwiseQuotient(delta);
  double rz = r.cwiseProduct(p).sum();
  constexpr int kMaxIterations = 100;
  for (out.zvector_iterations = 0; out.zvector_iterations < kMaxIterations; ++out.zvector_iterations) {
    out.zvector_residual = r.cwiseAbs().maxCoeff();
    if (out.zvector_residual < kZvectorConvergence) return z;
    const Matrix ap = apply(p);
    const double alpha = rz / p.cwiseProduct(ap).sum();
    z += alpha * p;
    r -= alpha * ap;
    const Matrix zr = r.cwiseQuotient(delta);
    const double rz_next = r.cwiseProduct(zr).sum();
    p = zr + (rz_next / rz) * p;
    rz = rz_next;
  }
  throw NumericalError(fmt::format("DF-MP2 gradient: the Z-vector equations did not converge in {} iterations "
                                   "(largest residual {:.2e})", kMaxIterations, out.zvector_residual));
}

// The energy-weighted density W (MO basis) from X = dE/dU, the Z-vector, the frozen-active rotations and their
// AO form (whose Fock response enters the occupied block).
Matrix energy_weighted_density(const Matrix& x, const Matrix& z, const Matrix& z_frozen, const Matrix& rotations_ao,
                               const Spaces& s, JkBuilder& jk, Kernels& kernels) {
  const Index nf = s.nf, no = s.no, na = s.na, nv = s.nv, nmo = s.nmo;
  const Matrix xs = 0.5 * (x + x.transpose());
  Matrix w = Matrix::Zero(nmo, nmo);
  w.topLeftCorner(no, no) = 0.5 * xs.topLeftCorner(no, no);
  for (Index i = 0; i < nf; ++i)
    for (Index j = 0; j < na; ++j)
      w(i, nf + j) = w(nf + j, i) = 0.5 * (x(nf + j, i) + z_frozen(i, j) * s.e(nf + j));
  kernels.gemm<double>(kStep, Trans::yes, Trans::no, 0.5, linalg::view(s.c_occ),
                       linalg::view(fock_response(jk, rotations_ao, s.c_occ, kernels)), 1.0,
                       MatrixView{w.data(), no, no, nmo});
  w.block(no, no, nv, nv) = 0.5 * xs.block(no, no, nv, nv);
  w.block(no, 0, nv, no) = 0.5 * (x.block(0, no, no, nv).transpose() + z * s.e.head(no).asDiagonal());
  w.block(0, no, no, nv) = w.block(no, 0, nv, no).transpose();
  return w;
}

}  // namespace

DfMp2Gradient rhf_dfmp2_gradient(const DfMp2GradientInput& in, Kernels& kernels) {
  const ScfResult& scf = *in.scf;
  if (scf.open_shell()) throw std::logic_error("rhf_dfmp2_gradient: an open-shell SCF");
  DfMp2Gradient out;
  const Spaces s = spaces_of(scf, in.nfrozen);
  const Index nf = s.nf, no = s.no, na = s.na, nv = s.nv, nmo = s.nmo;
  const auto natoms = static_cast<Index>(in.molecule->atoms.size());
  Stopwatch clock;
  auto lap = [&](const char* step) { out.seconds.emplace_back(step, clock.seconds()); clock = Stopwatch(); };

  // Steps 1 and 2: amplitudes, densities, the energy's explicit derivative terms.
  Matrix gamma_t, v;
  Matrix x = Matrix::Zero(nmo, nmo);  // X_qp = dE/dU_qp
  Amplitudes amp;
  {
    const FittedIntegrals f = fitted_integrals(*in.ri_basis, *in.basis, s, kernels);
    lap("integrals");
    amp = amplitudes(f, s, kernels);
    out.opposite_spin = amp.opposite_spin;
    out.same_spin = amp.same_spin;
    lap("amplitudes");
    FittedLagrangian l = fitted_lagrangian(f, amp, s, kernels);
    v = std::move(l.v);
    x.block(0, nf, no, na) = l.y_oo;
    x.block(no, no, nv, nv) = l.y_vv;
    x.block(0, no, no, nv) = l.y_ov;
    // Gamma = L^-T G, kept as its transpose: one auxiliary function's nv x na block per column.
    kernels.trsm(kStep, linalg::Side::left, linalg::Uplo::lower, Trans::yes, linalg::Diag::non_unit, 1.0,
                 linalg::view(f.factor), linalg::view(amp.g));
    gamma_t = amp.g.transpose();
    amp.g.resize(0, 0);
  }
  x.block(no, nf, nv, na) = virtual_active_lagrangian(*in.ri_basis, *in.basis, gamma_t, s, kernels);
  lap("lagrangian");

  // Step 3: the Fock matrix's part of X.
  const Matrix p_unrelaxed =
      sandwich(kernels, s.c_act, amp.p_oo, s.c_act) + sandwich(kernels, s.c_vir, amp.p_vv, s.c_vir);
  x.block(nf, nf, na, na) += 2.0 * s.e.segment(nf, na).asDiagonal() * amp.p_oo;
  x.block(no, no, nv, nv) += 2.0 * s.e.tail(nv).asDiagonal() * amp.p_vv;
  kernels.gemm<double>(kStep, Trans::yes, Trans::no, 1.0, linalg::view(s.c),
                       linalg::view(fock_response(*in.jk, p_unrelaxed, s.c_occ, kernels)), 1.0,
                       MatrixView{x.data(), nmo, no, nmo});

  // Step 4: the frozen-active rotations, then the Z-vector.
  Matrix z_frozen(nf, na);
  for (Index i = 0; i < nf; ++i)
    for (Index j = 0; j < na; ++j) z_frozen(i, j) = -(x(i, nf + j) - x(nf + j, i)) / (s.e(i) - s.e(nf + j));
  Matrix lagrangian = x.block(no, 0, nv, no) - x.block(0, no, no, nv).transpose();
  if (nf > 0) {
    const Matrix m = sandwich(kernels, s.c.leftCols(nf), z_frozen, s.c_act);
    kernels.gemm<double>(kStep, Trans::yes, Trans::no, 1.0, linalg::view(s.c_vir),
                         linalg::view(fock_response(*in.jk, 0.5 * (m + m.transpose()), s.c_occ, kernels)), 1.0,
                         linalg::view(lagrangian));
  }
  const Matrix z = solve_zvector(*in.jk, s, -lagrangian, out, kernels);
  in.jk->release_response();
  lap("z-vector");

  // Step 5: the relaxed and energy-weighted densities.
  Matrix rotations = Matrix::Zero(nmo, nmo);  // the z/2 blocks, symmetric
  rotations.block(no, 0, nv, no) = 0.5 * z;
  rotations.block(0, nf, nf, na) = 0.5 * z_frozen;
  rotations = (rotations + rotations.transpose()).eval();
  const Matrix rotations_ao = sandwich(kernels, s.c, rotations, s.c);
  Matrix p_mo = rotations;
  p_mo.block(nf, nf, na, na) += amp.p_oo;
  p_mo.block(no, no, nv, nv) += amp.p_vv;
  const Matrix w = energy_weighted_density(x, z, z_frozen, rotations_ao, s, *in.jk, kernels);
  const DensityCorrection correction{sandwich(kernels, s.c, p_mo, s.c), sandwich(kernels, s.c, w, s.c)};
  lap("densities");

  // The gradient: the SCF's form with the corrected densities, and the non-separable three-index and metric terms.
  const std::vector<Matrix> separable = rhf_gradients(*in.molecule, *in.basis, in.jk_basis, scf, {correction}, kernels);
  out.scf_gradient = separable[0];
  lap("separable");
  // (The three-index derivative's densities are made inside the integral code's threads, where the kernel log
  // cannot follow: their small products stay Eigen's until that contraction is blocked over auxiliary shells.)
  const Matrix three_index =
      three_center_gradient(*in.ri_basis, *in.basis, natoms, [&](Index p0, Index p1, double* r) {
        for (Index p = p0; p < p1; ++p) {
          const Matrix half = s.c_act * Eigen::Map<const Matrix>(gamma_t.col(p).data(), nv, na).transpose() *
                              s.c_vir.transpose();
          Eigen::Map<Matrix>(r + (p - p0) * half.size(), half.rows(), half.cols()) = 2.0 * (half + half.transpose());
        }
      });
  out.gradient = separable[1] + three_index + metric_gradient(*in.ri_basis, natoms, -2.0 * v);
  lap("non-separable");

  const Matrix scf_density = product(kernels, kStep, s.c_occ, Trans::no, s.c_occ, Trans::yes, 2.0);
  out.relaxed_density = scf_density + correction.density;
  out.scf_dipole = dipole_moment(*in.molecule, *in.basis, scf_density);
  out.relaxed_dipole = dipole_moment(*in.molecule, *in.basis, out.relaxed_density);
  return out;
}

double dfmp2_gradient_bytes(Index nbf, Index nocc, Index nfrozen, Index naux, Index naux_jk) {
  const double nv = double(nbf - nocc), no = double(nocc), na = double(nocc - nfrozen);
  const double three_index = double(naux) * (no * nv + no * no + 2.0 * na * nv);
  const double pairs = 3.0 * na * nv * nv;
  // The separable pass's half-transformed integrals, or the Z-vector's kept B_Q C_o (and one block's products).
  const double separable = 2.0 * double(naux_jk) * double(nbf) * no;
  // A block of AO integrals (P|mn) and its products: the half-transformed rows and the (ia) and (ij) blocks, or
  // C_v Gamma^P twice (side by side, then stacked).
  const double block = double(kAuxBlock) * (double(nbf) * double(nbf) + std::max(double(nbf) * no + (nv + no) * no,
                                                                              2.0 * double(nbf) * na));
  const double matrices = 12.0 * double(nbf) * double(nbf) + double(naux) * double(naux);
  return 8.0 * (three_index + std::max({pairs, separable, block}) + matrices);
}

}  // namespace dfmp2::chem
