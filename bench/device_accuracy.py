#!/usr/bin/env python3
"""What each device precision costs in accuracy and in modelled time.

For each molecule (the committed water and methane integral files, and the (H2O)n clusters of the benchmarks on
the 3.0 angstrom lattice, cc-pVDZ / cc-pVDZ-RI / cc-pVDZ-JKFIT), runs dfmp2 once with eigen in fp64 next to a
device model (trn1 by default) in fp32, bf16 and bf16x3, and prints, per precision, the correlation-energy error
against fp64 (absolute and relative), the error relative to fp32's, and the modelled warm device time of the
DF-MP2 step (the compile cache is filled by a first, untimed run of the same input).

    bench/device_accuracy.py                      # water, methane, (H2O)2, (H2O)4, (H2O)8
    bench/device_accuracy.py --waters 2,4,8,16 --device trn2 --json accuracy.json

Results: bench/README.md, "Device precisions".
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

PRECISIONS = ["fp32", "bf16", "bf16x3"]


def molecule_yaml(atoms, device, cache, threads):
    body = "\n".join("    " + ln for ln in psi4_compare.xyz_lines(atoms).splitlines())
    return ("molecule:\n  xyz: |\n%s\n"
            "basis: cc-pvdz\naux_basis: cc-pvdz-ri\nscf: {type: df, jk_basis: cc-pvdz-jkfit}\n"
            "frozen_core: false\nthreads: %d\nbackends: [eigen, %s]\n"
            "precision: {eigen: fp64, %s: [%s]}\ndevice: {compile_cache: %s}\n"
            % (body, threads, device, device, ", ".join(PRECISIONS), cache))


def file_yaml(path, device, cache, threads):
    return ("integrals: %s\nthreads: %d\nbackends: [eigen, %s]\nprecision: {eigen: fp64, %s: [%s]}\n"
            "device: {compile_cache: %s}\n" % (path, threads, device, device, ", ".join(PRECISIONS), cache))


def run(dfmp2, text, folder):
    path = os.path.join(folder, "input.yaml")
    with open(path, "w") as f:
        f.write(text)
    out = os.path.join(folder, "out.json")
    subprocess.run([dfmp2, path, "--json", out], check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        return json.load(f)


def rows_of(name, result):
    runs = result["extras"]["dfmp2"]["backends"]
    ref = runs[0]["properties"]["mp2_correlation_energy"]
    fp32_err = None
    rows = []
    for r in runs[1:]:
        e = r["properties"]["mp2_correlation_energy"]
        err = e - ref
        if r["precision"] == "fp32":
            fp32_err = err
        rows.append({"molecule": name, "precision": r["precision"], "correlation": e, "error": err,
                     "relative": abs(err / ref), "operands": r.get("matmul_operands", {}),
                     "modelled_seconds": r["modelled_seconds"]})
    for row in rows:
        row["vs_fp32"] = abs(row["error"] / fp32_err) if fp32_err else None
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dfmp2", default=os.path.join(ROOT, "build", "app", "dfmp2"))
    p.add_argument("--device", default="trn1", choices=["trn1", "trn2"])
    p.add_argument("--waters", default="2,4,8", help="cluster sizes, comma-separated (empty: none)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args()

    cases = [("water", file_yaml, os.path.join(ROOT, "inputs", "water-cc-pvdz.h5")),
             ("methane", file_yaml, os.path.join(ROOT, "inputs", "methane-cc-pvdz.h5"))]
    for n in [int(x) for x in args.waters.split(",") if x]:
        cases.append(("(H2O)%d" % n, molecule_yaml, psi4_compare.cluster(n)[0]))

    rows = []
    print("%-9s %-7s %22s %11s %9s %9s %12s  %s" % ("molecule", "prec", "correlation [Eh]", "error [Eh]", "relative",
                                                   "x fp32", "model [s]", "operands (transform, pairs)"))
    for name, make, what in cases:
        with tempfile.TemporaryDirectory(prefix="dfmp2-accuracy-") as d:
            cache = os.path.join(d, "cache")
            text = make(what, args.device, cache, args.threads)
            run(args.dfmp2, text, d)  # cold: fills the compile cache
            result = run(args.dfmp2, text, d)  # warm: the modelled times reported
        for r in rows_of(name, result):
            rows.append(r)
            ops = r["operands"]
            print("%-9s %-7s %22.12f %11.3e %9.2e %9s %12.4f  %s, %s" % (
                r["molecule"], r["precision"], r["correlation"], r["error"], r["relative"],
                "%.1f" % r["vs_fp32"] if r["vs_fp32"] is not None else "-", r["modelled_seconds"],
                ops.get("transform", "?"), ops.get("pair_energy", "?")), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": args.device, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
