// The analytic gradient of the ROHF-MBPT(2) energy as Psi4 defines it (semicanonical orbitals, singles included), on
// the UHF gradient's steps (uhf_dfmp2_gradient.cpp) with what the ROHF reference changes.
//
// The energy is ROHF-MBPT(2)'s in each spin's semicanonical orbitals C^s = C V^s (C the ROHF orbitals, V^s rotating
// within that spin's occupied and within its virtual orbitals so that its Fock matrix f^s is diagonal there):
//   E = sum_s sum_ia (f^s_ia)^2 / (e_i - e_a) + the UHF-form doubles in the semicanonical orbitals.
// It is the value, in these orbitals, of a functional that does not change when a spin's occupied (or virtual)
// orbitals rotate among themselves (the Hylleraas functional with the whole of f), so V^s's response to the geometry
// drops out, and the energy depends on the orbitals through the ROHF orbitals alone. Its orbital derivative
// X^s = dE/dU^s (dC^s = C^s U^s) is the UHF one with the whole f: 2 f^s P^s, P^s the unrelaxed density with the
// singles' blocks (P_ia = t_ia = f_ia / (e_i - e_a), P_ij -= sum_a t_ia t_ja, P_ab += sum_i t_ia t_ib), and the Fock
// response. In the ROHF orbitals it is X = sum_s V^s X^s V^sT, and the ROHF rotations kappa (doubly occupied d,
// singly occupied s, virtual v: the pairs s-d, v-d and v-s, dC = C kappa) see L = X - X^T.
// The orbital response is the ROHF's: its orbital gradient g_xy = 2 sum_s F^s_xy (n^s_y - n^s_x) (F^s = C^T F^s_AO C,
// n^s the spin's occupations) stays zero, so the Z-vector solves H z = -L with H = dg/dkappa, the ROHF orbital
// Hessian: for a rotation kappa, the spins' density changes dD^s = C (kappa N^s - N^s kappa) C^T, their Fock
// changes J[dD^a + dD^b] - K[dD^s], and dF^s = C^T dF^s_AO C + kappa^T F^s + F^s kappa. The Lagrangian's z g adds
// Y^s_xy = Y^s_yx = z_xy (n^s_y - n^s_x) to each spin's relaxed density, and W = (X_L + X_L^T) / 2 from the whole
// Lagrangian's orbital derivative X_L (X, 2 F^s Y^s and the Fock response to Y). With a frozen core (each spin's
// lowest semicanonical orbitals, as Psi4 freezes them) the energy also changes when a spin's frozen and active
// orbitals mix, which its semicanonical condition f^s_Ij = 0 fixes: each spin's multipliers z^s_Ij = -(X^s_Ij -
// X^s_jI) / (e_I - e_j), as the closed shell's, whose term z^s_Ij f^s_Ij adds 2 f^s Z^s and its Fock response to X^s
// and Z^s to the relaxed density (Z^s symmetric, z/2 in the frozen-active blocks); X^s is then stationary in every
// rotation within a spin's occupied orbitals, and the rest is as without.
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
using linalg::Vector;

namespace {

using gradient_detail::AmplitudePass;
using gradient_detail::kStep;
using gradient_detail::Ranks;
using gradient_detail::sandwich;
using gradient_detail::Spaces;
using gradient_detail::Spins;
using linalg::product;

// The ROHF orbitals and what the orbital response reads of them: each spin's occupations and Fock matrix (ROHF MO
// basis), and the rotation pairs (x > y of different classes: singly-doubly, virtual-doubly, virtual-singly).
struct RohfOrbitals {
  Matrix c;
  Index nd = 0, ns = 0, nmo = 0;  // doubly, singly occupied; orbitals
  Spins<Vector> n;
  Spins<Matrix> fock_ao, fock;
  Matrix pairs;  // 1 at (x, y) for each rotation pair, else 0
  int space(Index p) const { return p < nd ? 0 : p < nd + ns ? 1 : 2; }
};

RohfOrbitals rohf_orbitals(const ScfResult& scf, Kernels& kernels) {
  RohfOrbitals r;
  r.c = scf.rohf_coefficients;
  r.nmo = r.c.cols();
  r.nd = scf.nocc_beta;
  r.ns = scf.nocc - scf.nocc_beta;
  r.fock_ao = {scf.fock_alpha, scf.fock_beta};
  for (int spin = 0; spin < 2; ++spin) {
    r.n[spin] = Vector::Zero(r.nmo);
    r.n[spin].head(spin == 0 ? scf.nocc : scf.nocc_beta).setOnes();
    r.fock[spin] = sandwich(kernels, r.c.transpose(), r.fock_ao[spin], r.c.transpose());
  }
  r.pairs = Matrix::Zero(r.nmo, r.nmo);
  for (Index x = 0; x < r.nmo; ++x)
    for (Index y = 0; y < x; ++y)
      if (r.space(x) != r.space(y)) r.pairs(x, y) = 1.0;
  return r;
}

// Each spin's unrelaxed density in its semicanonical orbitals (nmo x nmo): the doubles' blocks and the singles',
// whose energy is added to out.singles.
Spins<Matrix> unrelaxed_densities(const Spins<AmplitudePass>& amp, const Spins<Spaces>& s, const Spins<Matrix>& f,
                                  DfMp2Gradient& out) {
  Spins<Matrix> p;
  out.singles = 0;
  for (int spin = 0; spin < 2; ++spin) {
    const Spaces& t = s[spin];
    p[spin] = Matrix::Zero(t.nmo, t.nmo);
    p[spin].block(t.nf, t.nf, t.na, t.na) = amp[spin].p_oo;
    p[spin].block(t.no, t.no, t.nv, t.nv) = amp[spin].p_vv;
    Matrix singles(t.na, t.nv);  // t_ia = f_ia / (e_i - e_a)
    for (Index i = 0; i < t.na; ++i)
      for (Index a = 0; a < t.nv; ++a)
        singles(i, a) = f[spin](t.nf + i, t.no + a) / (t.e(t.nf + i) - t.e(t.no + a));
    out.singles += singles.cwiseProduct(f[spin].block(t.nf, t.no, t.na, t.nv)).sum();
    p[spin].block(t.nf, t.no, t.na, t.nv) += singles;
    p[spin].block(t.no, t.nf, t.nv, t.na) += singles.transpose();
    p[spin].block(t.nf, t.nf, t.na, t.na) -= singles * singles.transpose();
    p[spin].block(t.no, t.no, t.nv, t.nv) += singles.transpose() * singles;
  }
  return p;
}

// The Fock matrices' change for each spin's symmetric density change m^s (AO), J[m^a + m^b] - K[m^s], whole.
Spins<Matrix> fock_changes(JkBuilder& jk, const Spins<Matrix>& m) {
  Spins<Matrix> j, k;
  const Matrix unit = Matrix::Identity(m[0].rows(), m[0].rows());
  for (int spin = 0; spin < 2; ++spin) jk.compute_response(m[spin], unit, j[spin], k[spin]);
  return {Matrix(j[0] + j[1] - k[0]), Matrix(j[0] + j[1] - k[1])};
}

// The ROHF orbital Hessian applied to the rotations z (their pairs, lower triangle): H z = d g / d kappa.
Matrix rohf_hessian(JkBuilder& jk, const RohfOrbitals& r, const Matrix& z, Kernels& kernels) {
  const Matrix kappa = z - z.transpose();
  Spins<Matrix> dd;
  for (int spin = 0; spin < 2; ++spin) {
    const Matrix d_mo = kappa * r.n[spin].asDiagonal() - r.n[spin].asDiagonal() * kappa;
    dd[spin] = sandwich(kernels, r.c, d_mo, r.c);
  }
  const Spins<Matrix> df = fock_changes(jk, dd);
  Matrix out = Matrix::Zero(r.nmo, r.nmo);
  for (int spin = 0; spin < 2; ++spin) {
    const Matrix df_mo = sandwich(kernels, r.c.transpose(), df[spin], r.c.transpose()) +
                         kappa.transpose() * r.fock[spin] + r.fock[spin] * kappa;
    for (Index x = 0; x < r.nmo; ++x)
      for (Index y = 0; y < x; ++y)
        out(x, y) += 2.0 * df_mo(x, y) * (r.n[spin](y) - r.n[spin](x));
  }
  return out.cwiseProduct(r.pairs);
}

// The Z-vector: H z = -L by conjugate gradients, preconditioned with H's orbital-energy part,
// 2 sum_s (F^s_xx - F^s_yy) (n^s_y - n^s_x), to the SCF's d_convergence as the closed shell's.
Matrix solve_zvector(JkBuilder& jk, const RohfOrbitals& r, const Matrix& lagrangian, double convergence,
                     DfMp2Gradient& out, Kernels& kernels) {
  Matrix diagonal = Matrix::Ones(r.nmo, r.nmo);
  for (Index a = 0; a < r.nmo; ++a)
    for (Index b = 0; b < a; ++b) {
      if (r.pairs(a, b) == 0) continue;
      double h = 0;
      for (int spin = 0; spin < 2; ++spin)
        h += 2.0 * (r.fock[spin](a, a) - r.fock[spin](b, b)) * (r.n[spin](b) - r.n[spin](a));
      diagonal(a, b) = h;
    }
  auto apply = [&](const Matrix& z) { return rohf_hessian(jk, r, z, kernels); };
  return gradient_detail::conjugate_gradient(apply, -lagrangian, diagonal, [] { return Matrix(); }, convergence, out);
}

}  // namespace

DfMp2Gradient rohf_dfmp2_gradient(const DfMp2GradientInput& in, Kernels& kernels) {
  const ScfResult& scf = *in.scf;
  if (scf.reference != ScfReference::rohf) throw std::logic_error("rohf_dfmp2_gradient: not an ROHF SCF");
  DfMp2Gradient out;
  const Spins<Spaces> s = gradient_detail::open_shell_spaces(scf, in.nfrozen);
  const Ranks ranks{in.comm};
  Stopwatch clock;
  auto lap = [&](const char* step) { out.seconds.emplace_back(step, clock.seconds()); clock = Stopwatch(); };

  Spins<Matrix> x = {Matrix::Zero(s[0].nmo, s[0].nmo), Matrix::Zero(s[1].nmo, s[1].nmo)};
  const Spins<AmplitudePass> amp = gradient_detail::open_shell_explicit_terms(in, s, ranks, x, out, lap, kernels);

  // X^s's Fock part with the whole f^s (its occupied-virtual block is not zero) and the singles' densities.
  const RohfOrbitals r = rohf_orbitals(scf, kernels);
  Spins<Matrix> f, p_ao;
  for (int spin = 0; spin < 2; ++spin) f[spin] = sandwich(kernels, s[spin].c.transpose(), r.fock_ao[spin],
                                                          s[spin].c.transpose());
  const Spins<Matrix> p = unrelaxed_densities(amp, s, f, out);
  for (int spin = 0; spin < 2; ++spin) {
    x[spin] += 2.0 * f[spin] * p[spin];
    p_ao[spin] = sandwich(kernels, s[spin].c, p[spin], s[spin].c);
  }
  const Spins<Matrix> unrelaxed = p_ao;
  {
    const Spins<Matrix> response = gradient_detail::spin_fock_response(*in.jk, p_ao, s, kernels);
    for (int spin = 0; spin < 2; ++spin)
      x[spin].leftCols(s[spin].no) += product(kernels, kStep, s[spin].c, Trans::yes, response[spin], Trans::no);
  }
  if (in.nfrozen > 0) {  // the frozen-active multipliers' terms, into X^s and the relaxed density (the header's)
    Spins<Matrix> z_frozen, z_ao;
    for (int spin = 0; spin < 2; ++spin) {
      const Matrix rotations = gradient_detail::relaxed_rotations(
          Matrix::Zero(s[spin].nv, s[spin].no), gradient_detail::frozen_rotations(x[spin], s[spin]), s[spin]);
      x[spin] += 2.0 * f[spin] * rotations;
      z_ao[spin] = sandwich(kernels, s[spin].c, rotations, s[spin].c);
    }
    const Spins<Matrix> response = gradient_detail::spin_fock_response(*in.jk, z_ao, s, kernels);
    for (int spin = 0; spin < 2; ++spin) {
      x[spin].leftCols(s[spin].no) += product(kernels, kStep, s[spin].c, Trans::yes, response[spin], Trans::no);
      p_ao[spin] += z_ao[spin];
    }
  }

  // In the ROHF orbitals: X = sum_s V^s X^s V^sT, V^s = C^T S C^s; the Lagrangian of the rotation pairs.
  const Matrix overlap = overlap_matrix(*in.basis);
  Matrix x_rohf = Matrix::Zero(r.nmo, r.nmo);
  for (int spin = 0; spin < 2; ++spin) {
    const Matrix v = product(kernels, kStep, r.c, Trans::yes, product(kernels, kStep, overlap, Trans::no, s[spin].c,
                                                                      Trans::no), Trans::no);
    x_rohf += sandwich(kernels, v, x[spin], v);
  }
  const Matrix lagrangian = (x_rohf - x_rohf.transpose()).cwiseProduct(r.pairs);

  const Matrix z = solve_zvector(*in.jk, r, lagrangian, in.zvector_convergence, out, kernels);
  lap("z-vector");

  // The relaxed densities: the unrelaxed ones and z's Y^s; W from the whole Lagrangian's orbital derivative.
  Spins<Matrix> y, y_ao;
  for (int spin = 0; spin < 2; ++spin) {
    y[spin] = Matrix::Zero(r.nmo, r.nmo);
    for (Index a = 0; a < r.nmo; ++a)
      for (Index b = 0; b < a; ++b)
        y[spin](a, b) = y[spin](b, a) = z(a, b) * (r.n[spin](b) - r.n[spin](a));
    y_ao[spin] = sandwich(kernels, r.c, y[spin], r.c);
  }
  const Spins<Matrix> y_response = fock_changes(*in.jk, y_ao);
  Matrix x_lagrangian = x_rohf;
  for (int spin = 0; spin < 2; ++spin) {
    x_lagrangian += 2.0 * r.fock[spin] * y[spin];
    const Index nocc = spin == 0 ? r.nd + r.ns : r.nd;
    x_lagrangian.leftCols(nocc) +=
        2.0 * sandwich(kernels, r.c.transpose(), y_response[spin], r.c.transpose()).leftCols(nocc);
  }
  const Matrix w = 0.25 * (x_lagrangian + x_lagrangian.transpose());  // half of X_L, which is symmetric
  DensityCorrection correction;
  correction.alpha = p_ao[0] + y_ao[0];
  correction.density = correction.alpha + p_ao[1] + y_ao[1];
  correction.energy_weighted = sandwich(kernels, r.c, w, r.c);
  lap("densities");

  gradient_detail::add_separable(in, {&s[0], &s[1]}, correction, {unrelaxed[0], unrelaxed[1]}, out, kernels);
  lap("separable");
  return out;
}

}  // namespace dfmp2::chem
