#pragma once
// The io room's public header (README "Layout"): HDF5 integral files, scratch files, temporaries beside kept
// outputs.
// Code outside chem/ includes this header, not the room's others.
#include "chem/io/integral_file.hpp"  // IWYU pragma: export
#include "chem/io/scratch.hpp"  // IWYU pragma: export
#include "chem/io/temporary_files.hpp"  // IWYU pragma: export
#include "chem/io/molden.hpp"  // IWYU pragma: export
