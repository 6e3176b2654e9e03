#!/usr/bin/env python3
"""Runs one group of the bad-input corpus against `dfmp2` (tests/bad_inputs/README.md).

Each case runs in a fresh empty folder, with its input written there as input.yaml, and passes when
  - dfmp2 exits with the expected code within the time limit (a hang fails the case),
  - stderr is exactly one line of UTF-8, 'dfmp2: error: ...', containing the expected fragment,
  - stdout is empty (unless the case says `#! stdout any`: errors found after the run started),
  - the folder holds afterwards exactly what it held before the run (no results file, no temporary, no scratch).
Prints one line per failing case and a summary; exits 1 if any case failed.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TIMEOUT = 120


class Case:
    def __init__(self, group, name):
        self.group, self.name = group, name
        self.exit = None
        self.message = None
        self.stdout = "empty"
        self.args = ["{input}", "--json", "result.json"]
        self.setup = []      # (verb, args...) run in the case folder before dfmp2
        self.body = ""       # input.yaml
        self.timeout = DEFAULT_TIMEOUT
        self.files = {}      # name -> bytes, written into the case folder (generated cases)
        self.redirect = None  # a file standard output goes to instead of a pipe (/dev/full)

    def label(self):
        return "%s/%s" % (self.group, self.name)


def parse_group_file(path, group):
    """Cases of a `<group>.cases` file: '=== name' starts a case; '#! key value' lines are its expectations."""
    cases, case = [], None
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("=== "):
                case = Case(group, line[4:].strip())
                cases.append(case)
                continue
            if case is None:
                continue  # the file's own preamble
            if line.startswith("#! "):
                key, _, value = line[3:].rstrip("\n").partition(" ")
                if key == "exit":
                    case.exit = int(value)
                elif key == "message":
                    case.message = value
                elif key == "stdout":
                    case.stdout = value.strip()
                elif key == "args":
                    case.args = value.split()
                elif key == "setup":
                    case.setup.append(value.split(" ", 2))
                elif key == "timeout":
                    case.timeout = int(value)
                elif key == "redirect":
                    case.redirect = value.strip()
                else:
                    raise SystemExit("%s: case %s: unknown directive '#! %s'" % (path, case.name, key))
                continue
            case.body += line
    for c in cases:
        if c.exit is None or c.message is None:
            raise SystemExit("%s: case %s needs '#! exit' and '#! message'" % (path, c.name))
    return cases


def substitute(text, repo, group_dir):
    return (text.replace("@INPUTS@", os.path.join(repo, "inputs")).replace("@CASES@", group_dir)
            .replace("@REPO@", repo))


def do_setup(case, folder, repo, group_dir):
    for step in case.setup:
        verb, args = step[0], step[1:]
        target = os.path.join(folder, args[0])
        if verb == "fifo":
            os.mkfifo(target)
        elif verb == "dir":
            os.makedirs(target)
        elif verb == "file":  # file NAME TEXT, with Python escapes (\n, \xNN) for any byte
            text = args[1] if len(args) > 1 else ""
            with open(target, "wb") as f:
                f.write(text.encode("utf-8").decode("unicode_escape").encode("latin-1"))
        elif verb == "copy":  # copy NAME SOURCE (SOURCE with @INPUTS@ / @CASES@)
            shutil.copyfile(substitute(args[1], repo, group_dir), target)
        elif verb == "replace":  # replace NAME SOURCE OLD=>NEW: a copy with the first OLD made NEW (\n escapes)
            source, edit = args[1].split(" ", 1)
            old, new = (t.encode("utf-8").decode("unicode_escape") for t in edit.split("=>", 1))
            with open(substitute(source, repo, group_dir), encoding="utf-8") as f:
                text = f.read()
            if old not in text:
                raise SystemExit("case %s: '%s' is not in %s" % (case.label(), old, source))
            with open(target, "w", encoding="utf-8") as f:
                f.write(text.replace(old, new, 1))
        elif verb == "sparse":  # sparse NAME BYTES: a file that large, holding nothing
            with open(target, "wb") as f:
                f.truncate(int(args[1]))
        else:
            raise SystemExit("case %s: unknown setup verb '%s'" % (case.label(), verb))
    for name, data in case.files.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)


def listing(folder):
    out = set()
    for root, dirs, files in os.walk(folder):
        for n in dirs + files:
            out.add(os.path.relpath(os.path.join(root, n), folder))
    return out


def run_case(case, dfmp2, repo, work):
    group_dir = os.path.join(HERE, case.group)
    folder = tempfile.mkdtemp(prefix=re.sub(r"[^A-Za-z0-9_]", "_", case.name) + ".", dir=work)
    try:
        with open(os.path.join(folder, "input.yaml"), "w", encoding="utf-8") as f:
            f.write(substitute(case.body, repo, group_dir))
        do_setup(case, folder, repo, group_dir)
        before = listing(folder)
        argv = [dfmp2] + [substitute(a, repo, group_dir).replace("{input}", "input.yaml") for a in case.args]
        try:
            if case.redirect:
                with open(case.redirect, "wb") as out:
                    p = subprocess.run(argv, cwd=folder, stdout=out, stderr=subprocess.PIPE, timeout=case.timeout,
                                       stdin=subprocess.DEVNULL)
                p.stdout = b""
            else:
                p = subprocess.run(argv, cwd=folder, capture_output=True, timeout=case.timeout,
                                   stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return ["hung: no exit within %d s" % case.timeout]
        problems = []
        try:  # the line is UTF-8 whatever bytes the input held (they are shown escaped)
            stderr = p.stderr.decode("utf-8")
        except UnicodeDecodeError:
            return ["stderr is not UTF-8: %r" % p.stderr[:400]]
        stdout = p.stdout.decode("utf-8", "replace")
        pristine = getattr(case, "unchanged_ok", None)
        if p.returncode == 0 and pristine is not None and not stderr:
            # A damaged byte HDF5 never reads: acceptable only if every energy is exactly the undamaged file's.
            if energies(stdout) == pristine_energies(pristine, case, dfmp2, work):
                case.harmless = True
                return []
            return ["exit 0 with energies that differ from the undamaged file's: a silently wrong result"]
        if p.returncode != case.exit:
            problems.append("exit %d, expected %d" % (p.returncode, case.exit))
        lines = stderr.split("\n")
        if not (len(lines) == 2 and lines[1] == "" and lines[0].startswith("dfmp2: error: ")):
            problems.append("stderr is not one line 'dfmp2: error: ...'")
        if case.message not in stderr:
            problems.append("message lacks '%s'" % case.message)
        if case.stdout == "empty" and stdout:
            problems.append("stdout is not empty (%d bytes)" % len(stdout))
        after = listing(folder)
        if after != before:
            problems.append("files left behind: %s; gone: %s" % (sorted(after - before), sorted(before - after)))
        if problems:
            problems.append("stderr: %s" % stderr.strip()[:400])
        return problems
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def energies(stdout):
    return [line.split() for line in stdout.splitlines() if "Energy" in line and "=" in line]


_pristine = {}


def pristine_energies(data, case, dfmp2, work):
    key = id(data)
    if key not in _pristine:
        folder = tempfile.mkdtemp(dir=work)
        with open(os.path.join(folder, "f.h5"), "wb") as f:
            f.write(data)
        with open(os.path.join(folder, "input.yaml"), "w") as f:
            f.write(case.body)
        p = subprocess.run([dfmp2, "input.yaml"], cwd=folder, capture_output=True, timeout=case.timeout)
        if p.returncode != 0:
            raise SystemExit("the undamaged file of %s does not run: %s" % (case.label(), p.stderr.decode()))
        _pristine[key] = energies(p.stdout.decode())
        shutil.rmtree(folder, ignore_errors=True)
    return _pristine[key]


def load_cases(group, repo, work):
    path = os.path.join(HERE, group + ".cases")
    if os.path.exists(path):
        return parse_group_file(path, group)
    sys.path.insert(0, HERE)
    import integral_files  # noqa: E402  (needs h5py and numpy)
    if group == "integral_files":
        return integral_files.structural_cases(Case, repo, work)
    if group == "integral_bytes":
        return integral_files.byte_flip_cases(Case, repo, work, dfmp2=os.path.abspath(ARGS.dfmp2))
    raise SystemExit("no group '%s' (no %s and not a generated group)" % (group, path))


def main():
    global ARGS
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dfmp2", required=True, help="the dfmp2 executable")
    p.add_argument("--repo", default=os.path.dirname(os.path.dirname(HERE)), help="repository root")
    p.add_argument("--group", required=True, help="yaml, values, molecule, basis, paths, device, numerical, "
                                                  "integral_files or integral_bytes")
    p.add_argument("--only", default=None, help="run only cases whose name contains this")
    ARGS = p.parse_args()
    dfmp2 = os.path.abspath(ARGS.dfmp2)
    work = tempfile.mkdtemp(prefix="dfmp2_bad_inputs_%s." % ARGS.group)
    try:
        cases = load_cases(ARGS.group, os.path.abspath(ARGS.repo), work)
        if ARGS.only:
            cases = [c for c in cases if ARGS.only in c.name]
        names = [c.name for c in cases]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise SystemExit("duplicate case names: %s" % ", ".join(duplicates))
        failed = 0
        for case in cases:
            problems = run_case(case, dfmp2, os.path.abspath(ARGS.repo), work)
            if problems:
                failed += 1
                print("FAIL %s: %s" % (case.label(), "; ".join(problems)))
        harmless = sum(1 for c in cases if getattr(c, "harmless", False))
        print("%s: %d cases, %d failed%s" % (ARGS.group, len(cases), failed,
                                             "; %d damaged bytes were never read (energies unchanged)" % harmless
                                             if harmless else ""))
        return 1 if failed or not cases else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
