#pragma once
// The gradient room's public header (README "Layout"): SCF and DF-MP2 gradients, the vibrational analysis of Hessians.
// Code outside chem/ includes this header, not the room's others.
#include "chem/gradient/scf_gradient.hpp"  // IWYU pragma: export
#include "chem/gradient/dfmp2_gradient.hpp"  // IWYU pragma: export
#include "chem/gradient/vibrations.hpp"  // IWYU pragma: export
