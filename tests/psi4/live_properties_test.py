#!/usr/bin/python3
"""Live Psi4 tier, MP2 properties (issue 46): Psi4 1.3.2's properties('mp2', properties=[dipole, quadrupole,
mulliken_charges, lowdin_charges, no_occupations]) (its dfmp2 module's relaxed density) against `dfmp2` with
`driver: properties` on water, formaldehyde and ammonia in cc-pVDZ and aug-cc-pVDZ, all electrons in one and a frozen
core in the other: the relaxed dipole and quadrupole (Psi4's MP2 DIPOLE and MP2 QUADRUPOLE variables, in Debye and
Debye angstrom), the Mulliken and Loewdin charges (oeprop on Psi4's wavefunction, whose density is then the relaxed
MP2 one), and every natural-orbital occupation (the eigenvalues of S^1/2 D S^1/2 of that density), each within 1e-6
a.u. The electrostatic potential at a grid.dat's points against Psi4's GRID_ESP (1e-6 Eh/e), and the Molden
files read back (Open Babel; the densities their orbitals give, with Psi4's integrals: dfmp2's multipoles within 1e-8
a.u.). Also, in dfmp2's results: each density's electrons (its Mulliken populations) and its natural occupations sum to
the electron count (1e-10), and the relaxed dipole equals the one `driver: gradient` reports (1e-10).

    PYTHONPATH=/usr/lib/x86_64-linux-gnu /usr/bin/python3 tests/psi4/live_properties_test.py --dfmp2 build/app/dfmp2
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

TOLERANCE = 1e-6            # a.u.
SUM_TOLERANCE = 1e-10       # electrons, e a0
DEBYE = 2.541746451895025   # Psi4 1.3 prints the dipole in Debye (CODATA 2014)
BOHR = 0.52917721067        # angstrom

# (name, xyz in angstrom): out of symmetry, so that no component vanishes by symmetry.
MOLECULES = [
    ("water", "O 0.0 0.02 0.117790\nH 0.0 0.755453 -0.471161\nH 0.03 -0.75 -0.48"),
    ("formaldehyde", "C 0.0 0.0 -0.53\nO 0.02 0.0 0.68\nH 0.0 0.94 -1.12\nH 0.05 -0.93 -1.10"),
    ("ammonia", "N 0.0 0.0 0.12\nH 0.0 0.94 -0.26\nH 0.81 -0.47 -0.27\nH -0.80 -0.48 -0.28"),
]
CASES = [(name, xyz, basis, (k + (basis == "aug-cc-pvdz")) % 2 == 1)
         for k, (name, xyz) in enumerate(MOLECULES) for basis in ("cc-pvdz", "aug-cc-pvdz")]


def psi4_properties(xyz, basis, frozen_core):
    """Psi4's relaxed MP2 properties, in atomic units."""
    import psi4
    psi4.core.be_quiet()
    psi4.core.clean()
    psi4.core.clean_options()
    psi4.core.clean_variables()
    psi4.geometry("0 1\n%s\nunits angstrom\nsymmetry c1\nno_reorient\nno_com\n" % xyz)
    psi4.set_options({"basis": basis, "scf_type": "df", "mp2_type": "df", "freeze_core": frozen_core,
                      "e_convergence": 1e-10, "d_convergence": 1e-10})
    _, wfn = psi4.properties("mp2", properties=["dipole", "quadrupole", "mulliken_charges", "lowdin_charges",
                                                "no_occupations"], return_wfn=True)
    out = {"dipole": np.array([psi4.variable("MP2 DIPOLE " + x) for x in "XYZ"]) / DEBYE,
           "quadrupole": np.array([psi4.variable("MP2 QUADRUPOLE " + xy)
                                   for xy in ("XX", "XY", "XZ", "YY", "YZ", "ZZ")]) / (DEBYE * BOHR)}
    for name, prop in (("mulliken", "MULLIKEN_CHARGES"), ("lowdin", "LOWDIN_CHARGES")):
        psi4.oeprop(wfn, prop)
        out[name] = np.array(wfn.atomic_point_charges().np)
    s = wfn.S().np
    w, u = np.linalg.eigh(s)
    half = u @ np.diag(np.sqrt(w)) @ u.T
    out["occupations"] = np.sort(np.linalg.eigvalsh(half @ (wfn.Da().np + wfn.Db().np) @ half))[::-1]
    return out


def dfmp2_input(xyz, basis, frozen_core, driver, output):
    return ("molecule:\n  xyz: |\n" + "".join("    %s\n" % l for l in xyz.splitlines()) +
            "basis: %s\ndriver: %s\nfrozen_core: %s\n" % (basis, driver, "true" if frozen_core else "false") +
            "scf: {e_convergence: 1e-10, d_convergence: 1e-10}\noutput: %s\n" % output)


def run_dfmp2(binary, workdir, text, output):
    yaml = os.path.join(workdir, "in.yaml")
    with open(yaml, "w") as f:
        f.write(text)
    subprocess.run([binary, yaml], check=True, stdout=subprocess.DEVNULL, cwd=workdir)
    with open(os.path.join(workdir, output)) as f:
        return json.load(f)


def upper_triangle(m):
    m = np.asarray(m)
    return np.array([m[0][0], m[0][1], m[0][2], m[1][1], m[1][2], m[2][2]])


def sums_hold(name, result):
    """Every density's electrons and natural occupations sum to the electron count."""
    numbers = {"H": 1, "C": 6, "N": 7, "O": 8}
    electrons = sum(numbers[x] for x in result["molecule"]["symbols"]) - result["molecule"]["molecular_charge"]
    ok = True
    for kind in ("scf", "unrelaxed", "relaxed"):
        d = result["extras"]["dfmp2"]["properties"][kind]
        mulliken = sum(d["mulliken"]["alpha_population"]) + sum(d["mulliken"]["beta_population"])
        occupations = sum(d["natural_occupations"]["total"])
        if abs(mulliken - electrons) > SUM_TOLERANCE or abs(occupations - electrons) > SUM_TOLERANCE:
            print("FAIL %s %s density: %.12f electrons, occupations %.12f, expected %d"
                  % (name, kind, mulliken, occupations, electrons))
            ok = False
    return ok


def psi4_setup(charge, multiplicity, xyz, basis, reference):
    import psi4
    psi4.core.be_quiet()
    psi4.core.clean()
    psi4.core.clean_options()
    psi4.core.clean_variables()
    mol = psi4.geometry("%d %d\n%s\nunits angstrom\nsymmetry c1\nno_reorient\nno_com\n" % (charge, multiplicity, xyz))
    psi4.set_options({"basis": basis, "reference": reference, "scf_type": "df", "mp2_type": "df",
                      "e_convergence": 1e-10, "d_convergence": 1e-10})
    return psi4, mol


def electrostatic_potential(binary, workdir):
    """The relaxed density's potential at points of a grid.dat (angstrom) against Psi4's GRID_ESP on its own relaxed
    MP2 density (written to grid_esp.dat), water in aug-cc-pVDZ: within 1e-6 Eh/e."""
    xyz = MOLECULES[0][1]
    points = [(0.0, 0.0, 2.5), (1.0, 1.5, -1.0), (-2.0, 0.3, 0.7), (0.3, -0.2, 0.1), (4.0, -3.0, 5.0)]
    here = os.getcwd()
    os.chdir(workdir)
    try:
        with open("grid.dat", "w") as f:
            f.write("".join("%.6f %.6f %.6f\n" % p for p in points))
        psi4, _ = psi4_setup(0, 1, xyz, "aug-cc-pvdz", "rhf")
        psi4.properties("mp2", properties=["GRID_ESP"])
        theirs = np.loadtxt("grid_esp.dat")
    finally:
        os.chdir(here)
    text = dfmp2_input(xyz, "aug-cc-pvdz", False, "properties", "esp.json") + "properties: {esp_points: grid.dat}\n"
    ours = np.array(run_dfmp2(binary, workdir, text, "esp.json")["extras"]["dfmp2"]["properties"]["esp"]["relaxed"])
    worst = np.abs(ours - theirs).max()
    ok = worst < TOLERANCE
    print("%s water aug-cc-pvdz electrostatic potential at %d points against Psi4's GRID_ESP: %.2e"
          % ("ok  " if ok else "FAIL", len(points), worst))
    return ok


def read_molden(path):
    """Each [MO] set of a Molden file: (spin, energies, occupations, coefficients as nbf x n), and the atoms."""
    orbitals, atoms, section = [], [], None
    with open(path) as f:
        lines = f.read().splitlines()
    k = 0
    while k < len(lines):
        line = lines[k].strip()
        if line.startswith("["):
            section = line.split("]")[0][1:].lower()
        elif section == "atoms" and line:
            atoms.append(line.split()[0])
        elif section == "mo" and line.startswith("Sym="):
            energy = float(lines[k + 1].split("=")[1])
            spin = lines[k + 2].split("=")[1].strip()
            occupation = float(lines[k + 3].split("=")[1])
            k += 4
            column = []
            while k < len(lines) and lines[k].strip() and lines[k].split()[0].isdigit():
                column.append(float(lines[k].split()[1]))
                k += 1
            orbitals.append((spin, energy, occupation, column))
            continue
        k += 1
    return atoms, orbitals


def psi4_order(basis):
    """Where each of Psi4's functions is in a Molden file's order: the same shells, the same spherical functions (m = 0,
    +1, -1, ...), but p shells as x, y, z in Molden and as z, x, y (m = 0, +1, -1) in Psi4."""
    order, start = [], 0
    for shell in range(basis.nshell()):
        n = basis.shell(shell).nfunction
        order += [start + 2, start, start + 1] if basis.shell(shell).am == 1 else list(range(start, start + n))
        start += n
    return order


def molden_files(binary, workdir):
    """The Molden files read back: Open Babel (Debian's `obabel`) takes their atoms; the density rebuilt from each
    file's orbitals and occupations (sum_k n_k C_k C_k^T, functions in the file's order, which is Psi4's) gives, with
    Psi4's dipole and quadrupole integrals of the same basis, the dipole and second moments dfmp2 reports for that
    density (1e-8 a.u.), and holds the molecule's electrons. Water in cc-pVQZ (d, f and g shells) and the hydroxyl
    radical in aug-cc-pVTZ (UHF: alpha and beta sets)."""
    cases = [("water cc-pvqz", 0, 1, MOLECULES[0][1], "cc-pvqz", "rhf", 10),
             ("OH aug-cc-pvtz uhf", 0, 2, "O 0.0 0.1 0.0\nH 0.05 0.0 0.97", "aug-cc-pvtz", "uhf", 9)]
    ok = True
    for label, charge, mult, xyz, basis, reference, electrons in cases:
        text = ("molecule:\n  charge: %d\n  multiplicity: %d\n  xyz: |\n" % (charge, mult) +
                "".join("    %s\n" % l for l in xyz.splitlines()) +
                "basis: %s\nreference: %s\ndriver: properties\nfrozen_core: true\n" % (basis, reference) +
                "scf: {e_convergence: 1e-10, d_convergence: 1e-10}\noutput: m.json\n"
                "properties: {molden: no.molden, scf_molden: scf.molden}\n")
        result = run_dfmp2(binary, workdir, text, "m.json")
        psi4, mol = psi4_setup(charge, mult, xyz, basis, reference)
        wfn = psi4.core.Wavefunction.build(mol, basis)
        mints = psi4.core.MintsHelper(wfn.basisset())
        dipoles = [np.array(m) for m in mints.ao_dipole()]          # -<m|r|n>, Psi4's sign (electrons)
        quadrupoles = [np.array(m) for m in mints.ao_quadrupole()]  # -<m|r_i r_j|n>: xx, xy, xz, yy, yz, zz
        nuclei = np.array(mol.geometry().np)
        charges = np.array([mol.Z(a) for a in range(mol.natom())])
        for name, kind in (("no.molden", "relaxed"), ("scf.molden", "scf")):
            babel = subprocess.run(["obabel", "-imolden", os.path.join(workdir, name), "-oxyz"], capture_output=True,
                                   text=True)
            read = babel.returncode == 0 and len(babel.stdout.splitlines()) == 2 + mol.natom()
            atoms, orbitals = read_molden(os.path.join(workdir, name))
            order = psi4_order(wfn.basisset())
            density = sum(n * np.outer(np.array(c)[order], np.array(c)[order]) for _, _, n, c in orbitals)
            count = np.trace(density @ np.array(mints.ao_overlap()))
            dipole = [np.sum(density * d) + charges @ nuclei[:, i] for i, d in enumerate(dipoles)]
            pairs = [(0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)]
            second = [np.sum(density * q) + np.sum(charges * nuclei[:, i] * nuclei[:, j])
                      for q, (i, j) in zip(quadrupoles, pairs)]
            reported = result["extras"]["dfmp2"]["properties"][kind]
            worst = max(np.abs(np.array(dipole) - reported["dipole"]).max(),
                        np.abs(np.array(second) - upper_triangle(reported["quadrupole"])).max())
            good = read and worst < 1e-8 and abs(count - electrons) < 1e-8
            ok &= good
            print("%s %-22s %-10s Open Babel reads %d atoms: %s; %d orbitals, %.10f electrons, multipoles %.2e"
                  % ("ok  " if good else "FAIL", label, name, mol.natom(), read, len(orbitals), count, worst))
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dfmp2", required=True)
    args = parser.parse_args()
    failures = 0
    with tempfile.TemporaryDirectory() as workdir:
        for name, xyz, basis, fc in CASES:
            label = "%s %s %s" % (name, basis, "frozen core" if fc else "all electrons")
            theirs = psi4_properties(xyz, basis, fc)
            result = run_dfmp2(args.dfmp2, workdir, dfmp2_input(xyz, basis, fc, "properties", "p.json"), "p.json")
            relaxed = result["extras"]["dfmp2"]["properties"]["relaxed"]
            ours = {"dipole": np.array(relaxed["dipole"]), "quadrupole": upper_triangle(relaxed["quadrupole"]),
                    "mulliken": np.array(relaxed["mulliken"]["charge"]),
                    "lowdin": np.array(relaxed["lowdin"]["charge"]),
                    "occupations": np.array(relaxed["natural_occupations"]["total"])}
            for key in ("dipole", "quadrupole", "mulliken", "lowdin", "occupations"):
                worst = np.abs(ours[key] - theirs[key]).max()
                ok = worst < TOLERANCE
                failures += not ok
                print("%s %-40s %-12s largest difference %.2e" % ("ok  " if ok else "FAIL", label, key, worst))
            failures += not sums_hold(label, result)
            if name == "water":  # the relaxed dipole is the gradient's
                gradient = run_dfmp2(args.dfmp2, workdir, dfmp2_input(xyz, basis, fc, "gradient", "g.json"), "g.json")
                worst = np.abs(np.array(gradient["extras"]["dfmp2"]["gradient"]["relaxed_dipole"]) -
                               ours["dipole"]).max()
                ok = worst < SUM_TOLERANCE
                failures += not ok
                print("%s %-40s relaxed dipole against driver: gradient's %.2e" % ("ok  " if ok else "FAIL", label,
                                                                                  worst))
        failures += not electrostatic_potential(args.dfmp2, workdir)
        failures += not molden_files(args.dfmp2, workdir)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
