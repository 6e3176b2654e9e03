#pragma once
// One-electron properties of a density (the SCF's, or DF-MP2's unrelaxed or relaxed one; chem/gradient gives them):
// multipole moments, Mulliken and Loewdin charges, natural orbitals and their occupations, the electrostatic
// potential at points and charges fitted to it. Atomic units throughout (e a0, e a0^2, Eh/e, bohr) unless a name
// says otherwise; positions of atoms in their Molecule's angstrom.
#include <array>
#include <string>
#include <vector>

#include "chem/system/basis_set.hpp"
#include "chem/system/molecule.hpp"
#include "linalg/matrix_view.hpp"

namespace dfmp2::chem {

// A density by spin, AO (symmetric, nbf x nbf): a closed shell's are the halves of its own.
struct SpinDensities {
  linalg::Matrix alpha, beta;
  linalg::Matrix total() const { return alpha + beta; }
};

// The dipole (e a0) and the second moment sum q r_i r_j (e a0^2, xx, xy, xz, yy, yz, zz) of the nuclei and
// electrons about `origin` (bohr), ghost atoms without nuclei. Psi4 prints the second moment as its "Quadrupole
// Moment" and the traceless form (3 Q_ij - delta_ij tr Q) / 2 as its "Traceless Quadrupole Moment".
struct Multipoles {
  std::array<double, 3> origin{};
  std::array<double, 3> dipole{};
  std::array<double, 6> quadrupole{};
  std::array<double, 6> traceless_quadrupole() const;
};
Multipoles multipoles(const Molecule& molecule, const BasisSet& basis, const linalg::Matrix& density,
                      const std::array<double, 3>& origin = {});

// Each atom's electron populations (alpha and beta) and charge, nuclear charge less both populations (ghost atoms:
// their basis functions' populations, no nucleus).
struct AtomicCharges {
  std::vector<double> alpha, beta, charge;
};
// Mulliken's: the population of each function is (D S)_mm.
AtomicCharges mulliken_charges(const Molecule& molecule, const BasisSet& basis, const SpinDensities& density,
                               const linalg::Matrix& overlap);
// Loewdin's: (S^1/2 D S^1/2)_mm.
AtomicCharges lowdin_charges(const Molecule& molecule, const BasisSet& basis, const SpinDensities& density,
                             const linalg::Matrix& overlap);

// The eigenvectors of a density in the orthonormal space of `orbitals` (the SCF's molecular orbitals, C^T S C = 1):
// AO coefficients (nbf x nmo), occupations largest first (0..1 for one spin, 0..2 for both).
struct NaturalOrbitals {
  linalg::Matrix coefficients;
  linalg::Vector occupations;
};
NaturalOrbitals natural_orbitals(const linalg::Matrix& density, const linalg::Matrix& overlap,
                                 const linalg::Matrix& orbitals);

// The electrostatic potential (Eh/e) of the nuclei and the electrons of `density` at each of `points` (bohr).
std::vector<double> electrostatic_potential(const Molecule& molecule, const BasisSet& basis,
                                            const linalg::Matrix& density,
                                            const std::vector<std::array<double, 3>>& points);

// Points on Merz-Kollman shells (Singh and Kollman, J. Comput. Chem. 5, 129 (1984); Besler, Merz and Kollman, ibid.
// 11, 431 (1990)): on spheres of each atom's van der Waals radius times each of `scales`, `density` points per
// square angstrom spread evenly (a golden-angle spiral), those inside another atom's sphere of the same scale left
// out; ghost atoms take no part. Bohr. Radii: Merz and Kollman's for H, C, N, O, F, P, S, Cl, Bondi's (Mantina's
// where Bondi gives none) for the other elements up to krypton.
struct EspGridOptions {
  std::vector<double> scales = {1.4, 1.6, 1.8, 2.0};
  double density = 1.0;  // points per angstrom^2
};
std::vector<std::array<double, 3>> merz_kollman_points(const Molecule& molecule, const EspGridOptions& options = {});

// Atomic charges q_A that best reproduce `potential` (Eh/e) at `points` (bohr), sum_k (V_k - sum_A q_A / r_kA)^2
// least, with sum_A q_A the molecule's charge and, when given, sum_A q_A R_A the dipole `dipole` (e a0, origin 0),
// by Lagrange multipliers; ghost atoms carry none. rms_residual: sqrt(mean of the squared misfit), relative: over
// the root mean square of the potential.
struct FittedCharges {
  std::vector<double> charges;
  std::array<double, 3> dipole{};  // of the charges, e a0 about the origin
  double rms_residual = 0, relative_residual = 0;
  bool dipole_constrained = false;
};
FittedCharges fit_charges(const Molecule& molecule, const std::vector<std::array<double, 3>>& points,
                          const std::vector<double>& potential, const std::array<double, 3>* dipole = nullptr);

// What one density gives (driver: properties reports the SCF's, DF-MP2's unrelaxed and its relaxed density): its
// multipoles about `origin`, Mulliken and Loewdin charges, and natural orbitals of each spin and of both.
struct DensityProperties {
  SpinDensities density;
  Multipoles multipoles;
  AtomicCharges mulliken, lowdin;
  NaturalOrbitals natural_alpha, natural_beta, natural;
};
DensityProperties density_properties(const Molecule& molecule, const BasisSet& basis, SpinDensities density,
                                     const linalg::Matrix& overlap, const linalg::Matrix& orbitals,
                                     const std::array<double, 3>& origin = {});

}  // namespace dfmp2::chem
