// Effective core potentials: their one-electron matrix and its nuclear derivatives, through libecpint (the library
// Psi4 adopted), on the shells libint2 normalises, so that the matrix adds to libint2's T + V term by term.
//
// libecpint computes over unnormalised cartesian primitives x^i y^j z^k exp(-a r^2) with the coefficients it is
// given, in the canonical order (xx, xy, xz, yy, yz, zz): handed libint2's own contraction coefficients (which carry
// each primitive's x^l normalisation and the contraction's), its cartesian blocks are libint2's, and libint2's solid
// harmonics transform turns them into the pure functions. tests/unit checks both against libint2's overlap (a
// potential whose local part is a constant d times exp(-a r^2) with a -> 0 is d times the overlap).
#include <fmt/format.h>
#include <libecpint/ecpint.hpp>

#include "chem/integrals/libint_support.hpp"

namespace dfmp2::chem {
namespace {

using libint_support::LibintBasis;
using libint_support::thread_count;
using libint_support::to_libint;

// The basis's shells as libecpint's, with libint2's coefficients.
std::vector<libecpint::GaussianShell> ecp_shells(const LibintBasis& b) {
  std::vector<libecpint::GaussianShell> out;
  out.reserve(b.shells.size());
  for (const libint2::Shell& s : b.shells) {
    libecpint::GaussianShell g(std::array<double, 3>{s.O[0], s.O[1], s.O[2]}, s.contr[0].l);
    for (std::size_t p = 0; p < s.alpha.size(); ++p) g.addPrim(s.alpha[p], s.contr[0].coeff[p]);
    out.push_back(g);
  }
  return out;
}

// The potentials on the atoms that are real in `molecule`: a ghost carries the functions of its element, not its
// core (a fragment in the complex's basis shares the complex's BasisSet, potentials included). Psi4 1.3.2 keeps a
// ghost's potential (its issue 1968); dfmp2 does not.
std::vector<const CorePotential*> acting_potentials(const BasisSet& basis, const Molecule& molecule) {
  std::vector<const CorePotential*> out;
  for (const CorePotential& c : basis.core_potentials) {
    if (!molecule.atoms.at(static_cast<std::size_t>(c.atom)).ghost) out.push_back(&c);
  }
  return out;
}

std::vector<libecpint::ECP> ecp_potentials(const std::vector<const CorePotential*>& potentials) {
  std::vector<libecpint::ECP> out;
  for (const CorePotential* p : potentials) {
    const CorePotential& c = *p;
    libecpint::ECP u(c.center.data());
    for (const CorePotentialTerm& t : c.terms) u.addPrimitive(t.power, t.l, t.exponent, t.coefficient);
    out.push_back(u);
  }
  return out;
}

int max_potential_l(const BasisSet& basis) {
  int l = 0;
  for (const CorePotential& c : basis.core_potentials) l = std::max(l, c.lmax);
  return l;
}

// A cartesian shell-pair block (row-major, libecpint's) as the basis's functions: pure rows and columns where the
// shells are pure (l >= 2), through libint2's solid harmonics.
std::vector<double> to_basis_functions(const libint2::Shell& sa, const libint2::Shell& sb,
                                       const std::vector<double>& cartesian) {
  const int la = sa.contr[0].l, lb = sb.contr[0].l;
  const bool pa = sa.contr[0].pure && la >= 2, pb = sb.contr[0].pure && lb >= 2;
  if (!pa && !pb) return cartesian;
  std::vector<double> out(sa.size() * sb.size());
  if (pa && pb) {
    libint2::solidharmonics::tform(la, lb, cartesian.data(), out.data());
  } else if (pa) {
    libint2::solidharmonics::tform_rows(la, sb.size(), cartesian.data(), out.data());
  } else {
    libint2::solidharmonics::tform_cols(sa.size(), lb, cartesian.data(), out.data());
  }
  return out;
}

void check_angular_momentum(const LibintBasis& b, const BasisSet& basis) {
  if (b.max_l > LIBECPINT_MAX_L || max_potential_l(basis) > LIBECPINT_MAX_L) {
    throw UnsupportedError(
        fmt::format("integrals: core potentials over '{}' need angular momentum {} (basis) and {} (potential), "
                    "beyond libecpint's {}",
                    basis.name, b.max_l, max_potential_l(basis), LIBECPINT_MAX_L));
  }
}

}  // namespace

linalg::Matrix core_potential_matrix(const BasisSet& basis, const Molecule& molecule) {
  const auto nbf = static_cast<linalg::Index>(basis.nbf());
  linalg::Matrix u = linalg::Matrix::Zero(nbf, nbf);
  const std::vector<const CorePotential*> acting = acting_potentials(basis, molecule);
  if (acting.empty()) return u;
  const LibintBasis b = to_libint(basis);
  check_angular_momentum(b, basis);
  const std::vector<libecpint::GaussianShell> shells = ecp_shells(b);
  const std::vector<libecpint::ECP> potentials = ecp_potentials(acting);
  const int nsh = b.nshells();
#pragma omp parallel num_threads(thread_count())
  {
    const libecpint::ECPIntegral engine(b.max_l, max_potential_l(basis), 0);
    libecpint::TwoIndex<double> block;
#pragma omp for schedule(dynamic)
    for (int s1 = 0; s1 < nsh; ++s1) {
      const auto& sa = b.shells[static_cast<std::size_t>(s1)];
      for (int s2 = 0; s2 <= s1; ++s2) {
        const auto& sb = b.shells[static_cast<std::size_t>(s2)];
        std::vector<double> sum(static_cast<std::size_t>(shells[static_cast<std::size_t>(s1)].ncartesian() *
                                                         shells[static_cast<std::size_t>(s2)].ncartesian()),
                                0.0);
        for (const libecpint::ECP& potential : potentials) {
          engine.compute_shell_pair(potential, shells[static_cast<std::size_t>(s1)],
                                    shells[static_cast<std::size_t>(s2)], block);
          for (std::size_t k = 0; k < sum.size(); ++k) sum[k] += block.data[k];
        }
        const std::vector<double> values = to_basis_functions(sa, sb, sum);
        const auto o1 = static_cast<linalg::Index>(b.offsets[static_cast<std::size_t>(s1)]);
        const auto o2 = static_cast<linalg::Index>(b.offsets[static_cast<std::size_t>(s2)]);
        const auto n1 = static_cast<linalg::Index>(sa.size()), n2 = static_cast<linalg::Index>(sb.size());
        for (linalg::Index i = 0; i < n1; ++i) {
          for (linalg::Index j = 0; j < n2; ++j) {
            u(o1 + i, o2 + j) = u(o2 + j, o1 + i) = values[static_cast<std::size_t>(i * n2 + j)];
          }
        }
      }
    }
  }
  return u;
}

linalg::Matrix core_potential_gradient(const BasisSet& basis, const Molecule& molecule, const linalg::Matrix& density) {
  const auto natoms = static_cast<linalg::Index>(molecule.atoms.size());
  linalg::Matrix gradient = linalg::Matrix::Zero(natoms, 3);
  const std::vector<const CorePotential*> acting = acting_potentials(basis, molecule);
  if (acting.empty()) return gradient;
  const LibintBasis b = to_libint(basis);
  check_angular_momentum(b, basis);
  const std::vector<libecpint::GaussianShell> shells = ecp_shells(b);
  const std::vector<libecpint::ECP> potentials = ecp_potentials(acting);
  const int nsh = b.nshells();
  // Per bra shell, summed in shell order afterwards: the same sum whatever the threads.
  std::vector<linalg::Matrix> by_shell(static_cast<std::size_t>(nsh), linalg::Matrix::Zero(natoms, 3));
#pragma omp parallel num_threads(thread_count())
  {
    const libecpint::ECPIntegral engine(b.max_l, max_potential_l(basis), 1);
    std::array<libecpint::TwoIndex<double>, 9> blocks;
#pragma omp for schedule(dynamic)
    for (int s1 = 0; s1 < nsh; ++s1) {
      linalg::Matrix& g = by_shell[static_cast<std::size_t>(s1)];
      const auto& sa = b.shells[static_cast<std::size_t>(s1)];
      const auto o1 = static_cast<linalg::Index>(b.offsets[static_cast<std::size_t>(s1)]);
      const auto n1 = static_cast<linalg::Index>(sa.size());
      for (int s2 = 0; s2 <= s1; ++s2) {
        const auto& sb = b.shells[static_cast<std::size_t>(s2)];
        const auto o2 = static_cast<linalg::Index>(b.offsets[static_cast<std::size_t>(s2)]);
        const auto n2 = static_cast<linalg::Index>(sb.size());
        const double pair_weight = s2 < s1 ? 2.0 : 1.0;  // the (s2, s1) block by symmetry
        const std::array<linalg::Index, 2> shell_atoms{basis.shells[static_cast<std::size_t>(s1)].atom,
                                                       basis.shells[static_cast<std::size_t>(s2)].atom};
        for (std::size_t c = 0; c < potentials.size(); ++c) {
          engine.compute_shell_pair_derivative(potentials[c], shells[static_cast<std::size_t>(s1)],
                                               shells[static_cast<std::size_t>(s2)], blocks);
          // Blocks Ax, Ay, Az, Bx, By, Bz, Cx, Cy, Cz: the derivative through shell A's centre, B's and the
          // potential's.
          const std::array<linalg::Index, 3> centre_atoms{shell_atoms[0], shell_atoms[1], acting[c]->atom};
          for (int centre = 0; centre < 3; ++centre) {
            for (int d = 0; d < 3; ++d) {
              const std::vector<double> values = to_basis_functions(sa, sb, blocks[static_cast<std::size_t>(3 * centre + d)].data);
              double t = 0;
              for (linalg::Index i = 0; i < n1; ++i)
                for (linalg::Index j = 0; j < n2; ++j) t += density(o1 + i, o2 + j) * values[static_cast<std::size_t>(i * n2 + j)];
              g(centre_atoms[static_cast<std::size_t>(centre)], d) += pair_weight * t;
            }
          }
        }
      }
    }
  }
  for (const auto& g : by_shell) gradient += g;
  return gradient;
}

}  // namespace dfmp2::chem
