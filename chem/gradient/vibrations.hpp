#pragma once
// Harmonic vibrational analysis from a Cartesian Hessian: the Hessian from central differences of analytic
// gradients, mass-weighted with the most abundant isotope of each element, translations and rotations projected out,
// frequencies (cm^-1; an imaginary one is given as negative) and normal modes.
//
// Constants are CODATA 2014 and masses AME2016, as Psi4 1.3 takes them from QCElemental, so that frequencies agree
// with Psi4's to the finite-difference error.
#include <functional>
#include <vector>

#include "chem/system/molecule.hpp"
#include "linalg/matrix_view.hpp"

namespace dfmp2::chem {

// The mass (amu) of the most abundant isotope of element `z` (H to Rn); UnsupportedError beyond.
double isotopic_mass(int z);

// The displacement of finite-difference Hessians (bohr): Psi4's findif DISP_SIZE default.
inline constexpr double kHessianStep = 0.005;

// The Hessian (3 natoms x 3 natoms, Eh/bohr^2, coordinate 3 a + x) from central differences of `gradient` (natoms x
// 3, Eh/bohr) at `molecule` displaced by +-step bohr along each Cartesian coordinate in turn, symmetrised.
// `gradient(displaced, k)` is called for k = 0 .. 6 natoms - 1 (coordinate k / 2, + then -).
linalg::Matrix finite_difference_hessian(const Molecule& molecule,
                                         const std::function<linalg::Matrix(const Molecule&, int)>& gradient,
                                         double step = kHessianStep);
// The same in two halves, so that the gradients can be computed anywhere (over MPI ranks): the 6 natoms displaced
// geometries in that order, and the Hessian from their gradients.
std::vector<Molecule> hessian_displacements(const Molecule& molecule, double step = kHessianStep);
linalg::Matrix hessian_from_gradients(const std::vector<linalg::Matrix>& gradients, double step = kHessianStep);

struct Vibrations {
  linalg::Vector frequencies;  // cm^-1, ascending; negative: imaginary
  linalg::Matrix modes;        // 3 natoms x nmodes: each mode's Cartesian displacements, normalised
  linalg::Vector reduced_masses;  // amu
  int projected = 0;  // translations and rotations projected out (3 for an atom, 5 for a linear molecule, else 6)
};

// Harmonic frequencies and normal modes of `hessian` at `molecule` (real atoms only: ghost atoms carry no mass and
// are refused with InputError).
Vibrations harmonic_analysis(const Molecule& molecule, const linalg::Matrix& hessian);

}  // namespace dfmp2::chem
