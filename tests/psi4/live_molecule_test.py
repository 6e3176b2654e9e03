#!/usr/bin/python3
"""Live Psi4 tier, molecule input: Psi4 1.3.2 and dfmp2 each run an SCF (RHF, UHF or ROHF) + DF-MP2 on the same
molecule and bases (dfmp2 with its own integrals and SCF); the SCF energies must agree within 1e-6 Eh, the MP2
correlation energies (ROHF: singles included) within 1e-7 Eh and UHF's <S^2> within 1e-5. The cases go beyond
shared/reference/psi4_refs.json: other molecules, cartesian and minimal bases, a cation, triple-zeta; and the open
shells of issue 25 (each molecule of tests/validation/reference/psi4_open_shell.json in UHF and ROHF, cc-pVDZ or
aug-cc-pVDZ, DF or exact SCF, some with a frozen core: settings the reference file does not have). Run by ctest (label psi4) under Debian's /usr/bin/python3 with
PYTHONPATH=/usr/lib/x86_64-linux-gnu.
"""
import argparse
import json
import os
import subprocess
import sys

from scratch_folder import scratch_folder  # beside this file

SCF_TOLERANCE = 1e-6
MP2_TOLERANCE = 1e-7
S2_TOLERANCE = 1e-5

WATER = "O 0.000000 0.000000 0.117790\nH 0.000000 0.755453 -0.471161\nH 0.000000 -0.755453 -0.471161"
AMMONIA = "N 0.0 0.0 0.1\nH 0.0 0.94 -0.27\nH 0.81 -0.47 -0.27\nH -0.81 -0.47 -0.27"
HYDRONIUM = "O 0.0 0.0 0.05\nH 0.0 0.95 -0.25\nH 0.82 -0.47 -0.25\nH -0.82 -0.47 -0.25"
FORMALDEHYDE = "C 0.0 0.0 -0.53\nO 0.0 0.0 0.68\nH 0.0 0.94 -1.12\nH 0.0 -0.94 -1.12"
# Two waters 3 A apart: the exact J/K's Schwarz and density screening and incremental builds skip quartets here.
WATER_DIMER = WATER + "\nO 0.000000 0.000000 3.117790\nH 0.000000 0.755453 2.528839\nH 0.000000 -0.755453 2.528839"

# molecule, xyz, charge, basis, scf type, frozen core[, multiplicity, reference]
CASES = [
    ("water", WATER, 0, "sto-3g", "df", False),
    ("water", WATER, 0, "6-31g*", "df", True),
    ("ammonia", AMMONIA, 0, "def2-svp", "pk", True),
    ("water dimer", WATER_DIMER, 0, "cc-pvdz", "pk", False),
    ("hydronium", HYDRONIUM, 1, "cc-pvdz", "df", False),
    ("formaldehyde", FORMALDEHYDE, 0, "cc-pvdz", "df", True),
    ("water", WATER, 0, "cc-pvtz", "df", True),
    ("water", WATER, 0, "aug-cc-pvdz", "df", True),  # diffuse functions (the augmented library sets)
    # A ghost atom (issue 26): helium's basis functions 3 angstrom from the water, no nucleus, no electrons.
    ("water + Gh(He)", WATER + "\nGh(He) 0 0 3.0", 0, "cc-pvdz", "pk", False),
    ("water + Gh(He)", WATER + "\nGh(He) 0 0 3.0", 0, "cc-pvdz", "df", False),  # JKFIT blended for He, as Psi4
    ("water + @He", WATER + "\n@He 0 0 3.0", 0, "cc-pvdz", "pk", True),
    # Interaction-energy bases (issue 26), with the fitting sets Psi4 picks for them.
    ("water", WATER, 0, "6-31+g*", "df", False),
    ("water", WATER, 0, "6-311++g**", "df", True),
    ("water", WATER, 0, "aug-cc-pv(d+d)z", "df", False),
    ("ammonia", AMMONIA, 0, "def2-svpd", "df", True),
]


def open_shell_cases():
    """Each open-shell molecule of the reference file in UHF and in ROHF; the basis, SCF type and frozen core vary
    from case to case so that every combination appears."""
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "validation", "reference", "psi4_open_shell.json")) as f:
        cases = json.load(f)["cases"]
    molecules = {}
    for c in cases:
        molecules.setdefault(c["name"], (c["xyz"], c["charge"], c["multiplicity"]))
    out = []
    for k, (name, (xyz, charge, multiplicity)) in enumerate(molecules.items()):
        for r, reference in enumerate(("uhf", "rohf")):
            basis = "aug-cc-pvdz" if (k + r) % 3 == 0 else "cc-pvdz"
            out.append((name, xyz, charge, basis, "pk" if (k + r) % 2 else "df", k % 2 == 1, multiplicity, reference))
    return out


CASES += open_shell_cases()

# Psi4's default fitting sets for these orbital bases (inputs/basis/README.md).
FITTING = {"sto-3g": ("def2-qzvpp-ri", "def2-svp-jkfit"), "6-31g*": ("cc-pvdz-ri", "cc-pvdz-jkfit")}


# SCS-MP2 with given scales (issue 45): Psi4 1.3.2 has no method 'scs-mp2' or 'sos-mp2'; its DF-MP2 takes
# mp2_os_scale and mp2_ss_scale for its SCS lines, which dfmp2's `method: scs-mp2` returns.
# molecule, xyz, charge, multiplicity, reference, basis, scf type, frozen core, (c_os, c_ss) or None (the defaults)
SCALED_CASES = [
    ("water", WATER, 0, 1, "rhf", "cc-pvdz", "df", False, (0.9, 0.5)),
    ("hydroxyl", "O 0 0 0\nH 0 0 0.97", 0, 2, "uhf", "cc-pvdz", "df", True, (1.1, 0.4)),
    ("hydroxyl", "O 0 0 0\nH 0 0 0.97", 0, 2, "rohf", "cc-pvdz", "pk", True, None),
]


def psi4_energies(xyz, charge, basis, scf_type, frozen, multiplicity, reference, scales=None):
    """Psi4's SCF and MP2 correlation energies, and <S^2> of a UHF (None otherwise) from its orbitals:
    Sz (Sz + 1) + n_beta - sum_ij |<i alpha|j beta>|^2."""
    import numpy as np
    import psi4
    psi4.core.be_quiet()
    psi4.core.clean()
    psi4.core.clean_options()
    ri, jk = FITTING.get(basis, (basis + "-ri", basis + "-jkfit"))
    psi4.geometry("units angstrom\nsymmetry c1\nno_reorient\nno_com\n%d %d\n%s" % (charge, multiplicity, xyz))
    if basis in FITTING:  # otherwise Psi4's own defaults, which dfmp2 follows (<basis>-jkfit blended, Pople sets...)
        psi4.set_options({"df_basis_scf": jk, "df_basis_mp2": ri})
    if scales:
        psi4.set_options({"mp2_os_scale": scales[0], "mp2_ss_scale": scales[1]})
    psi4.set_options({"basis": basis, "scf_type": scf_type,
                      "mp2_type": "df", "freeze_core": frozen, "reference": reference, "e_convergence": 1e-10,
                      "d_convergence": 1e-10 if reference != "rhf" else 1e-9})
    _, wfn = psi4.energy("mp2", return_wfn=True)
    s2 = None
    if reference == "uhf":
        ca, cb = wfn.Ca_subset("AO", "OCC").np, wfn.Cb_subset("AO", "OCC").np
        s = psi4.core.MintsHelper(wfn.basisset()).ao_overlap().np
        na, nb = ca.shape[1], cb.shape[1]
        sz = 0.5 * (na - nb)
        s2 = sz * (sz + 1) + nb - float(np.sum((ca.T @ s @ cb) ** 2))
    return psi4.variable("SCF TOTAL ENERGY"), psi4.variable("MP2 CORRELATION ENERGY"), s2, \
        psi4.variable("SCS-MP2 TOTAL ENERGY")


def dfmp2_energies(binary, workdir, xyz, charge, basis, scf_type, frozen, multiplicity, reference, method=""):
    yaml = os.path.join(workdir, "in.yaml")
    open_shell = reference != "rhf"
    with open(yaml, "w") as f:
        f.write("molecule:\n  charge: %d\n  multiplicity: %d\n  xyz: |\n" % (charge, multiplicity))
        for line in xyz.splitlines():
            f.write("    %s\n" % line)
        # Open shells converge the gradient to 1e-10: a spin-contaminated UHF's MP2 energy moves by up to 8e-8 Eh
        # between 1e-8 and 1e-10.
        f.write('basis: "%s"\nreference: %s\nscf: {type: %s, e_convergence: 1e-10, d_convergence: %s, '
                'max_iterations: 200}\nfrozen_core: %s\nsave_integrals: false\nthreads: 2\n'
                % (basis, reference, "exact" if scf_type == "pk" else "df", "1e-10" if open_shell else "1e-8",
                   "true" if frozen else "false"))
        f.write(method)
    out = os.path.join(workdir, "out.json")
    subprocess.run([binary, yaml, "--json", out], check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        results = json.load(f)
    props = results["properties"]
    return (props["scf_total_energy"], props["mp2_correlation_energy"],
            results["extras"]["dfmp2"]["problem"]["scf"]["s_squared"], props["return_energy"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dfmp2", required=True)
    args = ap.parse_args()
    passed = failed = 0
    work = scratch_folder("dfmp2-live-")
    os.chdir(work)
    for case in CASES:
        name, xyz, charge, basis, scf_type, frozen = case[:6]
        multiplicity, reference = case[6:] if len(case) > 6 else (1, "rhf")
        e_scf, e_corr, e_s2, _ = psi4_energies(xyz, charge, basis, scf_type, frozen, multiplicity, reference)
        d_scf, d_corr, d_s2, _ = dfmp2_energies(args.dfmp2, work, xyz, charge, basis, scf_type, frozen, multiplicity,
                                                reference)
        checks = [("scf", d_scf, e_scf, SCF_TOLERANCE), ("mp2", d_corr, e_corr, MP2_TOLERANCE)]
        if e_s2 is not None:
            checks.append(("s^2", d_s2, e_s2, S2_TOLERANCE))
        for what, ours, theirs, tol in checks:
            ok = abs(ours - theirs) <= tol
            passed += ok
            failed += not ok
            print("%-18s %-11s %-4s %-5s fc=%-5s %-3s  dfmp2 %.10f  psi4 %.10f  diff %+.1e %s"
                  % (name, basis, reference, scf_type, frozen, what, ours, theirs, ours - theirs,
                     "ok" if ok else "FAIL"), flush=True)
    # The SCS-MP2 correlation energy (total less SCF, so that the SCF's agreement does not decide it) that
    # `method: scs-mp2` returns, against Psi4's SCS-MP2 TOTAL ENERGY with the same scales.
    for name, xyz, charge, multiplicity, reference, basis, scf_type, frozen, scales in SCALED_CASES:
        e_scf, _, _, e_scs = psi4_energies(xyz, charge, basis, scf_type, frozen, multiplicity, reference,
                                           scales or (6 / 5, 1 / 3))
        method = "method: scs-mp2\n" + ("mp2_os_scale: %r\nmp2_ss_scale: %r\n" % scales if scales else "")
        d_scf, _, _, d_scs = dfmp2_energies(args.dfmp2, work, xyz, charge, basis, scf_type, frozen, multiplicity,
                                            reference, method)
        ours, theirs = d_scs - d_scf, e_scs - e_scf
        ok = abs(ours - theirs) <= MP2_TOLERANCE
        passed += ok
        failed += not ok
        print("%-18s %-11s %-4s %-5s fc=%-5s scs %s  dfmp2 %.10f  psi4 %.10f  diff %+.1e %s"
              % (name, basis, reference, scf_type, frozen, scales or "default", ours, theirs, ours - theirs,
                 "ok" if ok else "FAIL"), flush=True)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
