#!/usr/bin/python3
"""dfmp2's completion of fragment charges and multiplicities (chem::fill_charges_and_multiplicities) against
qcelemental's validate_and_fill_chgmult, which Psi4 and QCEngine apply, on random cases and on qcelemental's own
documented ones: the same charges and multiplicities wherever qcelemental finds them, a refusal wherever it refuses.

    chgmult_against_qcelemental.py --probe build/tests/chgmult_probe [--cases 1200] [--seed 1]
"""
import argparse
import json
import random
import subprocess
import sys

import numpy as np
from qcelemental.exceptions import ValidationError
from qcelemental.molparse.chgmult import validate_and_fill_chgmult

# qcelemental's documented systems: per atom the electrons of the neutral atom (0: a ghost), fragment separators.
DOCUMENTED = {"He/He": ([2, 2], [1]), "Ne/He/He": ([10, 2, 2], [1, 2]), "He/He/Ne": ([2, 2, 10], [1, 2]),
              "H/He/Na/Ne": ([1, 2, 11, 10], [1, 2, 3]), "N/N/N": ([7, 7, 7], [1, 2]), "N/Ne/N": ([7, 10, 7], [1, 2]),
              "Gh/He/Ne": ([0, 0, 2, 10], [2, 3]), "Gh/He/Gh": ([0, 2, 0], [1, 2])}


def qcel(case):
    try:
        c, fc, m, fm = (validate_and_fill_chgmult(np.array(case["zeff"]), np.array(case["separators"], dtype=int),
                                                  case["c"], list(case["fc"]), case["m"], list(case["fm"]), verbose=-1)
                        [k] for k in ("molecular_charge", "fragment_charges", "molecular_multiplicity",
                                      "fragment_multiplicities"))
    except ValidationError:
        return {"ok": False}
    return {"ok": True, "c": int(c), "fc": [int(x) for x in fc], "m": int(m), "fm": [int(x) for x in fm]}


def random_case(rng):
    nfrag = rng.choice([1, 2, 2, 3, 3, 4, 5])
    zeff, separators = [], []
    for k in range(nfrag):
        if k:
            separators.append(len(zeff))
        zeff += [rng.choice([0, 1, 1, 2, 3, 6, 7, 8, 8, 10, 11]) for _ in range(rng.choice([1, 1, 2, 3]))]
    maybe = lambda p, lo, hi: rng.randint(lo, hi) if rng.random() < p else None  # noqa: E731
    return {"zeff": zeff, "separators": separators, "c": maybe(0.4, -3, 3), "m": maybe(0.4, 1, 5),
            "fc": [maybe(0.35, -2, 2) for _ in range(nfrag)], "fm": [maybe(0.35, 1, 4) for _ in range(nfrag)]}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--probe", required=True)
    p.add_argument("--cases", type=int, default=1200)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    rng = random.Random(args.seed)
    cases = []
    for zeff, separators in DOCUMENTED.values():  # every given/not-given pattern on the documented systems
        n = len(separators) + 1
        for c in (None, -1, 0, 2):
            for m in (None, 1, 2, 3):
                cases.append({"zeff": zeff, "separators": separators, "c": c, "m": m, "fc": [None] * n, "fm": [None] * n})
    cases += [random_case(rng) for _ in range(args.cases)]
    text = "".join(json.dumps(c) + "\n" for c in cases)
    out = subprocess.run([args.probe], input=text, capture_output=True, text=True, check=True).stdout.splitlines()
    if len(out) != len(cases):
        print("FAIL the probe answered %d of %d cases" % (len(out), len(cases)))
        return 1
    differ = 0
    filled = sum(1 for c in cases if qcel(c)["ok"])
    for case, line in zip(cases, out):
        mine, theirs = json.loads(line), qcel(case)
        if mine != theirs:
            differ += 1
            if differ <= 10:
                print("FAIL %s: dfmp2 %s, qcelemental %s" % (json.dumps(case), json.dumps(mine), json.dumps(theirs)))
    print("chgmult: %d cases (%d completed, %d refused by qcelemental), %d differ" % (
        len(cases), filled, len(cases) - filled, differ))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
