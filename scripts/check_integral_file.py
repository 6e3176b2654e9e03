#!/usr/bin/python3
# Needs numpy and h5py (Debian: python3-numpy, python3-h5py for /usr/bin/python3); no Psi4.
"""Independent numpy DF-MP2 from a dfmp2 integral file (format version 1, AO or MO form).

Validates the layout of docs/integral-file-format.md, computes the DF-MP2 opposite-spin, same-spin and
total correlation energies (Cholesky of the metric, fitted (ia|jb), canonical RHF denominators) and
compares them with the energies recorded under reference/frozen_core_<n>.

    check_integral_file.py FILE.h5 [--frozen-core N] [--tolerance 1e-9]

Without --frozen-core every reference/frozen_core_<n> group in the file is checked. Exit status 0 if
the file is well formed and every |difference| on OS, SS and total correlation energy is within the
tolerance, 1 otherwise, 2 for bad arguments.
"""

import argparse
import re
import sys

import h5py
import numpy as np

REF_KEYS = ("mp2_opposite_spin_correlation_energy", "mp2_same_spin_correlation_energy",
            "mp2_correlation_energy", "mp2_total_energy")


class FileError(Exception):
    pass


def as_str(v):
    if isinstance(v, bytes):
        return v.decode("utf-8")
    if isinstance(v, np.ndarray) and v.shape == ():
        return as_str(v[()])
    return str(v)


def get_float(f, name, shape):
    if name not in f or not isinstance(f[name], h5py.Dataset):
        raise FileError("missing dataset '%s'" % name)
    d = f[name]
    if d.dtype.kind != "f" or d.dtype.itemsize != 8:
        raise FileError("dataset '%s' has type %s, expected float64" % (name, d.dtype))
    if shape is not None and tuple(d.shape) != tuple(shape):
        raise FileError("dataset '%s' has shape %s, expected %s" % (name, list(d.shape), list(shape)))
    a = d[()]
    if not np.all(np.isfinite(a)):
        raise FileError("dataset '%s' has non-finite values" % name)
    return np.asarray(a, dtype=np.float64)


def rank_of(f, name, rank):
    if name not in f or not isinstance(f[name], h5py.Dataset):
        raise FileError("missing dataset '%s'" % name)
    if len(f[name].shape) != rank:
        raise FileError("dataset '%s' has rank %d, expected %d" % (name, len(f[name].shape), rank))
    return f[name].shape


def read_file(path):
    """Return dict with eps, nocc, B_ia (unfitted (P|ia)), metric, scf_energy, refs, metadata."""
    with h5py.File(path, "r") as f:
        if as_str(f.attrs.get("dfmp2_format", "")) != "dfmp2-integrals":
            raise FileError("root attribute dfmp2_format is not 'dfmp2-integrals'")
        ver = f.attrs.get("dfmp2_format_version", None)
        if ver is None or int(np.asarray(ver)) != 1:
            raise FileError("root attribute dfmp2_format_version is %r, expected 1" % (ver,))
        form = as_str(f.attrs.get("form", ""))
        if form not in ("ao", "mo"):
            raise FileError("root attribute form is %r, expected 'ao' or 'mo'" % form)

        if "nocc" not in f or f["nocc"].shape != () or f["nocc"].dtype.kind not in "iu":
            raise FileError("dataset 'nocc' must be a scalar integer")
        nocc = int(f["nocc"][()])

        if form == "ao":
            nbf, nmo = rank_of(f, "mo_coefficients", 2)
            naux = rank_of(f, "ao_3index", 3)[0]
            C = get_float(f, "mo_coefficients", (nbf, nmo))
            eps = get_float(f, "orbital_energies", (nmo,))
            Pmn = get_float(f, "ao_3index", (naux, nbf, nbf))
            asym = np.abs(Pmn - Pmn.transpose(0, 2, 1)).max()
            if asym > 1e-12 * max(1.0, np.abs(Pmn).max()):
                raise FileError("dataset 'ao_3index' is not symmetric in mu, nu (max asymmetry %.2e)" % asym)
            if np.any(np.diff(eps) < 0):
                raise FileError("dataset 'orbital_energies' is not in ascending order")
            if not 1 <= nocc < nmo:
                raise FileError("nocc = %d, expected 1 <= nocc < nmo = %d" % (nocc, nmo))
            Pia = np.einsum("Pmn,mi->Pin", Pmn, C[:, :nocc], optimize=True)
            Pia = np.einsum("Pin,na->Pia", Pia, C[:, nocc:], optimize=True)
        else:
            naux, n_o, nvir = rank_of(f, "mo_3index", 3)
            if n_o != nocc:
                raise FileError("dataset 'mo_3index' has %d occupied rows, nocc is %d" % (n_o, nocc))
            Pia = get_float(f, "mo_3index", (naux, nocc, nvir))
            eps = get_float(f, "orbital_energies", (nocc + nvir,))
            nbf = None
            if nocc < 1 or nvir < 1:
                raise FileError("need at least one occupied and one virtual orbital")
        J = get_float(f, "metric", (naux, naux))
        asym = np.abs(J - J.T).max()
        if asym > 1e-12 * max(1.0, np.abs(J).max()):
            raise FileError("dataset 'metric' is not symmetric (max asymmetry %.2e)" % asym)

        scf = float(get_float(f, "scf_energy", ())) if "scf_energy" in f else None
        enuc = float(get_float(f, "nuclear_repulsion_energy", ())) if "nuclear_repulsion_energy" in f else None
        meta = {}
        if "metadata" in f:
            for k, v in f["metadata"].attrs.items():
                meta[k] = int(np.asarray(v)) if k == "charge" else as_str(v)
        refs = {}
        if "reference" in f:
            for name, g in f["reference"].items():
                m = re.fullmatch(r"frozen_core_(\d+)", name)
                if not m or not isinstance(g, h5py.Group):
                    raise FileError("unexpected entry 'reference/%s'" % name)
                refs[int(m.group(1))] = {k: float(get_float(g, k, ())) for k in REF_KEYS}
                refs[int(m.group(1))]["program"] = as_str(g.attrs.get("program", "?"))
    return {"form": form, "nocc": nocc, "nbf": nbf, "naux": naux, "eps": eps, "Pia": Pia, "J": J,
            "scf": scf, "enuc": enuc, "meta": meta, "refs": refs}


def df_mp2(Pia, J, eps, nocc, nfrozen):
    """DF-MP2 OS/SS correlation energies (Eh) with the lowest nfrozen occupied orbitals dropped."""
    naux = J.shape[0]
    L = np.linalg.cholesky(J)  # J = L L^T
    nvir = Pia.shape[2]
    # B = L^{-1} (P|ia), so (ia|jb) = sum_Q B_Q,ia B_Q,jb = (ia|P) J^-1 (P|jb)
    B = np.linalg.solve(L, Pia[:, nfrozen:, :].reshape(naux, -1)).reshape(naux, nocc - nfrozen, nvir)
    eo = eps[nfrozen:nocc]
    ev = eps[nocc:]
    e_os = 0.0
    e_ss = 0.0
    dv = ev[:, None, None] + ev[None, None, :]  # [a, 1, b]
    for i in range(nocc - nfrozen):
        K = np.einsum("Qa,Qjb->ajb", B[:, i, :], B, optimize=True)  # (ia|jb)  [a, j, b]
        D = eo[i] + eo[None, :, None] - dv  # e_i + e_j - e_a - e_b
        X = K.transpose(2, 1, 0)  # (ib|ja)
        e_os += np.sum(K * K / D)
        e_ss += np.sum(K * (K - X) / D)
    return e_os, e_ss


def main(argv=None):
    p = argparse.ArgumentParser(description="Check a dfmp2 integral file with an independent numpy DF-MP2.")
    p.add_argument("file", metavar="FILE.h5")
    p.add_argument("--frozen-core", type=int, default=None, metavar="N",
                   help="number of frozen core orbitals to check (default: every reference group in the file)")
    p.add_argument("--tolerance", type=float, default=1e-9, help="max |difference| in Eh (default 1e-9)")
    args = p.parse_args(argv)
    if args.frozen_core is not None and args.frozen_core < 0:
        p.error("--frozen-core must be >= 0")
    try:
        d = read_file(args.file)
    except FileError as exc:
        print("%s: %s" % (args.file, exc), file=sys.stderr)
        return 1
    except OSError as exc:
        print("%s: cannot read: %s" % (args.file, exc), file=sys.stderr)
        return 1
    nocc = d["nocc"]
    nvir = d["eps"].shape[0] - nocc
    print("%s: form %s, naux %d, %snocc %d, nvir %d" % (args.file, d["form"], d["naux"],
                                                       "nbf %d, " % d["nbf"] if d["nbf"] else "", nocc, nvir))
    if d["meta"]:
        print("  metadata: " + ", ".join("%s=%s" % (k, v) for k, v in d["meta"].items() if k != "molecule"))
    if d["scf"] is not None:
        print("  scf_energy %.12f" % d["scf"])

    frozen = [args.frozen_core] if args.frozen_core is not None else sorted(d["refs"])
    if not frozen:
        frozen = [0]
    ok = True
    for n in frozen:
        if n >= nocc:
            print("  --frozen-core %d: must be < nocc = %d" % (n, nocc), file=sys.stderr)
            return 1
        e_os, e_ss = df_mp2(d["Pia"], d["J"], d["eps"], nocc, n)
        ours = {"mp2_opposite_spin_correlation_energy": e_os, "mp2_same_spin_correlation_energy": e_ss,
                "mp2_correlation_energy": e_os + e_ss}
        if d["scf"] is not None:
            ours["mp2_total_energy"] = d["scf"] + e_os + e_ss
        ref = d["refs"].get(n)
        print("  frozen core %d%s" % (n, " (reference: %s)" % ref["program"] if ref else " (no reference in file)"))
        print("    %-10s %20s %20s %12s" % ("", "numpy", "reference", "diff"))
        for key, label in zip(REF_KEYS, ("OS", "SS", "corr", "total")):
            if key not in ours:
                continue
            if ref is None:
                print("    %-10s %20.12f" % (label, ours[key]))
                continue
            diff = ours[key] - ref[key]
            checked = key != "mp2_total_energy"
            bad = checked and abs(diff) > args.tolerance
            ok = ok and not bad
            print("    %-10s %20.12f %20.12f %12.3e%s" % (label, ours[key], ref[key], diff,
                                                          "  FAIL" if bad else ("" if checked else "  (info)")))
        if ref is None:
            print("    no reference/frozen_core_%d group: nothing to compare" % n, file=sys.stderr)
            ok = False
    print("PASS" if ok else "FAIL (tolerance %.1e Eh on OS, SS, correlation)" % args.tolerance)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
