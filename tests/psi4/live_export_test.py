#!/usr/bin/python3
"""Live Psi4 tier: export a molecule with Psi4 (scripts/export_psi4.py), run dfmp2 on the file, and compare
dfmp2's energies with the DF-MP2 energies Psi4 computed on the same orbitals (recorded in the file).

Covers a molecule that is not among the committed fixtures (hydrogen fluoride, cc-pVDZ / cc-pVDZ-RI), both file
forms (AO and MO), all electrons and frozen core, and a density-fitted SCF. Run by ctest (label psi4) under
Debian's /usr/bin/python3 with PYTHONPATH=/usr/lib/x86_64-linux-gnu.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import h5py

TOLERANCE = 1e-9  # Eh
MOLECULE = "F 0.0 0.0 0.0\nH 0.0 0.0 0.917"


def export(exporter, out, form, scf_type):
    cmd = [sys.executable, exporter, "--xyz", MOLECULE, "--basis", "cc-pvdz", "--aux-basis", "cc-pvdz-ri",
           "--scf-type", scf_type, "--form", form, "--threads", "2", "-o", out]
    if scf_type == "df":
        cmd += ["--jk-basis", "cc-pvdz-jkfit"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def run_dfmp2(dfmp2, h5, frozen, workdir):
    yaml = os.path.join(workdir, "in.yaml")
    with open(yaml, "w") as f:
        f.write("integrals: %s\nfrozen_core: %s\nbackends: [openblas, eigen]\nthreads: 2\n" % (h5, frozen))
    out = os.path.join(workdir, "out.json")
    subprocess.run([dfmp2, yaml, "--json", out], check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dfmp2", required=True)
    ap.add_argument("--exporter", required=True)
    args = ap.parse_args()
    failures = 0
    checks = 0
    with tempfile.TemporaryDirectory() as work:
        for form, scf_type in (("ao", "pk"), ("mo", "pk"), ("ao", "df")):
            h5 = os.path.join(work, "hf-%s-%s.h5" % (form, scf_type))
            export(args.exporter, h5, form, scf_type)
            with h5py.File(h5, "r") as f:
                refs = {int(name.split("_")[-1]): {k: float(v[()]) for k, v in f["reference"][name].items()}
                        for name in f["reference"]}
            for frozen, nfrozen in (("false", 0), ("true", 1)):
                result = run_dfmp2(args.dfmp2, h5, frozen, work)
                ref = refs[nfrozen]
                for backend in result["extras"]["dfmp2"]["backends"]:
                    props = backend["properties"]
                    for key in ("mp2_opposite_spin_correlation_energy", "mp2_same_spin_correlation_energy",
                                "mp2_correlation_energy", "mp2_total_energy"):
                        diff = props[key] - ref[key]
                        checks += 1
                        status = "ok" if abs(diff) <= TOLERANCE else "FAIL"
                        failures += status == "FAIL"
                        print("%-4s %-2s scf_type %-2s frozen %d %-9s %-38s dfmp2 %.12f psi4 %.12f diff %+.1e %s"
                              % ("HF", form, scf_type, nfrozen, backend["backend"], key, props[key], ref[key], diff,
                                 status))
    print("%d passed, %d failed" % (checks - failures, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
