// The sizes that set a molecule's DF-SCF and DF-MP2 cost, without any SCF: orbital and fitting basis functions,
// occupied orbitals, and the significant function pairs (m >= n) of the three-index integrals after the same
// Schwarz screening the runs use (ThreeCenterEngine, for the JK and the MP2 fitting bases). For the MPI scaling
// model (bench/mpi_model.py), which predicts clusters too large to run here.
//
//   bench_problem_size INPUT.yaml     # a molecule input; prints one JSON object
#include <fmt/format.h>

#include <chrono>
#include <iostream>

#include "app/input.hpp"
#include "chem/system/basis_set.hpp"
#include "chem/integrals/integrals.hpp"
#include "chem/scf/scf.hpp"
#include "linalg/errors.hpp"

int main(int argc, char** argv) {
  using namespace dfmp2;
  if (argc != 2) {
    std::cerr << "usage: bench_problem_size INPUT.yaml (a molecule input)\n";
    return 2;
  }
  try {
    const app::Input in = app::read_input(argv[1]);
    if (!in.molecule) throw InputError(fmt::format("{}: needs a molecule", argv[1]));
    const chem::Molecule& mol = *in.molecule;
    const auto basis = chem::load_basis(in.basis, mol, in.basis_dir, "basis", chem::max_orbital_angular_momentum());
    const auto aux = chem::load_basis(in.aux_basis, mol, in.basis_dir, "aux_basis", chem::max_fitting_angular_momentum());
    const auto jk = chem::load_basis(in.jk_basis, mol, in.basis_dir, "scf.jk_basis", chem::max_fitting_angular_momentum());
    const auto start = std::chrono::steady_clock::now();
    const chem::ThreeCenterEngine jk_engine(jk, basis), mp2_engine(aux, basis);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cout << fmt::format(
        "{{\"atoms\": {}, \"nbf\": {}, \"nocc\": {}, \"naux_ri\": {}, \"naux_jk\": {}, \"npacked_jk\": {}, "
        "\"npacked_ri\": {}, \"basis\": \"{}\", \"screening_seconds\": {:.2f}}}\n",
        mol.atoms.size(), basis.nbf(), chem::closed_shell_occupied(mol), aux.nbf(), jk.nbf(), jk_engine.npacked(),
        mp2_engine.npacked(), basis.name, seconds);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench_problem_size: " << e.what() << "\n";
    return 2;
  }
}
