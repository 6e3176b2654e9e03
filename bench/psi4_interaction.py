#!/usr/bin/python3
"""Time a counterpoise-corrected DF-MP2 interaction energy in dfmp2 against Psi4 1.3.2 on the same machine.

Psi4 runs `energy('mp2', bsse_type='cp')` (the complex and each fragment in the complex's basis: three DF-SCF +
DF-MP2 calculations, each computing its own integrals); dfmp2 runs the same with `interaction: {bsse: cp}` (one J/K
set-up and one DF-MP2 run shared by the three). Both with DF-SCF (Psi4's default fitting sets, which dfmp2 picks
too), converged to 1e-8, no frozen core, the same thread count. Each program runs in its own subprocess, --repeat
times alternating; the table gives medians of the whole wall time (process start to exit), the ratio dfmp2 / Psi4,
dfmp2's breakdown (the shared J/K set-up, each SCF, the one DF-MP2 run), both CP interaction energies and their
difference, the peak resident memory of each program, the CPU and the BLAS kernels each ran.

    bench/psi4_interaction.py                       # S22-7 adenine-thymine, aug-cc-pVDZ (536 basis functions)
    bench/psi4_interaction.py --s22 2 --basis cc-pvdz --repeat 1   # quick: the water dimer
    bench/psi4_interaction.py --json /tmp/at.json

Exit status 0 when both programs ran, 1 when one failed or their energies disagree by more than 1e-6 Eh.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "scripts"))
sys.path.insert(0, HERE)
import psi4_complexes  # noqa: E402
from psi4_compare import machine_notes, openblas_core  # noqa: E402  (the CPU and Psi4's OpenBLAS kernels)

PSI4_PYTHON_DIR = "/usr/lib/x86_64-linux-gnu"

PSI4_WORKER = r"""
import json, sys, time
sys.path.insert(0, %(psi4_dir)r)
sys.path.insert(0, %(bench)r)
import psi4
from psi4_compare import openblas_core
psi4.core.set_output_file("output.dat", False)
psi4.set_memory(%(memory)r)
psi4.core.set_num_threads(%(threads)d)
psi4.geometry("units angstrom\nsymmetry c1\nno_reorient\nno_com\n" + %(xyz)r)
psi4.set_options({"basis": %(basis)r, "scf_type": "df", "mp2_type": "df", "freeze_core": False,
                  "e_convergence": 1e-8, "d_convergence": 1e-8})
t0 = time.perf_counter()
e = psi4.energy("mp2", bsse_type="cp")
json.dump({"cp": float(e), "seconds": time.perf_counter() - t0, "openblas": openblas_core(("openblas", "libblas"))},
          open("result.json", "w"))
"""


def run(cmd, cwd, env=None):
    """Wall seconds and peak resident bytes of a child process; raises on failure."""
    with open(os.path.join(cwd, "stdout"), "w") as out, open(os.path.join(cwd, "stderr"), "w") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        with open(os.path.join(cwd, "stderr")) as f:
            raise RuntimeError("%s failed: %s" % (cmd[0], f.read()[-2000:]))
    return wall, usage.ru_maxrss * 1024.0


def run_psi4(args, xyz, workdir, index):
    d = os.path.join(workdir, "psi4.%d" % index)
    os.makedirs(d)
    script = PSI4_WORKER % {"psi4_dir": PSI4_PYTHON_DIR, "bench": HERE, "memory": args.psi4_memory,
                            "threads": args.threads, "xyz": xyz, "basis": args.basis}
    env = dict(os.environ, PSI_SCRATCH=d)
    wall, peak = run(["/usr/bin/python3", "-c", script], d, env)
    with open(os.path.join(d, "result.json")) as f:
        r = json.load(f)
    return {"whole_seconds": wall, "peak_resident_bytes": peak, "cp": r["cp"], "openblas": r["openblas"]}


def run_dfmp2(args, xyz, workdir, index):
    d = os.path.join(workdir, "dfmp2.%d" % index)
    os.makedirs(d)
    with open(os.path.join(d, "in.yaml"), "w") as f:
        f.write("molecule:\n  xyz: |\n")
        for line in xyz.splitlines():
            f.write("    %s\n" % line)
        f.write('basis: "%s"\nscf: {type: df, e_convergence: 1e-8, d_convergence: 1e-8}\ninteraction: {bsse: cp}\n'
                'threads: %d\nmemory: "%s"\n' % (args.basis, args.threads, args.dfmp2_memory))
    wall, peak = run([os.path.abspath(args.dfmp2), "in.yaml", "--json", "out.json"], d)
    with open(os.path.join(d, "out.json")) as f:
        res = json.load(f)
    ie = res["extras"]["dfmp2"]["interaction"]
    calcs = ie["calculations"]
    backend = res["extras"]["dfmp2"]["backends"][0]
    return {"whole_seconds": wall, "peak_resident_bytes": peak,
            "cp": res["extras"]["qcvars"]["CP-CORRECTED INTERACTION ENERGY"],
            "nbf": calcs[0]["nbf"],
            "jk_setup_seconds": ie["jk_setup_seconds"],
            "complex_scf_seconds": calcs[0]["scf_seconds"],
            "fragment_scf_seconds": [c["scf_seconds"] for c in calcs[1:]],
            "scf_iterations": [c["scf_iterations"] for c in calcs],
            "mp2_seconds": backend["wall_time_seconds"],
            "backend": backend["backend"], "backend_details": backend.get("details")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dfmp2", default=os.path.join(REPO, "build", "app", "dfmp2"))
    ap.add_argument("--s22", type=int, default=7, help="S22 entry (default 7, adenine-thymine Watson-Crick)")
    ap.add_argument("--basis", default="aug-cc-pvdz")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--psi4-memory", default="8 GB")
    ap.add_argument("--dfmp2-memory", default="12 GiB")
    ap.add_argument("--skip-psi4", action="store_true")
    ap.add_argument("--json", help="write every run's figures here")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (inputs, outputs, Psi4's output.dat)")
    args = ap.parse_args()
    xyz, name = psi4_complexes.s22_complex(args.s22)
    work = tempfile.mkdtemp(prefix="dfmp2-bench-ie-")
    psi4_runs, dfmp2_runs = [], []
    for i in range(args.repeat):
        if not args.skip_psi4:
            psi4_runs.append(run_psi4(args, xyz, work, i))
            print("psi4  run %d: %.1f s, CP %.10f" % (i, psi4_runs[-1]["whole_seconds"], psi4_runs[-1]["cp"]),
                  flush=True)
        dfmp2_runs.append(run_dfmp2(args, xyz, work, i))
        print("dfmp2 run %d: %.1f s, CP %.10f" % (i, dfmp2_runs[-1]["whole_seconds"], dfmp2_runs[-1]["cp"]),
              flush=True)
    med = lambda runs, key: statistics.median(r[key] for r in runs)  # noqa: E731
    d = dfmp2_runs[0]
    print("\n%s (S22-%d), %s, %d basis functions, %d threads" % (name, args.s22, args.basis, d["nbf"], args.threads))
    notes = machine_notes()
    print("CPU: %s; OPENBLAS_CORETYPE=%s" % (notes["cpu"], os.environ.get("OPENBLAS_CORETYPE", "unset")))
    print("dfmp2 backend %s; dfmp2 whole %.1f s (median of %d), peak resident %.2f GiB"
          % (d["backend"], med(dfmp2_runs, "whole_seconds"), len(dfmp2_runs), d["peak_resident_bytes"] / 2**30))
    print("  shared J/K set-up %.1f s (in the complex's SCF %.1f s), fragment SCFs %s s, one DF-MP2 run for all "
          "three %.1f s; SCF iterations %s"
          % (d["jk_setup_seconds"], d["complex_scf_seconds"],
             " + ".join("%.1f" % s for s in d["fragment_scf_seconds"]), d["mp2_seconds"], d["scf_iterations"]))
    summary = {"complex": name, "s22": args.s22, "basis": args.basis, "threads": args.threads, "machine": notes,
               "dfmp2": dfmp2_runs, "psi4": psi4_runs}
    status = 0
    if psi4_runs:
        p = psi4_runs[0]
        ratio = med(dfmp2_runs, "whole_seconds") / med(psi4_runs, "whole_seconds")
        diff = d["cp"] - p["cp"]
        print("Psi4 (OpenBLAS %s): whole %.1f s (median of %d), peak resident %.2f GiB"
              % (p["openblas"], med(psi4_runs, "whole_seconds"), len(psi4_runs), p["peak_resident_bytes"] / 2**30))
        print("whole time dfmp2 / Psi4: %.3f (target <= 0.4)" % ratio)
        print("CP interaction energy: dfmp2 %.10f, Psi4 %.10f Eh, difference %.1e Eh (%.5f kcal/mol each)"
              % (d["cp"], p["cp"], diff, d["cp"] * 627.5094737775374))
        summary["ratio"] = ratio
        status = 1 if abs(diff) > 1e-6 else 0
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    if args.keep:
        print("kept %s" % work)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
