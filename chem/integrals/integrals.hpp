#pragma once
// Molecular integrals over Gaussian shells, computed with libint2. This header does not include libint2 (its
// header costs ~25 s per translation unit); only the files of chem/integrals/ do, through libint_support.hpp.
//
// Layouts: matrices are column-major nbf x nbf (symmetric, both triangles filled). Functions are in shell order
// (BasisSet::shell_offsets), with libint2's standard ordering inside a shell: s; p as x, y, z (shells with l < 2
// are always cartesian); l >= 2 pure as solid harmonics m = -l..l, cartesian as xx, xy, xz, yy, yz, zz, ...
// Contracted functions are normalised to unity (libint2::Shell, as Psi4); cartesian components carry the
// normalisation of x^l. All work is threaded with OpenMP (omp_get_max_threads() threads, one libint2 engine each)
// over shell pairs or auxiliary shells.
//
// A basis with more angular momentum than the libint2 build supports (four-centre l <= 5, two- and three-centre
// auxiliary l <= 7 with Debian's libint2 2.7) is an UnsupportedError; a malformed shell std::invalid_argument.
#include <array>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include "chem/system/basis_set.hpp"
#include "chem/system/molecule.hpp"
#include "chem/integrals/three_index_source.hpp"
#include "linalg/comm.hpp"
#include "linalg/dense_grid.hpp"
#include "linalg/matrix_view.hpp"

namespace dfmp2::chem {

// The highest angular momentum this build's libint2 computes for an orbital basis (one-electron, three-centre and
// four-centre integrals) and for a fitting basis ((P|Q) and (P|mn)); load_basis refuses shells above them.
int max_orbital_angular_momentum();
int max_fitting_angular_momentum();

double nuclear_repulsion_energy(const Molecule& molecule);

linalg::Matrix overlap_matrix(const BasisSet& basis);
// <m|n> between the functions of two basis sets (rows of `rows`, columns of `cols`): to project orbitals from one into
// the other.
linalg::Matrix overlap_matrix(const BasisSet& rows, const BasisSet& cols);
linalg::Matrix kinetic_matrix(const BasisSet& basis);
// Attraction to the nuclei of `molecule` (point charges at the atoms, bohr).
linalg::Matrix nuclear_attraction_matrix(const BasisSet& basis, const Molecule& molecule);
// The electrons' energy in the potential of point charges q_c at positions (bohr): -sum_c q_c <m| 1/|r - R_c| |n>.
linalg::Matrix point_charge_matrix(const BasisSet& basis,
                                   const std::vector<std::pair<double, std::array<double, 3>>>& charges);

// The effective core potentials of the basis (BasisSet::core_potentials) on the atoms that are real in `molecule`
// (a ghost has no core: a fragment in the complex's basis feels none of the others' potentials), summed: libecpint's
// integrals (chem/integrals/core_potentials.cpp) in this header's layout. Zero without potentials.
linalg::Matrix core_potential_matrix(const BasisSet& basis, const Molecule& molecule);
// sum_mn D_mn dU_mn/dR for a symmetric density D: through the basis functions' centres and the potentials' (Eh/bohr,
// a row per atom of `molecule`).
linalg::Matrix core_potential_gradient(const BasisSet& basis, const Molecule& molecule, const linalg::Matrix& density);

// Gradients (Eh/bohr, one row per atom of `molecule`, columns x, y, z), for the SCF and DF-MP2 gradients.
// The one-electron part: sum_mn D_mn d(T + V)_mn/dR - sum_mn W_mn dS_mn/dR for a symmetric density D and
// energy-weighted density W, with the nuclei's own motion in V (Hellmann-Feynman) included. libint2 2.7 as Debian
// builds it has no one-body derivative integrals, so the derivative of each shell is taken as the shells of l + 1
// and l - 1 its centre derivative is made of, whose ordinary integrals libint2 computes; the nuclei's term follows
// from translational invariance. Checked against finite differences of the integrals (tests/unit).
// The basis's effective core potentials' derivative (core_potential_gradient) is included.
// With point charges around the molecule (`external`, ScfOptions::external_charges), their attraction too, and one
// more row per charge after the atoms': the derivative with respect to its position.
using PointCharges = std::vector<std::pair<double, std::array<double, 3>>>;  // (q, position in bohr)
linalg::Matrix one_electron_gradient(const BasisSet& basis, const Molecule& molecule, const linalg::Matrix& density,
                                     const linalg::Matrix& energy_weighted, const PointCharges& external = {});
// d V_nn / dR of the nuclear repulsion energy (ghost atoms carry no charge), with the nuclei's interaction with the
// point charges `external` (their rows after the atoms').
linalg::Matrix nuclear_repulsion_gradient(const Molecule& molecule, const PointCharges& external = {});
// sum_P sum_mn d(P|mn)/dR R^P_mn for a three-index density R symmetric in m and n, through every centre (P's, m's
// and n's atoms): `density(p0, p1, out)` writes R for the auxiliary functions [p0, p1) of one auxiliary shell,
// out[((P - p0) nbf + m) nbf + n], so that no more than a shell's worth is held. libint2's three-centre first
// derivatives; `natoms` rows.
// With `mine`, only the auxiliary shells whose functions lie in [first, last) (one rank's, for a sum over the ranks).
struct AuxFunctions {
  linalg::Index first = 0, last = std::numeric_limits<linalg::Index>::max();
};
linalg::Matrix three_center_gradient(const BasisSet& aux, const BasisSet& basis, linalg::Index natoms,
                                     const std::function<void(linalg::Index, linalg::Index, double*)>& density,
                                     const AuxFunctions& mine = {});
// The same for `count` densities in one pass over the derivative integrals: `densities(p0, p1, out)` writes density
// k's block at out + k (p1 - p0) nbf^2; one gradient per density.
std::vector<linalg::Matrix> three_center_gradients(
    const BasisSet& aux, const BasisSet& basis, linalg::Index natoms, int count,
    const std::function<void(linalg::Index, linalg::Index, double*)>& densities, const AuxFunctions& mine = {});
// The densities of a two-electron energy sum_mn P_mn J(D)_mn - sum_c sum_mn P_c,mn K(X_c)_mn (chem/gradient/
// scf_gradient.hpp): `coulomb` D (or P), `exchange` the X_c (or P_c), one per exchange channel (RHF: one, X = D/2;
// UHF: the alpha and the beta density).
struct FourCenterDensities {
  linalg::Matrix coulomb;
  std::vector<linalg::Matrix> exchange;
};
// d/dR of that energy over the exact four-centre integrals, the densities symmetric and held fixed: the exact SCF's
// two-electron gradient with P = D/2 and P_c = w_c X_c (RHF: w = 1; UHF: 1/2), a correlated method's separable part
// with its relaxed densities added. Integral-direct over the unique shell quartets (libint2's four-centre
// first derivatives). One gradient per response, in one pass over the integrals.
std::vector<linalg::Matrix> four_center_gradients(const BasisSet& basis, linalg::Index natoms,
                                                 const FourCenterDensities& density,
                                                 const std::vector<FourCenterDensities>& responses);
// <m| r - origin |n> for x, y and z (bohr): the dipole moment's integrals.
std::array<linalg::Matrix, 3> dipole_matrices(const BasisSet& basis, const std::array<double, 3>& origin);
// <m| (r - origin)_i (r - origin)_j |n> for ij = xx, xy, xz, yy, yz, zz (bohr^2): the quadrupole moment's.
std::array<linalg::Matrix, 6> second_moment_matrices(const BasisSet& basis, const std::array<double, 3>& origin);
// The electrons' electrostatic potential at each of `points` (bohr): -sum_mn D_mn <m| 1/|r - point| |n> for a
// symmetric AO density D (both spins). Threaded over the points.
std::vector<double> electronic_potential(const BasisSet& basis, const linalg::Matrix& density,
                                         const std::vector<std::array<double, 3>>& points);
// sum_PQ d(P|Q)/dR V_PQ for a symmetric V over an auxiliary basis (libint2's two-centre first derivatives).
linalg::Matrix metric_gradient(const BasisSet& aux, linalg::Index natoms, const linalg::Matrix& v);

// (P|Q) over an auxiliary basis, naux x naux.
linalg::Matrix coulomb_metric(const BasisSet& aux);
// This rank's block-cyclic part of the same (linalg/dense_grid.hpp): only the shell pairs that reach its tiles are
// computed, and no rank holds the whole matrix.
void coulomb_metric_tiles(const BasisSet& aux, linalg::DistributedMatrix& metric);

// (P|mn) computed a block of auxiliary functions at a time, so that no phase needs the whole tensor (naux x nbf^2
// doubles) unless its memory plan allows it. Blocks start and end on auxiliary shells (shell_starts()).
//
// Shell pairs (m, n), m >= n, whose Schwarz bound sqrt((mn|mn)) * max_P sqrt((P|P)) is below
// `screening_threshold` are left out, and so are shell triples whose bound sqrt((P|P)) * sqrt((mn|mn)) is (they are
// zero in the output). The significant function pairs m >= n of the kept shell pairs form the packed layout that
// the DF-J/K stores: npacked() values per auxiliary function instead of nbf^2.
class ThreeCenterEngine {
 public:
  // What an engine over these bases holds (its shell-pair data and packed index, at most), for the memory plan:
  // known from the bases alone, before any integral.
  static double bytes(const BasisSet& aux, const BasisSet& basis);

  ThreeCenterEngine(const BasisSet& aux, const BasisSet& basis, double screening_threshold = 1e-14);
  ~ThreeCenterEngine();
  ThreeCenterEngine(const ThreeCenterEngine&) = delete;
  ThreeCenterEngine& operator=(const ThreeCenterEngine&) = delete;

  linalg::Index naux() const;
  linalg::Index nbf() const;
  linalg::Index npacked() const;
  // First function of each auxiliary shell, and naux at the end (size nshells + 1).
  const std::vector<linalg::Index>& shell_starts() const;
  // Blocks [start, end) of whole auxiliary shells with at most `max_functions` functions each (a shell larger than
  // that is a block of its own).
  std::vector<std::pair<linalg::Index, linalg::Index>> blocks(linalg::Index max_functions) const;
  // Function indices (m, n), m >= n, of each packed position.
  const std::vector<int>& packed_m() const;
  const std::vector<int>& packed_n() const;

  // (P|mn) for P in [p0, p1) (shell boundaries): packed, out[(P - p0) * npacked() + k]; or square, both triangles,
  // out[(P - p0) * nbf^2 + m * nbf + n]. Threaded over the block's shells.
  void compute_packed(linalg::Index p0, linalg::Index p1, double* out) const;
  void compute_square(linalg::Index p0, linalg::Index p1, double* out) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// (P|mn) of molecule input for DF-MP2, computed by a ThreeCenterEngine block by block as DF-MP2 reads them: the
// whole AO tensor never exists. read_block() takes the blocks of blocks() (whole auxiliary shells).
class DirectThreeIndex final : public ThreeIndexSource {
 public:
  DirectThreeIndex(const BasisSet& aux, const BasisSet& basis) : engine_(aux, basis) {}
  ThreeIndexForm form() const override { return ThreeIndexForm::ao; }
  linalg::Index naux() const override { return engine_.naux(); }
  linalg::Index block_stride() const override { return engine_.nbf() * engine_.nbf(); }
  void read_block(linalg::Index p0, linalg::Index count, double* out) const override {
    engine_.compute_square(p0, p0 + count, out);
  }
  std::vector<std::pair<linalg::Index, linalg::Index>> blocks(linalg::Index max_functions) const override {
    return engine_.blocks(max_functions);
  }
  linalg::Index largest_block(linalg::Index max_functions) const override;
  const ThreeCenterEngine& engine() const { return engine_; }

 private:
  ThreeCenterEngine engine_;
};

// (P|mn) for all P, m, n: out has naux * nbf * nbf doubles in the integral file's row-major order,
// out[n + nbf*(m + nbf*P)], both (m, n) and (n, m) filled. Shell pairs (m, n) whose Schwarz bound
// sqrt((mn|mn)) * max_P sqrt((P|P)) is below `screening_threshold` are skipped (left zero), and so are shell
// triples whose bound sqrt((P|P)) * sqrt((mn|mn)) is (each Schwarz factor is the largest over the shell's
// or shell pair's functions). Threaded over auxiliary shells.
std::vector<double> three_center_integrals(const BasisSet& aux, const BasisSet& basis,
                                           double screening_threshold = 1e-14);

// All four-centre integrals (mn|ls) over every shell quartet (no symmetry, no screening): nbf^4 doubles,
// out[s + nbf*(l + nbf*(n + nbf*m))]. For tests and tiny bases only.
std::vector<double> four_center_integrals(const BasisSet& basis);

// Exact Coulomb and exchange matrices from the four-centre integrals, for a symmetric density D:
// J_mn = sum_ls (mn|ls) D_ls, K_mn = sum_ls (ml|ns) D_ls. Integral-direct or semi-direct over the unique shell
// quartets (8-fold permutational symmetry); nothing of size nbf^4 is formed.
//
// Screening: the shell pairs are sorted by their Schwarz factor sqrt(max (ab|ab)), so each bra pair's quartets
// end at the first ket pair whose bound q_bra q_ket is below `screening_threshold`; a quartet that passes is still
// skipped when q_bra q_ket times the largest |D| of the six shell blocks it contracts with is (density screening,
// which makes the incremental builds of an SCF cheap: there D is the change of the density).
//
// Semi-direct: the integrals of the first bra pairs (in the sorted order, whole pairs) that fit in `cache_bytes`
// are computed on the first build and kept; later builds contract them from memory and compute the rest again.
// Threaded over bra pairs with one J/K accumulator per thread.
class FourCenterJk {
 public:
  // What the object holds besides its cache (shell pairs, per-thread accumulators) for nbf functions and this
  // many threads: for the memory plan.
  static double fixed_bytes(const BasisSet& basis, int threads);

  // With `ranks` > 1, this object takes bra pairs rank, rank + ranks, ... of the sorted list (round robin, so each
  // rank gets large and small bras alike), caches only theirs, and its J and K are this rank's share of the sums.
  FourCenterJk(const BasisSet& basis, double cache_bytes, double screening_threshold = 1e-12, int rank = 0,
               int ranks = 1);
  ~FourCenterJk();
  FourCenterJk(const FourCenterJk&) = delete;
  FourCenterJk& operator=(const FourCenterJk&) = delete;

  // j and k are resized to nbf x nbf. Throws std::invalid_argument when D is not nbf x nbf.
  void compute(const linalg::Matrix& density, linalg::Matrix& j, linalg::Matrix& k);

  struct Stats {
    double quartets = 0;         // unique shell quartets that pass the Schwarz screening (this rank's bras)
    double integrals = 0;        // their integrals (doubles)
    double cached_integrals = 0; // of which kept in memory
    double cache_bytes = 0;      // what the cache holds (8 bytes an integral)
    double computed_last = 0;    // quartets computed by libint2 in the last build
    double skipped_last = 0;     // quartets skipped by density screening in the last build
  };
  const Stats& stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One direct build of FourCenterJk, nothing cached. For tests and one-off uses.
void exact_jk(const BasisSet& basis, const linalg::Matrix& density, linalg::Matrix& j, linalg::Matrix& k,
              double screening_threshold = 1e-14);

}  // namespace dfmp2::chem
