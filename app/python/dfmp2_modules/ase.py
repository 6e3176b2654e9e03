"""dfmp2.ase: an ASE calculator for DF-MP2 energies, forces and the relaxed dipole moment.

    from ase.optimize import BFGS
    from dfmp2.ase import DFMP2
    atoms.calc = DFMP2(basis="cc-pvdz", frozen_core=True)
    BFGS(atoms).run(fmax=1e-3)

Every keyword but `charge` and `multiplicity` is a dfmp2 input key (README "Input keys": basis, aux_basis, scf,
frozen_core, memory, threads, backends, ...), passed to dfmp2.run() as the input mapping; the molecule is the
Atoms' symbols and positions. Forces and the dipole come from `driver: gradient` (closed-shell RHF only: an
open-shell molecule is a dfmp2.InputError), the energy alone from `driver: energy`. Units are ASE's: eV, eV/A, e A.
"""
import numpy as np
from ase.calculators.calculator import Calculator, all_changes
from ase.units import Bohr, Hartree

import dfmp2


class DFMP2(Calculator):
    implemented_properties = ["energy", "forces", "dipole"]
    default_parameters = {"basis": "cc-pvdz", "charge": 0, "multiplicity": 1}

    def __init__(self, **kwargs):
        Calculator.__init__(self, **kwargs)
        self.last_results_file = None  # the dfmp2.run() results of the last calculation (QCSchema AtomicResult)

    def input_mapping(self, atoms, driver):
        keys = dict(self.parameters)
        charge, multiplicity = keys.pop("charge"), keys.pop("multiplicity")
        xyz = "".join(f"{s} {x:.12f} {y:.12f} {z:.12f}\n"
                      for s, (x, y, z) in zip(atoms.get_chemical_symbols(), atoms.get_positions()))
        return {"molecule": {"xyz": xyz, "units": "angstrom", "charge": charge, "multiplicity": multiplicity},
                "driver": driver, **keys}

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        Calculator.calculate(self, atoms, properties, system_changes)
        gradient = "forces" in properties or "dipole" in properties
        r = dfmp2.run(self.input_mapping(self.atoms, "gradient" if gradient else "energy"))
        self.last_results_file = r
        self.results["energy"] = r["properties"]["return_energy"] * Hartree
        if gradient:
            g = np.array(r["return_result"], dtype=float).reshape(-1, 3)
            self.results["forces"] = -g * Hartree / Bohr
            self.results["dipole"] = np.array(r["properties"]["mp2_dipole_moment"]) * Bohr
