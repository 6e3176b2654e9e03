#!/usr/bin/python3
"""Every AtomicResult and FailedOperation dfmp2 writes validates with qcelemental (README "QCSchema and QCEngine"),
whatever input key made it: a sweep over the inputs the test suite already holds, each turned into a QCSchema
AtomicInput, so that a new key, field or error class cannot break the promise unnoticed.

  - the validation decks that name a molecule (closed shells, open shells, interaction energies, one-electron
    systems; the aug-cc-pVDZ twins of cc-pVDZ decks left out): each as an AtomicInput (its molecule as symbols, geometry in bohr, charge, multiplicity and fragments,
    its other keys as keywords.dfmp2_<key>), which must run and write an AtomicResult that validates, with the deck's
    own MP2 correlation energy;
  - every case of the bad-input corpus that is a YAML mapping (tests/bad_inputs/*.cases): its keys as keywords of an
    AtomicInput of water (its molecule instead when that converts), which must write, whatever the outcome, an
    AtomicResult (exit 0) or a FailedOperation (any other exit) that validates, with the error type of its exit code.

    validate_every_result.py --dfmp2 build/app/dfmp2 --repo . [--only WORD]
Needs Debian's python3-qcelemental and python3-yaml under /usr/bin/python3. Exit 0 when every check passes.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

import qcelemental as qcel
import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import Checker  # noqa: E402

BOHR_PER_ANGSTROM = 1.0 / 0.52917721067
WATER = {"symbols": ["O", "H", "H"],
         "geometry": [0.0, 0.0, 0.22259, 0.0, 1.42762, -0.89037, 0.0, -1.42762, -0.89037]}
ERROR_TYPES = {5: "convergence_error", 6: "resource_error", 70: "unknown_error"}
TIME_LIMIT = 300


def molecule_fields(mol):
    """A QCSchema molecule from a YAML `molecule` mapping of xyz lines (Psi4's fragments and charge lines), or None
    when it is not one that converts (a file, a list of fragments, lines that do not parse)."""
    if not isinstance(mol, dict) or not isinstance(mol.get("xyz"), str):
        return None
    scale = 1.0 if mol.get("units") == "bohr" else BOHR_PER_ANGSTROM
    symbols, geometry, real, fragments, charges, mults = [], [], [], [[]], [None], [None]
    for line in mol["xyz"].splitlines():
        f = line.split()
        if not f:
            continue
        if f == ["--"]:
            fragments.append([])
            charges.append(None)
            mults.append(None)
            continue
        if len(f) == 2:
            try:
                charges[-1], mults[-1] = int(f[0]), int(f[1])
                continue
            except ValueError:
                return None
        if len(f) != 4:
            return None
        sym = f[0]
        ghost = sym.startswith("@") or sym.lower().startswith("gh(")
        sym = sym[1:] if sym.startswith("@") else sym[3:-1] if ghost else sym
        try:
            xyz = [float(x) * scale for x in f[1:]]
        except ValueError:
            return None
        fragments[-1].append(len(symbols))
        symbols.append(sym)
        real.append(not ghost)
        geometry += xyz
    if not symbols:
        return None
    out = {"symbols": symbols, "geometry": geometry, "real": real}
    for key, field in (("charge", "molecular_charge"), ("multiplicity", "molecular_multiplicity")):
        if key in mol:
            out[field] = mol[key]
    if len(fragments) > 1 or charges[0] is not None:
        out["fragments"] = fragments
        if all(c is not None for c in charges):
            out["fragment_charges"] = charges
            out["fragment_multiplicities"] = mults
    return out


def atomic_input(mapping, molecule):
    """The AtomicInput of a YAML input mapping: `basis` as model.basis, `driver` as driver, every other key but the
    molecule as keywords.dfmp2_<key> (so the ones QCSchema owns are refused as such)."""
    keywords = {"dfmp2_" + k: v for k, v in mapping.items() if k not in ("molecule", "basis", "driver")}
    return {"schema_name": "qcschema_input", "schema_version": 1, "molecule": molecule,
            "driver": mapping.get("driver", "energy"), "model": {"method": "mp2", "basis": mapping.get("basis", "sto-3g")},
            "keywords": keywords}


def run(dfmp2, folder, inp, name):
    """Runs dfmp2 on the AtomicInput `inp` (a dict); returns (exit code or None, the output JSON or None, stderr)."""
    path = os.path.join(folder, name + ".json")
    out = os.path.join(folder, name + ".out.json")
    if os.path.exists(out):
        os.remove(out)
    with open(path, "w") as f:
        json.dump(inp, f, default=str)
    try:
        p = subprocess.run([dfmp2, path, "--json", out], cwd=folder, capture_output=True, text=True,
                           timeout=TIME_LIMIT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None, None, ""
    data = None
    if os.path.exists(out):
        with open(out) as f:
            data = json.load(f)
    return p.returncode, data, p.stderr


def validates(c, label, code, data, stderr):
    """The output is the AtomicResult of a run that succeeded or the FailedOperation of one that did not, and
    validates as such with qcelemental."""
    if code == 7:  # an output error: no FailedOperation can be written where the result was to go (README)
        return c.check(data is None, "%s: exit 7 writes nothing (%s)" % (label, stderr.strip()[-200:]))
    if not c.check(data is not None, "%s: exit %s writes its output (%s)" % (label, code, stderr.strip()[-200:])):
        return False
    try:
        if code == 0:
            qcel.models.AtomicResult(**data)
            return c.check(data.get("success") is True, "%s: an AtomicResult that validates" % label)
        op = qcel.models.FailedOperation(**data)
        return c.check(op.error.error_type == ERROR_TYPES.get(code, "input_error") and
                       op.error.error_message == stderr.strip(),
                       "%s: a FailedOperation that validates (exit %d, %s)" % (label, code, op.error.error_type))
    except Exception as e:  # noqa: BLE001
        return c.check(False, "%s: exit %s and output that does not validate: %s" % (label, code, str(e)[:400]))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dfmp2", required=True)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--only", default=None)
    args = ap.parse_args()
    dfmp2 = os.path.abspath(args.dfmp2)
    repo = os.path.abspath(args.repo)
    c = Checker()
    results = failures = 0
    with tempfile.TemporaryDirectory(prefix="dfmp2-validate-") as d:
        # The decks: AtomicResults with the deck's energies.
        for deck in sorted(glob.glob(os.path.join(repo, "tests", "validation", "decks", "*.yaml"))):
            name = os.path.basename(deck)[:-5]
            if args.only and args.only not in name:
                continue
            if "aug_cc_pv" in name and not name.startswith("ie_"):
                continue  # the same keys as its cc-pVDZ twin, at several times the cost
            with open(deck) as f:
                mapping = yaml.safe_load(f)
            molecule = molecule_fields(mapping.get("molecule"))
            if molecule is None:
                continue  # integral files and synthetic problems have no QCSchema molecule
            with open(deck[:-5] + ".expected.json") as f:
                expected = json.load(f)["properties"]
            code, data, stderr = run(dfmp2, d, atomic_input(mapping, molecule), name)
            results += 1
            if validates(c, "deck " + name, code, data, stderr) and code == 0 and "mp2_correlation_energy" in expected:
                e = expected["mp2_correlation_energy"]
                got = data["properties"]["mp2_correlation_energy"]
                c.check(abs(got - e["value"]) <= e["tolerance"], "deck %s: MP2 correlation %.10f (expected %.10f)" % (
                    name, got, e["value"]))
        # The corpus: whatever each case's keys do in an AtomicInput, the output validates.
        for path in sorted(glob.glob(os.path.join(repo, "tests", "bad_inputs", "*.cases"))):
            group = os.path.basename(path)[:-6]
            with open(path, encoding="utf-8") as f:
                text = f.read()
            for block in text.split("\n=== ")[1:]:
                name, _, body = block.partition("\n")
                label = "%s/%s" % (group, name.strip())
                if args.only and args.only not in label:
                    continue
                body = "".join(line + "\n" for line in body.splitlines() if not line.startswith("#! "))
                body = body.replace("@INPUTS@", os.path.join(repo, "inputs")).replace("@REPO@", repo)
                try:
                    mapping = yaml.safe_load(body)
                    json.dumps(mapping)
                except Exception:  # noqa: BLE001 -- YAML-only inputs (syntax, tags, aliases) have no JSON twin
                    continue
                if not isinstance(mapping, dict) or any(not isinstance(k, str) for k in mapping):
                    continue
                molecule = molecule_fields(mapping.get("molecule")) or dict(WATER)
                code, data, stderr = run(dfmp2, d, atomic_input(mapping, molecule), "case")
                failures += 1
                c.check(code is not None, "%s: ends within %d s" % (label, TIME_LIMIT)) and \
                    validates(c, label, code, data, stderr)
    print("validate_every_result: %d decks and %d corpus cases as AtomicInputs; %s" % (
        results, failures, "all checks passed" if c.failed == 0 else "%d checks failed" % c.failed))
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
