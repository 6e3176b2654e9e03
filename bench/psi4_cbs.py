#!/usr/bin/python3
"""Time an MP2/CBS extrapolation in dfmp2 against the same basis sets run one after another, and against Psi4 1.3.2.

A water cluster (bench/psi4_compare.py's (H2O)n) at MP2/cc-pV[TQ]Z by default (the SCF of the largest basis,
corl_xtpl_helgaker_2, Psi4's energy('mp2/cc-pv[tq]z')): dfmp2's one run with `basis: cc-pv[tq]z` (the smaller basis
first, the larger one's SCF from its orbitals projected), dfmp2's two single-basis runs one after the other (each SCF
from SAD, two processes), and Psi4's cbs(). DF-SCF converged to 1e-8, no frozen core, the same thread count, dfmp2 on
its openblas backend (Psi4's BLAS). Each runs in its own subprocess, --repeat times alternating; the table gives medians
of the whole wall time (process start to exit), the ratios, the SCF iterations of the largest basis, the peak resident
memory, the CBS energies' difference, the CPU and the BLAS kernels.

    bench/psi4_cbs.py                                # (H2O)4 cc-pV[TQ]Z, 3 alternations
    bench/psi4_cbs.py --waters 2 --repeat 1          # quick

Exit status 0 when all ran and the CBS total energies agree within 1e-7 Eh, 1 otherwise.
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
psi4.set_options({"scf_type": "df", "mp2_type": "df", "freeze_core": False, "e_convergence": 1e-8,
                  "d_convergence": 1e-8})
e = psi4.energy("mp2/" + %(series)r)
json.dump({"energy": e, "openblas": openblas_core(("openblas", "libblas"))}, open("result.json", "w"))
"""


def run_psi4(args, xyz, workdir, index):
    d = os.path.join(workdir, "psi4.%d" % index)
    os.makedirs(d)
    script = PSI4_WORKER % {"psi4_dir": PSI4_PYTHON_DIR, "bench": HERE, "memory": args.psi4_memory,
                            "threads": args.threads, "xyz": xyz, "series": args.series}
    wall, peak = run(["/usr/bin/python3", "-c", script], d, dict(os.environ, PSI_SCRATCH=d))
    with open(os.path.join(d, "result.json")) as f:
        return dict(json.load(f), whole_seconds=wall, peak_resident_bytes=peak)


def run_dfmp2(args, xyz, workdir, name, basis):
    d = os.path.join(workdir, name)
    os.makedirs(d)
    with open(os.path.join(d, "in.yaml"), "w") as f:
        f.write("molecule:\n  xyz: |\n" + "".join("    %s\n" % line for line in xyz.splitlines()))
        f.write('basis: "%s"\nscf: {type: df, e_convergence: 1e-8, d_convergence: 1e-8}\nthreads: %d\nmemory: "%s"\n'
                'backends: [%s]\n' % (basis, args.threads, args.dfmp2_memory, args.backend))
    wall, peak = run([os.path.abspath(args.dfmp2), "in.yaml", "--json", "out.json"], d)
    with open(os.path.join(d, "out.json")) as f:
        res = json.load(f)
    ex = res["extras"]["dfmp2"]
    return {"whole_seconds": wall, "peak_resident_bytes": peak, "energy": res["return_result"],
            "nbf": res["properties"]["calcinfo_nbasis"], "scf_iterations": ex["problem"]["scf"]["iterations"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dfmp2", default=os.path.join(REPO, "build", "app", "dfmp2"))
    ap.add_argument("--waters", type=int, default=4)
    ap.add_argument("--series", default="cc-pv[tq]z")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--psi4-memory", default="8 GB")
    ap.add_argument("--dfmp2-memory", default="12 GiB")
    ap.add_argument("--backend", default="openblas", help="dfmp2's backend (default openblas, Psi4's BLAS)")
    ap.add_argument("--json", help="write every run's figures here")
    args = ap.parse_args()
    prefix, rest = args.series.split("[")
    letters, suffix = rest.split("]")
    bases = [prefix + z + suffix for z in letters]
    atoms, _, _ = cluster(args.waters)
    xyz = xyz_lines(atoms)
    work = tempfile.mkdtemp(prefix="dfmp2-bench-cbs-")
    one, separate, psi4 = [], [], []
    for i in range(args.repeat):
        one.append(run_dfmp2(args, xyz, work, "cbs.%d" % i, args.series))
        print("dfmp2 %s one run: %.1f s" % (args.series, one[-1]["whole_seconds"]), flush=True)
        parts = [run_dfmp2(args, xyz, work, "%s.%d" % (b, i), b) for b in bases]
        separate.append({"whole_seconds": sum(p["whole_seconds"] for p in parts), "parts": parts,
                         "peak_resident_bytes": max(p["peak_resident_bytes"] for p in parts)})
        print("dfmp2 %s one after another: %.1f s" % (" + ".join(bases), separate[-1]["whole_seconds"]), flush=True)
        psi4.append(run_psi4(args, xyz, work, i))
        print("psi4  mp2/%s: %.1f s" % (args.series, psi4[-1]["whole_seconds"]), flush=True)
    med = lambda runs: statistics.median(r["whole_seconds"] for r in runs)  # noqa: E731
    diff = abs(one[0]["energy"] - psi4[0]["energy"])
    notes = machine_notes()
    print("\n(H2O)%d MP2/%s (%s basis functions), %d threads" % (
        args.waters, args.series, " and ".join(str(p["nbf"]) for p in separate[0]["parts"]), args.threads))
    print("CPU: %s; OPENBLAS_CORETYPE=%s; Psi4's OpenBLAS kernels: %s" % (
        notes["cpu"], os.environ.get("OPENBLAS_CORETYPE", "unset"), psi4[0]["openblas"]))
    for name, runs in (("dfmp2 one run", one), ("dfmp2 one after another", separate), ("Psi4 cbs()", psi4)):
        print("%-24s whole %.1f s (median of %d; runs %s), peak resident %.2f GiB" % (
            name, med(runs), len(runs), ", ".join("%.1f" % r["whole_seconds"] for r in runs),
            max(r["peak_resident_bytes"] for r in runs) / 2**30))
    print("largest basis SCF iterations: one run %s (projected guess), alone %s (SAD)" % (
        one[0]["scf_iterations"], separate[0]["parts"][-1]["scf_iterations"]))
    print("dfmp2 one run / one after another: %.3f; dfmp2 one run / Psi4: %.3f" % (
        med(one) / med(separate), med(one) / med(psi4)))
    print("CBS total energies differ by %.1e Eh" % diff)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"waters": args.waters, "series": args.series, "machine": notes, "one": one,
                       "separate": separate, "psi4": psi4, "difference": diff}, f, indent=1)
    shutil.rmtree(work, ignore_errors=True)
    return 0 if diff <= 1e-7 else 1


if __name__ == "__main__":
    sys.exit(main())
