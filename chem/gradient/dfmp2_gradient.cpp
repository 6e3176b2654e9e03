#include "chem/gradient/dfmp2_gradient.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>

#include "chem/gradient/gradient_detail.hpp"
#include "chem/gradient/scf_gradient.hpp"
#include "chem/integrals/integrals.hpp"
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

namespace gradient_detail {

Spaces spaces_of(const Matrix& c, const Vector& e, int nocc, int nfrozen, const std::string& spin) {
  Spaces s;
  s.c = c;
  s.e = e;
  s.nmo = s.c.cols();
  s.no = nocc;
  s.nf = nfrozen;
  s.na = s.no - s.nf;
  s.nv = s.nmo - s.no;
  s.c_occ = s.c.leftCols(s.no);
  s.c_act = s.c.middleCols(s.nf, s.na);
  s.c_vir = s.c.rightCols(s.nv);
  s.spin = spin;
  return s;
}

// Every dense product of the gradient goes through the run's backend and into its kernel table under kStep.
using linalg::product;

Matrix sandwich(Kernels& kernels, const Matrix& left, const Matrix& m, const Matrix& right) {
  return product(kernels, kStep, product(kernels, kStep, left, Trans::no, m, Trans::no), Trans::no, right, Trans::yes);
}

}  // namespace gradient_detail

namespace {

using gradient_detail::AmplitudePass;
using gradient_detail::FittedIntegrals;
using gradient_detail::kStep;
using gradient_detail::Ranks;
using gradient_detail::sandwich;
using gradient_detail::Spaces;
using linalg::product;

// G[M] C_o, G[M] = 4 J[M] - 2 K[M]: the change of the Fock matrix (times 2) for a symmetric change M of C_o C_o^T,
// times the occupied orbitals: all the orbital response reads of it.
Matrix fock_response(JkBuilder& jk, const Matrix& m, const Matrix& c_occ, Kernels& kernels) {
  Matrix j, kc;
  jk.compute_response(m, c_occ, j, kc);
  kernels.gemm<double>(kStep, Trans::no, Trans::no, 4.0, linalg::view(j), linalg::view(c_occ), -2.0, linalg::view(kc));
  return kc;
}

}  // namespace

namespace gradient_detail {

// Y's active columns, 4 sum_P (P|pb) Gamma^P_ib for every orbital p, through the AO integrals (the fitted (P|ab) are
// never formed): Yo = 4 sum_P (P|mn) (C_v Gamma^P^T), nbf x na, and C^T Yo. Gamma is read a slab of auxiliary
// functions at a time from its blocks; each rank does its own auxiliary functions (amp.aux), Yo summed over them.
Matrix active_lagrangian(const BasisSet& ri, const BasisSet& basis, const AmplitudePass& amp, const Spaces& s,
                         const Ranks& ranks, Kernels& kernels) {
  const Index nbf = basis.nbf(), col0 = amp.aux.first(ranks.rank());
  const ThreeCenterEngine engine(ri, basis);
  Matrix yo = Matrix::Zero(nbf, s.na), slab;
  std::vector<double> block;
  ranks.checked([&] {
    for (const auto& [p0, p1] : amp.aux.mine) {
      const Index np = p1 - p0;
      block.resize(static_cast<std::size_t>(np * nbf * nbf));
      engine.compute_square(p0, p0 + np, block.data());
      slab.resize(s.na * s.nv, np);
      amp.gamma->read_slab(p0 - col0, np, slab.data());
      // C_v Gamma^P for the block's P in one GEMM (the Gamma^P side by side in the slab's columns), then stacked
      // P above P as (nbf np) x na, so that sum_P (P|mn) (C_v Gamma^P) is one GEMM with the block's integrals as
      // nbf x (nbf np), n fastest within each P.
      Matrix side(nbf, s.na * np);
      kernels.gemm<double>(kStep, Trans::no, Trans::no, 1.0, linalg::view(s.c_vir),
                           ConstMatrixView{slab.data(), s.nv, s.na * np, s.nv}, 0.0, linalg::view(side));
      Matrix back(nbf * np, s.na);
      for (Index p = 0; p < np; ++p) back.middleRows(p * nbf, nbf) = side.middleCols(p * s.na, s.na);
      kernels.gemm<double>(kStep, Trans::no, Trans::no, 4.0, ConstMatrixView{block.data(), nbf, nbf * np, nbf},
                           linalg::view(back), 1.0, linalg::view(yo));
    }
  });
  ranks.sum(yo);
  return product(kernels, kStep, s.c, Trans::yes, yo, Trans::no);
}

// sum_P d(P|mn)/dR (4 C_i Gamma^P_ia C_a^T, symmetrised): the three-index integrals' explicit part, Gamma read for
// each auxiliary shell inside the integral code's threads (each rank its own auxiliary functions, amp.aux). (Its
// densities are made there, where the kernel log cannot follow: their small products stay Eigen's.)
Matrix three_index_gradient(const BasisSet& ri, const BasisSet& basis, Index natoms, const AmplitudePass& amp,
                            const Spaces& s, const Ranks& ranks) {
  const Index col0 = amp.aux.first(ranks.rank());
  auto density = [&](Index p0, Index p1, double* r) {
    Matrix slab(s.na * s.nv, p1 - p0);
    amp.gamma->read_slab(p0 - col0, p1 - p0, slab.data());
    for (Index p = p0; p < p1; ++p) {
      const Matrix half =
          s.c_act * Eigen::Map<const Matrix>(slab.col(p - p0).data(), s.nv, s.na).transpose() * s.c_vir.transpose();
      Eigen::Map<Matrix>(r + (p - p0) * half.size(), half.rows(), half.cols()) = 2.0 * (half + half.transpose());
    }
  };
  Matrix out;
  const AuxFunctions mine{col0, col0 + amp.aux.count(ranks.rank())};
  ranks.checked([&] { out = three_center_gradient(ri, basis, natoms, density, mine); });
  ranks.sum(out);  // each rank's auxiliary shells
  return out;
}

// Step 4's solver: A z = rhs by preconditioned conjugate gradients, A symmetric positive definite (the orbital
// Hessian of a stable SCF), to max |residual| below `convergence`. Preconditioned with A's diagonal: `diagonal`, and
// after the first product `sharper()` where that gives one (empty: keep `diagonal`).
Matrix conjugate_gradient(const std::function<Matrix(const Matrix&)>& apply, const Matrix& rhs, const Matrix& diagonal,
                          const std::function<Matrix()>& sharper, double convergence, DfMp2Gradient& out) {
  Matrix z = rhs.cwiseQuotient(diagonal);
  Matrix r = rhs - apply(z);
  Matrix d = diagonal;
  if (const Matrix better = sharper(); better.size() > 0) d = better;
  Matrix p = r.cwiseQuotient(d);
  double rz = r.cwiseProduct(p).sum();
  constexpr int kMaxIterations = 100;
  for (out.zvector_iterations = 0; out.zvector_iterations < kMaxIterations; ++out.zvector_iterations) {
    out.zvector_residual = r.cwiseAbs().maxCoeff();
    if (out.zvector_residual < convergence) return z;
    const Matrix ap = apply(p);
    const double alpha = rz / p.cwiseProduct(ap).sum();
    z += alpha * p;
    r -= alpha * ap;
    const Matrix zr = r.cwiseQuotient(d);
    const double rz_next = r.cwiseProduct(zr).sum();
    p = zr + (rz_next / rz) * p;
    rz = rz_next;
  }
  throw NumericalError(fmt::format("DF-MP2 gradient: the Z-vector equations did not converge in {} iterations "
                                   "(largest residual {:.2e})", kMaxIterations, out.zvector_residual));
}

Matrix orbital_energy_differences(const Spaces& s) {
  return s.e.tail(s.nv).replicate(1, s.no) - s.e.head(s.no).transpose().replicate(s.nv, 1);
}

// The energy-weighted density W (MO basis) from X = dE/dU, the Z-vector, the frozen-active rotations and
// `occupied_response`, C_o^T G[C R C^T] C_o for the rotations R (symmetric, MO) of all of them.
Matrix energy_weighted_density(const Matrix& x, const Matrix& z, const Matrix& z_frozen,
                               const Matrix& occupied_response, const Spaces& s) {
  const Index nf = s.nf, no = s.no, na = s.na, nv = s.nv, nmo = s.nmo;
  const Matrix xs = 0.5 * (x + x.transpose());
  Matrix w = Matrix::Zero(nmo, nmo);
  w.topLeftCorner(no, no) = 0.5 * xs.topLeftCorner(no, no);
  for (Index i = 0; i < nf; ++i)
    for (Index j = 0; j < na; ++j)
      w(i, nf + j) = w(nf + j, i) = 0.5 * (x(nf + j, i) + z_frozen(i, j) * s.e(nf + j));
  w.topLeftCorner(no, no) += 0.5 * occupied_response;
  w.block(no, no, nv, nv) = 0.5 * xs.block(no, no, nv, nv);
  w.block(no, 0, nv, no) = 0.5 * (x.block(0, no, no, nv).transpose() + z * s.e.head(no).asDiagonal());
  w.block(0, no, no, nv) = w.block(no, 0, nv, no).transpose();
  return w;
}

// The z/2 blocks of the relaxed density's rotations, symmetric (MO).
Matrix relaxed_rotations(const Matrix& z, const Matrix& z_frozen, const Spaces& s) {
  Matrix r = Matrix::Zero(s.nmo, s.nmo);
  r.block(s.no, 0, s.nv, s.no) = 0.5 * z;
  r.block(0, s.nf, s.nf, s.na) = 0.5 * z_frozen;
  return r + r.transpose();
}

// The frozen-active rotations, z_Ij = -(X_Ij - X_jI) / (e_I - e_j), which the Lagrangian couples in.
Matrix frozen_rotations(const Matrix& x, const Spaces& s) {
  Matrix z_frozen(s.nf, s.na);
  for (Index i = 0; i < s.nf; ++i)
    for (Index j = 0; j < s.na; ++j)
      z_frozen(i, j) = -(x(i, s.nf + j) - x(s.nf + j, i)) / (s.e(i) - s.e(s.nf + j));
  return z_frozen;
}

// The separable part (the SCF gradient's form with `correction` added, HalfTransformedStorage as the plan holds the
// blocks) added to out.gradient, the SCF's own in out.scf_gradient (unless in.derivatives is false), and the SCF and
// relaxed densities and dipoles;
// `spins` the SCF's occupied orbitals (one set doubly occupied, or alpha and beta).
void add_separable(const DfMp2GradientInput& in, const std::vector<const Spaces*>& spins,
                   const DensityCorrection& correction, const std::vector<Matrix>& unrelaxed, DfMp2Gradient& out,
                   Kernels& kernels) {
  if (in.derivatives) {
    const HalfTransformedStorage storage{in.plan.occupied_block, in.plan.aux_block, in.plan.on_scratch,
                                         in.scratch_folder, in.comm};
    const std::vector<Matrix> separable =
        scf_gradients(*in.molecule, *in.basis, in.jk_basis, *in.scf, {correction}, kernels, storage);
    out.scf_gradient = separable[0];
    const Index atoms = out.gradient.rows();  // point charges' rows follow (scf_gradients)
    out.gradient.conservativeResize(separable[1].rows(), 3);
    out.gradient.bottomRows(separable[1].rows() - atoms).setZero();
    out.gradient += separable[1];
  }
  // Each spin's densities: a closed shell's halves, else the spins' own (correction.alpha the relaxed alpha part).
  const bool closed_shell = spins.size() == 1;
  for (std::size_t spin = 0; spin < 2; ++spin) {
    const Spaces& t = *spins[closed_shell ? 0 : spin];
    out.scf_densities[spin] = product(kernels, kStep, t.c_occ, Trans::no, t.c_occ, Trans::yes);
    out.unrelaxed_densities[spin] =
        out.scf_densities[spin] + (closed_shell ? Matrix(0.5 * unrelaxed[0]) : unrelaxed[spin]);
    const Matrix relaxed_correction = closed_shell ? Matrix(0.5 * correction.density)
                                      : spin == 0  ? correction.alpha
                                                   : Matrix(correction.density - correction.alpha);
    out.relaxed_densities[spin] = out.scf_densities[spin] + relaxed_correction;
  }
  out.relaxed_density = out.relaxed_densities[0] + out.relaxed_densities[1];
  out.scf_dipole = dipole_moment(*in.molecule, *in.basis, out.scf_densities[0] + out.scf_densities[1]);
  out.relaxed_dipole = dipole_moment(*in.molecule, *in.basis, out.relaxed_density);
}

}  // namespace gradient_detail

namespace {

using gradient_detail::active_lagrangian;
using gradient_detail::three_index_gradient;

// Step 4: (e_a - e_i) z_ai + [C_v^T G[Z] C_o]_ai = rhs_ai, to max |residual| below `convergence`, the SCF's own
// d_convergence: the orbital response converged as far as the orbitals it responds with (on benzene cc-pVDZ a
// residual of 1e-8 moves the gradient by 2.0e-10 Eh/bohr from that of 1e-10, 1e-7 by 2.0e-9: far below what the
// orbitals' own convergence to 1e-8 moves it by). Preconditioned with the orbital-energy differences, and from the
// first product on, where the J/K's kept products give it, the exact 3 (ai|ai) - (aa|ii) beside them (one or two
// iterations fewer). The operator is symmetric positive definite for a stable RHF.
Matrix solve_zvector(JkBuilder& jk, const Spaces& s, const Matrix& rhs, double convergence, DfMp2Gradient& out,
                     Kernels& kernels) {
  const Matrix delta = gradient_detail::orbital_energy_differences(s);
  auto apply = [&](const Matrix& z) {
    Matrix applied = jk.rotation_hessian(s.c_vir, s.c_occ, z, kernels);
    applied += delta.cwiseProduct(z);
    return applied;
  };
  auto sharper = [&]() -> Matrix {
    const Matrix two_electron = jk.rotation_hessian_diagonal();
    return two_electron.size() > 0 ? Matrix(delta + two_electron) : Matrix();
  };
  return gradient_detail::conjugate_gradient(apply, rhs, delta, sharper, convergence, out);
}

}  // namespace

DfMp2Gradient rhf_dfmp2_gradient(const DfMp2GradientInput& in, Kernels& kernels) {
  const ScfResult& scf = *in.scf;
  if (scf.open_shell()) throw std::logic_error("rhf_dfmp2_gradient: an open-shell SCF");
  DfMp2Gradient out;
  const Spaces s = gradient_detail::spaces_of(scf.mo_coefficients, scf.orbital_energies, scf.nocc, in.nfrozen, "");
  const Index nf = s.nf, no = s.no, na = s.na, nv = s.nv, nmo = s.nmo;
  const auto natoms = static_cast<Index>(in.molecule->atoms.size());
  const Ranks ranks{in.comm};
  Stopwatch clock;
  auto lap = [&](const char* step) { out.seconds.emplace_back(step, clock.seconds()); clock = Stopwatch(); };

  // Steps 1 and 2: amplitudes, densities, the energy's explicit derivative terms, on the plan's blocks.
  Matrix x = Matrix::Zero(nmo, nmo);  // X_qp = dE/dU_qp
  AmplitudePass amp;
  {
    FittedIntegrals f = gradient_detail::fitted_integrals(*in.ri_basis, *in.basis, s, in.plan, in.scratch_folder,
                                                          ranks, kernels);
    lap("integrals");
    amp = gradient_detail::amplitude_pass(f, s, in.plan, in.scales, nullptr, in.scratch_folder, ranks,
                                            kernels);
    out.opposite_spin = amp.opposite_spin;
    out.same_spin = amp.same_spin;
    out.same_spin_alpha = out.same_spin_beta = 0.5 * amp.same_spin;
    x.block(no, no, nv, nv) = amp.y_vv;
    x.block(0, no, no, nv) = amp.y_ov;
    lap("amplitudes");
    x.middleCols(nf, na) =
        active_lagrangian(*in.ri_basis, *in.basis, amp, s, ranks, kernels);
    lap("lagrangian");
    // The three-index and metric terms need nothing more; Gamma is released before the orbital response.
    if (in.derivatives)
      out.gradient = three_index_gradient(*in.ri_basis, *in.basis, natoms, amp, s, ranks) +
                     metric_gradient(*in.ri_basis, natoms, -2.0 * amp.v);
    amp.gamma.reset();
    amp.v.resize(0, 0);
    lap("non-separable");
  }

  // Step 3: the Fock matrix's part of X; its response to the unrelaxed density from the Z-vector's products when
  // they are kept in the orbitals' basis (made here, for the Z-vector to use).
  x.block(nf, nf, na, na) += 2.0 * s.e.segment(nf, na).asDiagonal() * amp.p_oo;
  x.block(no, no, nv, nv) += 2.0 * s.e.tail(nv).asDiagonal() * amp.p_vv;
  Matrix p_occupied = Matrix::Zero(no, no);
  p_occupied.block(nf, nf, na, na) = amp.p_oo;
  in.jk->keep_rotation_products(in.plan.zvector_products);
  x.leftCols(no) += in.jk->unrelaxed_response(s.c_vir, s.c_occ, p_occupied, amp.p_vv, kernels);

  // Step 4: the frozen-active rotations, then the Z-vector.
  const Matrix z_frozen = gradient_detail::frozen_rotations(x, s);
  Matrix lagrangian = x.block(no, 0, nv, no) - x.block(0, no, no, nv).transpose();
  if (nf > 0) {
    const Matrix m = sandwich(kernels, s.c.leftCols(nf), z_frozen, s.c_act);
    kernels.gemm<double>(kStep, Trans::yes, Trans::no, 1.0, linalg::view(s.c_vir),
                         linalg::view(fock_response(*in.jk, 0.5 * (m + m.transpose()), s.c_occ, kernels)), 1.0,
                         linalg::view(lagrangian));
  }
  const Matrix z = solve_zvector(*in.jk, s, -lagrangian, in.zvector_convergence, out, kernels);
  lap("z-vector");

  // Step 5: the relaxed and energy-weighted densities (W's Fock response from the Z-vector's kept products, then
  // released).
  const Matrix rotations = gradient_detail::relaxed_rotations(z, z_frozen, s);
  Matrix p_mo = rotations;
  p_mo.block(nf, nf, na, na) += amp.p_oo;
  p_mo.block(no, no, nv, nv) += amp.p_vv;
  const Matrix w = gradient_detail::energy_weighted_density(
      x, z, z_frozen,
      in.jk->occupied_rotation_response(s.c_vir, s.c_occ, rotations.block(no, 0, nv, no),
                                        rotations.topLeftCorner(no, no), kernels),
      s);
  in.jk->release_response();
  const DensityCorrection correction{sandwich(kernels, s.c, p_mo, s.c), sandwich(kernels, s.c, w, s.c)};
  const Matrix unrelaxed =
      sandwich(kernels, s.c_act, amp.p_oo, s.c_act) + sandwich(kernels, s.c_vir, amp.p_vv, s.c_vir);
  lap("densities");

  // The gradient: the SCF's form with the corrected densities, beside the non-separable terms.
  gradient_detail::add_separable(in, {&s}, correction, {unrelaxed}, out, kernels);
  lap("separable");
  return out;
}

}  // namespace dfmp2::chem
