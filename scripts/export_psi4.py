#!/usr/bin/python3
# Runs under Debian's /usr/bin/python3 (python3.11) with Psi4 1.3.2 from the Debian `psi4` package:
#     PYTHONPATH=/usr/lib/x86_64-linux-gnu /usr/bin/python3 scripts/export_psi4.py ...
# (running it directly also works: the script adds /usr/lib/x86_64-linux-gnu to sys.path itself
# when psi4 is not importable). Needs python3-h5py and python3-numpy.
"""Export a Psi4 RHF calculation as a dfmp2 integral file (HDF5, format version 1).

See docs/integral-file-format.md. The script runs a closed-shell RHF SCF in C1 symmetry, takes the
three-index AO integrals (P|mn) in the MP2 fitting basis and the metric (P|Q) from Psi4's MintsHelper,
and records Psi4's own DF-MP2 energies (all electrons and frozen core) under reference/frozen_core_<n>.
"""

import argparse
import atexit
import contextlib
import io
import os
import re
import shutil
import sys
import tempfile

PSI4_PYTHON_DIR = "/usr/lib/x86_64-linux-gnu"
GENERATOR = "psi4 1.3.2 via scripts/export_psi4.py"
E_CONVERGENCE = 1e-11
D_CONVERGENCE = 1e-10
SCF_AGREEMENT = 1e-9  # the second SCF (frozen-core MP2 run) must reproduce the first this closely

FLOAT_RE = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eEdD][-+]?\d+)?"
ATOM_LINE_RE = re.compile(r"^\s*([A-Za-z]{1,3})\s+(%s)\s+(%s)\s+(%s)\s*$" % (FLOAT_RE, FLOAT_RE, FLOAT_RE))
MEMORY_RE = re.compile(r"^\s*(\d+\.?\d*|\.\d+)\s*([kmgtpe]i?b|b)\s*$", re.IGNORECASE)


def parse_xyz(text, parser, origin):
    """Return a list of (symbol, x, y, z-string...) lines 'Symbol x y z' from xyz text in angstrom.

    Accepts a literal backslash-n as a line separator (handy on the command line) and an optional
    standard xyz header (atom count line followed by a comment line).
    """
    text = text.replace("\\n", "\n")
    lines = [ln.strip() for ln in text.splitlines()]
    # Standard .xyz header: first non-empty line is the atom count, next line a comment.
    nonempty = [ln for ln in lines if ln]
    if nonempty and re.fullmatch(r"\d+", nonempty[0]):
        count = int(nonempty[0])
        first = lines.index(nonempty[0])
        body = [ln for ln in lines[first + 2:] if ln]
        if len(body) != count:
            parser.error("%s: xyz header says %d atoms but %d atom lines follow" % (origin, count, len(body)))
    else:
        body = nonempty
    if not body:
        parser.error("%s: no atoms given" % origin)
    atoms = []
    for ln in body:
        m = ATOM_LINE_RE.match(ln)
        if not m:
            parser.error("%s: cannot parse atom line %r (expected 'Symbol x y z' in angstrom)" % (origin, ln))
        sym = m.group(1)
        sym = sym[0].upper() + sym[1:].lower()
        coords = [float(v.replace("d", "e").replace("D", "e")) for v in m.group(2, 3, 4)]
        atoms.append((sym, coords))
    return atoms


def build_parser():
    p = argparse.ArgumentParser(
        description="Run a closed-shell RHF with Psi4 1.3.2 and write a dfmp2 integral file (format version 1).")
    geo = p.add_mutually_exclusive_group(required=True)
    geo.add_argument("--xyz", help="geometry as 'Symbol x y z' lines in angstrom (literal \\n separates lines)")
    geo.add_argument("--xyz-file", metavar="FILE", help="geometry file ('Symbol x y z' lines, angstrom; "
                     "an xyz count/comment header is allowed)")
    p.add_argument("--basis", required=True, help="orbital basis, e.g. cc-pvdz")
    p.add_argument("--aux-basis", required=True, help="MP2 fitting basis, e.g. cc-pvdz-ri")
    p.add_argument("--jk-basis", default=None,
                   help="SCF fitting basis for --scf-type df (default: Psi4's choice for the orbital basis)")
    p.add_argument("--scf-type", choices=["pk", "df"], default="pk", help="SCF integral algorithm (default pk)")
    p.add_argument("--charge", type=int, default=0, help="molecular charge (default 0); closed shell only")
    p.add_argument("--form", choices=["ao", "mo"], default="ao",
                   help="write AO three-index integrals + MO coefficients (ao, default) or (P|ia) (mo)")
    p.add_argument("--threads", type=int, default=1, help="Psi4 threads (default 1)")
    p.add_argument("--memory", default="2 GB", help="Psi4 memory, e.g. '2 GB' (default 2 GB)")
    p.add_argument("-o", "--output", required=True, metavar="OUT.h5", help="output HDF5 file")
    return p


def import_psi4():
    try:
        import psi4  # noqa: F401
    except ImportError:
        if PSI4_PYTHON_DIR not in sys.path:
            sys.path.insert(0, PSI4_PYTHON_DIR)
        import psi4  # noqa: F401
    return psi4


def check_args(args, parser):
    if args.xyz_file is not None:
        try:
            with open(args.xyz_file) as f:
                text = f.read()
        except OSError as exc:
            parser.error("--xyz-file: cannot read %s: %s" % (args.xyz_file, exc.strerror))
        atoms = parse_xyz(text, parser, "--xyz-file " + args.xyz_file)
    else:
        atoms = parse_xyz(args.xyz, parser, "--xyz")
    if args.threads < 1:
        parser.error("--threads must be >= 1, got %d" % args.threads)
    if not MEMORY_RE.match(args.memory):
        parser.error("--memory: cannot parse %r (expected e.g. '2 GB' or '500 MiB')" % args.memory)
    if args.jk_basis is not None and args.scf_type != "df":
        parser.error("--jk-basis is only used with --scf-type df")
    for opt in ("basis", "aux_basis", "jk_basis"):
        val = getattr(args, opt)
        if val is not None and not re.fullmatch(r"[A-Za-z0-9_+*()\-]+", val):
            parser.error("--%s: invalid basis set name %r" % (opt.replace("_", "-"), val))
    out = os.path.abspath(args.output)
    outdir = os.path.dirname(out)
    if not os.path.isdir(outdir):
        parser.error("-o: directory %s does not exist" % outdir)
    if not os.access(outdir, os.W_OK):
        parser.error("-o: directory %s is not writable" % outdir)
    if os.path.isdir(out):
        parser.error("-o: %s is a directory" % out)
    return atoms, out


def molecule_lines(atoms):
    """'Symbol x y z' lines, coordinates printed exactly as parsed (shortest repr of the float)."""
    out = []
    for sym, coords in atoms:
        out.append("%s %s" % (sym, " ".join(_num(c) for c in coords)))
    return out


def _num(x):
    s = "%.6f" % x
    # keep at least 6 decimals (the reference geometries use 6) but never lose precision
    if float(s) != x:
        s = repr(float(x))
    if s == "-0.000000":
        s = "0.000000"
    return s


def set_common_options(psi4, args, freeze_core):
    opts = {
        "basis": args.basis,
        "df_basis_mp2": args.aux_basis,
        "scf_type": args.scf_type,
        "mp2_type": "df",
        "reference": "rhf",
        "e_convergence": E_CONVERGENCE,
        "d_convergence": D_CONVERGENCE,
        "freeze_core": freeze_core,
    }
    if args.jk_basis is not None:
        opts["df_basis_scf"] = args.jk_basis
    psi4.set_options(opts)


def mp2_variables(psi4):
    names = {
        "mp2_opposite_spin_correlation_energy": "MP2 OPPOSITE-SPIN CORRELATION ENERGY",
        "mp2_same_spin_correlation_energy": "MP2 SAME-SPIN CORRELATION ENERGY",
        "mp2_correlation_energy": "MP2 CORRELATION ENERGY",
        "mp2_total_energy": "MP2 TOTAL ENERGY",
    }
    have = psi4.core.variables()
    out = {}
    for key, var in names.items():
        if var not in have:
            raise RuntimeError("Psi4 did not set the variable %r" % var)
        out[key] = float(psi4.variable(var))
    return out


def run_psi4(psi4, np, args, atoms, workdir):
    """Run SCF and both DF-MP2 references; return a dict with everything the file needs."""
    psi4.core.set_output_file(os.path.join(workdir, "psi4.out"), False)
    psi4.core.IOManager.shared_object().set_default_path(workdir)
    psi4.set_memory(args.memory)
    psi4.set_num_threads(args.threads)

    geom = "\n".join(["units angstrom", "symmetry c1", "no_reorient", "no_com",
                      "%d 1" % args.charge] + molecule_lines(atoms))
    mol = psi4.geometry(geom, name="dfmp2_export")
    mol.update_geometry()

    # 1. SCF (all-electron wavefunction: frzcpi = 0).
    set_common_options(psi4, args, freeze_core=False)
    e_scf, wfn = psi4.energy("scf", return_wfn=True)
    if wfn.soccpi().sum() != 0 or wfn.nirrep() != 1:
        raise RuntimeError("expected a closed-shell C1 wavefunction")
    basis = wfn.basisset()
    nbf = basis.nbf()
    nmo = wfn.nmo()
    nocc = int(wfn.doccpi().sum())
    if not 1 <= nocc < nmo:
        raise RuntimeError("need 1 <= nocc < nmo, got nocc=%d nmo=%d" % (nocc, nmo))
    C = np.array(wfn.Ca())  # [nbf, nmo]
    eps = np.array(wfn.epsilon_a())  # [nmo]
    if C.shape != (nbf, nmo) or eps.shape != (nmo,):
        raise RuntimeError("unexpected shapes: Ca %s, epsilon %s" % (C.shape, eps.shape))
    if np.any(np.diff(eps) < 0):
        raise RuntimeError("orbital energies are not in ascending order")
    e_nuc = float(mol.nuclear_repulsion_energy())

    # 2. Three-index integrals and metric in the MP2 fitting basis, built as Psi4's DFMP2 builds it.
    aux = psi4.core.BasisSet.build(mol, "DF_BASIS_MP2", args.aux_basis, "RIFIT", args.basis,
                                   puream=basis.has_puream())
    zero = psi4.core.BasisSet.zero_ao_basis_set()
    mints = psi4.core.MintsHelper(basis)
    naux = aux.nbf()
    Pmn = np.array(mints.ao_eri(aux, zero, basis, basis)).reshape(naux, nbf, nbf)
    J = np.array(mints.ao_eri(aux, zero, aux, zero)).reshape(naux, naux)

    # 3. Psi4's DF-MP2, all electrons, on exactly these orbitals.
    psi4.core.set_global_option("FREEZE_CORE", "FALSE")
    e_mp2_ae, wfn_ae = psi4.energy("mp2", ref_wfn=wfn, return_wfn=True)
    nfrz_ae = int(wfn_ae.frzcpi().sum())
    refs = {nfrz_ae: mp2_variables(psi4)}
    # The aux basis DFMP2 used must be ours.
    aux_used = wfn.get_basisset("DF_BASIS_MP2")
    if (aux_used.nbf() != naux or aux_used.nshell() != aux.nshell()
            or aux_used.has_puream() != aux.has_puream()):
        raise RuntimeError("aux basis mismatch: DFMP2 used nbf=%d nshell=%d puream=%s, exporter built "
                           "nbf=%d nshell=%d puream=%s" % (aux_used.nbf(), aux_used.nshell(),
                                                           aux_used.has_puream(), naux, aux.nshell(),
                                                           aux.has_puream()))
    if np.abs(np.array(wfn.Ca()) - C).max() != 0.0:
        raise RuntimeError("DFMP2 changed the SCF orbitals")

    # 4. Psi4's DF-MP2 with frozen core. The number of frozen orbitals is fixed when a wavefunction is
    # built, so this needs a fresh SCF; it must reproduce the first one.
    psi4.core.clean()
    set_common_options(psi4, args, freeze_core=True)
    e_mp2_fc, wfn_fc = psi4.energy("mp2", return_wfn=True)
    e_scf_fc = float(psi4.variable("SCF TOTAL ENERGY"))
    if abs(e_scf_fc - e_scf) > SCF_AGREEMENT:
        raise RuntimeError("second SCF energy %.12f differs from the first %.12f by %.3e > %.0e"
                           % (e_scf_fc, e_scf, e_scf_fc - e_scf, SCF_AGREEMENT))
    eps_fc = np.array(wfn_fc.epsilon_a())
    nfrz_fc = int(wfn_fc.frzcpi().sum())
    fc_vals = mp2_variables(psi4)
    if nfrz_fc in refs:
        # no core to freeze: both runs are the same calculation
        diff = abs(fc_vals["mp2_correlation_energy"] - refs[nfrz_fc]["mp2_correlation_energy"])
        if diff > SCF_AGREEMENT:
            raise RuntimeError("two MP2 runs with %d frozen orbitals differ by %.3e" % (nfrz_fc, diff))
    else:
        refs[nfrz_fc] = fc_vals
    psi4.core.clean()

    return {
        "nbf": nbf, "nmo": nmo, "nocc": nocc, "naux": naux, "C": C, "eps": eps, "Pmn": Pmn, "J": J,
        "e_scf": float(e_scf), "e_nuc": e_nuc, "refs": refs, "puream": bool(basis.has_puream()),
        "aux_puream": bool(aux.has_puream()), "e_scf_fc": e_scf_fc,
        "max_eps_diff_fc": float(np.abs(eps_fc - eps).max()),
    }


def chunk_rows(row_elems, target_bytes=1 << 20):
    return max(1, target_bytes // (8 * max(1, row_elems)))


# Every dataset carries a checksum that dfmp2 verifies as it reads (docs/integral-file-format.md, "Integrity"): the
# file uses the HDF5 1.10 format, whose metadata (chunk indexes included) is checksummed; small datasets are stored compact, inside their
# (checksummed) object header; larger ones are chunked with the Fletcher32 filter. String attributes are
# fixed-length (np.bytes_), so they too live in the checksummed object headers (variable-length strings go to a
# global heap that has no checksum).
COMPACT_BYTES = 16 * 1024


def create_dataset(h5py, np, group, name, data, dtype, chunks=None):
    data = np.asarray(data, dtype=dtype)
    if data.nbytes <= COMPACT_BYTES:
        space = h5py.h5s.create_simple(data.shape) if data.shape else h5py.h5s.create(h5py.h5s.SCALAR)
        props = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        props.set_layout(h5py.h5d.COMPACT)
        file_type = h5py.h5t.IEEE_F64LE if data.dtype.kind == "f" else h5py.h5t.STD_I64LE
        ds = h5py.h5d.create(group.id, name.encode(), file_type, space, dcpl=props)
        ds.write(h5py.h5s.ALL, h5py.h5s.ALL, np.ascontiguousarray(data))
        return
    group.create_dataset(name, data=data, dtype=dtype, chunks=chunks, compression="gzip", compression_opts=6,
                         shuffle=True, fletcher32=True)


def write_file(h5py, np, path, args, atoms, res):
    tmp = path + ".tmp"

    def put(group, name, data, dtype="f8", chunks=None):
        create_dataset(h5py, np, group, name, data, dtype, chunks)

    try:
        with h5py.File(tmp, "w", libver=("v110", "v110")) as f:
            f.attrs["dfmp2_format"] = np.bytes_("dfmp2-integrals")
            f.attrs["dfmp2_format_version"] = np.int64(1)
            f.attrs["form"] = np.bytes_(args.form)
            nocc, naux, nbf, nmo = res["nocc"], res["naux"], res["nbf"], res["nmo"]
            if args.form == "ao":
                put(f, "mo_coefficients", res["C"], chunks=(min(nbf, chunk_rows(nmo)), nmo))
                put(f, "ao_3index", res["Pmn"], chunks=(min(naux, chunk_rows(nbf * nbf)), nbf, nbf))
            else:
                C = res["C"]
                Co, Cv = C[:, :nocc], C[:, nocc:]
                Pia = np.einsum("Pmn,mi->Pin", res["Pmn"], Co, optimize=True)
                Pia = np.einsum("Pin,na->Pia", Pia, Cv, optimize=True)
                nvir = nmo - nocc
                put(f, "mo_3index", np.ascontiguousarray(Pia),
                    chunks=(min(naux, chunk_rows(nocc * nvir)), nocc, nvir))
            put(f, "orbital_energies", res["eps"], chunks=(min(nmo, chunk_rows(1)),))
            put(f, "nocc", np.int64(nocc), dtype="i8")
            put(f, "metric", res["J"], chunks=(min(naux, chunk_rows(naux)), naux))
            put(f, "scf_energy", np.float64(res["e_scf"]))
            put(f, "nuclear_repulsion_energy", np.float64(res["e_nuc"]))
            md = f.create_group("metadata")
            md.attrs["molecule"] = np.bytes_("\n".join(molecule_lines(atoms)))
            md.attrs["charge"] = np.int64(args.charge)
            md.attrs["basis"] = np.bytes_(args.basis.lower())
            md.attrs["aux_basis"] = np.bytes_(args.aux_basis.lower())
            md.attrs["scf_type"] = np.bytes_(args.scf_type)
            if args.scf_type == "df" and args.jk_basis is not None:
                md.attrs["jk_basis"] = np.bytes_(args.jk_basis.lower())
            md.attrs["generator"] = np.bytes_(GENERATOR)
            ref = f.create_group("reference")
            for n in sorted(res["refs"]):
                g = ref.create_group("frozen_core_%d" % n)
                for key, val in res["refs"][n].items():
                    put(g, key, np.float64(val))
                g.attrs["program"] = np.bytes_("psi4 1.3.2 dfmp2 (mp2_type df, scf_type %s, df_basis_mp2 %s)" % (
                    args.scf_type, args.aux_basis.lower()))
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def one_line(msg):
    return " ".join(str(msg).split())


def check_electrons(atoms, charge, parser):
    import qcelemental  # ships with (and is required by) Psi4 1.3.2
    nelec = -charge
    for sym, _ in atoms:
        try:
            nelec += qcelemental.periodictable.to_Z(sym)
        except Exception:
            parser.error("unknown element symbol %r" % sym)
    if nelec <= 0 or nelec % 2:
        parser.error("closed-shell RHF needs a positive even number of electrons; got %d (charge %d)"
                     % (nelec, charge))


def _cleanup(workdir, cwd):
    try:
        os.chdir(cwd)
    except OSError:
        os.chdir("/")
    shutil.rmtree(workdir, ignore_errors=True)


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    atoms, out = check_args(args, parser)

    # Psi4 keeps scratch files (and writes timer.dat into the working directory) until its own atexit
    # handlers run, so work inside a temporary directory and remove it after Psi4's handlers: atexit
    # runs handlers in reverse order of registration, so register ours before importing psi4.
    workdir = tempfile.mkdtemp(prefix="export_psi4_")
    cwd = os.getcwd()
    atexit.register(_cleanup, workdir, cwd)
    os.environ["PSI_SCRATCH"] = workdir
    os.chdir(workdir)
    psi4 = import_psi4()
    import numpy as np
    import h5py
    try:
        psi4.set_memory(args.memory, execute=False)
    except Exception as exc:  # psi4.ValidationError
        parser.error("--memory: %s" % one_line(getattr(exc, "message", exc)))
    check_electrons(atoms, args.charge, parser)
    chatter = io.StringIO()  # Psi4 prints some errors and notes on stdout itself
    try:
        with contextlib.redirect_stdout(chatter):
            res = run_psi4(psi4, np, args, atoms, workdir)
    except psi4.driver.qcdb.BasisSetNotFound as exc:
        msg = str(exc)
        m = re.search(r"for key (\w+)", msg)
        key = m.group(1).upper() if m else ""
        if key in ("RIFIT", "DF_BASIS_MP2"):
            opt, name = "--aux-basis", args.aux_basis
        elif key in ("JKFIT", "DF_BASIS_SCF"):
            opt, name = "--jk-basis", args.jk_basis or "(Psi4 default JK fitting basis)"
        else:
            opt, name = "--basis", args.basis
        m = re.search(r"for atom (\d+)", msg)
        parser.error("%s: Psi4 cannot find basis set '%s'%s (searched /usr/share/psi4/basis)"
                     % (opt, name, " for atom %s" % m.group(1) if m else ""))
    except Exception as exc:
        sys.stderr.write("export_psi4.py: Psi4 run failed: %s: %s\n" % (type(exc).__name__, one_line(exc)))
        log = os.path.join(workdir, "psi4.out")
        if os.path.exists(log):
            with open(log, errors="replace") as f:
                tail = f.readlines()[-25:]
            sys.stderr.write("--- last lines of the Psi4 output ---\n" + "".join(tail))
        return 1
    write_file(h5py, np, out, args, atoms, res)

    print("wrote %s (form %s, %d bytes)" % (out, args.form, os.path.getsize(out)))
    print("  basis %s (puream %s), aux basis %s (puream %s), scf_type %s"
          % (args.basis.lower(), res["puream"], args.aux_basis.lower(), res["aux_puream"], args.scf_type))
    print("  nbf %d  nmo %d  nocc %d  nvir %d  naux %d"
          % (res["nbf"], res["nmo"], res["nocc"], res["nmo"] - res["nocc"], res["naux"]))
    print("  E(SCF) %.12f  E(nuc) %.12f  (frozen-core rerun SCF differs by %.1e, max |d eps| %.1e)"
          % (res["e_scf"], res["e_nuc"], res["e_scf_fc"] - res["e_scf"], res["max_eps_diff_fc"]))
    for n in sorted(res["refs"]):
        r = res["refs"][n]
        print("  psi4 DF-MP2 frozen_core_%d: OS %.12f  SS %.12f  corr %.12f  total %.12f"
              % (n, r["mp2_opposite_spin_correlation_energy"], r["mp2_same_spin_correlation_energy"],
                 r["mp2_correlation_energy"], r["mp2_total_energy"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
