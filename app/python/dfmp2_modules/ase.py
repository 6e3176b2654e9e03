"""dfmp2.ase: an ASE calculator for DF-MP2 energies, forces and the relaxed dipole moment.

    from ase.optimize import BFGS
    from dfmp2.ase import DFMP2
    atoms.calc = DFMP2(basis="cc-pvdz", frozen_core=True)
    BFGS(atoms).run(fmax=1e-3)

Every keyword but `charge` and `multiplicity` is a dfmp2 input key (README "Input keys": basis, aux_basis, scf,
frozen_core, method and the spin scales (DFMP2(method="scs-mp2") optimises on the SCS-MP2 surface), memory,
threads, backends, ...), passed to dfmp2.run() as the input mapping; the molecule is the Atoms' symbols and
positions. Forces and the dipole come from `driver: gradient` (RHF; UHF for an open shell, DFMP2(multiplicity=2)
optimising a radical; ROHF-MBPT(2) with reference="rohf", all electrons), the energy alone from `driver: energy`. Units are ASE's: eV, eV/A, e A.

With `fragments` (lists of consecutive atom indices covering the Atoms, as QCSchema's; optional
`fragment_charges` and `fragment_multiplicities`) and `interaction={"bsse": "cp"}`, the energy is the
counterpoise-corrected total energy and the forces its gradient (README "Counterpoise-corrected gradients"), so a
complex optimises on its CP-corrected surface; both come from `driver: gradient` then.

What the calculator owns is not a keyword: the molecule (the Atoms), the driver (the properties ASE asks for),
another source of integrals, and the results file (the calculator reads dfmp2.run()'s return value). Giving one is a dfmp2.InputError naming it, at construction or in
set(); so is a periodic Atoms object (dfmp2 computes isolated molecules).
"""
import numpy as np
from ase.calculators.calculator import Calculator, all_changes
from ase.units import Bohr, Hartree

import dfmp2


# The input keys the calculator sets itself, and where each comes from instead.
OWNED_KEYS = {
    "molecule": "the Atoms object (its symbols and positions; charge and multiplicity as keywords)",
    "driver": "the properties ASE asks for (energy; forces and dipole through the gradient)",
    "integrals": "the Atoms object: the calculator computes the molecule's own integrals",
    "synthetic": "the Atoms object: the calculator computes the molecule's own integrals",
    "output": "dfmp2.run()'s return value (the last one is in last_results_file)",
}


class DFMP2(Calculator):
    implemented_properties = ["energy", "forces", "dipole"]
    default_parameters = {"basis": "cc-pvdz", "charge": 0, "multiplicity": 1, "fragments": None,
                          "fragment_charges": None, "fragment_multiplicities": None}

    def __init__(self, **kwargs):
        owned_keywords_refused(kwargs)
        Calculator.__init__(self, **kwargs)
        self.last_results_file = None  # the dfmp2.run() results of the last calculation (QCSchema AtomicResult)

    def set(self, **kwargs):
        owned_keywords_refused(kwargs)
        return Calculator.set(self, **kwargs)

    def input_mapping(self, atoms, driver):
        keys = dict(self.parameters)
        charge, multiplicity = keys.pop("charge"), keys.pop("multiplicity")
        fragments = keys.pop("fragments")
        charges, multiplicities = keys.pop("fragment_charges"), keys.pop("fragment_multiplicities")
        lines = [f"{s} {x:.12f} {y:.12f} {z:.12f}\n"
                 for s, (x, y, z) in zip(atoms.get_chemical_symbols(), atoms.get_positions())]
        xyz = "".join(lines)
        if fragments is not None:
            xyz = fragment_xyz(lines, fragments, charges, multiplicities)
        return {"molecule": {"xyz": xyz, "units": "angstrom", "charge": charge, "multiplicity": multiplicity},
                "driver": driver, **keys}

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        Calculator.calculate(self, atoms, properties, system_changes)
        if any(self.atoms.pbc):
            raise dfmp2.InputError("DFMP2: the Atoms object is periodic (pbc=%s); dfmp2 computes isolated molecules, "
                                   "so set atoms.pbc = False for a molecule" % list(bool(p) for p in self.atoms.pbc))
        # With an interaction, the energy is the counterpoise-corrected total energy, which the gradient run gives.
        gradient = "forces" in properties or "dipole" in properties or self.parameters.get("interaction")
        r = dfmp2.run(self.input_mapping(self.atoms, "gradient" if gradient else "energy"))
        self.last_results_file = r
        self.results["energy"] = r["properties"]["return_energy"] * Hartree
        if gradient:
            g = np.array(r["return_result"], dtype=float).reshape(-1, 3)
            self.results["forces"] = -g * Hartree / Bohr
            # The relaxed dipole of the energy differentiated (MP2's, or SCS-MP2's or SOS-MP2's with `method`).
            self.results["dipole"] = np.array(r["extras"]["qcvars"]["CURRENT DIPOLE"]) * Bohr


def fragment_xyz(lines, fragments, charges, multiplicities):
    """The xyz text with Psi4's '--' between fragments (each 'charge multiplicity' first when given)."""
    natoms = len(lines)
    flat = [i for f in fragments for i in f] if all(hasattr(f, "__iter__") for f in fragments) else None
    if flat != list(range(natoms)) or any(len(f) == 0 for f in fragments):
        raise dfmp2.InputError("DFMP2(fragments=...): expected lists of consecutive atom indices in order covering "
                               "the %d atoms once, as QCSchema's fragments, got %r" % (natoms, fragments))
    for name, values in (("fragment_charges", charges), ("fragment_multiplicities", multiplicities)):
        if values is not None and len(values) != len(fragments):
            raise dfmp2.InputError("DFMP2(%s=...): expected one per fragment (%d), got %r"
                                   % (name, len(fragments), values))
    out = []
    for k, f in enumerate(fragments):
        if k > 0:
            out.append("--\n")
        if charges is not None or multiplicities is not None:
            out.append("%d %d\n" % (charges[k] if charges is not None else 0,
                                    multiplicities[k] if multiplicities is not None else 1))
        out.extend(lines[i] for i in f)
    return "".join(out)


def owned_keywords_refused(kwargs):
    for key in kwargs:
        if key in OWNED_KEYS:
            raise dfmp2.InputError("DFMP2(%s=...): '%s' is the calculator's own; it comes from %s"
                                   % (key, key, OWNED_KEYS[key]))
