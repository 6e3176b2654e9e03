#!/usr/bin/python3
# Runs under Debian's /usr/bin/python3 (python3.11) with Psi4 1.3.2 from the Debian `psi4` package:
#     PYTHONPATH=/usr/lib/x86_64-linux-gnu /usr/bin/python3 bench/psi4_compare.py
# (running it directly also works: the Psi4 worker adds /usr/lib/x86_64-linux-gnu to sys.path itself when
# psi4 is not importable). Needs nothing but the standard library in the parent process.
"""Time dfmp2 against Psi4 1.3.2 on a water cluster: DF-SCF (cc-pVDZ-JKFIT) then DF-MP2 (cc-pVDZ-RI).

The default molecule is the performance reference of shared/reference/README.md: (H2O)16 on a cubic lattice
with 3.0 angstrom spacing (NBF 384, NAUX 1344, 80 occupied). Each program runs once, one after the other, in
its own subprocess and temporary folder, --repeat times (default 3, alternating Psi4 and dfmp2 so that a change of
machine load hits both); the script prints the median phase times side by side (with every run's), the energies and
their differences, and the target ratios of medians (issue 30: whole run <= 0.5, DF-MP2 step / Psi4 DFMP2 module
<= 0.45; with --scf-precision mixed --precision mixed the whole run <= 0.3 of Psi4's fp64).
Every result carries its context: the CPU model and instruction sets, and the BLAS kernels each program ran (Psi4's
OpenBLAS kernel set; dfmp2's backend, with the reason when it was the run-time default).

What each number includes is printed with the table and described in bench/README.md.
Exit status: 0 when both programs ran (whether or not the targets are met); 1 when a program failed, its output
could not be read, or the two programs disagree about the problem size; 2 bad arguments.
"""

import argparse
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

PSI4_PYTHON_DIR = "/usr/lib/x86_64-linux-gnu"
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
REFERENCE_JSON = os.path.join(REPO, "..", "shared", "reference", "psi4_refs.json")

# Water as in shared/reference/psi4_refs.json (angstrom); used when that file is not beside the repository.
WATER = [("O", 0.000000, 0.000000, 0.117790),
         ("H", 0.000000, 0.755453, -0.471161),
         ("H", 0.000000, -0.755453, -0.471161)]
SPACING = 3.0  # angstrom, lattice constant of the reference cluster

BASIS = "cc-pvdz"
AUX_BASIS = "cc-pvdz-ri"
JK_BASIS = "cc-pvdz-jkfit"
E_CONVERGENCE = 1e-8  # Psi4's defaults for an SCF ahead of a post-HF energy
D_CONVERGENCE = 1e-8

# Per water: basis functions, MP2 fitting functions, doubly occupied orbitals, for each orbital basis (--basis).
PER_WATER_BY_BASIS = {"cc-pvdz": {"nbf": 24, "naux": 84, "nocc": 5},
                      "cc-pvtz": {"nbf": 58, "naux": 141, "nocc": 5}}
PER_WATER = PER_WATER_BY_BASIS[BASIS]
# The cluster's charge, multiplicity and SCF reference (--charge, --multiplicity, --reference): a cation doublet
# (--charge 1 --multiplicity 2) times UHF (or ROHF) and DF-UMP2 (ROHF-MBPT(2)) in both programs.
STATE = {"charge": 0, "multiplicity": 1, "reference": "rhf"}


def use_basis(basis):
    """Sets the orbital basis and its -ri / -jkfit fitting sets for both programs (the worker gets it in its spec)."""
    global BASIS, AUX_BASIS, JK_BASIS, PER_WATER
    BASIS, AUX_BASIS, JK_BASIS = basis, basis + "-ri", basis + "-jkfit"
    PER_WATER = PER_WATER_BY_BASIS[basis]

# shared/reference/README.md: Psi4 1.3.2, 2 threads, default environment, (H2O)16.
REFERENCE_SECONDS = {"scf": 28.0, "mp2": 18.0, "whole": 46.0}

TARGET_WHOLE = 0.5  # dfmp2 whole run / Psi4 whole run (issue 30; issue 14 asked 0.6)
TARGET_MP2 = 0.45  # dfmp2 DF-MP2 step / Psi4 DFMP2 module (issue 30; issue 14 asked 0.5)
TARGET_WHOLE_MIXED = 0.3  # dfmp2 with scf.precision and precision mixed / Psi4's fp64 whole run (issue 30)


# ----------------------------------------------------------------------------------------------------------------
# Geometry


def water_geometry():
    """The water of psi4_refs.json (first case named water), or the embedded copy of it."""
    try:
        with open(REFERENCE_JSON) as f:
            refs = json.load(f)
        for case in refs.get("cases", []):
            if case.get("molecule") == "water":
                atoms = []
                for line in case["geometry_angstrom"].splitlines():
                    sym, x, y, z = line.split()
                    atoms.append((sym, float(x), float(y), float(z)))
                return atoms, os.path.normpath(REFERENCE_JSON)
    except (OSError, ValueError, KeyError):
        pass
    return list(WATER), "embedded copy of psi4_refs.json's water"


def lattice_shape(n):
    """The most compact a x b x c = n with a <= b <= c (smallest c - a, then smallest c): 16 -> 2 x 2 x 4."""
    best = None
    for a in range(1, n + 1):
        if n % a:
            continue
        for b in range(a, n // a + 1):
            if (n // a) % b:
                continue
            c = n // (a * b)
            if c < b:
                continue
            key = (c - a, c)
            if best is None or key < best[0]:
                best = (key, (a, b, c))
    return best[1]


def cluster(n, shape=None):
    """(H2O)n: the water translated to the points (i, j, k) * SPACING, i < a, j < b, k < c, k fastest."""
    water, source = water_geometry()
    a, b, c = shape or lattice_shape(n)
    atoms = []
    for i in range(a):
        for j in range(b):
            for k in range(c):
                for sym, x, y, z in water:
                    atoms.append((sym, x + i * SPACING, y + j * SPACING, z + k * SPACING))
    return atoms, (a, b, c), source


def xyz_lines(atoms):
    return "\n".join("%-2s %12.6f %12.6f %12.6f" % a for a in atoms)


def dfmp2_yaml(atoms, threads, memory, title, e_conv=E_CONVERGENCE, d_conv=D_CONVERGENCE, backend=None,
               scf_precision="fp64", precision="fp64", storage="auto", state=None):
    """dfmp2's input; storage 'scratch' puts both the SCF's J/K tensor and DF-MP2's fitted tensor on scratch
    (scf.jk_storage and mp2_storage), the out-of-core paths of the memory plan."""
    body = "\n".join("    " + ln for ln in xyz_lines(atoms).splitlines())
    return ("# %s\n"
            "# Generated by bench/psi4_compare.py.\n"
            "molecule:\n"
            "  charge: %d\n"
            "  multiplicity: %d\n"
            "  xyz: |\n%s\n"
            "reference: %s\n"
            "basis: %s\n"
            "aux_basis: %s\n"
            "scf: {type: df, jk_basis: %s, e_convergence: %g, d_convergence: %g, precision: %s, jk_storage: %s}\n"
            "mp2_storage: %s\n"
            "precision: %s\n"
            "frozen_core: false\n"
            "threads: %d\n"
            "%s"
            "save_integrals: false\n"
            "memory: %s\n") % (title, (state or STATE)["charge"], (state or STATE)["multiplicity"], body,
                                (state or STATE)["reference"], BASIS, AUX_BASIS, JK_BASIS, e_conv, d_conv, scf_precision, storage, storage,
                                precision, threads,
                                "" if backend is None else "backends: [%s]\n" % backend, memory)


def psi4_input(atoms, threads, memory, title, e_conv=E_CONVERGENCE, d_conv=D_CONVERGENCE):
    """A psithon input with the same settings, for running Psi4 by hand (`psi4 FILE`). Not used by the script."""
    return ("# %s\n"
            "# Generated by bench/psi4_compare.py; the script itself times energy('scf') and\n"
            "# energy('mp2', ref_wfn=wfn) separately in one Python process.\n"
            "memory %s\n"
            "set_num_threads(%d)\n"
            "molecule {\n%d %d\n%s\nsymmetry c1\nno_com\nno_reorient\nunits angstrom\n}\n"
            "set {\n  basis %s\n  reference %s\n  scf_type df\n  df_basis_scf %s\n  mp2_type df\n"
            "  df_basis_mp2 %s\n  freeze_core false\n  e_convergence %g\n  d_convergence %g\n}\n"
            "energy('mp2')\n") % (title, memory, threads, STATE["charge"], STATE["multiplicity"], xyz_lines(atoms),
                                  BASIS, STATE["reference"], JK_BASIS, AUX_BASIS, e_conv, d_conv)


# ----------------------------------------------------------------------------------------------------------------
# Psi4 worker (runs in the subprocess)


def openblas_core(maps_substrings=("openblas",)):
    """Name of the OpenBLAS kernel set loaded in this process (openblas_get_corename), or None."""
    try:
        import ctypes
        paths = set()
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6 and any(s in parts[5] for s in maps_substrings):
                    paths.add(parts[5])
        for path in sorted(paths):
            lib = ctypes.CDLL(path)
            if hasattr(lib, "openblas_get_corename"):
                lib.openblas_get_corename.restype = ctypes.c_char_p
                return "%s (%s)" % (lib.openblas_get_corename().decode(), os.path.realpath(path))
    except (OSError, AttributeError):
        pass
    return None


def psi4_worker(spec_path):
    with open(spec_path) as f:
        spec = json.load(f)
    t_start = time.perf_counter()
    try:
        import psi4
    except ImportError:
        if PSI4_PYTHON_DIR not in sys.path:
            sys.path.insert(0, PSI4_PYTHON_DIR)
        import psi4
    t_import = time.perf_counter() - t_start

    use_basis(spec.get("basis", BASIS))
    psi4.core.set_output_file(spec["output"], False)
    psi4.set_memory(spec["memory"])
    psi4.core.set_num_threads(spec["threads"])
    state = spec.get("state", STATE)
    mol = psi4.geometry("%d %d\n%s\nsymmetry c1\nno_com\nno_reorient\nunits angstrom\n" % (
        state["charge"], state["multiplicity"], spec["xyz"]))
    psi4.set_options({
        "basis": BASIS,
        "reference": state["reference"],
        "scf_type": "df",
        "df_basis_scf": JK_BASIS,
        "mp2_type": "df",
        "df_basis_mp2": AUX_BASIS,
        "freeze_core": False,
        "e_convergence": spec["e_convergence"],
        "d_convergence": spec["d_convergence"],
    })
    t0 = time.perf_counter()
    e_scf, wfn = psi4.energy("scf", return_wfn=True)
    t1 = time.perf_counter()
    iterations = psi4.variable("SCF ITERATIONS")
    psi4.energy("mp2", ref_wfn=wfn)
    t2 = time.perf_counter()

    result = {
        "version": psi4.__version__,
        "import_seconds": t_import,
        "scf_seconds": t1 - t0,
        "mp2_seconds": t2 - t1,
        "scf_total_energy": float(e_scf),
        "scf_iterations": int(iterations),
        "nuclear_repulsion_energy": float(mol.nuclear_repulsion_energy()),
        "mp2_correlation_energy": float(psi4.variable("MP2 CORRELATION ENERGY")),
        "mp2_same_spin_correlation_energy": float(psi4.variable("MP2 SAME-SPIN CORRELATION ENERGY")),
        "mp2_opposite_spin_correlation_energy": float(psi4.variable("MP2 OPPOSITE-SPIN CORRELATION ENERGY")),
        "mp2_total_energy": float(psi4.variable("MP2 TOTAL ENERGY")),
        "nbf": int(wfn.nso()),
        "nocc": int(wfn.nalpha()),
        # Built after the timed calls; DFMP2 builds the same set itself.
        "naux": int(psi4.core.BasisSet.build(mol, "DF_BASIS_MP2", AUX_BASIS, "RIFIT", BASIS).nbf()),
        "njk": int(psi4.core.BasisSet.build(mol, "DF_BASIS_SCF", JK_BASIS, "JKFIT", BASIS).nbf()),
        "openblas": openblas_core(("openblas", "libblas")),
    }
    with open(spec["result"], "w") as f:
        json.dump(result, f, indent=1)
    return 0


# ----------------------------------------------------------------------------------------------------------------
# Running the two programs


class RunError(Exception):
    pass


PEAK_RESIDENT = {}  # command's program -> peak resident bytes of its last run (getrusage of the child)


def run_timed(cmd, cwd, env, stdout_path, stderr_path):
    with open(stdout_path, "w") as out, open(stderr_path, "w") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    PEAK_RESIDENT[cmd[0]] = usage.ru_maxrss * 1024.0  # kilobytes on Linux
    code = os.waitstatus_to_exitcode(status)
    return code, wall


def tail(path, n=15):
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
        return "\n".join("    " + ln for ln in lines[-n:])
    except OSError:
        return "    (no output)"


def run_psi4(args, atoms, workdir, env, index=0):
    d = os.path.join(workdir, "psi4.%d" % index)
    os.makedirs(d)
    spec = {"xyz": xyz_lines(atoms), "threads": args.threads, "memory": args.psi4_memory, "basis": BASIS,
            "state": STATE,
            "output": os.path.join(d, "output.dat"), "result": os.path.join(d, "result.json"),
            "e_convergence": args.e_convergence, "d_convergence": args.d_convergence}
    spec_path = os.path.join(d, "spec.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    penv = dict(env)
    penv["PSI_SCRATCH"] = d
    pythonpath = penv.get("PYTHONPATH", "")
    if PSI4_PYTHON_DIR not in pythonpath.split(os.pathsep):
        penv["PYTHONPATH"] = os.pathsep.join(p for p in (PSI4_PYTHON_DIR, pythonpath) if p)
    cmd = [args.python, os.path.abspath(__file__), "--psi4-worker", spec_path]
    print("psi4: running (%s threads, memory %s) ..." % (args.threads, args.psi4_memory), file=sys.stderr, flush=True)
    rc, wall = run_timed(cmd, d, penv, os.path.join(d, "stdout.txt"), os.path.join(d, "stderr.txt"))
    if rc != 0 or not os.path.exists(spec["result"]):
        raise RunError("Psi4 worker failed (exit %d); stderr ends:\n%s\nPsi4 output ends:\n%s"
                       % (rc, tail(os.path.join(d, "stderr.txt")), tail(spec["output"])))
    with open(spec["result"]) as f:
        res = json.load(f)
    res["whole_seconds"] = wall
    res["other_seconds"] = wall - res["scf_seconds"] - res["mp2_seconds"]
    res["peak_resident_bytes"] = PEAK_RESIDENT.get(args.python)
    print("psi4: done in %.1f s" % wall, file=sys.stderr, flush=True)
    return res


TABLE_ROW = re.compile(r"^\s+(\S+)\s+(\S+(?: \S+)?)\s+(\S+)\s+(\S+)\s+(\d+|-)\s+([0-9.]+)\s+(\S+)\s+([0-9.]+)%\s*$")


def parse_kernel_table(text, header_prefix):
    """Rows (step, kernel, backend, dtype, calls, seconds) of the first report table whose title starts so."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith(header_prefix):
            m = re.search(r"\(wall ([0-9.]+) s\)", line)
            wall = float(m.group(1)) if m else None
            rows = []
            for row in lines[i + 2:]:
                mm = TABLE_ROW.match(row)
                if not mm:
                    break
                rows.append({"step": mm.group(1), "kernel": mm.group(2), "backend": mm.group(3),
                             "dtype": mm.group(4), "calls": mm.group(5), "seconds": float(mm.group(6))})
            return wall, rows
    return None, []


def run_dfmp2(args, atoms, workdir, env, title, index=0):
    d = os.path.join(workdir, "dfmp2.%d" % index)
    os.makedirs(d)
    yaml_path = os.path.join(d, "input.yaml")
    with open(yaml_path, "w") as f:
        f.write(dfmp2_yaml(atoms, args.threads, args.dfmp2_memory, title, args.e_convergence, args.d_convergence,
                           args.backend, args.scf_precision, args.precision, args.storage))
    json_path = os.path.join(d, "out.json")
    cmd = [args.dfmp2, yaml_path, "--json", json_path]
    print("dfmp2: running %s ..." % args.dfmp2, file=sys.stderr, flush=True)
    out_path, err_path = os.path.join(d, "stdout.txt"), os.path.join(d, "stderr.txt")
    rc, wall = run_timed(cmd, d, env, out_path, err_path)
    if rc != 0 or not os.path.exists(json_path):
        raise RunError("dfmp2 failed (exit %d); stderr ends:\n%s" % (rc, tail(err_path)))
    with open(json_path) as f:
        js = json.load(f)
    with open(out_path, errors="replace") as f:
        stdout = f.read()
    with open(err_path, errors="replace") as f:
        stderr = f.read()
    text = stdout + "\n" + stderr

    setup_wall, setup_rows = parse_kernel_table(stdout, "Integral and SCF timings")
    scf_js = js["extras"]["dfmp2"]["problem"].get("scf")
    if scf_js is not None:
        # The results file has the SCF and MP2 integral times (dfmp2 after 2026-11-22).
        scf_iterations, scf_seconds = int(scf_js["iterations"]), float(scf_js["scf_seconds"])
        mp2_integral_seconds = float(scf_js["mp2_integral_seconds"])
    else:
        m = re.search(r"SCF converged in (\d+) iterations: E = (\S+) Eh \(([0-9.]+) s\)", text)
        if not m:
            raise RunError("dfmp2: cannot find the line 'SCF converged in N iterations ... (T s)' in its output")
        scf_iterations, scf_seconds = int(m.group(1)), float(m.group(3))
        mp2_int = [r for r in setup_rows if r["step"] == "mp2_integrals"]
        if not mp2_int:
            raise RunError("dfmp2: no 'mp2_integrals' row in the 'Integral and SCF timings' table of its output")
        mp2_integral_seconds = sum(r["seconds"] for r in mp2_int)

    run = js["extras"]["dfmp2"]["backends"][0]
    props = js["properties"]
    backend_seconds = float(run["wall_time_seconds"])
    res = {
        "whole_seconds": wall,
        "peak_resident_bytes": PEAK_RESIDENT.get(args.dfmp2),
        "memory_plan": js["extras"]["dfmp2"].get("memory_plan"),
        "scf_seconds": scf_seconds,
        "scf_iterations": scf_iterations,
        "mp2_integral_seconds": mp2_integral_seconds,
        "mp2_backend_seconds": backend_seconds,
        "mp2_seconds": mp2_integral_seconds + backend_seconds,
        "other_seconds": wall - scf_seconds - mp2_integral_seconds - backend_seconds,
        "scf_total_energy": props.get("scf_total_energy"),
        "nuclear_repulsion_energy": props.get("nuclear_repulsion_energy"),
        "mp2_correlation_energy": props["mp2_correlation_energy"],
        "mp2_same_spin_correlation_energy": props["mp2_same_spin_correlation_energy"],
        "mp2_opposite_spin_correlation_energy": props["mp2_opposite_spin_correlation_energy"],
        "mp2_total_energy": props.get("mp2_total_energy"),
        "nbf": props.get("calcinfo_nbasis"),
        "nocc": props.get("calcinfo_nalpha"),
        "naux": js["extras"]["dfmp2"]["problem"]["naux"],
        "backend": run.get("backend"),
        "backend_details": run.get("details"),
        "default_backend": js["extras"]["dfmp2"].get("default_backend"),
        "blocking": run.get("blocking"),
        "setup_table_wall_seconds": setup_wall,
        "setup_kernels": setup_rows,
        "mp2_kernels": [{k: r[k] for k in ("step", "kernel", "backend", "dtype", "calls", "seconds")}
                        for r in run.get("kernels", [])],
    }
    print("dfmp2: done in %.1f s" % wall, file=sys.stderr, flush=True)
    return res


# ----------------------------------------------------------------------------------------------------------------
# Report


def fmt_s(x):
    return "-" if x is None else "%.2f" % x


def ratio(a, b):
    if a is None or b is None or b <= 0:
        return None
    return a / b


def fmt_r(x):
    return "-" if x is None else "%.3f" % x


def print_table(headers, rows, aligns=None):
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]
    aligns = aligns or ["<"] + [">"] * (len(headers) - 1)

    def line(cells):
        return "  ".join(("%-*s" if a == "<" else "%*s") % (w, c) for c, w, a in zip(cells, widths, aligns))

    print(line(headers))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(line(r))


# The vector instruction sets that decide a GEMM kernel's speed, as /proc/cpuinfo names them.
ISA_FLAGS = ("sse2", "avx", "avx2", "fma", "avx512f", "avx512dq", "avx512vl", "avx512_bf16", "amx_tile")


def machine_notes():
    model, isa = "unknown CPU", []
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
        m = re.search(r"^model name\s*:\s*(.*)$", info, re.M)
        fam = re.search(r"^cpu family\s*:\s*(\d+)", info, re.M)
        mod = re.search(r"^model\s*:\s*(\d+)", info, re.M)
        flags = re.search(r"^flags\s*:\s*(.*)$", info, re.M)
        have = set(flags.group(1).split()) if flags else set()
        isa = [f for f in ISA_FLAGS if f in have]
        if m:
            model = "%s (family %s, model %s)" % (m.group(1).strip(), fam.group(1) if fam else "?",
                                                  mod.group(1) if mod else "?")
    except OSError:
        pass
    return {"cpu": model, "instruction_sets": isa, "cores": os.cpu_count(), "host": platform.node(),
            "kernel": platform.release()}


MEDIAN_KEYS = ("scf_seconds", "mp2_seconds", "other_seconds", "whole_seconds", "mp2_integral_seconds",
               "mp2_backend_seconds", "import_seconds", "peak_resident_bytes")


def median(values):
    v = sorted(x for x in values if x is not None)
    if not v:
        return None
    h = len(v) // 2
    return v[h] if len(v) % 2 else 0.5 * (v[h - 1] + v[h])


def median_record(runs):
    """The first run's record (energies, sizes, kernels of that run) with each time replaced by the median over the
    runs, every run's times under 'runs', and the largest energy spread between runs under 'energy_spread'."""
    if not runs:
        return None
    out = dict(runs[0])
    for k in MEDIAN_KEYS:
        if any(k in r for r in runs):
            out[k] = median([r.get(k) for r in runs])
    out["runs"] = [{k: r.get(k) for k in MEDIAN_KEYS if k in r} for r in runs]
    out["energy_spread"] = max(abs(r["mp2_total_energy"] - runs[0]["mp2_total_energy"]) for r in runs
                               if r.get("mp2_total_energy") is not None) if runs[0].get("mp2_total_energy") else None
    return out


def env_value(name):
    v = os.environ.get(name)
    return "unset" if v is None else v


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog="See bench/README.md, section 'psi4_compare'.")
    p.add_argument("--dfmp2", default=os.path.join(REPO, "build", "app", "dfmp2"),
                   help="the dfmp2 executable (default build/app/dfmp2 of this repository)")
    p.add_argument("--threads", type=int, default=2, help="threads for both programs (default 2)")
    p.add_argument("--scf-precision", default="fp64", choices=["fp64", "mixed"],
                   help="dfmp2's scf.precision (mixed: fp32 K until the gradient is below 1e-4)")
    p.add_argument("--storage", default="auto", choices=["auto", "memory", "scratch"],
                   help="dfmp2's scf.jk_storage and mp2_storage (scratch: both tensors out of core; default auto)")
    p.add_argument("--precision", default="fp64", choices=["fp64", "mixed", "fp32"],
                   help="dfmp2's DF-MP2 precision")
    p.add_argument("--repeat", type=int, default=3,
                   help="runs of each program, alternating; medians are reported (default 3)")
    p.add_argument("--backend", default=None,
                   help="dfmp2 backend for the SCF and DF-MP2 (default: none given, so dfmp2 chooses the faster CPU "
                        "backend at run time and says why)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--molecule", default=None, metavar="NAME",
                   help="h2o16 (default), or h2oN for N waters on the lattice")
    g.add_argument("--waters", type=int, default=None, metavar="N",
                   help="N waters instead of 16 (e.g. 2, 4, 8 for a quick run)")
    p.add_argument("--lattice", default=None, metavar="AxBxC",
                   help="lattice block (default: the most compact, 2x2x4 for 16 waters)")
    p.add_argument("--charge", type=int, default=0, help="the cluster's charge (default 0)")
    p.add_argument("--multiplicity", type=int, default=1, help="its multiplicity 2S + 1 (default 1)")
    p.add_argument("--reference", default=None, choices=["rhf", "uhf", "rohf"],
                   help="the SCF reference of both programs (default rhf for a singlet, uhf otherwise)")
    p.add_argument("--skip-psi4", action="store_true",
                   help="run dfmp2 only; for (H2O)16 compare with shared/reference/README.md's Psi4 times")
    p.add_argument("--json", metavar="FILE", help="also write every number as JSON")
    p.add_argument("--e-convergence", type=float, default=E_CONVERGENCE,
                   help="SCF energy convergence for both programs (default 1e-8, Psi4's default before MP2)")
    p.add_argument("--d-convergence", type=float, default=D_CONVERGENCE,
                   help="SCF orbital-gradient convergence for both programs (default 1e-8)")
    p.add_argument("--basis", default="cc-pvdz", choices=sorted(PER_WATER_BY_BASIS),
                   help="orbital basis, with its -ri and -jkfit fitting sets (default cc-pvdz)")
    p.add_argument("--psi4-memory", default="4 GB", help="Psi4 memory (default '4 GB')")
    p.add_argument("--dfmp2-memory", default="8 GiB", help="dfmp2 input key memory (default '8 GiB')")
    p.add_argument("--python", default="/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable,
                   help="Python that runs the Psi4 worker (default /usr/bin/python3)")
    p.add_argument("--keep", action="store_true", help="keep the temporary folder with both programs' output")
    p.add_argument("--write-inputs", metavar="DIR",
                   help="only write the dfmp2 YAML and a Psi4 input for the molecule into DIR, run nothing")
    p.add_argument("--psi4-worker", metavar="SPEC", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    use_basis(args.basis)

    if args.psi4_worker:
        return psi4_worker(args.psi4_worker)

    if args.threads < 1:
        p.error("--threads must be >= 1, got %d" % args.threads)
    if args.repeat < 1:
        p.error("--repeat must be >= 1, got %d" % args.repeat)
    if args.waters is not None:
        n = args.waters
    elif args.molecule is not None:
        m = re.fullmatch(r"h2o(\d+)", args.molecule.lower())
        if not m:
            p.error("--molecule: expected h2o16 or h2oN, got %r" % args.molecule)
        n = int(m.group(1))
    else:
        n = 16
    if n < 1:
        p.error("the number of waters must be >= 1")
    shape = None
    if args.lattice:
        m = re.fullmatch(r"(\d+)x(\d+)x(\d+)", args.lattice)
        if not m or int(m.group(1)) * int(m.group(2)) * int(m.group(3)) != n:
            p.error("--lattice: expected AxBxC with A*B*C = %d, got %r" % (n, args.lattice))
        shape = tuple(int(v) for v in m.groups())
    atoms, shape, water_source = cluster(n, shape)
    STATE.update(charge=args.charge, multiplicity=args.multiplicity,
                 reference=args.reference or ("rhf" if args.multiplicity == 1 else "uhf"))
    if (10 * n - args.charge - args.multiplicity + 1) % 2 != 0 or args.multiplicity < 1:
        p.error("--charge %d and --multiplicity %d do not go together for (H2O)%d" % (args.charge, args.multiplicity, n))
    if STATE["reference"] == "rhf" and args.multiplicity != 1:
        p.error("--reference rhf is for singlets")
    name = "(H2O)%d" % n + ({1: "+", -1: "-"}.get(args.charge, "%+d" % args.charge) if args.charge else "")
    title = "%s: water of psi4_refs.json on a %dx%dx%d cubic lattice, spacing %.1f angstrom; %s / %s, DF-SCF %s; %s" % (
        name, shape[0], shape[1], shape[2], SPACING, BASIS, AUX_BASIS, JK_BASIS,
        "%s, multiplicity %d" % (STATE["reference"].upper(), STATE["multiplicity"]))

    if args.write_inputs:
        if not os.path.isdir(args.write_inputs):
            p.error("--write-inputs: folder %s does not exist" % args.write_inputs)
        stem = os.path.join(args.write_inputs, "h2o%d" % n)
        with open(stem + ".yaml", "w") as f:
            f.write(dfmp2_yaml(atoms, args.threads, args.dfmp2_memory, title, args.e_convergence,
                               args.d_convergence, args.backend, args.scf_precision, args.precision, args.storage))
        with open(stem + "_psi4.dat", "w") as f:
            f.write(psi4_input(atoms, args.threads, args.psi4_memory, title, args.e_convergence,
                               args.d_convergence))
        print("wrote %s.yaml and %s_psi4.dat" % (stem, stem))
        return 0

    if not (os.path.isfile(args.dfmp2) and os.access(args.dfmp2, os.X_OK)):
        p.error("--dfmp2: %s is not an executable file (build first: scripts/quickstart.sh)" % args.dfmp2)
    if args.json:
        jdir = os.path.dirname(os.path.abspath(args.json))
        if not os.path.isdir(jdir):
            p.error("--json: folder %s does not exist" % jdir)
    args.dfmp2 = os.path.abspath(args.dfmp2)

    env = dict(os.environ)
    notes = machine_notes()
    print("psi4_compare %s  %s" % (time.strftime("%Y-%m-%d %H:%M:%S"), name))
    print("  molecule   %s (%d atoms; water from %s)" % (title, len(atoms), water_source))
    print("  machine    %s, %s cores; load average before %.2f %.2f %.2f"
          % ((notes["cpu"], notes["cores"]) + os.getloadavg()))
    print("  ISA        %s" % " ".join(notes["instruction_sets"]))
    print("  threads    %d (both programs); SCF e_convergence %g, d_convergence %g; %d run%s each, medians"
          % (args.threads, args.e_convergence, args.d_convergence, args.repeat, "" if args.repeat == 1 else "s"))
    print("  dfmp2      scf.precision %s, precision %s, backend %s, storage %s, memory %s"
          % (args.scf_precision, args.precision, args.backend or "the run-time default", args.storage,
             args.dfmp2_memory))
    print("  env        OPENBLAS_CORETYPE=%s  OPENBLAS_L2_SIZE=%s  OMP_NUM_THREADS=%s"
          % (env_value("OPENBLAS_CORETYPE"), env_value("OPENBLAS_L2_SIZE"), env_value("OMP_NUM_THREADS")))
    sys.stdout.flush()

    workdir = tempfile.mkdtemp(prefix="psi4_compare.")
    record = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "molecule": name, "lattice": list(shape),
              "charge": STATE["charge"], "multiplicity": STATE["multiplicity"], "reference": STATE["reference"],
              "spacing_angstrom": SPACING, "atoms": len(atoms), "threads": args.threads,
              "e_convergence": args.e_convergence, "d_convergence": args.d_convergence, "machine": notes,
              "repeat": args.repeat, "statistic": "median",
              "dfmp2_settings": {"scf_precision": args.scf_precision, "precision": args.precision,
                                 "storage": args.storage,
                                 "backend": args.backend},
              "environment": {k: os.environ.get(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
                                                               "OMP_NUM_THREADS")},
              "load_average_before": os.getloadavg(), "psi4": None, "dfmp2": None, "psi4_source": None}
    status = 0
    try:
        psi_runs, dfm_runs = [], []
        for i in range(args.repeat):  # alternating, so that a change of load hits both programs
            if not args.skip_psi4:
                psi_runs.append(run_psi4(args, atoms, workdir, env, i))
                record["psi4_source"] = "measured"
            dfm_runs.append(run_dfmp2(args, atoms, workdir, env, title, i))
        psi, dfm = median_record(psi_runs), median_record(dfm_runs)
    except RunError as exc:
        print("psi4_compare: error: %s" % exc, file=sys.stderr)
        if not args.keep:
            print("  (work files kept in %s)" % workdir, file=sys.stderr)
        return 1
    finally:
        if args.keep:
            print("  work files in %s" % workdir)
    record["load_average_after"] = os.getloadavg()
    record["psi4"], record["dfmp2"] = psi, dfm

    ref_times = None
    if psi is None and n == 16 and STATE["charge"] == 0 and STATE["reference"] == "rhf":
        ref_times = {"scf_seconds": REFERENCE_SECONDS["scf"], "mp2_seconds": REFERENCE_SECONDS["mp2"],
                     "whole_seconds": REFERENCE_SECONDS["whole"], "other_seconds": None}
        record["psi4_source"] = "shared/reference/README.md (not measured in this run)"
    cmp = psi or ref_times

    # Sizes.
    expect = {k: v * n for k, v in PER_WATER.items()}
    print("\nSizes (expected for %s: nbf %d, naux %d, nocc %d):" % (name, expect["nbf"], expect["naux"],
                                                                    expect["nocc"]))
    size_rows = []
    for key in ("nbf", "naux", "nocc"):
        size_rows.append([key, psi[key] if psi else "-", dfm[key], expect[key]])
        if dfm[key] != expect[key] or (psi and psi[key] != expect[key]):
            status = 1
    if psi:
        size_rows.append(["JK fitting functions", psi["njk"], "-", "-"])
    print_table(["", "Psi4", "dfmp2", "expected"], size_rows)
    if status:
        print("SIZE MISMATCH: the two programs do not solve the expected problem", file=sys.stderr)

    # Times.
    print("\nWall times, seconds, median of %d run%s%s:" % (args.repeat, "" if args.repeat == 1 else "s", "" if psi else
                                        (" (Psi4 column: the shared reference, not measured here)" if cmp
                                         else " (Psi4 skipped)")))
    rows = []
    phases = [("SCF", "scf_seconds"), ("DF-MP2 step", "mp2_seconds"), ("other (start-up, I/O, exit)", "other_seconds"),
              ("whole run", "whole_seconds")]
    for label, key in phases:
        a = cmp[key] if cmp else None
        b = dfm[key]
        rows.append([label, fmt_s(a), fmt_s(b), fmt_r(ratio(b, a))])
    print_table(["phase", "Psi4 s", "dfmp2 s", "dfmp2/Psi4"], rows)
    if args.repeat > 1:
        for label, rec in (("Psi4", psi), ("dfmp2", dfm)):
            if rec:
                print("  %-6s runs: whole %s s; SCF %s s; DF-MP2 %s s" % (
                    label, ", ".join(fmt_s(r.get("whole_seconds")) for r in rec["runs"]),
                    ", ".join(fmt_s(r.get("scf_seconds")) for r in rec["runs"]),
                    ", ".join(fmt_s(r.get("mp2_seconds")) for r in rec["runs"])))
    gib = lambda b: "%.2f GiB" % (b / 2.0 ** 30) if b else "-"
    print("  peak resident memory (getrusage of each program's process): Psi4 %s, dfmp2 %s (dfmp2 memory %s)"
          % (gib(psi.get("peak_resident_bytes") if psi else None), gib(dfm.get("peak_resident_bytes")),
             args.dfmp2_memory))
    print("  Psi4 SCF         = energy('scf', return_wfn=True): integrals, guess, %s iterations"
          % (psi["scf_iterations"] if psi else "?"))
    print("  Psi4 DF-MP2      = energy('mp2', ref_wfn=wfn): the DFMP2 module (fitting basis, (Q|mn) and metric, "
          "transformation, fitting, pair energies)")
    print("  Psi4 whole       = subprocess wall clock (Python start, import psi4 %s s, both calls, exit)"
          % (fmt_s(psi["import_seconds"]) if psi else "?"))
    print("  dfmp2 SCF        = the 'SCF converged ... (T s)' line: JK integrals and fitting, SAD guess, %d iterations"
          % dfm["scf_iterations"])
    print("  dfmp2 DF-MP2     = mp2_integrals (metric (P|Q) and (P|mn) over cc-pvdz-ri) %.2f s + backend run "
          "(metric factor, transformation, fitting, pair energies) %.2f s" % (dfm["mp2_integral_seconds"],
                                                                             dfm["mp2_backend_seconds"]))
    print("  dfmp2 whole      = subprocess wall clock (basis files, SCF, DF-MP2, report, JSON)")

    # Energies.
    print("\nEnergies, Eh:")
    erows = []
    for label, key in [("SCF total", "scf_total_energy"), ("nuclear repulsion", "nuclear_repulsion_energy"),
                       ("MP2 same-spin", "mp2_same_spin_correlation_energy"),
                       ("MP2 opposite-spin", "mp2_opposite_spin_correlation_energy"),
                       ("MP2 correlation", "mp2_correlation_energy"), ("MP2 total", "mp2_total_energy")]:
        a = psi[key] if psi else None
        b = dfm[key]
        d = (b - a) if (a is not None and b is not None) else None
        erows.append([label, "-" if a is None else "%.10f" % a, "-" if b is None else "%.10f" % b,
                      "-" if d is None else "%+.2e" % d])
    print_table(["energy", "Psi4", "dfmp2", "dfmp2 - Psi4"], erows)

    # Where dfmp2 spends its time.
    print("\ndfmp2 kernels (seconds; SCF/integral table, then the DF-MP2 backend run):")
    krows = []
    mp2_rows = list(dfm["mp2_kernels"])
    untimed = dfm["mp2_backend_seconds"] - sum(r["seconds"] for r in mp2_rows)
    mp2_rows.append({"step": "other", "kernel": "(untimed)", "backend": "host", "calls": "-", "seconds": untimed})
    for table, rows_ in (("SCF+integrals", dfm["setup_kernels"]), ("DF-MP2 run", mp2_rows)):
        for r in rows_:
            krows.append([table, r["step"], r["kernel"], r["backend"], str(r["calls"]), "%.3f" % r["seconds"],
                          "%.1f%%" % (100.0 * r["seconds"] / dfm["whole_seconds"])])
    print_table(["table", "step", "kernel", "backend", "calls", "seconds", "of whole"], krows,
                ["<", "<", "<", "<", ">", ">", ">"])
    print("  dfmp2 backend: %s: %s" % (dfm.get("backend"), dfm["backend_details"]))
    if dfm.get("default_backend"):
        print("  dfmp2 default: %s (%s)" % (dfm["default_backend"]["name"], dfm["default_backend"]["reason"]))
    if psi and psi.get("openblas"):
        print("  Psi4 BLAS:     OpenBLAS kernels %s" % psi["openblas"])
    record["blas"] = {"dfmp2_backend": dfm.get("backend"), "dfmp2_details": dfm.get("backend_details"),
                      "dfmp2_default_reason": (dfm.get("default_backend") or {}).get("reason"),
                      "psi4_openblas": psi.get("openblas") if psi else None}

    # Targets.
    print("\nTargets:")
    r_whole = ratio(dfm["whole_seconds"], cmp["whole_seconds"]) if cmp else None
    r_mp2 = ratio(dfm["mp2_seconds"], cmp["mp2_seconds"]) if cmp else None
    record["ratios"] = {"whole": r_whole, "mp2": r_mp2}
    mixed = args.scf_precision == "mixed" and args.precision == "mixed"
    for label, r, target in [("whole run, dfmp2 / Psi4", r_whole, TARGET_WHOLE_MIXED if mixed else TARGET_WHOLE),
                             ("DF-MP2 step / Psi4 DFMP2 module", r_mp2, None if mixed else TARGET_MP2)]:
        if target is None:
            print("  %-34s %s  (no target for a mixed-precision run)" % (label, fmt_r(r)))
            continue
        if r is None:
            verdict = "not measured"
        else:
            verdict = "PASS" if r <= target else "BELOW TARGET"
        print("  %-34s %s  (target <= %.2f)  %s%s" % (label, fmt_r(r), target, verdict,
                                                     "" if psi or r is None else " [against the shared reference]"))
    print("  load average after %.2f %.2f %.2f" % os.getloadavg())

    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)
        print("  results written to %s" % args.json)
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
