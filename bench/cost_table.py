#!/usr/bin/env python3
"""The cost of one DF-MP2 energy on the Trainium device models and on this machine's CPU (README "Cost of a
calculation").

For each problem ((H2O)16 cc-pVDZ on the benchmarks' 3.0 angstrom lattice, and the synthetic medium shape of the
published Trainium pipeline), runs dfmp2 twice with a fresh compile cache: the CPU backend in fp64 and fp32 next to
trn1 and trn2 in fp32, bf16 and bf16x3. The first run is the cold one (every kernel compiles), the second finds
its kernels in the cache (warm). Prints one Markdown table per problem from the results files' extras.dfmp2.cost:
per run and instance the cold and warm seconds and the warm dollars and kWh, alone on the instance and per
calculation (the instance full of such runs).

    bench/cost_table.py                         # both problems, avx512 (else openblas) as the CPU backend
    bench/cost_table.py --problems medium --cpu openblas --json cost.json

Results: bench/README.md, "Cost of a calculation".
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import psi4_compare  # noqa: E402  (the cluster geometry, shared with the Psi4 comparison)

DEVICE_PRECISIONS = "[fp32, bf16, bf16x3]"


def problem_yaml(problem):
    if problem == "medium":
        return "synthetic: medium\n"
    n = int(problem[3:])  # h2oN
    body = "\n".join("    " + ln for ln in psi4_compare.xyz_lines(psi4_compare.cluster(n)[0]).splitlines())
    return ("molecule:\n  xyz: |\n%s\nbasis: cc-pvdz\naux_basis: cc-pvdz-ri\n"
            "scf: {type: df, jk_basis: cc-pvdz-jkfit}\nfrozen_core: false\n" % body)


def run(dfmp2, text, folder, name):
    path = os.path.join(folder, name + ".yaml")
    with open(path, "w") as f:
        f.write(text)
    out = os.path.join(folder, name + ".json")
    subprocess.run([dfmp2, path, "--json", out], check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        return json.load(f)


def table(problem, cold, warm):
    c_rows, w_rows = cold["extras"]["dfmp2"]["cost"]["rows"], warm["extras"]["dfmp2"]["cost"]["rows"]
    cost = warm["extras"]["dfmp2"]["cost"]
    lines = ["%s (CPU: %s, %d threads, priced as %s; PUE %.3f)" % (problem, cost["this_cpu"], cost["threads"],
                                                                   cost["cpu_instance"], cost["pue"]),
             "",
             "| run | instance | cold [s] | warm [s] | $ per calc (warm) | $ alone (warm) | kWh per calc (warm) |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for c, w in zip(c_rows, w_rows):
        assert (c["backend"], c["precision"], c["instance"]) == (w["backend"], w["precision"], w["instance"])
        cold_s = "%.1f" % c["seconds"] if c["time"] == "modelled" else "-"
        lines.append("| %s %s (%s) | %s | %s | %.3f | %.3g | %.3g | %.3g |" % (
            w["backend"], w["precision"], w["time"], w["instance"], cold_s, w["seconds"], w["usd_per_calculation"],
            w["usd_alone"], w["kwh_per_calculation"]))
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dfmp2", default=os.path.join(ROOT, "build", "app", "dfmp2"))
    p.add_argument("--problems", default="h2o16,medium", help="comma-separated: h2oN, medium")
    p.add_argument("--cpu", default=None, help="CPU backend (default: avx512 where the CPU has it, else openblas)")
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--json", help="write both runs' cost sections here")
    args = p.parse_args()
    cpu = args.cpu or ("avx512" if "avx512f" in open("/proc/cpuinfo").read() else "openblas")
    results = {}
    for problem in args.problems.split(","):
        with tempfile.TemporaryDirectory(prefix="dfmp2-cost-") as folder:
            text = (problem_yaml(problem) +
                    "threads: %d\nbackends: [%s, trn1, trn2]\n"
                    "precision: {%s: [fp64, fp32], trn1: %s, trn2: %s}\ndevice: {compile_cache: %s}\n"
                    % (args.threads, cpu, cpu, DEVICE_PRECISIONS, DEVICE_PRECISIONS, os.path.join(folder, "cache")))
            cold = run(args.dfmp2, text, folder, "cold")
            warm = run(args.dfmp2, text, folder, "warm")
        print(table(problem, cold, warm))
        print()
        results[problem] = {"cold": cold["extras"]["dfmp2"]["cost"], "warm": warm["extras"]["dfmp2"]["cost"]}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
