#pragma once
// driver: properties in the Python module: the densities and orbitals as NumPy arrays (README "Python module").
#include <pybind11/pybind11.h>

#include "app/run.hpp"

namespace dfmp2::app {

pybind11::dict property_arrays(const Calculation& calc);

}  // namespace dfmp2::app
