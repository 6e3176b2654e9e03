#!/usr/bin/python3
"""The shape of the code, guarded (README "Layout"; issue 43):

  layers     an #include goes down the layers only: app -> chem | devices -> linalg. linalg includes none of the
             others, chem and devices not each other, and nothing below app includes app.
  rooms      chem/ is in rooms by capability (system, integrals, scf, mp2, gradient, properties, io); code outside chem/
             includes a room's public header only, the one named after its folder (chem/scf/scf.hpp), and no
             source file lies in chem/ outside a room.
  files      a source file in app/ or chem/ holds at most 600 lines;
  classes    a class or struct in app/, chem/, devices/ or linalg/ at most 300;
  functions  a function (or lambda) there at most 100, and the driver, run_calculation, at most 40, so that it
             reads top to bottom as the list of its stages.

What was over a limit when the limit came (DEBT below) may stay at most as large as it was, and must leave the list
once it is within the limit, so the list only shrinks. Extents of functions and classes come from Universal Ctags
(Debian's universal-ctags, installed by scripts/setup.sh --tests).

    check_shape.py --repo .
Exit 0 when everything is within its limit; one FAIL line per breach.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

LAYERS = ("app", "chem", "devices", "linalg")
# What each layer's sources may include of the project's own folders.
MAY_INCLUDE = {"app": {"app", "chem", "devices", "linalg"}, "chem": {"chem", "linalg"},
               "devices": {"devices", "linalg"}, "linalg": {"linalg"}}
FILE_LIMIT = 600
FILE_FOLDERS = ("app", "chem")
CLASS_LIMIT = 300
FUNCTION_LIMIT = 100
FUNCTION_LIMITS = {"run_calculation": 40}

# Over a limit when the limit came in (issue 43), at most this large until split: (kind, path, name) -> lines.
DEBT = {
    ("file", "app/bench/bench.cpp", ""): 929,
    ("file", "app/python/module.cpp", ""): 674,
    ("file", "app/input.cpp", ""): 1058,
    ("file", "chem/scf/df_jk.cpp", ""): 628,
    ("file", "chem/io/integral_file.cpp", ""): 655,
    ("class", "chem/scf/df_jk.cpp", "BlockedDfJk"): 586,
    ("class", "devices/neuron/neuron_backend.cpp", "NeuronBackend"): 370,
    ("class", "chem/mp2/occupied_blocks.hpp", "OccupiedBlocks"): 316,
    ("function", "devices/neuron/calibration.cpp", "run_calibration"): 135,
    ("function", "app/input.cpp", "input_from_mapping"): 133,
    ("function", "app/python/module.cpp", "PYBIND11_MODULE"): 130,
    ("function", "app/bench/bench.cpp", "run_trace"): 115,
    ("function", "chem/system/molecule.cpp", "fill_charges_and_multiplicities"): 113,
    ("function", "app/bench/bench.cpp", "run_bench"): 109,
    ("function", "chem/mp2/dfmp2.cpp", "transform"): 107,
    ("function", "linalg/comm_mpi.cpp", "exchange"): 105,
    ("function", "app/bench/calls.cpp", "prepare"): 104,
    ("function", "chem/integrals/four_centre.cpp", "compute"): 103,
}

INCLUDE = re.compile(r'^\s*#\s*include\s*"([a-z_]+)/')
ROOM_INCLUDE = re.compile(r'^\s*#\s*include\s*"chem/([a-z0-9_]+)/([a-z0-9_]+)\.hpp"')
ROOMS = ("system", "integrals", "scf", "mp2", "gradient", "properties", "cbs", "io")
SOURCE = re.compile(r"\.(cpp|hpp|h|cc)$")


def sources(repo, folder):
    for root, _, names in os.walk(os.path.join(repo, folder)):
        for n in sorted(names):
            if SOURCE.search(n):
                yield os.path.relpath(os.path.join(root, n), repo)


def include_breaches(repo):
    out = []
    for layer in LAYERS:
        for path in sources(repo, layer):
            with open(os.path.join(repo, path), encoding="utf-8") as f:
                for number, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if m and m.group(1) in LAYERS and m.group(1) not in MAY_INCLUDE[layer]:
                        out.append("%s:%d includes %s/ (%s may include only %s)" % (
                            path, number, m.group(1), layer, ", ".join(sorted(MAY_INCLUDE[layer]))))
    return out


def room_breaches(repo):
    """Includes of a chem room's inner headers from outside chem/, and chem sources outside the rooms."""
    out = []
    for layer in LAYERS:
        if layer == "chem":
            continue
        for path in sources(repo, layer):
            with open(os.path.join(repo, path), encoding="utf-8") as f:
                for number, line in enumerate(f, 1):
                    m = ROOM_INCLUDE.match(line)
                    if m and m.group(1) != m.group(2):
                        out.append("%s:%d includes chem/%s/%s.hpp (outside chem/, include the room's door "
                                   "chem/%s/%s.hpp)" % (path, number, m.group(1), m.group(2), m.group(1), m.group(1)))
    for path in sources(repo, "chem"):
        parts = path.split(os.sep)
        if len(parts) != 3 or parts[1] not in ROOMS:
            out.append("%s lies outside chem's rooms (%s)" % (path, ", ".join(ROOMS)))
    for room in ROOMS:
        if not os.path.exists(os.path.join(repo, "chem", room, room + ".hpp")):
            out.append("chem/%s has no public header chem/%s/%s.hpp" % (room, room, room))
    return out


def measured(repo):
    """(kind, path, name, line, lines) of every file, class and function in the guarded folders."""
    items = []
    for folder in FILE_FOLDERS:
        for path in sources(repo, folder):
            if path.endswith(".cpp"):
                with open(os.path.join(repo, path), encoding="utf-8") as f:
                    items.append(("file", path, "", 1, sum(1 for _ in f)))
    out = subprocess.run(["ctags", "--output-format=json", "--fields=+neK", "--kinds-C++=fcs", "-R", "-o", "-"]
                         + list(LAYERS), cwd=repo, stdout=subprocess.PIPE, text=True, check=True).stdout
    for line in out.splitlines():
        tag = json.loads(line)
        if "end" not in tag:
            continue
        kind = "function" if tag.get("kind") == "function" else "class"
        items.append((kind, tag["path"], tag["name"], tag["line"], tag["end"] - tag["line"] + 1))
    return items


def limit_of(kind, name):
    if kind == "file":
        return FILE_LIMIT
    if kind == "class":
        return CLASS_LIMIT
    return FUNCTION_LIMITS.get(name, FUNCTION_LIMIT)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repo", required=True)
    args = p.parse_args()
    if shutil.which("ctags") is None:
        print("FAIL ctags not found: install universal-ctags (scripts/setup.sh --tests does)")
        return 1
    fails = include_breaches(args.repo) + room_breaches(args.repo)
    items = measured(args.repo)
    functions = sum(1 for i in items if i[0] == "function")
    if functions < 500:
        print("FAIL ctags found only %d functions: not Universal Ctags's C++ parser?" % functions)
        return 1
    # A name defined more than once in a file (overloads, members of several classes) counts by its longest.
    longest = {}
    for kind, path, name, line, lines in items:
        key = (kind, path, name)
        if key not in longest or lines > longest[key][1]:
            longest[key] = (line, lines)
    seen_debt = set()
    for (kind, path, name), (line, lines) in sorted(longest.items()):
        limit = limit_of(kind, name)
        key = (kind, path, name)
        if key in DEBT:
            seen_debt.add(key)
            if lines > DEBT[key]:
                fails.append("%s:%d %s %s: %d lines, more than the %d it had when the limit of %d came" % (
                    path, line, kind, name or path, lines, DEBT[key], limit))
            elif lines <= limit:
                fails.append("%s %s is %d lines, within the limit of %d: take it off DEBT in %s" % (
                    kind, name or path, lines, limit, os.path.basename(__file__)))
        elif lines > limit:
            fails.append("%s:%d %s %s: %d lines (at most %d)" % (path, line, kind, name or path, lines, limit))
    for key in sorted(set(DEBT) - seen_debt):
        fails.append("%s %s %s is gone: take it off DEBT in %s" % (key[0], key[1], key[2],
                                                                     os.path.basename(__file__)))
    for f in fails:
        print("FAIL " + f)
    print("shape: %d files, classes and functions (%d functions) in %s; %d on the debt list; %d breaches" % (
        len(items), functions, ", ".join(LAYERS), len(DEBT), len(fails)))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
