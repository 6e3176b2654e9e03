#!/usr/bin/python3
"""Live Psi4 tier, molecule input: Psi4 1.3.2 and dfmp2 each run RHF + DF-MP2 on the same molecule and bases
(dfmp2 with its own integrals and SCF); the SCF energies must agree within 1e-6 Eh and the MP2 correlation
energies within 1e-7 Eh. The cases go beyond shared/reference/psi4_refs.json: other molecules, cartesian and
minimal bases, a cation, triple-zeta. Run by ctest (label psi4) under Debian's /usr/bin/python3 with
PYTHONPATH=/usr/lib/x86_64-linux-gnu.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

SCF_TOLERANCE = 1e-6
MP2_TOLERANCE = 1e-7

WATER = "O 0.000000 0.000000 0.117790\nH 0.000000 0.755453 -0.471161\nH 0.000000 -0.755453 -0.471161"
AMMONIA = "N 0.0 0.0 0.1\nH 0.0 0.94 -0.27\nH 0.81 -0.47 -0.27\nH -0.81 -0.47 -0.27"
HYDRONIUM = "O 0.0 0.0 0.05\nH 0.0 0.95 -0.25\nH 0.82 -0.47 -0.25\nH -0.82 -0.47 -0.25"
FORMALDEHYDE = "C 0.0 0.0 -0.53\nO 0.0 0.0 0.68\nH 0.0 0.94 -1.12\nH 0.0 -0.94 -1.12"
# Two waters 3 A apart: the exact J/K's Schwarz and density screening and incremental builds skip quartets here.
WATER_DIMER = WATER + "\nO 0.000000 0.000000 3.117790\nH 0.000000 0.755453 2.528839\nH 0.000000 -0.755453 2.528839"

# molecule, xyz, charge, basis, scf type, frozen core
CASES = [
    ("water", WATER, 0, "sto-3g", "df", False),
    ("water", WATER, 0, "6-31g*", "df", True),
    ("ammonia", AMMONIA, 0, "def2-svp", "pk", True),
    ("water dimer", WATER_DIMER, 0, "cc-pvdz", "pk", False),
    ("hydronium", HYDRONIUM, 1, "cc-pvdz", "df", False),
    ("formaldehyde", FORMALDEHYDE, 0, "cc-pvdz", "df", True),
    ("water", WATER, 0, "cc-pvtz", "df", True),
    ("water", WATER, 0, "aug-cc-pvdz", "df", True),  # diffuse functions (the augmented library sets)
]

# Psi4's default fitting sets for these orbital bases (inputs/basis/README.md).
FITTING = {"sto-3g": ("def2-qzvpp-ri", "def2-svp-jkfit"), "6-31g*": ("cc-pvdz-ri", "cc-pvdz-jkfit")}


def psi4_energies(xyz, charge, basis, scf_type, frozen):
    import psi4
    psi4.core.be_quiet()
    psi4.core.clean()
    psi4.core.clean_options()
    ri, jk = FITTING.get(basis, (basis + "-ri", basis + "-jkfit"))
    psi4.geometry("units angstrom\nsymmetry c1\nno_reorient\nno_com\n%d 1\n%s" % (charge, xyz))
    psi4.set_options({"basis": basis, "df_basis_mp2": ri, "df_basis_scf": jk, "scf_type": scf_type,
                      "mp2_type": "df", "freeze_core": frozen, "e_convergence": 1e-10, "d_convergence": 1e-9})
    psi4.energy("mp2")
    return psi4.variable("SCF TOTAL ENERGY"), psi4.variable("MP2 CORRELATION ENERGY")


def dfmp2_energies(binary, workdir, xyz, charge, basis, scf_type, frozen):
    yaml = os.path.join(workdir, "in.yaml")
    with open(yaml, "w") as f:
        f.write("molecule:\n  charge: %d\n  xyz: |\n" % charge)
        for line in xyz.splitlines():
            f.write("    %s\n" % line)
        f.write('basis: "%s"\nscf: {type: %s, e_convergence: 1e-10, d_convergence: 1e-8}\nfrozen_core: %s\n'
                "save_integrals: false\nthreads: 2\n" % (basis, "exact" if scf_type == "pk" else "df",
                                                       "true" if frozen else "false"))
    out = os.path.join(workdir, "out.json")
    subprocess.run([binary, yaml, "--json", out], check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        props = json.load(f)["properties"]
    return props["scf_total_energy"], props["mp2_correlation_energy"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dfmp2", required=True)
    args = ap.parse_args()
    passed = failed = 0
    work = tempfile.mkdtemp(prefix="dfmp2-live-")
    # Psi4 writes timer.dat and scratch files into the working directory and removes some only at exit, so the
    # folder is left for the system to clean rather than removed under Psi4's feet.
    os.chdir(work)
    os.environ["PSI_SCRATCH"] = work
    for name, xyz, charge, basis, scf_type, frozen in CASES:
        e_scf, e_corr = psi4_energies(xyz, charge, basis, scf_type, frozen)
        d_scf, d_corr = dfmp2_energies(args.dfmp2, work, xyz, charge, basis, scf_type, frozen)
        for what, ours, theirs, tol in (("scf", d_scf, e_scf, SCF_TOLERANCE), ("mp2", d_corr, e_corr, MP2_TOLERANCE)):
            ok = abs(ours - theirs) <= tol
            passed += ok
            failed += not ok
            print("%-12s %-9s %-5s fc=%-5s %s  dfmp2 %.10f  psi4 %.10f  diff %+.1e %s"
                  % (name, basis, scf_type, frozen, what, ours, theirs, ours - theirs, "ok" if ok else "FAIL"))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
