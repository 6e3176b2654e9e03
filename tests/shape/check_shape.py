#!/usr/bin/python3
"""The shape of the code as issue 24 left it, guarded: no function (or lambda) in app/ or chem/ longer than 150
lines, and the driver, run_calculation, under 80, so that it reads top to bottom. Function extents come from
Universal Ctags (Debian's universal-ctags, installed by scripts/setup.sh --tests).

    check_shape.py --repo .
Exit 0 when every function is within its limit; one line per function over it.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

LIMIT = 150
LIMITS = {"run_calculation": 80}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repo", required=True)
    args = p.parse_args()
    if shutil.which("ctags") is None:
        print("FAIL ctags not found: install universal-ctags (scripts/setup.sh --tests does)")
        return 1
    out = subprocess.run(["ctags", "--output-format=json", "--fields=+ne", "--kinds-C++=f", "-R", "-o", "-",
                          "app", "chem"], cwd=args.repo, stdout=subprocess.PIPE, text=True, check=True).stdout
    functions, over = 0, []
    for line in out.splitlines():
        tag = json.loads(line)
        if "end" not in tag:
            continue
        functions += 1
        length = tag["end"] - tag["line"] + 1
        limit = LIMITS.get(tag["name"], LIMIT)
        if length > limit:
            over.append("%s:%d %s: %d lines (at most %d)" % (tag["path"], tag["line"], tag["name"], length, limit))
    if functions < 100:
        print("FAIL ctags found only %d functions in app/ and chem/: not Universal Ctags's C++ parser?" % functions)
        return 1
    for o in over:
        print("FAIL " + o)
    print("shape: %d functions in app/ and chem/, %d over their limit" % (functions, len(over)))
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
