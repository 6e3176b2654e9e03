#!/usr/bin/env python3
"""dfmp2 on 1, 2, ... ranks of this machine, side by side: per phase the time (the busiest rank's), speed-up and
parallel efficiency, the energies' differences, and the bytes each rank moved against the formulas of
bench/mpi_model.py (README "MPI"). Writes the measurements for bench/mpi_model.py.

    bench/mpi_scaling.py --molecule h2o16 --ranks 1,2 --threads 1 --repeat 3 --out bench/mpi/h2o16_scaling.json

Runs alternate between the rank counts, `--repeat` times; the run of median whole time is kept for each count. The
molecule is the (H2O)n lattice of bench/psi4_compare.py (DF-SCF with <basis>-jkfit, DF-MP2 with <basis>-ri). Needs
build/app/dfmp2, build/bench/bench_problem_size and mpirun.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import mpi_model  # noqa: E402
import psi4_compare  # noqa: E402  (the (H2O)n lattice and the machine notes)

SCF_PHASES = ["SCF J/K setup", "SCF J/K", "SCF other"]
MP2_PHASES = ["metric", "transform", "fitting", "pair_energy"]


def mpirun(ranks):
    cmd = ["mpirun", "-q", "-np", str(ranks)]
    if ranks > os.cpu_count():
        cmd.append("--oversubscribe")
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return cmd


def write_input(path, n, basis, threads, memory=None, min_order=None):
    atoms, shape, _ = psi4_compare.cluster(n)
    lines = "\n".join("    " + l for l in psi4_compare.xyz_lines(atoms).splitlines())
    with open(path, "w") as f:
        f.write("# (H2O)%d on a %dx%dx%d lattice (bench/psi4_compare.py)\nmolecule:\n  xyz: |\n%s\nbasis: %s\n"
                "scf: {type: df}\nthreads: %d\n" % (n, shape[0], shape[1], shape[2], lines, basis, threads))
        if memory:
            f.write("memory: %s\n" % memory)
        if min_order:
            f.write("mpi: {distributed_min_order: %d}\n" % min_order)


def extract(result):
    """What the model and the tables need from one results file."""
    ex = result["extras"]["dfmp2"]
    scf = ex["problem"]["scf"]
    run0 = ex["backends"][0]
    phases = {}
    for group in (scf["ranks"], run0["ranks"]):
        for ph in group:
            per_rank = ph["ranks"]
            phases[ph["phase"]] = {
                "wall": max(r["seconds"] for r in per_rank),
                "busy": max(r["seconds"] - r["wait_seconds"] for r in per_rank),
                "per_rank": per_rank}
    kernels = {}
    for k in scf["kernels"] + run0["kernels"]:
        key = "%s/%s" % (k["step"], k["kernel"])
        e = kernels.setdefault(key, {"seconds": 0.0, "flops": 0.0, "bytes": 0.0})
        e["seconds"] += k["seconds"]
        e["flops"] += k["flops"]
        e["bytes"] += k["bytes"]
    return {"iterations": scf["iterations"], "phases": phases, "kernels": kernels,
            "energies": {k: result["properties"][k] for k in ("scf_total_energy", "mp2_correlation_energy")},
            "peak_resident_bytes": ex["mpi"]["peak_resident_bytes"],
            "blocking": run0["blocking"]}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--molecule", default="h2o16", help="h2oN: N waters on the lattice")
    p.add_argument("--basis", default="cc-pvdz")
    p.add_argument("--ranks", default="1,2")
    p.add_argument("--threads", type=int, default=1, help="threads of each rank")
    p.add_argument("--cores", type=int, help="instead of --threads: these cores shared by the ranks (threads per "
                                              "rank = cores / ranks)")
    p.add_argument("--memory", help="each rank's `memory` (default: the program's)")
    p.add_argument("--min-order", type=int, help="mpi.distributed_min_order (default: the program's)")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--dfmp2", default=os.path.join(HERE, "..", "build", "app", "dfmp2"))
    p.add_argument("--problem-size", default=os.path.join(HERE, "..", "build", "bench", "bench_problem_size"))
    p.add_argument("--out", help="the measurements, for bench/mpi_model.py")
    args = p.parse_args(argv)
    n = int(args.molecule.lower().replace("h2o", ""))
    counts = [int(x) for x in args.ranks.split(",")]
    with tempfile.TemporaryDirectory(prefix="dfmp2-mpi-bench-") as d:
        inp = os.path.join(d, "in.yaml")
        write_input(inp, n, args.basis, args.threads, args.memory, args.min_order)
        # With --cores, an input per rank count, its threads the cores shared by the ranks.
        inputs = {}
        for c in counts:
            inputs[c] = inp
            if args.cores:
                inputs[c] = os.path.join(d, "in%d.yaml" % c)
                write_input(inputs[c], n, args.basis, max(1, args.cores // c), args.memory, args.min_order)
        size = json.loads(subprocess.run([args.problem_size, inp], check=True, stdout=subprocess.PIPE,
                                         text=True).stdout)
        size["nact"] = size["nocc"]
        runs = {c: [] for c in counts}
        for rep in range(args.repeat):
            for c in counts:
                out = os.path.join(d, "r%d_%d.json" % (c, rep))
                start = time.time()
                proc = subprocess.run(mpirun(c) + ["--bind-to", "none", args.dfmp2, inputs[c], "--json", out],
                                      stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)
                whole = time.time() - start
                if proc.returncode != 0:
                    print("dfmp2 on %d ranks failed (%d): %s" % (c, proc.returncode, proc.stderr.strip()))
                    return 1
                with open(out) as f:
                    e = extract(json.load(f))
                e["whole"] = whole
                runs[c].append(e)
                print("  run %d, %d ranks: %.1f s" % (rep + 1, c, whole), flush=True)
    kept = {}
    for c, rs in runs.items():
        med = statistics.median_low([r["whole"] for r in rs])
        kept[c] = next(r for r in rs if r["whole"] == med)
        kept[c]["whole_all"] = [r["whole"] for r in rs]
    machine = psi4_compare.machine_notes()
    print("\n(H2O)%d %s: nbf %d, nocc %d, naux %d (RI) and %d (JK), packed pairs %d; %s; %s threads per rank; "
          "OPENBLAS_CORETYPE=%s; median of %d runs" % (
              n, args.basis, size["nbf"], size["nocc"], size["naux_ri"], size["naux_jk"], size["npacked_jk"],
              machine["cpu"], args.threads if not args.cores else "%d cores shared," % args.cores,
              os.environ.get("OPENBLAS_CORETYPE", "(unset)"), args.repeat))
    base = kept[counts[0]]
    headers = ["phase"] + ["%d rank%s s" % (c, "s" if c > 1 else "") for c in counts] + \
              ["speed-up %d" % c for c in counts[1:]] + ["efficiency %d" % c for c in counts[1:]]
    rows = []
    for ph in SCF_PHASES + MP2_PHASES + ["whole run"]:
        t = {c: (kept[c]["whole"] if ph == "whole run" else kept[c]["phases"][ph]["wall"]) for c in counts}
        row = [ph] + ["%.3f" % t[c] for c in counts]
        row += ["%.2f" % (t[counts[0]] / t[c]) if t[c] > 0 else "-" for c in counts[1:]]
        row += ["%.0f %%" % (100 * t[counts[0]] / (c / counts[0] * t[c])) if t[c] > 0 else "-" for c in counts[1:]]
        rows.append(row)
    mpi_model.table(headers, rows)
    print()
    for c in counts:
        print("  %d rank%s: peak resident memory per rank %s GiB%s" % (
            c, "s" if c > 1 else "", ", ".join("%.2f" % (b / 2**30) for b in kept[c]["peak_resident_bytes"]),
            " (memory: %s each)" % args.memory if args.memory else ""))
    for c in counts[1:]:
        for k, v in kept[c]["energies"].items():
            print("  %d ranks: %s %+.2e Eh from %d rank" % (c, k, v - base["energies"][k], counts[0]))
    # Bytes each rank moved, against the formulas.
    print()
    rows = []
    for c in counts:
        if c == 1:
            continue
        vol = mpi_model.volumes(size, c, kept[c]["iterations"])
        for ph in ["SCF J/K setup", "SCF J/K", "fitting", "pair_energy"]:
            per = kept[c]["phases"][ph]["per_rank"]
            sent = [r["bytes_sent"] for r in per]
            received = [r["bytes_received"] for r in per]
            # Payload only: the lender's headers (2 KiB) and requests (16 bytes) are in the measured bytes too.
            rows.append([c, ph, " / ".join("%.1f" % (x / 2**20) for x in sent),
                         " / ".join("%.1f" % (x / 2**20) for x in received), "%.2f" % (sum(sent) / 2**20),
                         "%.2f" % (vol[ph]["total"] / 2**20),
                         "%.4f" % (sum(sent) / vol[ph]["total"]) if vol[ph]["total"] > 0 else "-"])
    if rows:
        mpi_model.table(["ranks", "phase", "sent MiB (each rank)", "received MiB (each rank)", "sent, all ranks",
                         "formula", "measured / formula"], rows)
    if args.out:
        record = {"molecule": "(H2O)%d %s" % (n, args.basis), "machine": machine, "cores": os.cpu_count(),
                  "threads": args.threads, "cores_shared": args.cores, "memory": args.memory,
                  "min_order": args.min_order, "repeat": args.repeat, "size": size,
                  "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
                  "runs": {str(c): kept[c] for c in counts}}
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(record, f, indent=1)
        print("\nwritten to %s" % args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
