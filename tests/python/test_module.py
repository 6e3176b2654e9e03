#!/usr/bin/python3
"""The dfmp2 Python module (README "Python module"), imported from the build tree (or from an install prefix with
--prefix): every op on every backend against NumPy, the device models' modelled time per call, the explicit host
fallback, wrong dtypes and shapes as TypeError and ValueError naming the argument, the layer's errors as Python
exceptions of their class, random and quasi-random numbers, and dfmp2.run against the water fixture's energy.

    test_module.py --module-dir build/python --repo .
Exit 0 when every check passes; one line per check. Needs Debian's python3-numpy (/usr/bin/python3).
"""
import argparse
import json
import pathlib
import pickle
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import Checker  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--module-dir", required=True)
    p.add_argument("--repo", required=True)
    args = p.parse_args()
    sys.path.insert(0, os.path.abspath(args.module_dir))
    import dfmp2

    c = Checker()
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((70, 40)), rng.standard_normal((40, 30))
    s = rng.standard_normal((40, 40))
    spd = s @ s.T + 40 * np.eye(40)
    tri = np.tril(rng.standard_normal((40, 40))) + 10 * np.eye(40)
    cpu = [x for x in dfmp2.backends() if x not in ("trn1", "trn2")]
    devices = [x for x in dfmp2.backends() if x in ("trn1", "trn2")]
    c.check("eigen" in cpu and "openblas" in cpu and devices == ["trn1", "trn2"],
            "backends: %s" % dfmp2.backends())

    # Every op on every backend against NumPy: fp64 (and fp32) on the CPU backends, fp32 on the device models.
    for name in cpu + devices:
        dtypes = [np.float32] if name in devices else [np.float64, np.float32]
        for dt in dtypes:
            be = dfmp2.Backend(name, threads=1)
            tol = 1e-10 if dt == np.float64 else 2e-3
            x, y = a.astype(dt), b.astype(dt)
            c.check(np.abs(be.gemm(x, y) - a @ b).max() < tol * 40, "%s %s gemm" % (name, dt.__name__))
            c.check(np.abs(be.gemm(y, x, trans_a=True, trans_b=True) - (a @ b).T).max() < tol * 40,
                    "%s %s gemm, both transposed" % (name, dt.__name__))
            c.check(np.abs(be.syrk(x) - a @ a.T).max() < tol * 40, "%s %s syrk" % (name, dt.__name__))
            sol = be.trsm(tri.astype(dt), b.astype(dt))
            c.check(np.abs(tri @ sol - b).max() < tol * 10, "%s %s trsm" % (name, dt.__name__))
            sp = dfmp2.csr_from_dense(np.where(np.abs(s) > 1, s, 0).astype(dt))
            bs = dfmp2.bsr_from_dense(np.where(np.abs(s) > 1, s, 0).astype(dt), block=8)
            ref = np.where(np.abs(s) > 1, s, 0) @ b
            c.check(np.abs(be.spmm(sp, y) - ref).max() < tol * 40 and np.abs(be.spmm(bs, y) - ref).max() < tol * 40,
                    "%s %s spmm (CSR and BSR)" % (name, dt.__name__))
            if name not in devices:  # the devices have no eigensolver; Cholesky runs on their host, as published
                L = be.cholesky(spd.astype(dt))
                c.check(np.abs(L @ L.T - spd).max() < tol * 400 and np.allclose(np.triu(L, 1), 0),
                        "%s %s cholesky" % (name, dt.__name__))
                w, v = be.eigh(spd.astype(dt))
                c.check(np.abs(w - np.linalg.eigvalsh(spd)).max() < tol * 400, "%s %s eigh" % (name, dt.__name__))
                for method in ("eigh", "newton-schulz"):
                    z, report = be.inverse_sqrt(spd.astype(dt), method=method, tolerance=1e-10 if dt == np.float64 else 1e-4)
                    c.check(np.abs(z @ spd @ z - np.eye(40)).max() < tol * 40 and report["method"] == method,
                            "%s %s inverse square root by %s (%s)" % (name, dt.__name__, method, report))
            last = be.last_call
            c.check(last["backend"] == name and (last["modelled"] is not None) == (name in devices),
                    "%s: last_call names the backend, with a modelled time on device models only" % name)

    # The device models: the modelled time and its breakdown, per call; the first call compiles, the second does not.
    for name in devices:
        be = dfmp2.Backend(name)
        be.gemm(a.astype(np.float32), b.astype(np.float32))
        first = be.last_call["modelled"]
        be.gemm(a.astype(np.float32), b.astype(np.float32))
        second = be.last_call["modelled"]
        keys = {"seconds", "dispatch", "transfer", "dma", "compute", "host", "compile", "launches", "compiles",
                "cache_loads", "device_flops"}
        c.check(keys <= set(first) and first["compiles"] == 1 and second["compiles"] == 0 and
                second["seconds"] < first["seconds"] and first["device_flops"] >= 2 * 70 * 40 * 30,
                "%s: modelled time per call with its breakdown, cold then warm (%.3g s, %.3g s)" % (
                    name, first["seconds"], second["seconds"]))
        bf16 = dfmp2.Backend(name, matmul_mode="bf16")
        err = np.abs(bf16.gemm(a.astype(np.float32), b.astype(np.float32)) - a @ b).max()
        c.check(bf16.last_call["dtype"] == "bf16" and 1e-4 < err < 0.5, "%s: bf16 operands (error %.2g)" % (name, err))

    # The explicit fallback rule: what a device cannot run is an error unless host_fallback, and then counted.
    c.raises(dfmp2.UnsupportedError, "does not support gemm in fp64", lambda: dfmp2.Backend("trn1").gemm(a, b),
             "fp64 gemm on trn1 without host_fallback")
    c.raises(dfmp2.UnsupportedError, "eigh", lambda: dfmp2.Backend("trn1").eigh(spd.astype(np.float32)),
             "eigh on trn1 without host_fallback")
    fb = dfmp2.Backend("trn1", host_fallback=True)
    out = fb.gemm(a, b)
    c.check(fb.last_call["fallback"] and "fallback from trn1" in fb.last_call["backend"] and
            np.abs(out - a @ b).max() < 1e-10, "with host_fallback the call runs on the host and says so (%s)" %
            fb.last_call["backend"])
    c.raises(dfmp2.UnsupportedError, "", lambda: dfmp2.Backend("trn1", matmul_mode="bf16x3").gemm(a, b),
             "a device's matmul mode applies to fp32 only")

    # Bad arguments: TypeError or ValueError naming the argument, never a crash.
    be = dfmp2.Backend("eigen")
    c.raises(TypeError, "argument 'a': expected a float64 or float32 array, got dtype int64",
             lambda: be.gemm(a.astype(np.int64), b), "integer operand")
    c.raises(TypeError, "argument 'b': its dtype differs", lambda: be.gemm(a, b.astype(np.float32)), "mixed dtypes")
    c.raises(TypeError, "argument 'a': expected a NumPy array, got list", lambda: be.gemm([[1.0]], b), "a list")
    c.raises(ValueError, "argument 'b': op(a) is 70 x 40, so op(b) needs 40 rows, has 70",
             lambda: be.gemm(a, a), "inner dimensions differ")
    c.raises(ValueError, "argument 'a': expected a 2-D array, got 1-D", lambda: be.syrk(np.ones(3)), "a vector")
    c.raises(ValueError, "argument 'a': expected a square matrix", lambda: be.cholesky(a), "cholesky of 70 x 40")
    c.raises(ValueError, "argument 'c': expected 70 x 30", lambda: be.gemm(a, b, c=np.zeros((3, 3))), "c of the wrong shape")
    c.raises(ValueError, "argument 'side'", lambda: be.trsm(tri, b, side="middle"), "trsm side")
    c.raises(dfmp2.NumericalError, "not positive definite", lambda: be.cholesky(-spd), "cholesky of -A")
    c.raises(dfmp2.UnsupportedError, "", lambda: dfmp2.Backend("nosuch"), "an unknown backend")
    c.raises(ValueError, "argument 'dimensions'", lambda: dfmp2.sobol(41, 4), "Sobol beyond 40 dimensions")
    c.raises(TypeError, "argument 'dtype'", lambda: dfmp2.philox(1, n=2, dtype="int8"), "philox dtype")
    # Numbers a factorisation cannot take, on every CPU backend alike: NumericalError naming the element.
    for name in cpu:
        for bad, word in ((np.nan, "NaN"), (np.inf, "Inf")):
            m = spd.copy()
            m[5, 3] = m[3, 5] = bad
            c.raises(dfmp2.NumericalError, "cholesky: the matrix holds %s at row 5, column 3" % word,
                     lambda: dfmp2.Backend(name).cholesky(m), "%s cholesky with %s" % (name, word))
            c.raises(dfmp2.NumericalError, "eigh: the matrix holds %s" % word,
                     lambda: dfmp2.Backend(name).eigh(m), "%s eigh with %s" % (name, word))
            c.raises(dfmp2.NumericalError, "eigh: the matrix holds %s" % word,
                     lambda: dfmp2.Backend(name).inverse_sqrt(m), "%s inverse_sqrt with %s" % (name, word))
    # The inverse square root's settings follow the input keys' rules (metric.threshold, tolerance, max_iterations).
    for threshold in (np.nan, -1e-10, 0.0, 1.0, np.inf):
        c.raises(ValueError, "argument 'threshold'", lambda: be.inverse_sqrt(spd, threshold=threshold),
                 "inverse_sqrt threshold %r" % threshold)
    c.raises(ValueError, "argument 'tolerance'",
             lambda: be.inverse_sqrt(spd, method="newton-schulz", tolerance=np.nan), "Newton-Schulz tolerance NaN")
    c.raises(ValueError, "argument 'max_iterations'",
             lambda: be.inverse_sqrt(spd, method="newton-schulz", max_iterations=0), "Newton-Schulz iterations 0")
    # Device overrides of the wrong type: TypeError naming the parameter; an unknown one: InputError.
    c.raises(TypeError, "argument 'device': parameter 'dispatch_ms' is a number, got str",
             lambda: dfmp2.Backend("trn1", device={"dispatch_ms": "fast"}), "a device parameter as text")
    c.raises(TypeError, "argument 'device': parameter 'queue_depth' is a number, got bool",
             lambda: dfmp2.Backend("trn1", device={"queue_depth": True}), "a device parameter as a bool")
    c.raises(TypeError, "argument 'device': keys are parameter names", lambda: dfmp2.Backend("trn1", device={1: 2}),
             "a device key that is not a name")
    c.raises(TypeError, "argument 'device': 'compile_cache' is a folder", lambda: dfmp2.Backend(
        "trn1", device={"compile_cache": 3}), "compile_cache as a number")
    c.raises(dfmp2.InputError, "dispatch_m", lambda: dfmp2.Backend("trn1", device={"dispatch_m": 1.0}),
             "an unknown device parameter")
    for name, f in (("philox", lambda: dfmp2.philox(1, n=2 ** 62)), ("sobol", lambda: dfmp2.sobol(2, 2 ** 62)),
                    ("halton", lambda: dfmp2.halton(2, 2 ** 62)), ("latin_hypercube", lambda: dfmp2.latin_hypercube(2 ** 60, 2))):
        c.raises(dfmp2.ResourceError, "argument 'n':", f, "%s of 2^62 numbers: more than the memory, said before" % name)
    c.raises(ValueError, "argument 'threads': expected a number of threads >= 1", lambda: dfmp2.Backend(
        "eigen", threads=0), "zero threads")
    # The classes as the README gives them: every one a dfmp2.Error, InputError also a ValueError.
    c.check(all(issubclass(getattr(dfmp2, n), dfmp2.Error) for n in (
        "InputError", "IntegralFileError", "UnsupportedError", "NumericalError", "ResourceError", "OutputError")) and
        issubclass(dfmp2.InputError, ValueError) and issubclass(dfmp2.OutputError, OSError),
        "every error class derives from dfmp2.Error; InputError is a ValueError, OutputError an OSError")

    # Random and quasi-random numbers.
    u = dfmp2.philox(seed=5, n=100000)
    g = dfmp2.philox(seed=5, n=100000, distribution="normal")
    c.check(abs(u.mean() - 0.5) < 0.01 and 0 <= u.min() and u.max() < 1 and abs(g.std() - 1) < 0.02,
            "Philox uniform and normal streams (mean %.4f, sd %.4f)" % (u.mean(), g.std()))
    c.check(np.array_equal(dfmp2.philox(seed=5, n=10, offset=90000), u[90000:90010]),
            "a Philox stream read from an offset is the same stream (skip-ahead)")
    sob = dfmp2.sobol(2, 8)
    c.check(sob.shape == (8, 2) and np.allclose(sob[1], [0.5, 0.5]), "Sobol points")
    hal = dfmp2.halton(2, 3)
    c.check(np.allclose(hal[0], [0.5, 1 / 3]), "Halton points (bases 2 and 3)")
    lhs = dfmp2.latin_hypercube(10, 3, seed=2)
    c.check(all(sorted((lhs[:, j] * 10).astype(int)) == list(range(10)) for j in range(3)),
            "a Latin hypercube has one point in each of the n strata of every dimension")

    # The DF-MP2 driver: a dict, a YAML path and a QCSchema path.
    water = os.path.join(os.path.abspath(args.repo), "inputs", "water-cc-pvdz.h5")
    r = dfmp2.run({"integrals": water, "backends": ["eigen"], "threads": 1})
    c.check(abs(r["properties"]["mp2_correlation_energy"] - (-0.20403345708736)) < 1e-12,
            "dfmp2.run(dict): water's correlation energy %.14f" % r["properties"]["mp2_correlation_energy"])
    r = dfmp2.run(os.path.join(os.path.abspath(args.repo), "inputs", "water.yaml"))
    c.check(abs(r["properties"]["mp2_correlation_energy"] - (-0.20403345708736)) < 1e-12, "dfmp2.run(path)")
    c.raises(dfmp2.InputError, "unknown key 'froze_core'", lambda: dfmp2.run({"integrals": water, "froze_core": 1}),
             "a bad input dict")
    c.raises(TypeError, "argument 'input'", lambda: dfmp2.run(3), "run(3)")
    # An open shell from Python: the hydroxyl radical's ROHF-MBPT(2) (Psi4 1.3.2: correlation -0.154951620237 with
    # singles -0.002725111670, DF-SCF; tests/validation/reference/psi4_open_shell.json).
    r = dfmp2.run({"molecule": {"xyz": "O 0 0 0\nH 0 0 0.97", "multiplicity": 2}, "basis": "cc-pvdz",
                   "reference": "rohf", "scf": {"e_convergence": 1e-10, "d_convergence": 1e-10},
                   "backends": ["eigen"], "threads": 1})
    c.check(abs(r["properties"]["mp2_correlation_energy"] - (-0.154951620237)) < 1e-8 and
            abs(r["properties"]["mp2_singles_energy"] - (-0.002725111670)) < 1e-9 and
            r["keywords"]["reference"] == "rohf" and r["properties"]["calcinfo_nbeta"] == 4,
            "dfmp2.run(open shell): OH ROHF-MBPT(2) correlation %.12f, singles %.12f" % (
                r["properties"]["mp2_correlation_energy"], r["properties"]["mp2_singles_energy"]))
    c.raises(dfmp2.InputError, "rhf is for closed shells", lambda: dfmp2.run(
        {"molecule": {"xyz": "O 0 0 0\nH 0 0 0.97", "multiplicity": 2}, "basis": "cc-pvdz", "reference": "rhf"}),
        "reference rhf for a doublet")
    # `output` in a dict is honoured as in a file: checked before the run, written after it.
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "water.json")
        r = dfmp2.run({"integrals": water, "backends": ["eigen"], "threads": 1, "output": out})
        with open(out) as f:
            written = json.load(f)
        c.check(written["properties"]["mp2_correlation_energy"] == r["properties"]["mp2_correlation_energy"],
                "dfmp2.run(dict with output) writes the results file it returns")
        c.raises(dfmp2.OutputError, "does not exist", lambda: dfmp2.run(
            {"integrals": water, "threads": 1, "output": os.path.join(d, "missing", "r.json")}),
            "an output in a folder that does not exist")
        c.raises(dfmp2.OutputError, "is the integral file", lambda: dfmp2.run(
            {"integrals": water, "threads": 1, "output": water}), "an output that is the integral file")
        c.raises(dfmp2.InputError, "key 'basis': sto-3g gives this molecule 1 basis function for 1 occupied orbital",
                 lambda: dfmp2.run({"molecule": {"xyz": "He 0 0 0"}, "basis": "sto-3g"}), "He in STO-3G")
        # A QCSchema AtomicInput by path: errors found after reading name its fields, as from the command line.
        qc = os.path.join(d, "he.json")
        with open(qc, "w") as f:
            json.dump({"schema_name": "qcschema_input", "driver": "energy", "model": {"method": "mp2", "basis": "sto-3g"},
                       "molecule": {"symbols": ["He"], "geometry": [0, 0, 0]}}, f)
        c.raises(dfmp2.InputError, "field 'model.basis': sto-3g gives this molecule 1 basis function",
                 lambda: dfmp2.run(qc), "a QCSchema input's error names its field")

    # What Python users pass: NumPy scalars and paths are the numbers and strings they stand for; anything else is a
    # dfmp2.InputError naming its key, never a bare TypeError from inside.
    r = dfmp2.run({"integrals": pathlib.Path(water), "backends": ("eigen",), "threads": np.int64(1),
                   "metric": {"method": "eigh", "threshold": np.float64(1e-12)}, "screening": np.bool_(False)})
    c.check(abs(r["properties"]["mp2_correlation_energy"] - (-0.20403345708736)) < 1e-10,
            "dfmp2.run(dict of NumPy scalars, a pathlib.Path and a tuple)")
    r = dfmp2.run(pathlib.Path(os.path.abspath(args.repo)) / "inputs" / "water.yaml")
    c.check(abs(r["properties"]["mp2_correlation_energy"] - (-0.20403345708736)) < 1e-12, "dfmp2.run(pathlib.Path)")
    c.raises(dfmp2.InputError, "input dict: key 'backends': a set is not an input value",
             lambda: dfmp2.run({"integrals": water, "backends": {"eigen"}}), "a set as a value")
    c.raises(dfmp2.InputError, "input dict: key 'metric.threshold': a complex is not an input value",
             lambda: dfmp2.run({"integrals": water, "metric": {"method": "eigh", "threshold": 1j}}), "a complex number")
    c.raises(dfmp2.InputError, "input dict: key 'scf' has a key 1 of type int; keys are strings",
             lambda: dfmp2.run({"integrals": water, "scf": {1: 2}}), "a key that is not a string")
    c.raises(dfmp2.InputError, "key 'threads': expected", lambda: dfmp2.run({"integrals": water, "threads": np.int64(0)}),
             "a NumPy integer out of range is the key's own error")
    # Arrays as multiprocessing and concurrent.futures pass them (through pickle) are the float64 arrays they were.
    be = dfmp2.Backend("eigen")
    pa, pb = pickle.loads(pickle.dumps(np.eye(3))), pickle.loads(pickle.dumps(np.ones((3, 2))))
    c.check(np.allclose(be.gemm(pa, pb), np.ones((3, 2))), "gemm of arrays that went through pickle")
    c.raises(TypeError, "expected a float64 or float32 array in this machine's byte order",
             lambda: be.gemm(np.eye(3).astype(">f8"), pb), "a big-endian array")

    # driver: properties (issue 46): the densities and orbitals as NumPy arrays, consistent with each other and with
    # the results: an OH radical (UHF): each density holds its spin's electrons, the natural orbitals are S-orthonormal
    # and rebuild their density, the relaxed dipole from the arrays is the reported one.
    r = dfmp2.run({"molecule": {"xyz": "O 0 0.1 0\nH 0.05 0 0.97", "multiplicity": 2}, "basis": "cc-pvdz",
                   "driver": "properties", "threads": 1})
    arr = r["arrays"]
    s_ao = arr["overlap"]
    for kind in ("scf", "unrelaxed", "relaxed"):
        da, db = arr[kind + "_density_alpha"], arr[kind + "_density_beta"]
        cn, n = arr[kind + "_natural_orbitals"], arr[kind + "_natural_occupations"]
        c.check(abs(np.trace(da @ s_ao) - 5) < 1e-10 and abs(np.trace(db @ s_ao) - 4) < 1e-10 and
                np.abs(cn.T @ s_ao @ cn - np.eye(cn.shape[1])).max() < 1e-10 and
                np.abs(cn @ np.diag(n) @ cn.T - (da + db)).max() < 1e-10 and np.all(np.diff(n) <= 1e-14),
                "properties arrays, %s density: 5 alpha and 4 beta electrons; natural orbitals orthonormal, largest "
                "first, rebuilding it" % kind)
    c.check(arr["relaxed_natural_orbitals_beta"].shape == s_ao.shape and
            abs(arr["relaxed_natural_occupations_beta"].sum() - 4) < 1e-10,
            "properties arrays: the beta natural orbitals")
    c.check(np.abs(arr["relaxed_density_alpha"] - arr["unrelaxed_density_alpha"]).max() > 1e-4,
            "properties arrays: the relaxed density is not the unrelaxed one")

    # The ASE calculator: what it owns is not a keyword, and a periodic Atoms object is not a molecule.
    try:
        import ase
        from dfmp2.ase import DFMP2
    except ImportError as e:
        c.check(False, "dfmp2.ase imports (%s)" % e)
    else:
        for key, value in (("driver", "hessian"), ("molecule", {"xyz": "He 0 0 0"}), ("integrals", water),
                           ("output", "x.json")):
            c.raises(dfmp2.InputError, "DFMP2(%s=...): '%s' is the calculator's own" % (key, key),
                     lambda: DFMP2(**{key: value}), "DFMP2(%s=...)" % key)
        c.raises(dfmp2.InputError, "DFMP2(driver=...)", lambda: DFMP2().set(driver="gradient"), "calc.set(driver=...)")
        crystal = ase.Atoms("He", positions=[(0, 0, 0)], cell=[3, 3, 3], pbc=True)
        crystal.calc = DFMP2(basis="cc-pvdz", threads=1)
        c.raises(dfmp2.InputError, "the Atoms object is periodic", crystal.get_potential_energy, "periodic Atoms")
        helium = ase.Atoms("He", positions=[(0, 0, 0)])
        helium.calc = DFMP2(basis="cc-pvdz", threads=1, backends=["eigen"])
        e = helium.get_potential_energy()
        c.check(abs(e / ase.units.Hartree - helium.calc.last_results_file["properties"]["return_energy"]) < 1e-12,
                "DFMP2 on helium: the energy in eV is the results file's return_energy")
        # method sos-mp2 through the calculator: the SOS-MP2 energy, its forces and relaxed dipole.
        h2o = ase.Atoms("OH2", positions=[(0, 0.05, 0.1178), (0, 0.7555, -0.4712), (0.03, -0.70, -0.50)])
        h2o.calc = DFMP2(basis="cc-pvdz", threads=1, method="sos-mp2")
        forces, dipole = h2o.get_forces(), h2o.get_dipole_moment()
        r = h2o.calc.last_results_file
        sos = r["properties"]["scf_total_energy"] + 1.3 * r["properties"]["mp2_opposite_spin_correlation_energy"]
        c.check(abs(h2o.get_potential_energy() / ase.units.Hartree - sos) < 1e-12 and
                np.allclose(forces, -np.array(r["return_result"]).reshape(-1, 3) * ase.units.Hartree / ase.units.Bohr,
                            atol=1e-12) and
                np.allclose(dipole, np.array(r["extras"]["qcvars"]["SOS-MP2 DIPOLE"]) * ase.units.Bohr, atol=1e-12),
                "DFMP2(method='sos-mp2'): the SOS-MP2 energy, forces and relaxed dipole")
        # A radical (issue 45): DFMP2(multiplicity=2) gives the UHF energy, its forces and relaxed dipole, and with
        # reference="rohf" ROHF-MBPT(2)'s; the force along the bond is minus the slope of the energy (five-point
        # differences, 1e-3 angstrom).
        for reference in ("uhf", "rohf"):
            keys = dict(basis="cc-pvdz", threads=1, multiplicity=2, reference=reference,
                        scf={"e_convergence": 1e-11, "d_convergence": 1e-9})
            oh = ase.Atoms("OH", positions=[(0, 0, 0), (0, 0, 0.99)])
            oh.calc = DFMP2(**keys)
            forces = oh.get_forces()
            r = oh.calc.last_results_file
            energies = []
            for dz in (-2e-3, -1e-3, 1e-3, 2e-3):
                moved = oh.copy()
                moved.positions[1, 2] += dz
                moved.calc = DFMP2(**keys)
                energies.append(moved.get_potential_energy())
            slope = (energies[0] - 8 * energies[1] + 8 * energies[2] - energies[3]) / 12e-3
            c.check(r["properties"]["calcinfo_nalpha"] == 5 and r["properties"]["calcinfo_nbeta"] == 4 and
                    abs(forces[1, 2] + slope) < 5e-6 and abs(forces[0, 2] + forces[1, 2]) < 1e-8 and
                    np.allclose(oh.get_dipole_moment(),
                                np.array(r["extras"]["qcvars"]["MP2 DIPOLE"]) * ase.units.Bohr, atol=1e-12),
                    "DFMP2(multiplicity=2, reference=%r) on OH: forces are minus the energy's slope (%.2e eV/A apart)"
                    % (reference, abs(forces[1, 2] + slope)))
        # A water dimer on its counterpoise-corrected surface: the energy is the CP-corrected total energy (even when
        # only the energy is asked for) and the forces its gradient.
        dimer = ase.Atoms("OH2OH2", positions=[(-1.551007, -0.114520, 0.0), (-1.934259, 0.762503, 0.0),
                                               (-0.599677, 0.040712, 0.0), (1.350625, 0.111469, 0.0),
                                               (1.680398, -0.373741, -0.758561), (1.680398, -0.373741, 0.758561)])
        dimer.calc = DFMP2(basis="cc-pvdz", threads=1, fragments=[[0, 1, 2], [3, 4, 5]], interaction={"bsse": "cp"})
        energy = dimer.get_potential_energy()
        r = dimer.calc.last_results_file
        cp = r["extras"]["dfmp2"]["counterpoise_gradient"]
        c.check(abs(energy / ase.units.Hartree - cp["energy"]) < 1e-12 and
                np.allclose(dimer.get_forces(), -np.array(cp["gradient"]) * ase.units.Hartree / ase.units.Bohr,
                            atol=1e-12),
                "DFMP2(fragments=..., interaction=cp): the CP-corrected total energy and its forces")
        c.raises(dfmp2.InputError, "DFMP2(fragments=...): expected lists of consecutive atom indices",
                 lambda: DFMP2(fragments=[[0, 2, 1], [3, 4, 5]], interaction={"bsse": "cp"}).get_potential_energy(
                     dimer.copy()), "fragments out of order")

    print("python module: %s" % ("all checks passed" if c.failed == 0 else "%d checks failed" % c.failed))
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
