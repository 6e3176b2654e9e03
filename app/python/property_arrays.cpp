// driver: properties in the Python module (property_arrays.hpp): what JSON would only list, as NumPy arrays: AO
// matrices (nbf x nbf, orbitals nbf x nmo as columns) with the basis functions in libint2's order (the shells as the
// basis file lists them per atom; spherical functions m = -l..l), occupations and energies as vectors.
#include "app/python/property_arrays.hpp"

#include <pybind11/numpy.h>

#include <algorithm>
#include <string>

#include "chem/integrals/integrals.hpp"

namespace dfmp2::app {

namespace py = pybind11;

namespace {

py::array matrix(const linalg::Matrix& m) {
  py::array_t<double, py::array::f_style> out({m.rows(), m.cols()});
  std::copy_n(m.data(), m.size(), out.mutable_data());
  return out;
}

py::array vector(const linalg::Vector& v) {
  py::array_t<double> out(static_cast<py::ssize_t>(v.size()));
  std::copy_n(v.data(), v.size(), out.mutable_data());
  return out;
}

}  // namespace

py::dict property_arrays(const Calculation& calc) {
  const PropertiesRun& p = *calc.properties;
  py::dict a;
  for (const auto& [name, d] : {std::pair{"scf", &p.scf}, {"unrelaxed", &p.unrelaxed}, {"relaxed", &p.relaxed}}) {
    const std::string kind = name;
    a[(kind + "_density_alpha").c_str()] = matrix(d->density.alpha);
    a[(kind + "_density_beta").c_str()] = matrix(d->density.beta);
    a[(kind + "_natural_orbitals").c_str()] = matrix(d->natural.coefficients);
    a[(kind + "_natural_occupations").c_str()] = vector(d->natural.occupations);
  }
  for (const auto& [spin, no] : {std::pair{"alpha", &p.relaxed.natural_alpha}, {"beta", &p.relaxed.natural_beta}}) {
    a[(std::string("relaxed_natural_orbitals_") + spin).c_str()] = matrix(no->coefficients);
    a[(std::string("relaxed_natural_occupations_") + spin).c_str()] = vector(no->occupations);
  }
  const chem::ScfResult& scf = calc.reference.molecule()->scf;
  a["scf_orbitals"] = matrix(scf.mo_coefficients);  // UHF: alpha; ROHF: its alpha semicanonical ones
  a["scf_orbital_energies"] = vector(scf.orbital_energies);
  a["overlap"] = matrix(chem::overlap_matrix(calc.reference.molecule()->basis));
  return a;
}

}  // namespace dfmp2::app
