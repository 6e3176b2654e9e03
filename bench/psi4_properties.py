#!/usr/bin/python3
"""Time MP2 properties (the relaxed density and what it gives) in dfmp2 against Psi4 1.3.2 on the same machine.

Both compute the relaxed RHF DF-MP2 density of a water cluster (bench/psi4_compare.py's (H2O)n) with DF-SCF
(Psi4's default fitting sets, which dfmp2 picks too), converged to 1e-8, no frozen core, the same thread count, and
its dipole, quadrupole, Mulliken charges and natural-orbital occupations: Psi4's `properties('mp2', properties=[...])`
(its dfmp2 module), dfmp2's `driver: properties` on its openblas backend (--backend: the same OpenBLAS kernels). A
dfmp2 `driver: energy` run of the same input gives the cost of the density over the energy. Each program runs in its
own subprocess, --repeat times alternating; the table gives medians of the whole wall time (process start to exit),
the ratios, the peak resident memory of each, the relaxed dipoles' difference, the CPU and the BLAS kernels.

    bench/psi4_properties.py                          # (H2O)16 cc-pVDZ (384 basis functions), 3 alternations
    bench/psi4_properties.py --waters 4 --repeat 1    # quick

Exit status 0 when all ran and the relaxed dipoles agree within 1e-5 e a0, 1 otherwise.
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from psi4_compare import cluster, machine_notes, xyz_lines  # noqa: E402
from psi4_interaction import run  # noqa: E402  (wall time and peak memory of a child process)

PSI4_PYTHON_DIR = "/usr/lib/x86_64-linux-gnu"
DEBYE = 2.541746451895025

PSI4_WORKER = r"""
import json, sys
sys.path.insert(0, %(psi4_dir)r)
sys.path.insert(0, %(bench)r)
import psi4
from psi4_compare import openblas_core
psi4.core.set_output_file("output.dat", False)
psi4.set_memory(%(memory)r)
psi4.core.set_num_threads(%(threads)d)
psi4.geometry("0 1\nunits angstrom\nsymmetry c1\nno_reorient\nno_com\n" + %(xyz)r)
psi4.set_options({"basis": %(basis)r, "scf_type": "df", "mp2_type": "df", "freeze_core": False,
                  "e_convergence": 1e-8, "d_convergence": 1e-8})
psi4.properties("mp2", properties=["dipole", "quadrupole", "mulliken_charges", "no_occupations"])
json.dump({"dipole": [psi4.variable("MP2 DIPOLE " + x) / %(debye)r for x in "XYZ"],
           "openblas": openblas_core(("openblas", "libblas"))}, open("result.json", "w"))
"""


def run_psi4(args, xyz, workdir, index):
    d = os.path.join(workdir, "psi4.%d" % index)
    os.makedirs(d)
    script = PSI4_WORKER % {"psi4_dir": PSI4_PYTHON_DIR, "bench": HERE, "memory": args.psi4_memory,
                            "threads": args.threads, "xyz": xyz, "basis": args.basis, "debye": DEBYE}
    wall, peak = run(["/usr/bin/python3", "-c", script], d, dict(os.environ, PSI_SCRATCH=d))
    with open(os.path.join(d, "result.json")) as f:
        return dict(json.load(f), whole_seconds=wall, peak_resident_bytes=peak)


def run_dfmp2(args, xyz, workdir, index, driver):
    d = os.path.join(workdir, "dfmp2.%s.%d" % (driver, index))
    os.makedirs(d)
    with open(os.path.join(d, "in.yaml"), "w") as f:
        f.write("molecule:\n  xyz: |\n" + "".join("    %s\n" % line for line in xyz.splitlines()))
        f.write('basis: "%s"\nscf: {type: df, e_convergence: 1e-8, d_convergence: 1e-8}\ndriver: %s\n'
                'threads: %d\nmemory: "%s"\nbackends: [%s]\n' % (args.basis, driver, args.threads, args.dfmp2_memory,
                                                              args.backend))
    wall, peak = run([os.path.abspath(args.dfmp2), "in.yaml", "--json", "out.json"], d)
    with open(os.path.join(d, "out.json")) as f:
        res = json.load(f)
    ex = res["extras"]["dfmp2"]
    out = {"whole_seconds": wall, "peak_resident_bytes": peak, "nbf": res["properties"]["calcinfo_nbasis"],
           "backend": ex["backends"][0]["backend"]}
    if driver == "properties":
        out.update(dipole=ex["properties"]["relaxed"]["dipole"], density_seconds=ex["properties"]["density_seconds"],
                   properties_seconds=ex["properties"]["seconds"])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dfmp2", default=os.path.join(REPO, "build", "app", "dfmp2"))
    ap.add_argument("--waters", type=int, default=16)
    ap.add_argument("--basis", default="cc-pvdz")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--psi4-memory", default="8 GB")
    ap.add_argument("--dfmp2-memory", default="12 GiB")
    ap.add_argument("--backend", default="openblas", help="dfmp2's backend (default openblas, Psi4's BLAS)")
    ap.add_argument("--json", help="write every run's figures here")
    args = ap.parse_args()
    atoms, _, _ = cluster(args.waters)
    xyz = xyz_lines(atoms)
    work = tempfile.mkdtemp(prefix="dfmp2-bench-properties-")
    psi4_runs, dfmp2_runs, energy_runs = [], [], []
    for i in range(args.repeat):
        psi4_runs.append(run_psi4(args, xyz, work, i))
        print("psi4  properties run %d: %.1f s" % (i, psi4_runs[-1]["whole_seconds"]), flush=True)
        dfmp2_runs.append(run_dfmp2(args, xyz, work, i, "properties"))
        print("dfmp2 properties run %d: %.1f s" % (i, dfmp2_runs[-1]["whole_seconds"]), flush=True)
        energy_runs.append(run_dfmp2(args, xyz, work, i, "energy"))
        print("dfmp2 energy     run %d: %.1f s" % (i, energy_runs[-1]["whole_seconds"]), flush=True)
    med = lambda runs, key="whole_seconds": statistics.median(r[key] for r in runs)  # noqa: E731
    d, p = dfmp2_runs[0], psi4_runs[0]
    diff = max(abs(a - b) for a, b in zip(d["dipole"], p["dipole"]))
    notes = machine_notes()
    ratio, over_energy = med(dfmp2_runs) / med(psi4_runs), med(dfmp2_runs) / med(energy_runs)
    print("\n(H2O)%d %s, %d basis functions, %d threads" % (args.waters, args.basis, d["nbf"], args.threads))
    print("CPU: %s; OPENBLAS_CORETYPE=%s" % (notes["cpu"], os.environ.get("OPENBLAS_CORETYPE", "unset")))
    for name, runs in (("dfmp2 properties", dfmp2_runs), ("dfmp2 energy", energy_runs), ("Psi4 properties", psi4_runs)):
        print("%-17s whole %.1f s (median of %d; runs %s), peak resident %.2f GiB" % (
            name, med(runs), len(runs), ", ".join("%.1f" % r["whole_seconds"] for r in runs),
            max(r["peak_resident_bytes"] for r in runs) / 2**30))
    print("dfmp2: the relaxed density step %.1f s, the properties from it %.2f s; Psi4's OpenBLAS kernels: %s" % (
        med(dfmp2_runs, "density_seconds"), med(dfmp2_runs, "properties_seconds"), p["openblas"]))
    print("whole time dfmp2 / Psi4: %.3f (target <= 0.5); dfmp2 properties / dfmp2 energy: %.2f (target <= 2)" % (
        ratio, over_energy))
    print("relaxed dipoles differ by %.1e e a0" % diff)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"waters": args.waters, "basis": args.basis, "threads": args.threads, "machine": notes,
                       "ratio": ratio, "over_energy": over_energy, "dipole_difference": diff, "dfmp2": dfmp2_runs,
                       "energy": energy_runs, "psi4": psi4_runs}, f, indent=1)
    shutil.rmtree(work, ignore_errors=True)
    return 0 if diff <= 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
