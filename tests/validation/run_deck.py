#!/usr/bin/env python3
"""Runs one validation deck: `dfmp2 DECK.yaml --json OUT`, then compares the results file's `properties` with
DECK.expected.json ({"source": ..., "properties": {name: {"value": v, "tolerance": t}}}): every named property must
be present and within its tolerance (absolute, Eh for energies). A name with dots is a path from the results file's
top (extras.dfmp2.problem.scf.s_squared). Exit 0 when all agree, 1 otherwise, with one line
per property either way.

    run_deck.py --dfmp2 build/app/dfmp2 tests/validation/decks/water_cc_pvdz_pk.yaml
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dfmp2", required=True)
    p.add_argument("deck")
    args = p.parse_args()
    expected_path = args.deck[: -len(".yaml")] + ".expected.json"
    with open(expected_path) as f:
        expected = json.load(f)
    with tempfile.TemporaryDirectory(prefix="dfmp2-deck-") as d:
        out = os.path.join(d, "result.json")
        run = subprocess.run([args.dfmp2, args.deck, "--json", out], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        if run.returncode != 0:
            print("FAIL %s: dfmp2 exited %d: %s" % (args.deck, run.returncode, run.stderr.strip()))
            return 1
        with open(out) as f:
            results = json.load(f)
    props = dict(results["properties"])
    for name in expected.get("properties", {}):
        if "." in name:
            node = results
            for part in name.split("."):
                node = node.get(part) if isinstance(node, dict) else None
            if node is not None:
                props[name] = node
    failed = 0
    if not expected.get("properties"):  # a deck that checks nothing would always pass
        print("FAIL %s: %s names no property to check" % (args.deck, expected_path))
        return 1
    for name, want in expected["properties"].items():
        if name not in props:
            print("FAIL %s: not in the results file" % name)
            failed += 1
            continue
        diff = props[name] - want["value"]
        ok = abs(diff) <= want["tolerance"]
        failed += not ok
        print("%s %-40s %22.12f  expected %22.12f  diff %10.2e  tolerance %.0e" % (
            "ok  " if ok else "FAIL", name, props[name], want["value"], diff, want["tolerance"]))
    print("%s: %d of %d properties within tolerance (%s)" % (
        os.path.basename(args.deck), len(expected["properties"]) - failed, len(expected["properties"]),
        expected["source"]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
