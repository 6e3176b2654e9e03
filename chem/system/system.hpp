#pragma once
// The system room's public header (README "Layout"): molecules and their basis sets.
// Code outside chem/ includes this header, not the room's others.
#include "chem/system/molecule.hpp"  // IWYU pragma: export
#include "chem/system/basis_set.hpp"  // IWYU pragma: export
