#!/usr/bin/python3
# Runs under Debian's /usr/bin/python3 with Psi4 1.3.2 from the Debian `psi4` package:
#     PYTHONPATH=/usr/lib/x86_64-linux-gnu /usr/bin/python3 bench/scf_iterations.py [--clusters 2,4,8,16]
"""SCF iteration counts of dfmp2 and Psi4 1.3.2 side by side, at the same convergence, each program with its defaults.

The molecules are the validation decks that name a molecule (tests/validation/decks/*.yaml: closed shells, the S22
and S66 dimers as complexes, the open-shell radicals in UHF and ROHF) and, with --clusters, the water clusters of
bench/psi4_compare.py. Each deck runs as written (its basis, reference, SCF type, convergence and iteration limit)
without `interaction` (the complex alone); Psi4 gets the same molecule, basis, JK fitting basis, reference, SCF type
and e/d convergence. Psi4 counts its iterations in "SCF ITERATIONS", which leaves out its SAD iteration (a Fock
build and diagonalisation with the guessed density, printed as "iter SAD"); dfmp2's first iteration is that build.
So the comparison is of Fock builds: Psi4's iterations plus one with a SAD guess, against dfmp2's iterations.
Prints one row per molecule and the totals; exit 0 when every run converged, 1 otherwise.
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PSI4_PYTHON_DIR = "/usr/lib/x86_64-linux-gnu"

PSI4_WORKER = r"""
import json, sys
sys.path.insert(0, %(dir)r)
import psi4
spec = json.load(open(sys.argv[1]))
psi4.set_memory("2 GB")
psi4.set_num_threads(2)
psi4.core.set_output_file(sys.argv[2], False)
psi4.geometry(spec["geometry"])
psi4.set_options(spec["options"])
e = psi4.energy("scf")
sad = "Guess Type is SAD" in open(sys.argv[2]).read()
json.dump({"energy": e, "iterations": int(psi4.variable("SCF ITERATIONS")), "sad": sad}, open(sys.argv[3], "w"))
"""


def psi4_geometry(molecule):
    """Psi4's geometry string from a deck's molecule mapping (xyz lines, charge, multiplicity, units)."""
    lines = []
    xyz = molecule["xyz"].strip("\n").splitlines()
    if "charge" in molecule or "multiplicity" in molecule:
        lines.append("%d %d" % (molecule.get("charge", 0), molecule.get("multiplicity", 1)))
    lines += xyz
    lines.append("units %s" % molecule.get("units", "angstrom"))
    lines += ["symmetry c1", "no_reorient", "no_com"]
    return "\n".join(lines)


def run_dfmp2(dfmp2, deck, workdir):
    spec = dict(deck)
    spec.pop("interaction", None)
    spec.pop("backends", None)
    path = os.path.join(workdir, "in.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(spec, f)
    out = os.path.join(workdir, "out.json")
    r = subprocess.run([dfmp2, path, "--json", out], capture_output=True, text=True, cwd=workdir)
    if r.returncode != 0:
        return None, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "exit %d" % r.returncode
    j = json.load(open(out))
    scf = j["extras"]["dfmp2"]["problem"]["scf"]
    return {"iterations": int(scf["iterations"]), "energy": j["properties"]["scf_total_energy"]}, None


def run_psi4(python, deck, workdir):
    scf = deck.get("scf", {})
    options = {
        "basis": deck["basis"],
        "scf_type": "df" if scf.get("type", "df") == "df" else "pk",
        "reference": deck.get("reference", "rhf"),
        "e_convergence": float(scf.get("e_convergence", 1e-8)),
        "d_convergence": float(scf.get("d_convergence", 1e-8)),
        "maxiter": int(scf.get("max_iterations", 100)),
    }
    if "jk_basis" in scf:
        options["df_basis_scf"] = scf["jk_basis"]
    spec = os.path.join(workdir, "psi4.json")
    json.dump({"geometry": psi4_geometry(deck["molecule"]), "options": options}, open(spec, "w"))
    worker = os.path.join(workdir, "worker.py")
    open(worker, "w").write(PSI4_WORKER % {"dir": PSI4_PYTHON_DIR})
    result = os.path.join(workdir, "psi4_result.json")
    env = dict(os.environ, PYTHONPATH=PSI4_PYTHON_DIR)
    r = subprocess.run([python, worker, spec, os.path.join(workdir, "psi4.out"), result], capture_output=True,
                       text=True, cwd=workdir, env=env)
    if r.returncode != 0:
        return None, (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]
    return json.load(open(result)), None


def water_cluster_deck(n):
    """The water cluster of bench/psi4_compare.py (its --write-inputs), as a deck."""
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([sys.executable, os.path.join(HERE, "psi4_compare.py"), "--waters", str(n), "--write-inputs", d],
                       check=True, capture_output=True)
        path = glob.glob(os.path.join(d, "*.yaml"))[0]
        deck = yaml.safe_load(open(path))
    return deck


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dfmp2", default=os.path.join(REPO, "build", "app", "dfmp2"))
    p.add_argument("--python", default="/usr/bin/python3")
    p.add_argument("--decks", default=os.path.join(REPO, "tests", "validation", "decks", "*.yaml"))
    p.add_argument("--clusters", default="", help="water cluster sizes, comma-separated (e.g. 2,4,8,16)")
    p.add_argument("--only", default="", help="only the decks whose names contain one of these, comma-separated")
    p.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    args = p.parse_args()

    cases = []
    for path in sorted(glob.glob(args.decks)):
        deck = yaml.safe_load(open(path))
        name = os.path.basename(path)[:-5]
        if args.only and not any(w in name for w in args.only.split(",")):
            continue
        if "molecule" in deck and isinstance(deck["molecule"], dict):
            cases.append((os.path.basename(path)[:-5], deck))
    for n in [int(x) for x in args.clusters.split(",") if x]:
        deck = water_cluster_deck(n)
        deck.pop("save_integrals", None)
        cases.append(("(H2O)%d" % n, deck))

    rows, failed = [], 0
    print("%-40s %-5s %-5s %10s %12s %12s %12s" % ("molecule", "ref", "scf", "Psi4 iter", "Psi4 builds",
                                                   "dfmp2 builds", "dE (Eh)"))
    for name, deck in cases:
        with tempfile.TemporaryDirectory() as work:
            psi, psi_err = run_psi4(args.python, deck, work)
            dfm, dfm_err = run_dfmp2(args.dfmp2, deck, work)
        ref = deck.get("reference", "rhf")
        kind = deck.get("scf", {}).get("type", "df")
        if psi is None or dfm is None:
            failed += 1
            print("%-40s %-5s %-3s  failed: %s" % (name, ref, kind, psi_err or dfm_err))
            continue
        builds = psi["iterations"] + (1 if psi["sad"] else 0)
        rows.append({"molecule": name, "reference": ref, "scf_type": kind, "psi4_iterations": psi["iterations"],
                     "psi4_builds": builds, "dfmp2_iterations": dfm["iterations"],
                     "energy_difference": dfm["energy"] - psi["energy"]})
        print("%-40s %-5s %-5s %10d %12d %12d %12.2e" % (name, ref, kind, psi["iterations"], builds, dfm["iterations"],
                                                        dfm["energy"] - psi["energy"]))
        sys.stdout.flush()
    more = [r for r in rows if r["dfmp2_iterations"] > r["psi4_builds"]]
    fewer = [r for r in rows if r["dfmp2_iterations"] < r["psi4_builds"]]
    print("\n%d molecules: Fock builds dfmp2 %d in all, Psi4 %d (%d iterations + SAD); dfmp2 needs fewer on %d, "
          "more on %d: %s" % (
              len(rows), sum(r["dfmp2_iterations"] for r in rows), sum(r["psi4_builds"] for r in rows),
              sum(r["psi4_iterations"] for r in rows), len(fewer), len(more),
              ", ".join("%s (%d vs %d)" % (r["molecule"], r["dfmp2_iterations"], r["psi4_builds"]) for r in more)
              or "none"))
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
