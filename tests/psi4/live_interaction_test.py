#!/usr/bin/python3
"""Live Psi4 tier, interaction energies (issue 26): Psi4 1.3.2's `energy('mp2', bsse_type=['cp', 'nocp'])` and one
dfmp2 run with `interaction: {bsse: both}` on the same complex; the CP and non-CP interaction energies must agree
within 1e-7 Eh, and so must every calculation's MP2 total energy (the complex, each fragment in the complex's basis
and in its own) within 1e-6 Eh. And counterpoise-corrected gradients (issue 45): Psi4's gradient('mp2',
bsse_type='cp', return_total_data=True) against `interaction: {bsse: cp}` with `driver: gradient` on the S22 water,
ammonia and ethene-ethyne complexes and an open shell (the hydroxyl radical beside a water, UHF, Psi4's dfocc):
every component within 1e-7 Eh/bohr, the CP-corrected total energy within 1e-7 Eh.

The complexes are Psi4's own: the water, ammonia and methane dimers and ethene-ethyne of the S22 database that
Debian's psi4 installs (/usr/share/psi4/databases/S22.py), and the formic acid dimer of Psi4's dfmp2-1 sample; each
in cc-pVDZ and aug-cc-pVDZ with DF-SCF (Psi4's default fitting sets, which dfmp2 picks too).

    PYTHONPATH=/usr/lib/x86_64-linux-gnu /usr/bin/python3 tests/psi4/live_interaction_test.py --dfmp2 build/app/dfmp2
    ... --write-reference tests/validation/reference/psi4_interaction.json   # also record Psi4's numbers

Run by ctest (label psi4); the recorded file feeds the validation decks (tests/validation/make_decks.py).
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import psi4_complexes  # noqa: E402  (the repository's scripts/)
from scratch_folder import scratch_folder  # noqa: E402  (beside this file)

INTERACTION_TOLERANCE = 1e-7
TOTAL_TOLERANCE = 1e-6
# S22 index -> name
S22_CASES = {1: "ammonia dimer", 2: "water dimer", 8: "methane dimer", 16: "ethene-ethyne"}
BASES = ["cc-pvdz", "aug-cc-pvdz"]


def complexes():
    """(name, xyz text with fragments) of every complex, read from Psi4's installed files."""
    out = [("S22-%d %s" % (index, name), psi4_complexes.s22_complex(index)[0]) for index, name in S22_CASES.items()]
    out.append(("dfmp2-1 formic acid dimer", psi4_complexes.formic_acid_dimer()))
    return out


def psi4_setup(xyz, basis):
    """Psi4, clean, with the complex in `basis`, DF-SCF and DF-MP2 converged to 1e-10."""
    import psi4
    psi4.core.be_quiet()
    psi4.core.clean()
    psi4.core.clean_options()
    psi4.core.clean_variables()
    psi4.geometry("units angstrom\nsymmetry c1\nno_reorient\nno_com\n" + xyz)
    psi4.set_options({"basis": basis, "scf_type": "df", "mp2_type": "df", "guess": "sad",
                      "e_convergence": 1e-10, "d_convergence": 1e-10})
    return psi4


def psi4_energies(xyz, basis):
    """Psi4's CP and non-CP MP2 interaction energies and the n-body totals, by its variable names."""
    psi4 = psi4_setup(xyz, basis)
    psi4.energy("mp2", bsse_type=["cp", "nocp"])
    names = ["CP-CORRECTED 2-BODY INTERACTION ENERGY", "NOCP-CORRECTED 2-BODY INTERACTION ENERGY",
             "N-BODY (1, 2)@(1, 2) TOTAL ENERGY", "N-BODY (1)@(1, 2) TOTAL ENERGY", "N-BODY (2)@(1, 2) TOTAL ENERGY",
             "N-BODY (1)@(1) TOTAL ENERGY", "N-BODY (2)@(2) TOTAL ENERGY"]
    return {n: psi4.variable(n) for n in names}


def run_dfmp2(binary, workdir, xyz, basis, keys, molecule_keys=""):
    """dfmp2's results file for the complex in `basis` (DF-SCF to 1e-10) with these input keys."""
    yaml = os.path.join(workdir, "in.yaml")
    with open(yaml, "w") as f:
        f.write("molecule:\n%s  xyz: |\n" % molecule_keys)
        for line in xyz.splitlines():
            f.write("    %s\n" % line)
        f.write('basis: "%s"\nscf: {type: df, e_convergence: 1e-10, d_convergence: 1e-10}\nthreads: 2\n%s'
                % (basis, keys))
    out = os.path.join(workdir, "out.json")
    subprocess.run([binary, yaml, "--json", out], check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        return json.load(f)


def dfmp2_energies(binary, workdir, xyz, basis):
    """dfmp2's energies under the same names: the interaction energies from extras.qcvars, the totals from
    extras.dfmp2.interaction.calculations."""
    results = run_dfmp2(binary, workdir, xyz, basis, "interaction: {bsse: both}\n")
    q = results["extras"]["qcvars"]
    got = {n: q[n] for n in ("CP-CORRECTED 2-BODY INTERACTION ENERGY", "NOCP-CORRECTED 2-BODY INTERACTION ENERGY")}
    for c in results["extras"]["dfmp2"]["interaction"]["calculations"]:
        total = c["scf_energy"] + c["mp2_correlation_energy"]
        if c["name"] == "complex":
            got["N-BODY (1, 2)@(1, 2) TOTAL ENERGY"] = total
        elif c["basis"] == "complex":
            got["N-BODY (%d)@(1, 2) TOTAL ENERGY" % c["fragment"]] = total
        else:
            got["N-BODY (%d)@(%d) TOTAL ENERGY" % (c["fragment"], c["fragment"])] = total
    return got


# Counterpoise-corrected gradients (issue 45): Psi4's gradient('mp2', bsse_type='cp', return_total_data=True), the
# gradient of E_AB(AB) - sum E_k(AB) + sum E_k(k), against dfmp2's `interaction: {bsse: cp}` with `driver: gradient`.
GRADIENT_TOLERANCE = 1e-7  # Eh/bohr, every component
GRADIENT_CASES = [(2, "cc-pvdz"), (1, "cc-pvdz"), (16, "cc-pvdz")]  # S22 index, basis
# An open shell: the hydroxyl radical beside a water (a doublet complex; Psi4 reference uhf for every part, whose
# UHF of the closed-shell water is its RHF), through Psi4's dfocc with its Z-vector converged to 1e-11.
OPEN_SHELL_GRADIENT_CASES = [("OH...H2O doublet", "0 2\nO -1.60 -0.10 0.0\nH -0.63 0.03 0.0\n--\n0 1\n"
                              "O 1.350625 0.111469 0.0\nH 1.680398 -0.373741 -0.758561\nH 1.680398 -0.373741 0.758561",
                              "cc-pvdz")]


def psi4_cp_gradient(xyz, basis, open_shell=False):
    psi4 = psi4_setup(xyz, basis)
    # Its Z-vector (CPHF) converged as tightly as the SCF, so that its convergence does not decide the comparison.
    psi4.set_options({"solver_convergence": 1e-10})
    if open_shell:
        psi4.set_options({"reference": "uhf", "pcg_convergence": 1e-11})
    g = psi4.gradient("mp2", bsse_type="cp", return_total_data=True)
    return [x for row in g.np.tolist() for x in row], psi4.variable("CURRENT ENERGY")


def dfmp2_cp_gradient(binary, workdir, xyz, basis, open_shell=False):
    keys = "interaction: {bsse: cp}\ndriver: gradient\n"
    if open_shell:  # the complex's multiplicity given (the fragments' electrons alone would only guess it)
        keys += "reference: uhf\n"
    results = run_dfmp2(binary, workdir, xyz, basis, keys, "  multiplicity: 2\n" if open_shell else "")
    return results["return_result"], results["properties"]["return_energy"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dfmp2", required=True)
    ap.add_argument("--write-reference", help="also write Psi4's energies of every case to this JSON file")
    ap.add_argument("--only", help="run only the complexes whose name contains this text")
    args = ap.parse_args()
    binary = os.path.abspath(args.dfmp2)
    write_to = os.path.abspath(args.write_reference) if args.write_reference else None
    passed = failed = 0
    work = scratch_folder("dfmp2-live-ie-")
    os.chdir(work)
    reference = {"source": "Psi4 1.3.2 (Debian), energy('mp2', bsse_type=['cp', 'nocp']), scf_type df, mp2_type df, "
                           "e_convergence 1e-10, d_convergence 1e-10, written by tests/psi4/live_interaction_test.py",
                 "cases": []}
    for name, xyz in complexes():
        if args.only and args.only not in name:
            continue
        for basis in BASES:
            theirs = psi4_energies(xyz, basis)
            ours = dfmp2_energies(binary, work, xyz, basis)
            reference["cases"].append({"name": name, "basis": basis, "xyz": xyz, "psi4": theirs})
            for what, value in theirs.items():
                tol = INTERACTION_TOLERANCE if "INTERACTION" in what else TOTAL_TOLERANCE
                ok = abs(ours[what] - value) <= tol
                passed += ok
                failed += not ok
                print("%-28s %-11s %-40s dfmp2 %17.10f  psi4 %17.10f  diff %+.1e %s"
                      % (name, basis, what, ours[what], value, ours[what] - value, "ok" if ok else "FAIL"), flush=True)
    gradient_cases = [("S22-%d %s" % (index, S22_CASES[index]), psi4_complexes.s22_complex(index)[0], basis, False)
                      for index, basis in GRADIENT_CASES]
    gradient_cases += [(name, xyz, basis, True) for name, xyz, basis in OPEN_SHELL_GRADIENT_CASES]
    for name, xyz, basis, open_shell in gradient_cases:
        if args.only and args.only not in name:
            continue
        theirs, their_energy = psi4_cp_gradient(xyz, basis, open_shell)
        ours, our_energy = dfmp2_cp_gradient(binary, work, xyz, basis, open_shell)
        diff = max(abs(a - b) for a, b in zip(ours, theirs))
        for what, d, tol in (("CP-corrected total gradient", diff, GRADIENT_TOLERANCE),
                             ("CP-corrected total energy", abs(our_energy - their_energy), INTERACTION_TOLERANCE)):
            ok = len(ours) == len(theirs) and d <= tol
            passed += ok
            failed += not ok
            print("%-28s %-11s %-40s largest difference %.1e (tolerance %.0e) %s"
                  % (name, basis, what, d, tol, "ok" if ok else "FAIL"), flush=True)
    if write_to:
        with open(write_to, "w") as f:
            json.dump(reference, f, indent=1)
            f.write("\n")
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
