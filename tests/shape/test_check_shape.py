#!/usr/bin/python3
"""The shape guard guarded: check_shape.py run on a copy of the tree with one breach of each kind planted must name
each of them (and pass on the untouched copy), so a guard that stopped looking would fail here.

    test_check_shape.py --repo .
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
LAYERS = ("app", "chem", "devices", "linalg")


def run_guard(tree):
    r = subprocess.run([sys.executable, os.path.join(HERE, "check_shape.py"), "--repo", tree],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return r.returncode, r.stdout


def append(path, text):
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repo", required=True)
    repo = p.parse_args().repo
    with tempfile.TemporaryDirectory() as tmp:
        for layer in LAYERS:
            shutil.copytree(os.path.join(repo, layer), os.path.join(tmp, layer))
        code, out = run_guard(tmp)
        if code != 0:
            print("FAIL the untouched copy breaches:\n" + out)
            return 1
        # One breach of each kind, each with the words its FAIL line must carry.
        planted = {
            "an include up a layer": ("linalg/comm.cpp", '#include "chem/scf/scf.hpp"\n', "includes chem/"),
            "a room's inner header from app": ("app/run.cpp", '#include "chem/scf/df_jk.hpp"\n', "room's door"),
            "a source outside the rooms": ("chem/loose.cpp", "int loose() { return 0; }\n", "outside chem's rooms"),
            "a long function": ("app/run.cpp", "int long_one() {\n" + "  int x = 0;\n" * 120 + "  return 0;\n}\n",
                                "long_one: 123 lines"),
            "a long file": ("chem/mp2/interaction.cpp", "// padding\n" * 700, "chem/mp2/interaction.cpp: "),
        }
        for path, text, _ in planted.values():
            append(os.path.join(tmp, path), text)
        code, out = run_guard(tmp)
        missed = [what for what, (_, _, words) in planted.items() if words not in out]
        if code == 0 or missed:
            print("FAIL the guard missed %s (exit %d):\n%s" % (", ".join(missed) or "nothing, but exited 0", code, out))
            return 1
    print("shape guard: finds every planted breach (%d kinds)" % len(planted))
    return 0


if __name__ == "__main__":
    sys.exit(main())
