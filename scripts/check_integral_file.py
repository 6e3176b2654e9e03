#!/usr/bin/python3
# Needs numpy and h5py (Debian: python3-numpy, python3-h5py for /usr/bin/python3); no Psi4.
"""Independent numpy DF-MP2 from a dfmp2 integral file (format versions 1 and 2, AO or MO form).

Validates the layout of docs/integral-file-format.md, computes the DF-MP2 opposite-spin, same-spin and
total correlation energies (Cholesky of the metric, fitted (ia|jb), the file's orbital energies as the
denominators: canonical RHF for a closed shell) and compares them with the energies recorded under
reference/frozen_core_<n>.

Open shells (format version 2, root attribute `reference` = uhf or rohf, AO form): the file's alpha orbitals
(mo_coefficients, orbital_energies, nocc) and beta orbitals (mo_coefficients_beta, orbital_energies_beta,
nocc_beta) are each transformed on their own, B_sigma = L^-1 (P|ia)_sigma, and DF-UMP2 is summed over them:
E_aa = 1/2 sum_ijab (ia|jb)[(ia|jb) - (ib|ja)] / D over alpha orbitals, E_bb likewise over beta ones, E_ab =
sum_ijab (ia|jb)^2 / D with i, a alpha and j, b beta; same-spin = E_aa + E_bb, opposite-spin = E_ab. A frozen
core of n drops the lowest n occupied orbitals of each spin. For rohf (semicanonical orbitals) the singles
energy is the sum of singles_alpha[n:] and singles_beta[n:] (the active orbitals' terms, as the file stores
them); for uhf it is zero. The correlation energy is singles + same-spin + opposite-spin, and a reference
group's mp2_singles_energy, when present, is compared too. A version-2 file without `reference`, or with
`reference` = rhf, is a closed shell and is checked as version 1 is. The metadata attribute `multiplicity`,
when present, must match the electron count the orbitals imply (1 + nocc - nocc_beta; 1 for a closed shell).

    check_integral_file.py FILE.h5 [--frozen-core N] [--tolerance 1e-9]

Without --frozen-core every reference/frozen_core_<n> group in the file is checked. Exit status 0 if
the file is well formed and every |difference| on OS, SS, singles (when the reference has it) and total
correlation energy is within the tolerance, 1 otherwise (a malformed file is reported on one line
`FILE: reason`), 2 for bad arguments.
"""

import argparse
import re
import sys

import h5py
import numpy as np

REF_KEYS = ("mp2_opposite_spin_correlation_energy", "mp2_same_spin_correlation_energy",
            "mp2_correlation_energy", "mp2_total_energy")
SINGLES_KEY = "mp2_singles_energy"  # optional in a reference group (format version 2)
FORMAT_VERSIONS = (1, 2)
OPEN_SHELL_VERSION = 2
REFERENCES = ("rhf", "uhf", "rohf")
INT_METADATA = ("charge", "multiplicity")


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


def get_int(f, name):
    """A scalar integer dataset (HDF5 scalar or one-element [1])."""
    if name not in f or not isinstance(f[name], h5py.Dataset):
        raise FileError("missing dataset '%s'" % name)
    d = f[name]
    if d.dtype.kind not in "iu" or d.shape not in ((), (1,)):
        raise FileError("dataset '%s' must be a scalar integer" % name)
    return int(np.asarray(d[()]).reshape(()))


def rank_of(f, name, rank):
    if name not in f or not isinstance(f[name], h5py.Dataset):
        raise FileError("missing dataset '%s'" % name)
    if len(f[name].shape) != rank:
        raise FileError("dataset '%s' has rank %d, expected %d" % (name, len(f[name].shape), rank))
    return f[name].shape


def check_occupied_below_virtual(name, eps, nocc):
    """Occupied energies ascending and below every virtual one (format version 2's rule for the beta set)."""
    if np.any(np.diff(eps[:nocc]) < 0):
        raise FileError("dataset '%s': the occupied energies (the first %d) are not in ascending order" % (name, nocc))
    if 0 < nocc < eps.shape[0] and eps[nocc:].min() <= eps[nocc - 1]:
        lumo = nocc + int(np.argmin(eps[nocc:]))
        raise FileError("dataset '%s': virtual element %d (%.10g Eh) is not above occupied element %d (%.10g Eh)"
                        % (name, lumo, eps[lumo], nocc - 1, eps[nocc - 1]))


def transform(Pmn, C, nocc):
    """(P|ia) for occupied columns [:nocc] and virtual columns [nocc:] of C."""
    Pia = np.einsum("Pmn,mi->Pin", Pmn, C[:, :nocc], optimize=True)
    return np.einsum("Pin,na->Pia", Pia, C[:, nocc:], optimize=True)


def read_open_shell(f, reference, nbf, nmo, nocc, Pmn):
    """The beta orbitals of a version-2 open-shell file, their (P|ia), and ROHF's singles terms."""
    nocc_b = get_int(f, "nocc_beta")
    if not 0 <= nocc_b <= nocc:
        raise FileError("dataset 'nocc_beta' is %d, expected 0 <= nocc_beta <= nocc = %d" % (nocc_b, nocc))
    C_b = get_float(f, "mo_coefficients_beta", (nbf, nmo))
    eps_b = get_float(f, "orbital_energies_beta", (nmo,))
    check_occupied_below_virtual("orbital_energies_beta", eps_b, nocc_b)
    out = {"nocc_beta": nocc_b, "eps_beta": eps_b, "Pia_beta": transform(Pmn, C_b, nocc_b),
           "singles_alpha": None, "singles_beta": None}
    if reference == "rohf":
        for spin, n in (("alpha", nocc), ("beta", nocc_b)):
            name = "singles_" + spin
            s = get_float(f, name, (n,))
            if np.any(s > 0):
                i = int(np.argmax(s > 0))
                raise FileError("dataset '%s': element %d is %.6g Eh; a singles term is never positive"
                                % (name, i, s[i]))
            out[name] = s
    return out


def read_file(path):
    """Return dict with eps, nocc, Pia (unfitted (P|ia)), J, scf, refs, meta, and for an open shell the beta
    orbitals' nocc_beta, eps_beta, Pia_beta and ROHF's singles_alpha, singles_beta."""
    with h5py.File(path, "r") as f:
        if as_str(f.attrs.get("dfmp2_format", "")) != "dfmp2-integrals":
            raise FileError("root attribute dfmp2_format is not 'dfmp2-integrals'")
        ver = f.attrs.get("dfmp2_format_version", None)
        try:
            version = int(np.asarray(ver).reshape(())) if ver is not None else None
        except (TypeError, ValueError):
            version = None
        if version not in FORMAT_VERSIONS or np.asarray(ver).dtype.kind not in "iu":
            raise FileError("root attribute dfmp2_format_version is %r, expected 1 or 2" % (ver,))
        form = as_str(f.attrs.get("form", ""))
        if form not in ("ao", "mo"):
            raise FileError("root attribute form is %r, expected 'ao' or 'mo'" % form)
        reference = "rhf"
        if "reference" in f.attrs:
            if version < OPEN_SHELL_VERSION:
                raise FileError("root attribute reference is a format version %d attribute, and the file is "
                                "version %d" % (OPEN_SHELL_VERSION, version))
            reference = as_str(f.attrs["reference"])
            if reference not in REFERENCES:
                raise FileError("root attribute reference is %r, expected 'rhf', 'uhf' or 'rohf'" % reference)
        open_shell = reference != "rhf"
        if open_shell and form != "ao":
            raise FileError("root attribute reference is '%s', and form 'mo' holds one set of orbitals; an open "
                            "shell needs form 'ao'" % reference)

        if "nocc" not in f or f["nocc"].shape != () or f["nocc"].dtype.kind not in "iu":
            raise FileError("dataset 'nocc' must be a scalar integer")
        nocc = int(f["nocc"][()])

        beta = {}
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
            Pia = transform(Pmn, C, nocc)
            if open_shell:
                beta = read_open_shell(f, reference, nbf, nmo, nocc, Pmn)
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
                if k in INT_METADATA:
                    a = np.asarray(v)
                    if a.dtype.kind not in "iu" or a.size != 1:
                        raise FileError("metadata attribute '%s' must be one integer" % k)
                    meta[k] = int(a.reshape(()))
                else:
                    meta[k] = as_str(v)
        if "multiplicity" in meta:
            expected = 1 + nocc - beta["nocc_beta"] if open_shell else 1
            if meta["multiplicity"] != expected:
                raise FileError("metadata attribute 'multiplicity' is %d, and the file's orbitals (reference %s, "
                                "%d alpha, %d beta electrons) give multiplicity %d"
                                % (meta["multiplicity"], reference, nocc,
                                   beta["nocc_beta"] if open_shell else nocc, expected))
        refs = {}
        if "reference" in f:
            for name, g in f["reference"].items():
                m = re.fullmatch(r"frozen_core_(\d+)", name)
                if not m or not isinstance(g, h5py.Group):
                    raise FileError("unexpected entry 'reference/%s'" % name)
                r = {k: float(get_float(g, k, ())) for k in REF_KEYS}
                if SINGLES_KEY in g:
                    r[SINGLES_KEY] = float(get_float(g, SINGLES_KEY, ()))
                r["program"] = as_str(g.attrs.get("program", "?"))
                refs[int(m.group(1))] = r
    d = {"version": version, "reference": reference, "form": form, "nocc": nocc, "nbf": nbf, "naux": naux,
         "eps": eps, "Pia": Pia, "J": J, "scf": scf, "enuc": enuc, "meta": meta, "refs": refs}
    d.update(beta)
    return d


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


def fitted(L, Pia, nfrozen):
    """B = L^-1 (P|ia) over the active occupied orbitals i >= nfrozen: [naux, nact, nvir]."""
    naux, nocc, nvir = Pia.shape
    if nocc - nfrozen == 0:
        return np.zeros((naux, 0, nvir))
    return np.linalg.solve(L, Pia[:, nfrozen:, :].reshape(naux, -1)).reshape(naux, nocc - nfrozen, nvir)


def pair_sum(B1, eo1, ev1, B2, eo2, ev2, exchange):
    """sum_{i a in 1, j b in 2} (ia|jb) [(ia|jb) - (ib|ja) if exchange] / (e_i + e_j - e_a - e_b)."""
    e = 0.0
    dv = ev1[:, None, None] + ev2[None, None, :]  # [a, 1, b]
    for i in range(B1.shape[1]):
        K = np.einsum("Qa,Qjb->ajb", B1[:, i, :], B2, optimize=True)  # (ia|jb)  [a, j, b]
        D = eo1[i] + eo2[None, :, None] - dv
        e += np.sum(K * (K - K.transpose(2, 1, 0)) / D) if exchange else np.sum(K * K / D)
    return e


def df_ump2(d, nfrozen):
    """DF-UMP2 (UHF, or ROHF-MBPT(2) on semicanonical orbitals): (OS, SS, singles) in Eh, the lowest nfrozen
    occupied orbitals of each spin dropped."""
    L = np.linalg.cholesky(d["J"])  # J = L L^T
    na, nb = d["nocc"], d["nocc_beta"]
    Ba, Bb = fitted(L, d["Pia"], nfrozen), fitted(L, d["Pia_beta"], nfrozen)
    ea, eb = d["eps"], d["eps_beta"]
    oa, va, ob, vb = ea[nfrozen:na], ea[na:], eb[nfrozen:nb], eb[nb:]
    e_aa = 0.5 * pair_sum(Ba, oa, va, Ba, oa, va, True)
    e_bb = 0.5 * pair_sum(Bb, ob, vb, Bb, ob, vb, True)
    e_ab = pair_sum(Ba, oa, va, Bb, ob, vb, False)
    singles = 0.0
    if d["singles_alpha"] is not None:
        singles = float(np.sum(d["singles_alpha"][nfrozen:]) + np.sum(d["singles_beta"][nfrozen:]))
    return e_ab, e_aa + e_bb, singles


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
    open_shell = d["reference"] != "rhf"
    nocc = d["nocc"]
    nvir = d["eps"].shape[0] - nocc
    print("%s: form %s, naux %d, %snocc %d, nvir %d" % (args.file, d["form"], d["naux"],
                                                       "nbf %d, " % d["nbf"] if d["nbf"] else "", nocc, nvir))
    if open_shell:
        print("  format version %d, reference %s: alpha nocc %d nvir %d, beta nocc %d nvir %d"
              % (d["version"], d["reference"], nocc, nvir, d["nocc_beta"], d["eps_beta"].shape[0] - d["nocc_beta"]))
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
        if open_shell and n > d["nocc_beta"]:
            print("  --frozen-core %d: must be <= nocc_beta = %d" % (n, d["nocc_beta"]), file=sys.stderr)
            return 1
        if open_shell:
            e_os, e_ss, e_s = df_ump2(d, n)
        else:
            e_os, e_ss = df_mp2(d["Pia"], d["J"], d["eps"], nocc, n)
            e_s = 0.0
        ours = {"mp2_opposite_spin_correlation_energy": e_os, "mp2_same_spin_correlation_energy": e_ss,
                "mp2_correlation_energy": e_s + e_os + e_ss if open_shell else e_os + e_ss}
        if d["scf"] is not None:
            # the RHF sum in its original order, so that closed-shell reports stay bit for bit as before
            ours["mp2_total_energy"] = d["scf"] + e_s + e_os + e_ss if open_shell else d["scf"] + e_os + e_ss
        ref = d["refs"].get(n)
        rows = [(key, label) for key, label in zip(REF_KEYS, ("OS", "SS", "corr", "total"))]
        if open_shell or (ref is not None and SINGLES_KEY in ref):
            ours[SINGLES_KEY] = e_s
            rows.insert(2, (SINGLES_KEY, "singles"))
        print("  frozen core %d%s" % (n, " (reference: %s)" % ref["program"] if ref else " (no reference in file)"))
        print("    %-10s %20s %20s %12s" % ("", "numpy", "reference", "diff"))
        for key, label in rows:
            if key not in ours:
                continue
            if ref is None:
                print("    %-10s %20.12f" % (label, ours[key]))
                continue
            if key not in ref:
                print("    %-10s %20.12f %20s" % (label, ours[key], "(none)"))
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
    print("PASS" if ok else "FAIL (tolerance %.1e Eh on OS, SS, %scorrelation)"
          % (args.tolerance, "singles, " if open_shell else ""))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
