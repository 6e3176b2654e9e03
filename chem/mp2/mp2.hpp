#pragma once
// The mp2 room's public header (README "Layout"): DF-MP2 (options, plan, blocks, kernel), synthetic problems,
// interaction energies.
// Code outside chem/ includes this header, not the room's others.
#include "chem/mp2/dfmp2.hpp"  // IWYU pragma: export
#include "chem/mp2/synthetic.hpp"  // IWYU pragma: export
#include "chem/mp2/interaction.hpp"  // IWYU pragma: export
