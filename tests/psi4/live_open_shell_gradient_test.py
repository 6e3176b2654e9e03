#!/usr/bin/python3
"""Live Psi4 tier, UHF DF-MP2 gradients (issue 45): Psi4 1.3.2's gradient('mp2') with reference uhf (its dfocc
module) against `dfmp2` with `driver: gradient` on radicals and ions in cc-pVDZ and aug-cc-pVDZ, all electrons and
frozen core: every component within 1e-7 Eh/bohr, and the relaxed dipole (dfocc's oeprop, "DF-OMP2 DIPOLE" in Debye)
within 1e-6 a.u. dfocc's Z-vector is converged to 1e-11 (pcg_convergence): at its default (1e-6) its gradient of OH
in cc-pVDZ is 1.7e-6 Eh/bohr from its own five-point finite differences, which dfmp2's matches to 5e-10.
The ROHF-MBPT(2) gradient (Psi4 1.3.2 has no analytic one) against Psi4's five-point finite differences of its own
ROHF-MBPT(2) energies (gradient('mp2', dertype=0) with reference rohf, points 5) on H2O+ (all electrons), OH and CH3
(frozen core): every component within 1e-7 Eh/bohr.
An ASE BFGS optimisation of the hydroxyl radical with dfmp2.ase.DFMP2(multiplicity=2) against Psi4's UHF
optimize('mp2') from the same stretched start: the distance within 1e-4 angstrom, the energy within 1e-8 Eh (the
methyl radical's flat umbrella mode kept Psi4's optimizer from gau_verytight in 100 steps). The OH
radical's harmonic frequency (driver: hessian), UHF and ROHF-MBPT(2), against Psi4's frequencies from its gradients
(UHF) or energies (ROHF): within 0.1 cm^-1.

    PYTHONPATH=/usr/lib/x86_64-linux-gnu /usr/bin/python3 tests/psi4/live_open_shell_gradient_test.py \\
        --dfmp2 build/app/dfmp2 --module-dir build/python
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

GRADIENT_TOLERANCE = 1e-7   # Eh/bohr
DIPOLE_TOLERANCE = 1e-6     # e a0
DISTANCE_TOLERANCE = 1e-4   # angstrom
ENERGY_TOLERANCE = 1e-8     # Eh
FREQUENCY_TOLERANCE = 0.1   # cm^-1
DEBYE = 2.541746451895025   # Psi4 1.3 prints the dipole in Debye (CODATA 2014)

# (name, charge, multiplicity, xyz in angstrom): off their equilibria and out of symmetry, so no component is zero.
MOLECULES = [
    ("OH", 0, 2, "O 0.0 0.1 0.0\nH 0.05 0.0 0.97"),
    ("CH3", 0, 2, "C 0.0 0.0 0.1\nH 1.08 0.0 0.0\nH -0.5 0.95 0.05\nH -0.52 -0.9 -0.1"),
    ("NO", 0, 2, "N 0.0 0.0 0.0\nO 0.02 0.01 1.15"),
    ("O2 triplet", 0, 3, "O 0.0 0.0 0.0\nO 0.01 -0.02 1.25"),
    ("H2O+", 1, 2, "O 0.0 0.05 0.117790\nH 0.0 0.755453 -0.471161\nH 0.03 -0.70 -0.50"),
]
# Each molecule in both basis sets, all electrons in one and frozen core in the other (alternating).
CASES = [(name, charge, mult, xyz, basis, (k + (basis == "aug-cc-pvdz")) % 2 == 1)
         for k, (name, charge, mult, xyz) in enumerate(MOLECULES) for basis in ("cc-pvdz", "aug-cc-pvdz")]


def psi4_setup(charge, multiplicity, xyz, basis, frozen_core):
    import psi4
    psi4.core.be_quiet()
    psi4.core.clean()
    psi4.core.clean_options()
    psi4.core.clean_variables()
    mol = psi4.geometry("%d %d\n%s\nunits angstrom\nsymmetry c1\nno_reorient\nno_com\n" % (charge, multiplicity, xyz))
    psi4.set_options({"basis": basis, "reference": "uhf", "scf_type": "df", "mp2_type": "df", "guess": "sad",
                      "freeze_core": frozen_core, "e_convergence": 1e-10, "d_convergence": 1e-10,
                      "pcg_convergence": 1e-11})
    return psi4, mol


def dfmp2_input(charge, multiplicity, xyz, basis, frozen_core, driver, output):
    return ("molecule:\n  charge: %d\n  multiplicity: %d\n  xyz: |\n" % (charge, multiplicity) +
            "".join("    %s\n" % l for l in xyz.splitlines()) +
            "basis: %s\nreference: uhf\ndriver: %s\nfrozen_core: %s\n" % (basis, driver, "true" if frozen_core else "false") +
            "scf: {e_convergence: 1e-10, d_convergence: 1e-10}\noutput: %s\n" % output)


def run_dfmp2(binary, workdir, text, output):
    yaml = os.path.join(workdir, "in.yaml")
    with open(yaml, "w") as f:
        f.write(text)
    subprocess.run([binary, yaml], check=True, stdout=subprocess.DEVNULL, cwd=workdir)
    with open(os.path.join(workdir, output)) as f:
        return json.load(f)


def gradients(binary, workdir):
    failures = 0
    for name, charge, mult, xyz, basis, fc in CASES:
        psi4, _ = psi4_setup(charge, mult, xyz, basis, fc)
        psi4.set_options({"oeprop": True})
        reference = np.array(psi4.gradient("mp2").np)
        psi4_dipole = np.array([psi4.variable("DF-OMP2 DIPOLE " + x) for x in "XYZ"]) / DEBYE
        r = run_dfmp2(binary, workdir, dfmp2_input(charge, mult, xyz, basis, fc, "gradient", "out.json"), "out.json")
        ours = np.array(r["return_result"]).reshape(-1, 3)
        diff = np.abs(ours - reference).max()
        dd = np.abs(np.array(r["properties"]["mp2_dipole_moment"]) - psi4_dipole).max()
        ok = diff <= GRADIENT_TOLERANCE and dd <= DIPOLE_TOLERANCE
        print("%s %-11s %-12s %-14s largest gradient difference %.1e Eh/bohr (largest component %.1e), relaxed "
              "dipole %.1e a.u." % ("ok  " if ok else "FAIL", name, basis, "frozen core" if fc else "all electrons",
                                    diff, np.abs(reference).max(), dd))
        failures += not ok
    return failures


ROHF_CASES = [("H2O+", "cc-pvdz", False), ("OH", "aug-cc-pvdz", True), ("CH3", "cc-pvdz", True)]  # frozen core


def rohf_gradients(binary, workdir):
    failures = 0
    molecules = {name: (charge, mult, xyz) for name, charge, mult, xyz in MOLECULES}
    for name, basis, fc in ROHF_CASES:
        charge, mult, xyz = molecules[name]
        psi4, _ = psi4_setup(charge, mult, xyz, basis, fc)
        psi4.set_options({"reference": "rohf", "points": 5, "e_convergence": 1e-11})
        reference = np.array(psi4.gradient("mp2", dertype=0).np)
        text = dfmp2_input(charge, mult, xyz, basis, fc, "gradient", "out.json").replace(
            "reference: uhf", "reference: rohf").replace("e_convergence: 1e-10", "e_convergence: 1e-11")
        r = run_dfmp2(binary, workdir, text, "out.json")
        diff = np.abs(np.array(r["return_result"]).reshape(-1, 3) - reference).max()
        ok = diff <= GRADIENT_TOLERANCE
        print("%s %-11s %-12s %-14s ROHF-MBPT(2) against Psi4's five-point differences: largest difference %.1e "
              "Eh/bohr (largest component %.1e)" % ("ok  " if ok else "FAIL", name, basis,
                                                     "frozen core" if fc else "all electrons", diff,
                                                     np.abs(reference).max()))
        failures += not ok
    return failures


def distances(positions):
    p = np.asarray(positions)
    return np.array([np.linalg.norm(p[a] - p[b]) for a in range(len(p)) for b in range(a)])


def radical_optimisation(module_dir):
    """ASE BFGS with DFMP2(multiplicity=2, reference uhf) and Psi4's UHF optimize('mp2'): the hydroxyl radical from
    a stretched start."""
    start = [("O", (0.0, 0.0, 0.0)), ("H", (0.0, 0.0, 1.06))]
    xyz = "\n".join("%s %.6f %.6f %.6f" % (s, *p) for s, p in start)
    psi4, mol = psi4_setup(0, 2, xyz, "cc-pvdz", False)
    psi4.set_options({"g_convergence": "gau_verytight", "geom_maxiter": 100})
    e_psi4 = psi4.optimize("mp2")
    psi4_positions = np.array(mol.geometry().np) * psi4.constants.bohr2angstroms

    sys.path.insert(0, module_dir)
    from ase import Atoms
    from ase.optimize import BFGS
    from dfmp2.ase import DFMP2
    atoms = Atoms([s for s, _ in start], positions=[p for _, p in start])
    atoms.calc = DFMP2(basis="cc-pvdz", multiplicity=2, reference="uhf",
                       scf={"e_convergence": 1e-10, "d_convergence": 1e-10})
    BFGS(atoms, logfile=None).run(fmax=1e-4)  # eV/angstrom: 2e-6 Eh/bohr
    e_dfmp2 = atoms.calc.last_results_file["properties"]["return_energy"]
    d = np.abs(distances(atoms.get_positions()) - distances(psi4_positions)).max()
    ok = abs(e_dfmp2 - e_psi4) <= ENERGY_TOLERANCE and d <= DISTANCE_TOLERANCE
    print("%s UHF optimisation of OH: energy dfmp2 %.10f Psi4 %.10f (diff %.1e); largest distance difference %.1e A"
          % ("ok  " if ok else "FAIL", e_dfmp2, e_psi4, e_dfmp2 - e_psi4, d))
    return ok


def radical_frequency(binary, workdir):
    """OH's harmonic frequency, frozen core: UHF against Psi4's frequencies('mp2', dertype=1) (finite differences of
    dfocc gradients), ROHF-MBPT(2) against its dertype=0 (of energies; it has no ROHF-MBPT(2) gradient), both against
    dfmp2's driver: hessian (central differences of analytic gradients)."""
    xyz = "O 0.0 0.0 0.0\nH 0.0 0.0 0.975"
    ok = True
    for reference, dertype in (("uhf", 1), ("rohf", 0)):
        psi4, _ = psi4_setup(0, 2, xyz, "cc-pvdz", True)
        psi4.set_options({"reference": reference})
        _, wfn = psi4.frequencies("mp2", dertype=dertype, return_wfn=True)
        theirs = sorted(wfn.frequencies().np)
        text = dfmp2_input(0, 2, xyz, "cc-pvdz", True, "hessian", "freq.json").replace(
            "reference: uhf", "reference: " + reference)
        r = run_dfmp2(binary, workdir, text, "freq.json")
        ours = sorted(r["extras"]["dfmp2"]["vibrations"]["frequencies_cm"])
        diff = max(abs(a - b) for a, b in zip(ours, theirs)) if len(ours) == len(theirs) else float("inf")
        good = diff <= FREQUENCY_TOLERANCE
        print("%s OH %s frequency %s cm^-1, Psi4 (dertype %d) %s, difference %.3f cm^-1" % (
            "ok  " if good else "FAIL", reference.upper(), " ".join("%.3f" % x for x in ours), dertype,
            " ".join("%.3f" % x for x in theirs), diff))
        ok = ok and good
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dfmp2", required=True)
    parser.add_argument("--module-dir", required=True, help="folder of the dfmp2 Python module")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        failures = gradients(args.dfmp2, workdir)
        failures += rohf_gradients(args.dfmp2, workdir)
        failures += not radical_frequency(args.dfmp2, workdir)
        failures += not radical_optimisation(args.module_dir)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
