// The analytic gradient of the UHF DF-MP2 energy, on the closed-shell gradient's steps, blocks, plan and ranks
// (chem/gradient/dfmp2_gradient.hpp has the method; this file what changes with two sets of orbitals).
//
// Each spin s has its own orbitals, fitted integrals B^s and pair amplitudes; the energy
//   E = c_os sum (ia|jb) t_ij^ab (i, a alpha; j, b beta) + c_ss sum_s 1/2 sum (ia|jb) (t_ij^ab - t_ij^ba) (all s)
// changes with the integrals as dE = 2 sum_s dB^s . Gamma^s. With each spin's amplitudes halved (T = T_uhf / 2,
// gradient_blocks.cpp's PairKind), the closed-shell formulas read for each spin give that spin's part of every term:
// the unrelaxed densities P^s, Gamma^s and V^s, y^s, X^s = dE/dU^s. What couples the spins is the Fock matrix:
// f^s = h + J[D^a + D^b] - K[D^s], whose change for symmetric changes M^s of the spins' densities, times the spin's
// occupied orbitals, is G^s[M] C^s_o = (2 J[M^a + M^b] - 2 K[M^s]) C^s_o (the closed shell's 4 J - 2 K with
// M^a = M^b). It enters X^s (the response to the unrelaxed densities), the Z-vector equations of both spins together
//   (e_a - e_i) z^s_ai + [C^s_v^T G^s[M] C^s_o]_ai = -(X^s_ai - X^s_ia),  M^s = (C^s_v z^s C^s_o^T + transpose) / 2
// (the UHF orbital Hessian A + B: symmetric positive definite for a stable UHF), and W^s's occupied block. The
// separable part is the UHF SCF gradient's form with each spin's relaxed density (chem::scf_gradients).
#include <fmt/format.h>

#include <array>
#include <functional>
#include <stdexcept>

#include "chem/gradient/dfmp2_gradient.hpp"
#include "chem/gradient/gradient_detail.hpp"
#include "chem/gradient/scf_gradient.hpp"
#include "chem/integrals/integrals.hpp"

namespace dfmp2::chem {

using linalg::Index;
using linalg::Kernels;
using linalg::Matrix;
using linalg::Stopwatch;
using linalg::Trans;

namespace gradient_detail {

using linalg::product;

Spins<Spaces> open_shell_spaces(const ScfResult& scf, int nfrozen) {
  return {spaces_of(scf.mo_coefficients, scf.orbital_energies, scf.nocc, nfrozen, "-alpha"),
          spaces_of(scf.mo_coefficients_beta, scf.orbital_energies_beta, scf.nocc_beta, nfrozen, "-beta")};
}

Spins<Matrix> spin_fock_response(JkBuilder& jk, const Spins<Matrix>& m, const Spins<Spaces>& s, Kernels& kernels) {
  Spins<Matrix> j, kc;
  for (int x = 0; x < 2; ++x) jk.compute_response(m[x], s[x].c_occ, j[x], kc[x]);
  const Matrix j_total = j[0] + j[1];
  Spins<Matrix> out;
  for (int x = 0; x < 2; ++x) {
    out[x] = std::move(kc[x]);
    kernels.gemm<double>(kStep, Trans::no, Trans::no, 2.0, linalg::view(j_total), linalg::view(s[x].c_occ), -2.0,
                         linalg::view(out[x]));
  }
  return out;
}


// Steps 1 and 2: each spin's rows of pairs, with both spins' B (the alpha pass keeps its own for the beta pass's
// opposite-spin pairs); each pass's P_ij of the other spin added to that spin's; X's parts from the integrals
// (y and the Lagrangian's active columns) and the gradient's explicit three-index and metric terms. Gamma released.
Spins<AmplitudePass> open_shell_explicit_terms(const DfMp2GradientInput& in, const Spins<Spaces>& s,
                                               const Ranks& ranks, Spins<Matrix>& x, DfMp2Gradient& out,
                                               const std::function<void(const char*)>& lap, Kernels& kernels) {
  const auto natoms = static_cast<Index>(in.molecule->atoms.size());
  Spins<AmplitudePass> amp;
  {
    Spins<FittedIntegrals> f;
    for (int spin = 0; spin < 2; ++spin)
      f[spin] = gradient_detail::fitted_integrals(*in.ri_basis, *in.basis, s[spin], in.plan, in.scratch_folder, ranks,
                                               kernels);
    lap("integrals");
    const gradient_detail::OppositeSpin beta{&f[1], &s[1], true}, alpha{&f[0], &s[0], false};
    amp[0] = gradient_detail::amplitude_pass(f[0], s[0], in.plan, in.scales, &beta, in.scratch_folder, ranks, kernels);
    amp[1] = gradient_detail::amplitude_pass(f[1], s[1], in.plan, in.scales, &alpha, in.scratch_folder, ranks, kernels);
    f[0].ov.reset();
    amp[0].p_oo += amp[1].p_oo_opposite;
    amp[1].p_oo += amp[0].p_oo_opposite;
    out.opposite_spin = 0.5 * (amp[0].opposite_spin + amp[1].opposite_spin);
    out.same_spin_alpha = amp[0].same_spin;
    out.same_spin_beta = amp[1].same_spin;
    out.same_spin = out.same_spin_alpha + out.same_spin_beta;
    for (int spin = 0; spin < 2; ++spin) {
      x[spin].block(s[spin].no, s[spin].no, s[spin].nv, s[spin].nv) = amp[spin].y_vv;
      x[spin].block(0, s[spin].no, s[spin].no, s[spin].nv) = amp[spin].y_ov;
    }
    lap("amplitudes");
    for (int spin = 0; spin < 2; ++spin)
      x[spin].middleCols(s[spin].nf, s[spin].na) =
          gradient_detail::active_lagrangian(*in.ri_basis, *in.basis, amp[spin], s[spin], ranks, kernels);
    lap("lagrangian");
    if (in.derivatives)
      out.gradient = three_index_gradient(*in.ri_basis, *in.basis, natoms, amp[0], s[0], ranks) +
                     three_index_gradient(*in.ri_basis, *in.basis, natoms, amp[1], s[1], ranks) +
                     metric_gradient(*in.ri_basis, natoms, -2.0 * (amp[0].v + amp[1].v));
    for (AmplitudePass& a : amp) {
      a.gamma.reset();
      a.v.resize(0, 0);
    }
    lap("non-separable");
  }
  return amp;
}

}  // namespace gradient_detail

namespace {

using gradient_detail::AmplitudePass;
using gradient_detail::FittedIntegrals;
using gradient_detail::kStep;
using gradient_detail::Ranks;
using gradient_detail::sandwich;
using gradient_detail::Spaces;
using gradient_detail::Spins;
using linalg::product;

// Both spins' occupied-virtual rotations as one column (alpha's then beta's), for the conjugate gradients.
Matrix packed(const Spins<Matrix>& z) {
  Matrix out(z[0].size() + z[1].size(), 1);
  out.topRows(z[0].size()) = z[0].reshaped();
  out.bottomRows(z[1].size()) = z[1].reshaped();
  return out;
}
Spins<Matrix> unpacked(const Matrix& column, const Spins<Spaces>& s) {
  Spins<Matrix> z;
  Index offset = 0;
  for (int x = 0; x < 2; ++x) {
    z[x] = column.middleRows(offset, s[x].nv * s[x].no).reshaped(s[x].nv, s[x].no);
    offset += s[x].nv * s[x].no;
  }
  return z;
}

// The Z-vector equations of both spins (the header's), by conjugate gradients preconditioned with the operator's
// diagonal (the orbital-energy differences, and the two-electron part where the kept products give it), to the SCF's
// d_convergence as the closed shell's; the J/K keeps both spins' products as the plan allows
// (JkBuilder::unrestricted_rotation_hessian).
Spins<Matrix> solve_zvector(JkBuilder& jk, const Spins<Spaces>& s, const Spins<Matrix>& rhs, double convergence,
                            DfMp2Gradient& out, Kernels& kernels) {
  const Spins<Matrix> delta = {gradient_detail::orbital_energy_differences(s[0]),
                               gradient_detail::orbital_energy_differences(s[1])};
  auto apply = [&](const Matrix& column) {
    const Spins<Matrix> z = unpacked(column, s);
    Spins<Matrix> applied = jk.unrestricted_rotation_hessian({&s[0].c_vir, &s[1].c_vir}, {&s[0].c_occ, &s[1].c_occ},
                                                             z, kernels);
    for (int spin = 0; spin < 2; ++spin) applied[spin] += delta[spin].cwiseProduct(z[spin]);
    return packed(applied);
  };
  // From the first product on, the exact diagonal where the kept products give it: (ai|ai) - (aa|ii) beside delta.
  auto sharper = [&]() -> Matrix {
    const Spins<Matrix> two_electron =
        jk.unrestricted_rotation_hessian_diagonal({&s[0].c_vir, &s[1].c_vir}, {&s[0].c_occ, &s[1].c_occ});
    if (two_electron[0].size() == 0) return Matrix();
    return packed({Matrix(delta[0] + two_electron[0]), Matrix(delta[1] + two_electron[1])});
  };
  const Matrix z = gradient_detail::conjugate_gradient(apply, packed(rhs), packed(delta), sharper, convergence, out);
  return unpacked(z, s);
}

}  // namespace

DfMp2Gradient uhf_dfmp2_gradient(const DfMp2GradientInput& in, Kernels& kernels) {
  const ScfResult& scf = *in.scf;
  if (scf.reference != ScfReference::uhf) throw std::logic_error("uhf_dfmp2_gradient: not a UHF SCF");
  DfMp2Gradient out;
  const Spins<Spaces> s = gradient_detail::open_shell_spaces(scf, in.nfrozen);
  const Ranks ranks{in.comm};
  Stopwatch clock;
  auto lap = [&](const char* step) { out.seconds.emplace_back(step, clock.seconds()); clock = Stopwatch(); };

  Spins<Matrix> x = {Matrix::Zero(s[0].nmo, s[0].nmo), Matrix::Zero(s[1].nmo, s[1].nmo)};
  Spins<AmplitudePass> amp = gradient_detail::open_shell_explicit_terms(in, s, ranks, x, out, lap, kernels);

  // Step 3: the Fock matrix's part of X: its orbital energies, and its response to the unrelaxed densities.
  Spins<Matrix> p_unrelaxed;
  for (int spin = 0; spin < 2; ++spin) {
    const Spaces& t = s[spin];
    x[spin].block(t.nf, t.nf, t.na, t.na) += 2.0 * t.e.segment(t.nf, t.na).asDiagonal() * amp[spin].p_oo;
    x[spin].block(t.no, t.no, t.nv, t.nv) += 2.0 * t.e.tail(t.nv).asDiagonal() * amp[spin].p_vv;
    p_unrelaxed[spin] = sandwich(kernels, t.c_act, amp[spin].p_oo, t.c_act) + sandwich(kernels, t.c_vir, amp[spin].p_vv, t.c_vir);
  }
  {
    const Spins<Matrix> response = gradient_detail::spin_fock_response(*in.jk, p_unrelaxed, s, kernels);
    for (int spin = 0; spin < 2; ++spin)
      x[spin].leftCols(s[spin].no) += product(kernels, kStep, s[spin].c, Trans::yes, response[spin], Trans::no);
  }

  // Step 4: the frozen-active rotations of each spin, then the Z-vector of both.
  Spins<Matrix> z_frozen, lagrangian;
  for (int spin = 0; spin < 2; ++spin) {
    const Spaces& t = s[spin];
    z_frozen[spin] = gradient_detail::frozen_rotations(x[spin], t);
    lagrangian[spin] = x[spin].block(t.no, 0, t.nv, t.no) - x[spin].block(0, t.no, t.no, t.nv).transpose();
  }
  if (in.nfrozen > 0) {
    Spins<Matrix> m;
    for (int spin = 0; spin < 2; ++spin) {
      const Matrix half = sandwich(kernels, s[spin].c.leftCols(s[spin].nf), z_frozen[spin], s[spin].c_act);
      m[spin] = 0.5 * (half + half.transpose());
    }
    const Spins<Matrix> response = gradient_detail::spin_fock_response(*in.jk, m, s, kernels);
    for (int spin = 0; spin < 2; ++spin)
      kernels.gemm<double>(kStep, Trans::yes, Trans::no, 1.0, linalg::view(s[spin].c_vir), linalg::view(response[spin]),
                           1.0, linalg::view(lagrangian[spin]));
  }
  in.jk->keep_rotation_products(in.plan.zvector_products, 2);
  const Spins<Matrix> z =
      solve_zvector(*in.jk, s, {-lagrangian[0], -lagrangian[1]}, in.zvector_convergence, out, kernels);
  in.jk->release_response();
  lap("z-vector");

  // Step 5: each spin's relaxed and energy-weighted densities.
  Spins<Matrix> rotations, rotations_ao;
  for (int spin = 0; spin < 2; ++spin) {
    rotations[spin] = gradient_detail::relaxed_rotations(z[spin], z_frozen[spin], s[spin]);
    rotations_ao[spin] = sandwich(kernels, s[spin].c, rotations[spin], s[spin].c);
  }
  const Spins<Matrix> rotation_response = gradient_detail::spin_fock_response(*in.jk, rotations_ao, s, kernels);
  DensityCorrection correction;
  for (int spin = 0; spin < 2; ++spin) {
    const Spaces& t = s[spin];
    const Matrix occupied_response = product(kernels, kStep, t.c_occ, Trans::yes, rotation_response[spin], Trans::no);
    const Matrix w = gradient_detail::energy_weighted_density(x[spin], z[spin], z_frozen[spin], occupied_response, t);
    const Matrix p_ao = rotations_ao[spin] + p_unrelaxed[spin];
    const Matrix w_ao = sandwich(kernels, t.c, w, t.c);
    if (spin == 0) {
      correction = {p_ao, w_ao, p_ao};
    } else {
      correction.density += p_ao;
      correction.energy_weighted += w_ao;
    }
  }
  lap("densities");

  gradient_detail::add_separable(in, {&s[0], &s[1]}, correction, {p_unrelaxed[0], p_unrelaxed[1]}, out,
                                 kernels);
  lap("separable");
  return out;
}

DfMp2Gradient dfmp2_gradient(const DfMp2GradientInput& in, Kernels& kernels) {
  switch (in.scf->reference) {
    case ScfReference::rhf: return rhf_dfmp2_gradient(in, kernels);
    case ScfReference::uhf: return uhf_dfmp2_gradient(in, kernels);
    case ScfReference::rohf: return rohf_dfmp2_gradient(in, kernels);
  }
  throw std::logic_error("dfmp2_gradient: an unknown reference");
}

}  // namespace dfmp2::chem
