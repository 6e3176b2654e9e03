#!/usr/bin/python3
"""Live Psi4 tier, point-charge embedding (issue 47): Psi4 1.3.2's EXTERN point charges (QMMM().extern.addCharge,
angstrom) against `dfmp2` with `external_charges` on the water of Psi4's extern1/extern2 samples beside their TIP3P
water's charges: DF-SCF in cc-pVDZ (all electrons), the exact SCF in 6-31G* (cartesian d, frozen core), and the
hydroxyl radical (UHF, DF-SCF) beside the same charges: the nuclear repulsion (which counts the charges' interaction
with the nuclei, as Psi4's does), SCF and MP2 total energies within 1e-8 Eh.

    PYTHONPATH=/usr/lib/x86_64-linux-gnu /usr/bin/python3 tests/psi4/live_embedding_test.py --dfmp2 build/app/dfmp2
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

TOLERANCE = 1e-8  # Eh

WATER = ("O  -0.778803000000  0.000000000000  1.132683000000\n"
         "H  -0.666682000000  0.764099000000  1.706291000000\n"
         "H  -0.666682000000  -0.764099000000  1.706290000000")
HYDROXYL = "O  -0.778803000000  0.000000000000  1.132683000000\nH  -0.666682000000  0.764099000000  1.706291000000"
TIP3P = [(-0.834, 1.649232019048, 0.0, -2.356023604706), (0.417, 0.544757019107, 0.0, -3.799961446760),
         (0.417, 0.544757019107, 0.0, -0.912085762652)]
# (name, xyz, multiplicity, basis, scf_type, frozen core)
CASES = [("water DF-SCF cc-pVDZ", WATER, 1, "cc-pvdz", "df", False),
         ("water exact SCF 6-31G* frozen core", WATER, 1, "6-31g*", "pk", True),
         ("OH UHF DF-SCF aug-cc-pVDZ", HYDROXYL, 2, "aug-cc-pvdz", "df", False)]


def psi4_energies(xyz, multiplicity, basis, scf_type, frozen_core):
    import psi4
    psi4.core.be_quiet()
    psi4.core.clean()
    psi4.core.clean_options()
    psi4.core.clean_variables()
    psi4.geometry("0 %d\n%s\nunits angstrom\nsymmetry c1\nno_reorient\nno_com\n" % (multiplicity, xyz))
    field = psi4.QMMM()
    for q, x, y, z in TIP3P:
        field.extern.addCharge(q, x, y, z)
    psi4.core.set_global_option_python("EXTERN", field.extern)
    psi4.set_options({"basis": basis, "scf_type": scf_type, "mp2_type": "df", "freeze_core": frozen_core,
                      "reference": "uhf" if multiplicity > 1 else "rhf", "e_convergence": 1e-10,
                      "d_convergence": 1e-10})
    psi4.energy("mp2")
    out = {k: psi4.variable(k) for k in ("NUCLEAR REPULSION ENERGY", "SCF TOTAL ENERGY", "MP2 TOTAL ENERGY")}
    psi4.core.set_global_option_python("EXTERN", None)
    return out


def dfmp2_energies(binary, workdir, xyz, multiplicity, basis, scf_type, frozen_core):
    text = ("molecule:\n  multiplicity: %d\n  xyz: |\n" % multiplicity + "".join("    %s\n" % l for l in xyz.splitlines()) +
            "basis: %s\nfrozen_core: %s\n" % (basis, "true" if frozen_core else "false") +
            "scf: {type: %s, e_convergence: 1e-10, d_convergence: 1e-10}\n" % ("df" if scf_type == "df" else "exact") +
            "external_charges:\n" + "".join("  - [%r, %r, %r, %r]\n" % c for c in TIP3P) + "output: e.json\n")
    with open(os.path.join(workdir, "in.yaml"), "w") as f:
        f.write(text)
    subprocess.run([binary, "in.yaml"], check=True, stdout=subprocess.DEVNULL, cwd=workdir)
    with open(os.path.join(workdir, "e.json")) as f:
        q = json.load(f)["extras"]["qcvars"]
    return {k: q[k] for k in ("NUCLEAR REPULSION ENERGY", "SCF TOTAL ENERGY", "MP2 TOTAL ENERGY")}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dfmp2", required=True)
    args = parser.parse_args()
    failures = 0
    with tempfile.TemporaryDirectory() as workdir:
        for name, xyz, mult, basis, scf_type, fc in CASES:
            theirs = psi4_energies(xyz, mult, basis, scf_type, fc)
            ours = dfmp2_energies(os.path.abspath(args.dfmp2), workdir, xyz, mult, basis, scf_type, fc)
            for key in theirs:
                diff = ours[key] - theirs[key]
                ok = abs(diff) < TOLERANCE
                failures += not ok
                print("%s %-36s %-26s %.10f %+.1e" % ("ok  " if ok else "FAIL", name, key, ours[key], diff))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
