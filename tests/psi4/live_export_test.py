#!/usr/bin/python3
"""Live Psi4 tier: export a molecule with Psi4 (scripts/export_psi4.py), run dfmp2 on the file, and compare
dfmp2's energies with the DF-MP2 energies Psi4 computed on the same orbitals (recorded in the file).

Covers a molecule that is not among the committed fixtures (hydrogen fluoride, cc-pVDZ / cc-pVDZ-RI), both file
forms (AO and MO), all electrons and frozen core, and a density-fitted SCF; and open shells (format version 2): the
hydroxyl radical (doublet, cc-pVDZ / cc-pVDZ-RI, AO form) in UHF with a density-fitted SCF and in ROHF with exact
SCF integrals, whose files are first checked with h5py (version and reference attributes, shapes, the beta orbital
energies' order, and that ROHF's per-orbital singles terms sum to Psi4's MP2 SINGLES ENERGY, all electrons and
frozen core). dfmp2's correlation, same-spin, opposite-spin, singles (open shells) and total energies must agree
with Psi4's within 1e-9 Eh. Run by ctest (label psi4) under Debian's /usr/bin/python3 with
PYTHONPATH=/usr/lib/x86_64-linux-gnu.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

TOLERANCE = 1e-9  # Eh, dfmp2 against Psi4
SINGLES_TOLERANCE = 1e-10  # Eh, the file's ROHF singles terms against Psi4's singles energy
HF = "F 0.0 0.0 0.0\nH 0.0 0.0 0.917"
OH = "O 0 0 0\nH 0 0 0.97"

# label, xyz, multiplicity, reference, form, scf type, number of core orbitals (frozen_core: true)
CASES = [
    ("HF", HF, 1, "rhf", "ao", "pk", 1),
    ("HF", HF, 1, "rhf", "mo", "pk", 1),
    ("HF", HF, 1, "rhf", "ao", "df", 1),
    ("OH", OH, 2, "uhf", "ao", "df", 1),
    ("OH", OH, 2, "rohf", "ao", "pk", 1),
]
ENERGIES = ("mp2_opposite_spin_correlation_energy", "mp2_same_spin_correlation_energy", "mp2_correlation_energy",
            "mp2_total_energy")


def export(exporter, out, xyz, multiplicity, reference, form, scf_type):
    cmd = [sys.executable, exporter, "--xyz", xyz, "--basis", "cc-pvdz", "--aux-basis", "cc-pvdz-ri",
           "--scf-type", scf_type, "--form", form, "--threads", "2", "-o", out]
    if multiplicity != 1 or reference != "rhf":
        cmd += ["--multiplicity", str(multiplicity), "--reference", reference]
    if scf_type == "df":
        cmd += ["--jk-basis", "cc-pvdz-jkfit"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def run_dfmp2(dfmp2, h5, frozen, workdir):
    """dfmp2's results JSON, or (None, the reason) when it fails."""
    yaml = os.path.join(workdir, "in.yaml")
    with open(yaml, "w") as f:
        f.write("integrals: %s\nfrozen_core: %s\nbackends: [openblas, eigen]\nthreads: 2\n" % (h5, frozen))
    out = os.path.join(workdir, "out.json")
    if os.path.exists(out):
        os.unlink(out)
    r = subprocess.run([dfmp2, yaml, "--json", out], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        lines = r.stderr.strip().splitlines()
        return None, "exit %d: %s" % (r.returncode, lines[-1] if lines else "(no message)")
    with open(out) as f:
        return json.load(f), None


class Checks:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, ok, line):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        print("%s %s" % (line, "ok" if ok else "FAIL"))


def text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def check_file(checks, tag, f, multiplicity, reference, nfrozen):
    """The layout of docs/integral-file-format.md: version 1 (no reference attribute) for RHF, version 2 with the
    beta orbitals for UHF and ROHF; ROHF's singles terms add up to the singles energies Psi4 recorded."""
    version = int(f.attrs["dfmp2_format_version"])
    if reference == "rhf":
        checks.check(version == 1 and "reference" not in f.attrs,
                     "%s file: dfmp2_format_version %d, reference attribute %s" % (
                         tag, version, "absent" if "reference" not in f.attrs else text(f.attrs["reference"])))
        return
    ref_attr = text(f.attrs.get("reference", b"(absent)"))
    checks.check(version == 2 and ref_attr == reference and f.attrs["reference"].dtype.kind == "S",
                 "%s file: dfmp2_format_version %d, reference %r (fixed-length string)" % (tag, version, ref_attr))
    nbf, nmo = f["mo_coefficients"].shape
    nocc, nocc_b = int(f["nocc"][()]), int(f["nocc_beta"][()])
    nalpha_expected = nocc_b + multiplicity - 1
    checks.check(nocc == nalpha_expected and 1 <= nocc_b <= nocc < nmo,
                 "%s file: nocc %d, nocc_beta %d, nmo %d, multiplicity %d" % (tag, nocc, nocc_b, nmo, multiplicity))
    checks.check(int(f["metadata"].attrs["multiplicity"]) == multiplicity,
                 "%s file: metadata multiplicity %d" % (tag, int(f["metadata"].attrs["multiplicity"])))
    shapes = {name: f[name].shape for name in ("mo_coefficients_beta", "orbital_energies_beta", "orbital_energies")}
    checks.check(shapes == {"mo_coefficients_beta": (nbf, nmo), "orbital_energies_beta": (nmo,),
                            "orbital_energies": (nmo,)},
                 "%s file: shapes %s" % (tag, ", ".join("%s %s" % kv for kv in sorted(shapes.items()))))
    eps_b = f["orbital_energies_beta"][()]
    checks.check(bool(np.all(np.diff(eps_b[:nocc_b]) >= 0) and eps_b[:nocc_b].max() < eps_b[nocc_b:].min()),
                 "%s file: beta occupied orbital energies ascend (%s) and lie below the virtual ones (lowest %.6f)"
                 % (tag, " ".join("%.6f" % e for e in eps_b[:nocc_b]), eps_b[nocc_b:].min()))
    refs = f["reference"]
    for name in sorted(refs):
        checks.check("mp2_singles_energy" in refs[name], "%s file: reference/%s has mp2_singles_energy" % (tag, name))
    if reference == "uhf":
        checks.check("singles_alpha" not in f and "singles_beta" not in f, "%s file: no singles terms (UHF)" % tag)
        return
    sa, sb = f["singles_alpha"][()], f["singles_beta"][()]
    checks.check(sa.shape == (nocc,) and sb.shape == (nocc_b,),
                 "%s file: singles_alpha %s, singles_beta %s" % (tag, sa.shape, sb.shape))
    for n in (0, nfrozen):
        psi4_singles = float(refs["frozen_core_%d" % n]["mp2_singles_energy"][()])
        ours = float(sa[n:].sum() + sb[n:].sum())
        checks.check(abs(ours - psi4_singles) <= SINGLES_TOLERANCE,
                     "%s file: singles terms from orbital %d sum to %.15f, frozen_core_%d mp2_singles_energy %.15f "
                     "diff %+.1e" % (tag, n, ours, n, psi4_singles, ours - psi4_singles))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dfmp2", required=True)
    ap.add_argument("--exporter", required=True)
    args = ap.parse_args()
    checks = Checks()
    with tempfile.TemporaryDirectory() as work:
        for label, xyz, multiplicity, reference, form, scf_type, ncore in CASES:
            tag = "%-4s %-4s %-2s scf_type %-2s" % (label, reference, form, scf_type)
            h5 = os.path.join(work, "%s-%s-%s-%s.h5" % (label.lower(), reference, form, scf_type))
            export(args.exporter, h5, xyz, multiplicity, reference, form, scf_type)
            with h5py.File(h5, "r") as f:
                check_file(checks, tag, f, multiplicity, reference, ncore)
                refs = {int(name.split("_")[-1]): {k: float(v[()]) for k, v in f["reference"][name].items()}
                        for name in f["reference"]}
            # The independent numpy DF-MP2 (DF-UMP2, singles) of scripts/check_integral_file.py agrees with the
            # energies the exporter recorded.
            checker = os.path.join(os.path.dirname(os.path.abspath(args.exporter)), "check_integral_file.py")
            p = subprocess.run([sys.executable, checker, h5], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            checks.check(p.returncode == 0, "%s check_integral_file.py passes (%s)" % (
                tag, (p.stderr.strip() or p.stdout.strip().splitlines()[-1])[:200]))
            keys = ENERGIES + (("mp2_singles_energy",) if reference != "rhf" else ())
            for frozen, nfrozen in (("false", 0), ("true", ncore)):
                result, problem = run_dfmp2(args.dfmp2, h5, frozen, work)
                if result is None:
                    checks.check(False, "%s frozen %d dfmp2 failed (%s)" % (tag, nfrozen, problem))
                    continue
                ref = refs[nfrozen]
                for backend in result["extras"]["dfmp2"]["backends"]:
                    props = backend["properties"]
                    for key in keys:
                        if key not in props:
                            checks.check(False, "%s frozen %d %-9s %s missing from the results" % (
                                tag, nfrozen, backend["backend"], key))
                            continue
                        diff = props[key] - ref[key]
                        checks.check(abs(diff) <= TOLERANCE,
                                     "%s frozen %d %-9s %-38s dfmp2 %.12f psi4 %.12f diff %+.1e"
                                     % (tag, nfrozen, backend["backend"], key, props[key], ref[key], diff))
    print("%d passed, %d failed" % (checks.passed, checks.failed))
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
