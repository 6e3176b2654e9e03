#!/usr/bin/env python3
"""The MPI tier (README "MPI"): dfmp2 under `mpirun` on 1 to 4 ranks of this machine (oversubscribed) against the same
input run as one process without mpirun.

    run_mpi.py --dfmp2 build/app/dfmp2 --repo . --case water_file      # one group of cases; --list names them

energies   each case's SCF and MP2 energies on 1, 2, 3 and 4 ranks within 1e-10 Eh of the serial run (MP2 in mixed
           precision within that run's own error against fp64: FP32_CASES), every rank's
           stats in the results file, the memory plan of each rank within its `memory`, no scratch file left
failures   a bad input on one rank, a file only one rank cannot read, a scratch write that fails on one rank mid-run,
           `memory` too small, an SCF that does not converge: each ends every rank with one line naming the rank and
           the cause, the documented exit code, nothing on stdout before the failure where there is no progress, no
           results file and no scratch file left; never a hang (each run has a time limit)
Exit 0 when every check passes; one line per check either way.
"""
import argparse
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import Checker  # noqa: E402

RANKS = [1, 2, 3, 4]
TOLERANCE = 1e-10  # Eh
MP2_GRADIENT_TOLERANCE = 1e-12  # Eh/bohr: the gradient less the SCF's, on any rank count
# Eh/bohr^2: a Hessian from central differences (0.005 bohr) of gradients, each displaced SCF started from the
# undisplaced orbitals, which carry the SCF's convergence on each rank count: TOLERANCE over the step 2h.
HESSIAN_TOLERANCE = TOLERANCE / (2 * 0.005)
TIME_LIMIT = 240   # seconds per run: a hang fails the test instead of stalling the suite


def mpirun():
    cmd = ["mpirun", "-q", "--oversubscribe"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return cmd


WATER_XYZ = """    O 0.000000 0.000000 0.117790
    H 0.000000 0.755453 -0.471161
    H 0.000000 -0.755453 -0.471161"""
DIMER_XYZ = WATER_XYZ + """
    O 0.000000 0.000000 3.117790
    H 0.000000 0.755453 2.528839
    H 0.000000 -0.755453 2.528839"""


def molecule(xyz, extra):
    return "molecule:\n  xyz: |\n%s\nbasis: cc-pvdz\nthreads: 1\n%s" % (xyz, extra)


# name -> input text ({repo} is the repository). Each runs serially and on every rank count of RANKS.
CASES = {
    # An integral file: one occupied block, so one block pair: more ranks than pairs.
    "water_file": "integrals: {repo}/inputs/water-cc-pvdz.h5\nthreads: 1\n",
    # Molecule input, DF-SCF (J/K in memory), frozen core.
    "water_frozen_core": molecule(WATER_XYZ, "scf: {type: df}\nfrozen_core: true\n"),
    # A synthetic problem with several auxiliary and occupied blocks, frozen orbitals by count.
    "synthetic": "synthetic: {nbasis: 160, nocc: 36, naux: 480, seed: 5}\nfrozen_core: 2\nthreads: 1\n",
    # Out of core: DF-MP2's tensors on scratch (synthetic), and a molecule with both SCF and MP2 on scratch.
    "synthetic_scratch": "synthetic: {nbasis: 160, nocc: 36, naux: 480, seed: 5}\nmp2_storage: scratch\n"
                         "threads: 1\n",
    "dimer_scratch": molecule(DIMER_XYZ, "scf: {type: df, jk_storage: scratch}\nmp2_storage: scratch\n"),
    # The SCF's other J/K builds: recomputed three-index integrals, and the exact four-centre J/K.
    "dimer_recompute": molecule(DIMER_XYZ, "scf: {type: df, jk_storage: recompute}\n"),
    "water_exact": molecule(WATER_XYZ, "scf: {type: exact}\n"),
    # Mixed precision in DF-MP2 (with an fp64 run beside it, whose difference is the bound below) and the SCF's
    # fp32 exchange.
    # Its backend named: fp32 results differ between backends by 1e-7, and the measured default (devices/calibration)
    # may differ between the one-process run and mpirun's (their thread settings are part of the calibration's key).
    "dimer_mixed": molecule(DIMER_XYZ, "scf: {type: df, precision: mixed}\nprecision: [mixed, fp64]\n"
                                       "backends: [openblas]\n"),
    # Open shells: DF-UMP2 of the water dimer cation (alpha and beta blocks spread over the ranks, on scratch), and
    # ROHF-MBPT(2) of triplet methylene with the exact SCF and a frozen core.
    "dimer_cation_uhf": "molecule:\n  charge: 1\n  multiplicity: 2\n  xyz: |\n%s\nbasis: cc-pvdz\nthreads: 1\n"
                        "scf: {type: df, d_convergence: 1e-9}\nmp2_storage: scratch\n" % DIMER_XYZ,
    "methylene_rohf": "molecule:\n  multiplicity: 3\n  xyz: |\n    C 0 0 0.1\n    H 0 0.99 -0.5\n"
                      "    H 0 -0.99 -0.5\nbasis: cc-pvdz\nthreads: 1\nreference: rohf\n"
                      "scf: {type: exact, d_convergence: 1e-9}\nfrozen_core: true\n",
    # Interaction energies (both schemes): the fragments in the complex's basis in the complex's DF-MP2 run (their
    # blocks spread over the ranks with the complex's), the fragments in their own basis as runs of their own; a
    # doublet fragment (OH) beside a water, so the complex is UHF and the water fragment RHF.
    "interaction_uhf": "molecule:\n  xyz: |\n    0 2\n    O 0 0 0\n    H 0 0 0.97\n    --\n    0 1\n"
                       "    O 0 0 2.9\n    H 0.76 0 3.5\n    H -0.76 0 3.5\nbasis: cc-pvdz\nthreads: 1\n"
                       "scf: {type: df, d_convergence: 1e-9}\nfrozen_core: true\ninteraction: {bsse: both}\n",
    # DF-MP2 gradients (driver: gradient): the gradient's work shared among the ranks, its J/K builds as in the SCF
    # (DF in memory with a frozen core; the exact J/K).
    "dimer_gradient": molecule(DIMER_XYZ, "scf: {type: df, d_convergence: 1e-9}\nfrozen_core: true\n"
                                          "driver: gradient\n"),
    "water_exact_gradient": molecule(WATER_XYZ, "scf: {type: exact, d_convergence: 1e-9}\ndriver: gradient\n"),
    # A Hessian: its displaced geometries spread over the ranks, each a calculation of one rank.
    "water_hessian": molecule(WATER_XYZ, "scf: {type: df, d_convergence: 1e-9}\nfrozen_core: true\n"
                                         "driver: hessian\n"),
    # A counterpoise-corrected gradient (issue 45): the complex's and each fragment's gradient calculation on the
    # ranks, summed as on one process; with SOS-MP2.
    "dimer_cp_gradient": molecule(WATER_XYZ + "\n    --" + DIMER_XYZ[len(WATER_XYZ):],
                                  "scf: {type: df, d_convergence: 1e-9}\nfrozen_core: true\n"
                                  "interaction: {bsse: cp}\nmethod: sos-mp2\ndriver: gradient\n"),
    # The gradient's blocks in every rank's own scratch file.
    "dimer_gradient_scratch": molecule(DIMER_XYZ, "scf: {type: df, d_convergence: 1e-9}\nfrozen_core: true\n"
                                                  "mp2_storage: scratch\ndriver: gradient\n"),
    # UHF gradients (issue 45): each spin's rows of pairs with both spins' blocks fetched from their holders, the
    # spins' Z-vector on the ranks' J/K; in memory (SCS-MP2 with an exact SCF) and on scratch (frozen core).
    "cation_uhf_gradient": "molecule:\n  charge: 1\n  multiplicity: 2\n  xyz: |\n%s\nbasis: cc-pvdz\nthreads: 1\n"
                           "scf: {type: exact, d_convergence: 1e-9}\nmethod: scs-mp2\ndriver: gradient\n" % WATER_XYZ,
    "cation_uhf_gradient_scratch": "molecule:\n  charge: 1\n  multiplicity: 2\n  xyz: |\n%s\nbasis: cc-pvdz\n"
                                   "threads: 1\nscf: {type: df, d_convergence: 1e-9}\nfrozen_core: true\n"
                                   "mp2_storage: scratch\ndriver: gradient\n" % DIMER_XYZ,
    # ROHF-MBPT(2)'s gradient: the same passes in the semicanonical orbitals, the ROHF Z-vector on the ranks' J/K (its
    # SCF converged further: at d_convergence 1e-9 the ROHF orbitals of different rank counts moved the MP2 part by
    # 3e-10 Eh/bohr).
    "cation_rohf_gradient": "molecule:\n  charge: 1\n  multiplicity: 2\n  xyz: |\n%s\nbasis: cc-pvdz\nthreads: 1\n"
                            "reference: rohf\nscf: {type: df, e_convergence: 1e-12, d_convergence: 1e-11}\n"
                            "mp2_storage: scratch\ndriver: gradient\n" % DIMER_XYZ,
    # MP2 properties (issue 46): the relaxed density of the UHF cation from blocks on every rank's scratch, its
    # properties and potential; the closed-shell dimer's in memory with a frozen core and Merz-Kollman charges.
    "cation_uhf_properties": "molecule:\n  charge: 1\n  multiplicity: 2\n  xyz: |\n%s\nbasis: cc-pvdz\n"
                             "threads: 1\nscf: {type: df, d_convergence: 1e-9}\nmp2_storage: scratch\n"
                             "driver: properties\nproperties: {esp_charges: true}\n" % DIMER_XYZ,
    "dimer_properties": molecule(DIMER_XYZ, "scf: {type: df, d_convergence: 1e-9}\nfrozen_core: true\n"
                                            "driver: properties\n"),
    # The distributed factorisations (linalg/dense_grid.hpp) switched on at every size: the JK and MP2 metrics
    # (computed by tiles, factored, and the fitting's row solves), the SCF's eigenproblems, on grids of 1 to 8 ranks;
    # ELPA (the default) and ScaLAPACK; J/K in memory and recomputed (J^-1 c as row solves), DF-MP2 on scratch;
    # UHF; a synthetic problem (its metric copied from the whole); the gradient's orbital response on the grid's J/K.
    "dimer_grid": molecule(DIMER_XYZ, "scf: {type: df}\nmpi: {distributed_min_order: 1}\n"),
    "dimer_grid_scalapack": molecule(DIMER_XYZ, "scf: {type: df, jk_storage: recompute}\nmp2_storage: scratch\n"
                                                "mpi: {distributed_min_order: 1, cholesky: scalapack, "
                                                "eigensolver: scalapack}\n"),
    "cation_grid_uhf": "molecule:\n  charge: 1\n  multiplicity: 2\n  xyz: |\n%s\nbasis: cc-pvdz\nthreads: 1\n"
                       "scf: {type: df, d_convergence: 1e-9}\nmpi: {distributed_min_order: 1}\n" % DIMER_XYZ,
    "synthetic_grid": "synthetic: {nbasis: 160, nocc: 36, naux: 480, seed: 5}\nmp2_storage: scratch\nthreads: 1\n"
                      "mpi: {distributed_min_order: 1}\n",
    "dimer_grid_gradient": molecule(DIMER_XYZ, "scf: {type: df, d_convergence: 1e-9}\nfrozen_core: true\n"
                                               "driver: gradient\nmpi: {distributed_min_order: 1}\n"),
    # Matrices smaller than the grid (issue 42: ELPA refused ranks that hold none of them, exit 5): H2 in STO-3G (SCF
    # eigenproblems of order 2) and water in STO-3G (order 7) on up to 6 ranks, ELPA asked for everything; such
    # matrices go to ScaLAPACK, and the report says so.
    "h2_tiny_grid": "molecule:\n  xyz: |\n    H 0 0 0\n    H 0 0 0.74\nbasis: sto-3g\nthreads: 1\n"
                    "scf: {type: df}\nmpi: {distributed_min_order: 1, cholesky: elpa, eigensolver: elpa}\n",
    "water_tiny_grid": molecule(WATER_XYZ, "scf: {type: df}\nmpi: {distributed_min_order: 1}\n").replace(
        "cc-pvdz", "sto-3g"),
}
# The rank counts of each case (RANKS unless named): the grid cases go to 8 ranks, odd counts included, so that
# the grids are 1 x n and 2 x n and the block-cyclic blocks shrink below their default to give every rank a part.
CASE_RANKS = {"dimer_grid": [1, 2, 3, 4, 5, 6, 7, 8], "dimer_grid_scalapack": [2, 3, 5, 8],
              "cation_grid_uhf": [2, 3, 4], "synthetic_grid": [2, 5, 6, 7], "dimer_grid_gradient": [2, 3],
              "h2_tiny_grid": [2, 3, 4, 5, 6], "water_tiny_grid": [5, 6]}
# Cases whose MP2 products run in fp32: the ranks cut the auxiliary blocks differently, which moves the fp32
# rounding. Their MP2 energies must agree with one process's within three times the mixed run's own error against
# fp64 in that process: two fp32 sums in different orders each carry an error of that size, so they differ by up to
# about twice it, and the error itself varies from one order to another (measured on Zen 5: up to 2.6e-9 Eh with
# avx512, 2.1e-8 Eh in the sanitizer build, against an error of about 2e-7 Eh; on Zen 4 with eigen, up to 1.7e-7 Eh
# against an error of 8e-8 Eh). A block pair missed or counted twice moves the energy by far more. The SCF,
# converged in fp64, is still held to TOLERANCE.
FP32_CASES = {"dimer_mixed"}
FP32_SPREAD = 3.0

FAILURE_GROUP = "failures"
SHAPE_GROUP = "every_storage_rank_thread"
TRIMER_XYZ = DIMER_XYZ + """
    O 3.000000 0.000000 0.117790
    H 3.000000 0.755453 -0.471161
    H 3.000000 -0.755453 -0.471161"""


def every_storage_rank_thread(args, c):
    """DF-MP2 through its block source (chem/mp2/occupied_blocks.hpp) with the blocks in memory and on scratch, on 1, 2 and
    3 ranks, with 1 and 2 threads, on the water dimer and trimer (each SCF run once, its integrals saved): every
    combination's MP2 energies within 1e-12 Eh of the first, and every pair computed once."""
    with tempfile.TemporaryDirectory(prefix="dfmp2-mpi-") as d:
        scratch = os.path.join(d, "scratch")
        os.mkdir(scratch)
        for name, xyz in (("dimer", DIMER_XYZ), ("trimer", TRIMER_XYZ)):
            h5 = os.path.join(d, name + ".h5")
            scf = os.path.join(d, name + "_scf.yaml")
            with open(scf, "w") as f:
                f.write(molecule(xyz, "scf: {type: df}\nsave_integrals: %s\n" % h5))
            p = run([args.dfmp2, scf], d)
            if not c.check(p is not None and p.returncode == 0, "%s: the SCF runs and saves its integrals" % name):
                continue
            first = None
            for storage in ("memory", "scratch"):
                for ranks in (1, 2, 3):
                    for threads in (1, 2):
                        inp = os.path.join(d, "in.yaml")
                        with open(inp, "w") as f:
                            f.write("integrals: %s\nmp2_storage: %s\nscratch: %s\nthreads: %d\n" % (
                                h5, storage, scratch, threads))
                        out = os.path.join(d, "out.json")
                        # Unbound, so that each rank may run two threads on this 2-core machine.
                        cmd = (mpirun() + ["--bind-to", "none", "-np", str(ranks), args.dfmp2] if ranks > 1
                               else [args.dfmp2])
                        p = run(cmd + [inp, "--json", out], d)
                        label = "%s, %s, %d rank(s), %d thread(s)" % (name, storage, ranks, threads)
                        if not c.check(p is not None and p.returncode == 0, "%s runs (%s)" % (
                                label, "" if p is None else p.stderr.strip()[-200:])):
                            continue
                        with open(out) as f:
                            r = json.load(f)
                        e = (r["properties"]["mp2_opposite_spin_correlation_energy"],
                             r["properties"]["mp2_same_spin_correlation_energy"])
                        first = first or (e, label)
                        c.check(all(abs(a - b) <= 1e-12 for a, b in zip(e, first[0])),
                                "%s: MP2 %.14f, %+.1e Eh from %s" % (label, sum(e), sum(e) - sum(first[0]), first[1]))
                        c.check(abs(pair_flops(r) - expected_pair_flops(r)) <= 1e-9 * expected_pair_flops(r) and
                                r["extras"]["dfmp2"]["backends"][0]["blocking"]["block_pairs"] > (1 if name ==
                                                                                                "trimer" else 0),
                                "%s: every pair once (%d block pairs)" % (
                                    label, r["extras"]["dfmp2"]["backends"][0]["blocking"]["block_pairs"]))
            c.check(not os.listdir(scratch), "%s: no scratch file left" % name)


def run(cmd, cwd, env=None):
    try:
        return subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=TIME_LIMIT, env=env)
    except subprocess.TimeoutExpired:
        return None


def scratch_left(folder):
    return glob.glob(os.path.join(folder, "dfmp2-*"))


def energies_case(args, name, c):
    text = CASES[name].replace("{repo}", os.path.abspath(args.repo))
    with tempfile.TemporaryDirectory(prefix="dfmp2-mpi-") as d:
        scratch = os.path.join(d, "scratch")
        os.mkdir(scratch)
        path = os.path.join(d, "in.yaml")
        with open(path, "w") as f:
            f.write(text + "scratch: %s\n" % scratch)
        env = dict(os.environ, TMPDIR=scratch)
        results = {}
        rank_counts = CASE_RANKS.get(name, RANKS)
        for ranks in [0] + rank_counts:  # 0: one process, no mpirun
            out = os.path.join(d, "r%d.json" % ranks)
            cmd = ([args.dfmp2] if ranks == 0 else mpirun() + ["-np", str(ranks), args.dfmp2]) + [path, "--json", out]
            p = run(cmd, d, env)
            label = "%s on %s" % (name, "one process" if ranks == 0 else "%d ranks" % ranks)
            if not c.check(p is not None, "%s finishes within %d s" % (label, TIME_LIMIT)):
                continue
            if not c.check(p.returncode == 0, "%s exits 0 (%s)" % (label, p.stderr.strip()[-300:])):
                continue
            with open(out) as f:
                results[ranks] = json.load(f)
            c.check(not scratch_left(scratch), "%s leaves no scratch file" % label)
        if 0 not in results:
            return
        serial = results[0]["properties"]
        # driver: gradient computes its energy once, in the gradient's amplitude pass: no DF-MP2 run, no pair steps.
        own_run = not results[0]["extras"]["dfmp2"]["backends"][0]["energy_from_gradient"]
        if own_run:
            c.check(abs(pair_flops(results[0]) - expected_pair_flops(results[0])) <=
                    1e-9 * expected_pair_flops(results[0]),
                    "%s, one process: the pair energies' flops are those of every block pair once" % name)
        mp2_tolerance = TOLERANCE
        if name in FP32_CASES:  # the fp32 error of one process: its mixed run against its fp64 run
            runs = results[0]["extras"]["dfmp2"]["backends"]
            fp64 = next(x for x in runs if x["precision"] == "fp64")["properties"]["mp2_correlation_energy"]
            mp2_tolerance = max(TOLERANCE, FP32_SPREAD * abs(serial["mp2_correlation_energy"] - fp64))
        for ranks in rank_counts:
            if ranks not in results:
                continue
            r = results[ranks]
            props = r["properties"]
            if name in CASE_RANKS and ranks > 1:  # the grid ran what the case asks of it
                f = r["extras"]["dfmp2"]["mpi"]["factorisations"]
                c.check(f["matrices"] and all(m["distributed"] for m in f["matrices"]) and
                        f["grid"][0] * f["grid"][1] == ranks,
                        "%s, %d ranks: every factorisation on the %s grid (%s)" % (
                            name, ranks, " x ".join(map(str, f["grid"])),
                            "; ".join("%s %s" % (m["matrix"], m["how"]) for m in f["matrices"])))
                if name == "h2_tiny_grid" and max(f["grid"]) > 2:  # order 2 below the grid's longer side
                    eig = [m for m in f["matrices"] if m["matrix"] == "SCF eigenproblems"]
                    c.check(eig and "ScaLAPACK instead of ELPA" in eig[0]["how"],
                            "%s, %d ranks: the order-2 eigenproblems go to ScaLAPACK, and the results say so (%s)" % (
                                name, ranks, eig[0]["how"] if eig else "no SCF eigenproblems"))
            for key in ("scf_total_energy", "mp2_correlation_energy", "mp2_opposite_spin_correlation_energy",
                        "mp2_same_spin_correlation_energy"):
                if key not in serial:
                    continue
                diff = props[key] - serial[key]
                tolerance = TOLERANCE if key == "scf_total_energy" else mp2_tolerance
                c.check(abs(diff) <= tolerance, "%s, %d ranks: %s %.12f, %+.1e from one process (tolerance %.0e)" % (
                    name, ranks, key, props[key], diff, tolerance))
            if isinstance(results[0]["return_result"], list):  # driver: gradient or hessian
                diff = max(abs(a - b) for a, b in zip(r["return_result"], results[0]["return_result"]))
                if r["driver"] == "hessian":
                    c.check(diff <= HESSIAN_TOLERANCE, "%s, %d ranks: the Hessian within %.1e Eh/bohr^2 of one "
                            "process's (tolerance %.0e)" % (name, ranks, diff, HESSIAN_TOLERANCE))
                else:
                    c.check(diff <= TOLERANCE, "%s, %d ranks: the gradient within %.1e Eh/bohr of one process's" % (
                        name, ranks, diff))
                # The MP2 part (the gradient less the SCF's), whose work the ranks share: the SCF's own gradient
                # carries the SCF's convergence on each rank count (about 5e-12 Eh/bohr), the MP2 part only the
                # order of its sums.
                def mp2_part(res):
                    g = res["extras"]["dfmp2"].get("gradient") or {}
                    return [a - b for ra, rb in zip(g.get("gradient", []), g.get("scf_gradient", []))
                            for a, b in zip(ra, rb)]
                if mp2_part(results[0]):
                    diff = max(abs(a - b) for a, b in zip(mp2_part(r), mp2_part(results[0])))
                    c.check(diff <= MP2_GRADIENT_TOLERANCE, "%s, %d ranks: the MP2 part of the gradient within %.1e "
                            "Eh/bohr of one process's (tolerance %.0e)" % (name, ranks, diff, MP2_GRADIENT_TOLERANCE))
                # The pair integrals kept over ranks as on one process (each rank lending its rows' to the others):
                # the agreement above then covers them.
                def keeps_pairs(res):
                    return any(p["phase"] == "MP2 gradient" and "pair integrals" in p["reason"]
                               for p in res["extras"]["dfmp2"]["memory_plan"]["phases"])
                if r["driver"] == "gradient" and keeps_pairs(results[0]):
                    c.check(keeps_pairs(r), "%s, %d ranks: the pair integrals kept, as on one process" % (name, ranks))
            if r["driver"] == "properties":  # the densities' properties as one process's
                def properties_of(res):
                    p = res["extras"]["dfmp2"]["properties"]
                    values = []
                    for kind in ("unrelaxed", "relaxed"):
                        values += p[kind]["dipole"] + p[kind]["mulliken"]["charge"] + p[kind]["natural_occupations"]["total"]
                    return values + (p["esp_charges"]["relaxed"]["charges"] if p["esp_charges"] else [])
                diff = max(abs(a - b) for a, b in zip(properties_of(r), properties_of(results[0])))
                c.check(diff <= 1e-9, "%s, %d ranks: dipoles, Mulliken charges, natural occupations and fitted charges "
                        "within %.1e of one process's" % (name, ranks, diff))
            for key, value in results[0]["extras"]["qcvars"].items():
                if "INTERACTION" in key:
                    diff = r["extras"]["qcvars"][key] - value
                    c.check(abs(diff) <= mp2_tolerance, "%s, %d ranks: %s %+.1e from one process" % (
                        name, ranks, key, diff))
            ex = r["extras"]["dfmp2"]
            c.check(ex["mpi"]["ranks"] == ranks and len(ex["mpi"]["peak_resident_bytes"]) == ranks,
                    "%s, %d ranks: the results file names %d ranks and each one's peak memory" % (name, ranks, ranks))
            run0 = ex["backends"][0]
            steps = run0["ranks"]
            if not own_run:
                c.check(run0["energy_from_gradient"] and not steps and run0["blocking"] is None,
                        "%s, %d ranks: the energy from the gradient's amplitude pass, as on one process" % (name, ranks))
            else:
                c.check(all(len(s["ranks"]) == ranks for s in steps) and
                        sum(x["flops"] for s in steps if s["phase"] == "pair_energy" for x in s["ranks"]) > 0,
                        "%s, %d ranks: every rank's DF-MP2 steps in the results file" % (name, ranks))
                # Pair energies: the flops of all ranks together are those of every block pair of this run's
                # blocking, once (no pair twice, none left out), whatever the occupied block the ranks chose.
                got, want = pair_flops(r), expected_pair_flops(r)
                c.check(abs(got - want) <= 1e-9 * want, "%s, %d ranks: the pair energies' flops summed over the ranks "
                        "(%.6g) are those of every block pair once (%.6g, occupied block %d)" % (
                            name, ranks, got, want, run0["blocking"]["occupied_block"]))
            budget = ex["memory_plan"]["memory_bytes"]
            peaks = ex["mpi"]["peak_resident_bytes"]
            c.check(max(peaks) <= budget, "%s, %d ranks: every rank's peak resident memory (largest %.0f MiB) "
                    "within its memory (%.0f MiB)" % (name, ranks, max(peaks) / 2**20, budget / 2**20))


def pair_flops(result):
    """The pair-energy step's flops of the first run, summed over its ranks."""
    return sum(x["flops"] for s in result["extras"]["dfmp2"]["backends"][0]["ranks"]
               if s["phase"] == "pair_energy" for x in s["ranks"])


def expected_pair_flops(result):
    """The flops of every occupied block pair I >= J of the first run's blocking, as the kernel log counts them: SYRK
    n (n + 1) k for a diagonal pair, GEMM 2 m n k otherwise, and the reduction's 7 flops per (ia|jb) it reads (4 for
    the opposite-spin pairs of an open shell, a beta block with an alpha block)."""
    props, ex = result["properties"], result["extras"]["dfmp2"]
    nfrozen, nmo, naux = ex["problem"]["nfrozen"], props["calcinfo_nmo"], ex["problem"]["naux"]
    block = ex["backends"][0]["blocking"]["occupied_block"]
    # The systems of the run: the reference, and with a counterpoise interaction energy each fragment in its basis
    # (extras.dfmp2.interaction), each with its occupied orbitals of each spin (alpha, then beta for an open shell)
    # and its frozen core.
    systems = [([props["calcinfo_nalpha"]] + ([props["calcinfo_nbeta"]]
                                              if result["keywords"].get("reference", "rhf") != "rhf" else []), nfrozen)]
    for calc in ex.get("interaction", {}).get("calculations", [])[1:]:
        if calc["basis"] == "complex":
            systems.append(([calc["nalpha"]] + ([calc["nbeta"]] if calc["reference"] != "rhf" else []),
                            calc["nfrozen"]))
    # Each space cut into blocks of (system, space, first orbital, rows); pairs only within a system.
    blocks = []
    space = 0
    for system, (occupied, frozen) in enumerate(systems):
        for nocc in occupied:
            nact, nvir = nocc - frozen, nmo - nocc
            blocks += [(system, space, i0, min(block, nact - i0) * nvir) for i0 in range(0, nact, block)]
            space += 1
    total = 0.0
    for bi, (yi, si, i0, ni) in enumerate(blocks):
        for (yj, sj, j0, nj) in blocks[:bi + 1]:
            if yi != yj:
                continue
            if si != sj:
                total += 2.0 * ni * nj * naux + 4.0 * ni * nj
            elif i0 == j0:
                total += ni * (ni + 1.0) * naux + 7.0 * ni * ni * 0.5
            else:
                total += 2.0 * ni * nj * naux + 7.0 * ni * nj
    return total


def failure(c, args, d, label, cmd, code, message, rank=None, env=None, stdout_empty=True):
    p = run(cmd, d, env)
    if not c.check(p is not None, "%s: ends within %d s (no hang)" % (label, TIME_LIMIT)):
        return
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    c.check(p.returncode == code, "%s: exit %d (got %d)" % (label, code, p.returncode))
    c.check(len(lines) == 1, "%s: one line on stderr (%d: %s)" % (label, len(lines), " | ".join(lines)[:400]))
    if lines:
        prefix = "dfmp2: error: rank %d: " % rank if rank is not None else "dfmp2: error: rank "
        c.check(lines[0].startswith(prefix) and message in lines[0],
                "%s: names the rank and the cause ('%s' ... '%s'): %s" % (label, prefix, message, lines[0]))
    if stdout_empty:
        c.check(p.stdout == "", "%s: nothing on stdout" % label)


def scratch_open_by(pids, folder):
    """Files in `folder` that these processes hold open, as /proc/<pid>/fd shows them (unnamed ones included)."""
    held = []
    for pid in pids:
        try:
            for fd in os.listdir("/proc/%d/fd" % pid):
                target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
                if target.startswith(folder + "/"):
                    held.append(target)
        except OSError:
            pass
    return held


def rank_pids(launcher):
    """The dfmp2 processes started by mpirun (its children and theirs)."""
    out = subprocess.run(["ps", "-o", "pid=,ppid=,comm=", "-e"], stdout=subprocess.PIPE, text=True).stdout
    children, names = {}, {}
    for line in out.splitlines():
        pid, ppid, comm = line.split(None, 2)
        children.setdefault(int(ppid), []).append(int(pid))
        names[int(pid)] = comm.strip()
    found, todo = [], [launcher]
    while todo:
        for child in children.get(todo.pop(), []):
            todo.append(child)
            if names.get(child) == "dfmp2":
                found.append(child)
    return found


def interrupted(c, d, dfmp2, scratch, env):
    """SIGINT to mpirun while the ranks' SCF J/K tensors are on scratch, three times: mpirun ends its ranks (with
    SIGKILL after a grace period, which no handler can catch), and no scratch file may be left."""
    dimer = os.path.join(d, "interrupt.yaml")
    with open(dimer, "w") as f:
        f.write(molecule(DIMER_XYZ, "scf: {jk_storage: scratch}\nmp2_storage: scratch\nscratch: %s\n"
                         % scratch))
    for attempt in range(3):
        p = subprocess.Popen(mpirun() + ["-np", "2", dfmp2, dimer], cwd=d, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        held = []
        deadline = time.time() + TIME_LIMIT
        while time.time() < deadline and p.poll() is None and not held:
            held = scratch_open_by(rank_pids(p.pid), scratch)
            time.sleep(0.005)
        if held:
            p.send_signal(signal.SIGINT)
        try:
            p.wait(timeout=TIME_LIMIT)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        c.check(bool(held), "SIGINT to mpirun, try %d: sent while the ranks held scratch files (%d)" % (
            attempt + 1, len(held)))
        left = os.listdir(scratch)
        c.check(not left, "SIGINT to mpirun, try %d: nothing left in the scratch folder (%s)" % (attempt + 1, left))


def failures(args, c):
    dfmp2 = args.dfmp2
    with tempfile.TemporaryDirectory(prefix="dfmp2-mpi-") as d:
        scratch = os.path.join(d, "scratch")
        os.mkdir(scratch)
        env = dict(os.environ, TMPDIR=scratch)
        good = os.path.join(d, "good.yaml")
        with open(good, "w") as f:
            f.write("synthetic: {nbasis: 160, nocc: 36, naux: 480, seed: 5}\nthreads: 1\noutput: good.json\n")
        bad = os.path.join(d, "bad.yaml")
        with open(bad, "w") as f:
            f.write("synthetic: {nbasis: 160, nocc: 36, naux: 480, seed: 5}\nfroze_core: 2\n")
        # MPMD: rank 1 (of 2) and rank 2 (of 3) get another input than the others.
        failure(c, args, d, "bad input on rank 1 of 2",
                mpirun() + ["-np", "1", dfmp2, good, ":", "-np", "1", dfmp2, bad], 2,
                "bad.yaml:2:1: unknown key 'froze_core'", rank=1, env=env)
        failure(c, args, d, "missing input on rank 2 of 3",
                mpirun() + ["-np", "2", dfmp2, good, ":", "-np", "1", dfmp2, os.path.join(d, "absent.yaml")], 2,
                "absent.yaml", rank=2, env=env)
        failure(c, args, d, "bad input on all 3 ranks", mpirun() + ["-np", "3", dfmp2, bad], 2,
                "unknown key 'froze_core'", rank=0, env=env)
        small = os.path.join(d, "small.yaml")
        with open(small, "w") as f:
            f.write("synthetic: {nbasis: 160, nocc: 36, naux: 480, seed: 5}\nmemory: 20 MB\noutput: small.json\n")
        failure(c, args, d, "memory too small on 2 ranks", mpirun() + ["-np", "2", dfmp2, small], 6,
                "is too small for the", rank=0, env=env)
        # Out of core, rank 1's scratch file may not grow beyond 1 MB: its first write fails mid-run.
        scr = os.path.join(d, "scratch.yaml")
        with open(scr, "w") as f:
            f.write("synthetic: {nbasis: 160, nocc: 36, naux: 480, seed: 5}\nmp2_storage: scratch\nthreads: 1\n"
                    "scratch: %s\noutput: scratch.json\n" % scratch)
        failure(c, args, d, "scratch write failing on rank 1 mid-run",
                mpirun() + ["-np", "1", dfmp2, scr, ":", "-np", "1", "sh", "-c",
                            "ulimit -f 1000; exec \"$0\" \"$@\"", dfmp2, scr], 6,
                "scratch: writing", rank=1, env=env)
        # An SCF that stops before converging fails on every rank alike (outside any agreed step): rank 0 says so.
        nc = os.path.join(d, "nc.yaml")
        with open(nc, "w") as f:
            f.write(molecule(WATER_XYZ, "scf: {type: df, max_iterations: 3}\noutput: nc.json\n"))
        failure(c, args, d, "SCF not converged on 3 ranks", mpirun() + ["-np", "3", dfmp2, nc], 5,
                "SCF did not converge in 3 iterations", rank=0, env=env, stdout_empty=False)
        interrupted(c, d, dfmp2, scratch, env)
        c.check(not scratch_left(scratch), "no scratch file left after the failures")
        left = [x for x in os.listdir(d) if x.endswith(".json") or ".tmp." in x]
        c.check(not left, "no results file or temporary left after the failures (%s)" % left)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dfmp2", required=True)
    p.add_argument("--repo", required=True)
    p.add_argument("--case", help="a case of CASES, '%s' or '%s'" % (FAILURE_GROUP, SHAPE_GROUP))
    p.add_argument("--list", action="store_true")
    p.add_argument("--grid", dest="grid", action="store_true", default=True,
                   help="list the grid cases (a build with ScaLAPACK)")
    p.add_argument("--no-grid", dest="grid", action="store_false")
    args = p.parse_args()
    if args.list:
        print("\n".join([k for k in CASES if args.grid or k not in CASE_RANKS] + [FAILURE_GROUP, SHAPE_GROUP]))
        return 0
    if shutil.which("mpirun") is None:
        print("FAIL mpirun not found: install openmpi-bin (scripts/setup.sh does)")
        return 1
    args.dfmp2 = os.path.abspath(args.dfmp2)
    c = Checker()
    if args.case == FAILURE_GROUP:
        failures(args, c)
    elif args.case == SHAPE_GROUP:
        every_storage_rank_thread(args, c)
    else:
        energies_case(args, args.case, c)
    print("%s: %s" % (args.case, "all checks passed" if c.failed == 0 else "%d checks failed" % c.failed))
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
