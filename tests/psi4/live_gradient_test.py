#!/usr/bin/python3
"""Live Psi4 tier, DF-MP2 gradients (issue 27): Psi4 1.3.2's gradient('mp2') against `dfmp2` with `driver: gradient`
on the same molecules, DF-SCF (Psi4 1.3 has no DF-MP2 gradient on an exact SCF: "DF-MP2 gradients need DF-SCF
reference"; that case is checked against finite differences in tests/unit/test_gradients.cpp), all electrons and
frozen core: every component within 1e-7 Eh/bohr. The relaxed dipole against Psi4's properties('mp2') within 1e-6 a.u.
An ASE BFGS optimisation with dfmp2.ase.DFMP2 against Psi4's optimize('mp2') from the same start: interatomic
distances within 1e-4 angstrom and the energy within 1e-8 Eh; and the S22 water dimer on its counterpoise-corrected
surface (issue 45: DFMP2 with fragments and interaction cp against optimize('mp2', bsse_type='cp',
return_total_data=True)), the same tolerances. Harmonic frequencies (driver: hessian) against Psi4's
dfmp2-freq1 and dfmp2-freq2 samples: within 0.1 cm^-1.

The molecules: water (Psi4's dfmp2-grad5 sample geometry), formaldehyde and ammonia distorted out of symmetry, and
benzene (Psi4's dfmp2-3 sample, which runs it with a frozen core; here both), in cc-pVDZ with its JKFIT and RI sets.

    PYTHONPATH=/usr/lib/x86_64-linux-gnu /usr/bin/python3 tests/psi4/live_gradient_test.py \\
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

WATER = """O 0.000000000000 0.000000000000 -0.071143036192
H 0.000000000000 -0.758215806856 0.564545805801
H 0.000000000000 0.758215806856 0.564545805801"""
FORMALDEHYDE = """C 0.000000 0.010000 -0.530000
O 0.020000 0.000000 0.680000
H 0.000000 0.940000 -1.110000
H -0.030000 -0.930000 -1.100000"""
AMMONIA = """N 0.000000 0.000000 0.120000
H 0.000000 0.950000 -0.270000
H 0.820000 -0.470000 -0.290000
H -0.800000 -0.480000 -0.250000"""
BENZENE_SAMPLE = "/usr/share/psi4/samples/dfmp2-3/input.dat"


def benzene():
    """The dfmp2-3 sample's benzene, read from Debian's psi4 package."""
    lines, inside = [], False
    with open(BENZENE_SAMPLE) as f:
        for line in f:
            if line.strip().startswith("molecule"):
                inside = True
            elif inside and line.strip().startswith("}"):
                break
            elif inside and line.split():
                lines.append(" ".join(line.split()))
    return "\n".join(lines)


# (name, xyz, frozen core settings to run, compare the relaxed dipole)
CASES = [("water", WATER, [False, True], True), ("formaldehyde", FORMALDEHYDE, [False, True], True),
         ("ammonia", AMMONIA, [False, True], False), ("benzene (dfmp2-3)", None, [False, True], False)]


def psi4_setup(xyz, frozen_core):
    import psi4
    psi4.core.be_quiet()
    psi4.core.clean()
    psi4.core.clean_options()
    psi4.core.clean_variables()
    mol = psi4.geometry("0 1\n" + xyz + "\nunits angstrom\nsymmetry c1\nno_reorient\nno_com\n")
    psi4.set_options({"basis": "cc-pvdz", "scf_type": "df", "mp2_type": "df", "guess": "sad",
                      "freeze_core": frozen_core, "e_convergence": 1e-10, "d_convergence": 1e-10})
    return psi4, mol


def dfmp2_gradient(binary, workdir, xyz, frozen_core):
    yaml = os.path.join(workdir, "in.yaml")
    out = os.path.join(workdir, "out.json")
    with open(yaml, "w") as f:
        f.write("molecule:\n  xyz: |\n" + "".join("    %s\n" % l for l in xyz.splitlines()) +
                "basis: cc-pvdz\ndriver: gradient\nfrozen_core: %s\n" % ("true" if frozen_core else "false") +
                "scf: {e_convergence: 1e-10, d_convergence: 1e-10}\noutput: out.json\n")
    subprocess.run([binary, yaml], check=True, stdout=subprocess.DEVNULL, cwd=workdir)
    with open(out) as f:
        r = json.load(f)
    return np.array(r["return_result"]).reshape(-1, 3), np.array(r["properties"]["mp2_dipole_moment"])


def distances(positions):
    p = np.asarray(positions)
    return np.array([np.linalg.norm(p[a] - p[b]) for a in range(len(p)) for b in range(a)])


def optimisation(module_dir):
    """ASE BFGS with dfmp2.ase.DFMP2 and Psi4's optimize('mp2') from the same distorted water."""
    start = [("O", (0.0, 0.0, 0.12)), ("H", (0.0, 0.80, -0.45)), ("H", (0.0, -0.70, -0.50))]
    xyz = "\n".join("%s %.6f %.6f %.6f" % (s, *p) for s, p in start)
    psi4, mol = psi4_setup(xyz, False)
    psi4.set_options({"g_convergence": "gau_verytight", "geom_maxiter": 100})
    e_psi4 = psi4.optimize("mp2")
    bohr = psi4.constants.bohr2angstroms
    psi4_positions = np.array(mol.geometry().np) * bohr

    sys.path.insert(0, module_dir)
    from ase import Atoms
    from ase.optimize import BFGS
    from dfmp2.ase import DFMP2
    atoms = Atoms([s for s, _ in start], positions=[p for _, p in start])
    atoms.calc = DFMP2(basis="cc-pvdz", scf={"e_convergence": 1e-10, "d_convergence": 1e-10})
    BFGS(atoms, logfile=None).run(fmax=1e-4)  # eV/angstrom: 2e-6 Eh/bohr
    e_dfmp2 = atoms.calc.last_results_file["properties"]["return_energy"]
    d = np.abs(distances(atoms.get_positions()) - distances(psi4_positions)).max()
    print("optimisation: energy dfmp2 %.10f Psi4 %.10f (diff %.1e); largest distance difference %.1e A" %
          (e_dfmp2, e_psi4, e_dfmp2 - e_psi4, d))
    return abs(e_dfmp2 - e_psi4) <= ENERGY_TOLERANCE and d <= DISTANCE_TOLERANCE


def cp_optimisation(module_dir):
    """ASE BFGS with DFMP2(fragments=..., interaction cp) and Psi4's optimize('mp2', bsse_type='cp',
    return_total_data=True) from the S22 water dimer (issue 45): the counterpoise-corrected surface, optimised tightly
    on both sides (its intermolecular modes are soft: gau_verytight and fmax 2e-5 eV/A)."""
    import psi4
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
    import psi4_complexes
    xyz = psi4_complexes.s22_complex(2)[0]
    psi4.core.be_quiet()
    psi4.core.clean()
    psi4.core.clean_options()
    psi4.core.clean_variables()
    mol = psi4.geometry("units angstrom\nsymmetry c1\nno_reorient\nno_com\n" + xyz)
    psi4.set_options({"basis": "cc-pvdz", "scf_type": "df", "mp2_type": "df", "guess": "sad", "e_convergence": 1e-10,
                      "d_convergence": 1e-10, "solver_convergence": 1e-10, "g_convergence": "gau_verytight",
                      "geom_maxiter": 100})
    e_psi4 = psi4.optimize("mp2", bsse_type="cp", return_total_data=True)
    psi4_positions = np.array(mol.geometry().np) * psi4.constants.bohr2angstroms

    sys.path.insert(0, module_dir)
    from ase import Atoms
    from ase.optimize import BFGS
    from dfmp2.ase import DFMP2
    symbols, positions, fragments = [], [], [[]]
    for line in xyz.splitlines():
        words = line.split()
        if line.strip() == "--":
            fragments.append([])
        elif len(words) == 4:
            fragments[-1].append(len(symbols))
            symbols.append(words[0])
            positions.append([float(x) for x in words[1:]])
    atoms = Atoms(symbols, positions=positions)
    atoms.calc = DFMP2(basis="cc-pvdz", fragments=fragments, interaction={"bsse": "cp"},
                       scf={"e_convergence": 1e-10, "d_convergence": 1e-10})
    BFGS(atoms, logfile=None).run(fmax=2e-5)
    e_dfmp2 = atoms.calc.last_results_file["properties"]["return_energy"]
    d = np.abs(distances(atoms.get_positions()) - distances(psi4_positions)).max()
    ok = abs(e_dfmp2 - e_psi4) <= ENERGY_TOLERANCE and d <= DISTANCE_TOLERANCE
    print("%s CP-corrected optimisation of the S22 water dimer: energy dfmp2 %.10f Psi4 %.10f (diff %.1e); largest "
          "distance difference %.1e A" % ("ok  " if ok else "FAIL", e_dfmp2, e_psi4, e_dfmp2 - e_psi4, d))
    return ok


def frequencies(binary, workdir):
    """Psi4's dfmp2-freq1 (finite differences of energies) and dfmp2-freq2 (of gradients) samples, water frozen core
    at the samples' z-matrix geometry, against dfmp2's driver: hessian (central differences of analytic gradients):
    every harmonic frequency within 0.1 cm^-1."""
    import psi4
    psi4.core.be_quiet()
    ok = True
    for sample, dertype in (("dfmp2-freq1", 0), ("dfmp2-freq2", 1)):
        psi4.core.clean()
        psi4.core.clean_options()
        psi4.core.clean_variables()
        mol = psi4.geometry("0 1\no\nh 1 0.958\nh 1 0.958 2 104.4776\nsymmetry c1\n")
        mol.update_geometry()
        xyz = "\n".join("%s %.12f %.12f %.12f" % (mol.symbol(i), mol.x(i) * psi4.constants.bohr2angstroms,
                                                  mol.y(i) * psi4.constants.bohr2angstroms,
                                                  mol.z(i) * psi4.constants.bohr2angstroms) for i in range(mol.natom()))
        psi4.set_options({"basis": "cc-pvdz", "scf_type": "df", "mp2_type": "df", "freeze_core": True,
                          "e_convergence": 1e-10, "d_convergence": 1e-10})
        _, wfn = psi4.frequencies("mp2", dertype=dertype, return_wfn=True)
        theirs = sorted(wfn.frequencies().np)
        yaml = os.path.join(workdir, "freq.yaml")
        with open(yaml, "w") as f:
            f.write("molecule:\n  xyz: |\n" + "".join("    %s\n" % l for l in xyz.splitlines()) +
                    "basis: cc-pvdz\ndriver: hessian\nfrozen_core: true\n"
                    "scf: {e_convergence: 1e-10, d_convergence: 1e-10}\noutput: freq.json\n")
        subprocess.run([binary, yaml], check=True, stdout=subprocess.DEVNULL, cwd=workdir)
        with open(os.path.join(workdir, "freq.json")) as f:
            ours = sorted(json.load(f)["extras"]["dfmp2"]["vibrations"]["frequencies_cm"])
        diff = max(abs(a - b) for a, b in zip(ours, theirs)) if len(ours) == len(theirs) else float("inf")
        good = diff <= FREQUENCY_TOLERANCE
        print("%s %s: frequencies %s cm^-1, Psi4 %s, largest difference %.3f cm^-1" % (
            "ok  " if good else "FAIL", sample, " ".join("%.3f" % x for x in ours),
            " ".join("%.3f" % x for x in theirs), diff))
        ok = ok and good
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dfmp2", required=True)
    parser.add_argument("--module-dir", required=True, help="folder of the dfmp2 Python module")
    args = parser.parse_args()
    failures = 0
    with tempfile.TemporaryDirectory() as workdir:
        for name, xyz, frozen, dipole in CASES:
            xyz = xyz or benzene()
            for fc in frozen:
                psi4, _ = psi4_setup(xyz, fc)
                reference = np.array(psi4.gradient("mp2").np)
                ours, our_dipole = dfmp2_gradient(args.dfmp2, workdir, xyz, fc)
                diff = np.abs(ours - reference).max()
                ok = diff <= GRADIENT_TOLERANCE
                line = "%-20s %-14s largest gradient difference %.1e Eh/bohr" % (
                    name, "frozen core" if fc else "all electrons", diff)
                if dipole:
                    psi4, _ = psi4_setup(xyz, fc)
                    psi4.properties("mp2", properties=["dipole"])
                    psi4_dipole = np.array([psi4.variable("MP2 DIPOLE " + x) for x in "XYZ"]) / DEBYE
                    dd = np.abs(our_dipole - psi4_dipole).max()
                    ok = ok and dd <= DIPOLE_TOLERANCE
                    line += ", relaxed dipole %.1e a.u." % dd
                print(("ok   " if ok else "FAIL ") + line)
                failures += not ok
        if not frequencies(args.dfmp2, workdir):
            failures += 1
        if not optimisation(args.module_dir):
            print("FAIL optimisation")
            failures += 1
        if not cp_optimisation(args.module_dir):
            failures += 1
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
