#!/usr/bin/python3
"""An install that stands alone (README "Install"): `cmake --install` into a prefix, the prefix moved elsewhere, and
the source and build trees hidden (a private mount namespace with empty folders mounted over them, `unshare -m`);
then the installed binary, Python module and QCEngine harness each run a molecule, and their energies must be the
build tree's. The installed binary must also look for its basis sets in its own prefix, not in the source tree.

    run_install.py --build build --source . [--python-dir lib/python3/dist-packages]
Needs root (or user namespaces) for unshare; says so and fails without it. Exit 0 when every check passes.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import Checker  # noqa: E402

WATER = "O 0 0 0.117790\\nH 0 0.755453 -0.471161\\nH 0 -0.755453 -0.471161"
INPUT = 'molecule: {xyz: "%s"}\nbasis: cc-pvdz\nscf: {e_convergence: 1e-10, d_convergence: 1e-10}\nthreads: 1\n' % WATER
SYS_PYTHONPATH = "/usr/lib/x86_64-linux-gnu"  # Debian's qcengine and qcelemental (PYTHONPATH of the psi4 tier)


def hidden(folders, argv):
    """argv run with empty tmpfs folders mounted over `folders`, in a private mount namespace."""
    script = " && ".join("mount -t tmpfs none '%s'" % f for f in folders) + ' && exec "$@"'
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"] + argv


def run(argv, cwd, env=None):
    return subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=600)


def energies(path):
    with open(path) as f:
        p = json.load(f)["properties"]
    return p["scf_total_energy"], p["mp2_correlation_energy"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--python-dir", default=None, help="the module's folder in the prefix (DFMP2_PYTHON_DIR)")
    args = ap.parse_args()
    build, source = os.path.realpath(args.build), os.path.realpath(args.source)
    c = Checker()
    work = tempfile.mkdtemp(prefix="dfmp2-install-", dir="/tmp")
    try:
        staged, prefix, rundir = os.path.join(work, "staged"), os.path.join(work, "moved", "prefix"), \
            os.path.join(work, "run")
        p = run(["cmake", "--install", build, "--prefix", staged], work)
        if not c.check(p.returncode == 0, "cmake --install (%s)" % p.stderr.strip()[-300:]):
            return 1
        os.makedirs(os.path.dirname(prefix))
        shutil.move(staged, prefix)  # a relocated install: nothing may depend on the prefix it was installed to
        c.check(os.path.isfile(os.path.join(prefix, "share", "dfmp2", "basis", "cc-pvdz.gbs")),
                "the basis library is installed under share/dfmp2/basis")
        os.makedirs(rundir)
        with open(os.path.join(rundir, "water.yaml"), "w") as f:
            f.write(INPUT)

        # The reference: the build tree's binary, sources in place.
        p = run([os.path.join(build, "app", "dfmp2"), "water.yaml", "--json", "reference.json"], rundir)
        if not c.check(p.returncode == 0, "the build tree's dfmp2 runs water (%s)" % p.stderr.strip()):
            return 1
        reference = energies(os.path.join(rundir, "reference.json"))

        probe = run(hidden([source], ["true"]), rundir)
        if not c.check(probe.returncode == 0, "unshare -m can hide the source tree (%s)" % probe.stderr.strip()):
            return 1
        trees = [source] if build.startswith(source + "/") else [source, build]
        env = {k: v for k, v in os.environ.items() if k not in ("DFMP2_BINARY", "DFMP2_BASIS_DIR", "PYTHONPATH")}
        env["PATH"] = "/usr/bin:/bin"  # no dfmp2 on it: the harness must find the installed one by itself

        binary = os.path.join(prefix, "bin", "dfmp2")
        p = run(hidden(trees, [binary, "water.yaml", "--json", "installed.json"]), rundir, env)
        if c.check(p.returncode == 0, "the installed binary runs water with the source tree hidden (%s)" %
                   p.stderr.strip()):
            got = energies(os.path.join(rundir, "installed.json"))
            c.check(all(abs(a - b) <= 1e-10 for a, b in zip(got, reference)),
                    "the installed binary's energies are the build tree's (SCF %+.1e, MP2 %+.1e Eh)" % (
                        got[0] - reference[0], got[1] - reference[1]))

        if args.python_dir:
            module_dir = os.path.join(prefix, args.python_dir)
            py_env = dict(env, PYTHONPATH=module_dir + ":" + SYS_PYTHONPATH)
            code = ("import json, dfmp2; assert dfmp2.__file__.startswith(%r), dfmp2.__file__; "
                    "r = dfmp2.run('water.yaml'); p = r['properties']; "
                    "print(json.dumps([p['scf_total_energy'], p['mp2_correlation_energy']]))" % prefix)
            p = run(hidden(trees, ["/usr/bin/python3", "-c", code]), rundir, py_env)
            if c.check(p.returncode == 0, "the installed module runs water with the source tree hidden (%s)" %
                       p.stderr.strip()[-400:]):
                got = json.loads(p.stdout.strip().splitlines()[-1])
                c.check(all(abs(a - b) <= 1e-10 for a, b in zip(got, reference)),
                        "the installed module's energies are the build tree's")
            code = ("import qcelemental as qcel, qcengine, dfmp2_qcengine\n"
                    "assert dfmp2_qcengine.dfmp2_binary() == %r, dfmp2_qcengine.dfmp2_binary()\n"
                    "mol = qcel.models.Molecule.from_data('''%s''')\n"
                    "inp = qcel.models.AtomicInput(molecule=mol, driver='energy', model={'method': 'mp2', "
                    "'basis': 'cc-pvdz'}, keywords={'e_convergence': 1e-10, 'd_convergence': 1e-10})\n"
                    "r = qcengine.compute(inp, 'dfmp2', task_config={'ncores': 1, 'memory': 1})\n"
                    "assert r.success, r.error\n"
                    "print(r.properties.scf_total_energy)\n" % (binary, WATER.replace("\\n", "\n")))
            p = run(hidden(trees, ["/usr/bin/python3", "-c", code]), rundir, py_env)
            if c.check(p.returncode == 0, "the installed harness finds the installed binary and runs water (%s)" %
                       p.stderr.strip()[-400:]):
                scf = float(p.stdout.strip().splitlines()[-1])
                c.check(abs(scf - reference[0]) <= 1e-6, "the harness's SCF energy is the build tree's (%+.1e Eh)" %
                        (scf - reference[0]))

        # Without its share/ folder the installed binary says where it looked: its prefix, never the source tree.
        shutil.rmtree(os.path.join(prefix, "share"))
        p = run([binary, "water.yaml"], rundir, env)
        c.check(p.returncode == 2 and os.path.join(prefix, "share", "dfmp2", "basis") in p.stderr and
                source not in p.stderr,
                "with share/ removed the installed binary names its own prefix's library (%s)" % p.stderr.strip())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("install: %s" % ("all checks passed" if c.failed == 0 else "%d checks failed" % c.failed))
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
