#!/usr/bin/python3
# Runs under Debian's /usr/bin/python3 (python3.11) with Psi4 1.3.2 from the Debian `psi4` package:
#     PYTHONPATH=/usr/lib/x86_64-linux-gnu /usr/bin/python3 scripts/export_psi4.py ...
# (running it directly also works: the script adds /usr/lib/x86_64-linux-gnu to sys.path itself
# when psi4 is not importable). Needs python3-h5py and python3-numpy.
# Open shells: --multiplicity N [--reference uhf|rohf] (AO form only), e.g. the hydroxyl radical:
#     ... scripts/export_psi4.py --xyz "O 0 0 0\nH 0 0 0.97" --multiplicity 2 --reference rohf \
#         --basis cc-pvdz --aux-basis cc-pvdz-ri -o oh-rohf.h5
"""Export a Psi4 SCF (RHF, UHF or ROHF) as a dfmp2 integral file (HDF5, format version 1 or 2).

See docs/integral-file-format.md. The script runs an SCF in C1 symmetry, takes the three-index AO integrals (P|mn)
in the MP2 fitting basis and the metric (P|Q) from Psi4's MintsHelper, and records Psi4's own DF-MP2 energies (all
electrons and frozen core) under reference/frozen_core_<n>.

Closed shell (--reference rhf, the default for --multiplicity 1): format version 1, AO or MO form, exactly as
before (no `reference` attribute).

Open shell (--reference uhf, the default for --multiplicity > 1, or rohf; AO form only): format version 2, root
attribute `reference`, the alpha orbitals in mo_coefficients / orbital_energies / nocc and the beta ones in
mo_coefficients_beta / orbital_energies_beta / nocc_beta, metadata attribute `multiplicity`, and
mp2_singles_energy (Psi4's MP2 SINGLES ENERGY) in each reference group.
  uhf:  the UHF's canonical alpha and beta orbitals.
  rohf: the semicanonical orbitals of ROHF-MBPT(2): Psi4's ROHF orbitals C (first nbeta doubly, next
        nalpha - nbeta singly occupied) with each spin's AO Fock matrix of the converged density (wfn.Fa(),
        wfn.Fb(): in Psi4 1.3.2 these are H + J[Da+Db] - K[Da] and H + J[Da+Db] - K[Db], built with the SCF's own
        J/K, so DF for --scf-type df; the script checks that they reproduce the SCF energy) diagonalised within
        that spin's occupied orbitals and within its virtual ones. singles_alpha[i] = -sum_a f_ia^2 / (e_a - e_i)
        over the semicanonical alpha virtuals a (f = C_occ'^T F_alpha C_vir'), singles_beta likewise. The script
        checks that the sum of all terms reproduces Psi4's MP2 SINGLES ENERGY of its all-electron ROHF DF-MP2, and
        the sum from orbital n_frozen on that of its frozen-core run (Psi4 leaves the frozen orbitals' terms out),
        within 1e-9 Eh, and that its orbital energies are those of Psi4's own semicanonicalisation.
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
SINGLES_AGREEMENT = 1e-9  # ROHF: our singles terms must sum to Psi4's MP2 SINGLES ENERGY this closely
FOCK_ENERGY_AGREEMENT = 1e-8  # ROHF: the SCF energy recomputed from wfn.Fa()/wfn.Fb() (Psi4 1.3.2: about 1e-10)
SEMICANONICAL_AGREEMENT = 1e-8  # ROHF: our semicanonical orbital energies against Psi4's semicanonicalize()
REFERENCES = ("rhf", "uhf", "rohf")

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
        description="Run an SCF (closed-shell RHF, or open-shell UHF / ROHF) with Psi4 1.3.2 and write a dfmp2 "
                    "integral file (format version 1 for RHF, 2 for UHF and ROHF).")
    geo = p.add_mutually_exclusive_group(required=True)
    geo.add_argument("--xyz", help="geometry as 'Symbol x y z' lines in angstrom (literal \\n separates lines)")
    geo.add_argument("--xyz-file", metavar="FILE", help="geometry file ('Symbol x y z' lines, angstrom; "
                     "an xyz count/comment header is allowed)")
    p.add_argument("--basis", required=True, help="orbital basis, e.g. cc-pvdz")
    p.add_argument("--aux-basis", required=True, help="MP2 fitting basis, e.g. cc-pvdz-ri")
    p.add_argument("--jk-basis", default=None,
                   help="SCF fitting basis for --scf-type df (default: Psi4's choice for the orbital basis)")
    p.add_argument("--scf-type", choices=["pk", "df"], default="pk", help="SCF integral algorithm (default pk)")
    p.add_argument("--charge", type=int, default=0, help="molecular charge (default 0)")
    p.add_argument("--multiplicity", type=int, default=1,
                   help="spin multiplicity 2S+1 (default 1: closed shell)")
    p.add_argument("--reference", choices=REFERENCES, default=None,
                   help="SCF reference: rhf (closed shell; the default for multiplicity 1), uhf (the default "
                        "otherwise) or rohf (written as its semicanonical orbitals and singles terms)")
    p.add_argument("--form", choices=["ao", "mo"], default="ao",
                   help="write AO three-index integrals + MO coefficients (ao, default) or (P|ia) (mo; RHF only)")
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
    if args.multiplicity < 1:
        parser.error("--multiplicity must be >= 1 (2S+1), got %d" % args.multiplicity)
    if args.reference is None:
        args.reference = "rhf" if args.multiplicity == 1 else "uhf"
    if args.reference == "rhf" and args.multiplicity != 1:
        parser.error("--reference rhf is closed-shell and needs --multiplicity 1, got %d (use --reference uhf or rohf)"
                     % args.multiplicity)
    if args.reference != "rhf" and args.form == "mo":
        parser.error("--form mo is closed-shell (RHF) only; --reference %s needs --form ao" % args.reference)
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
        "reference": args.reference,
        "e_convergence": E_CONVERGENCE,
        "d_convergence": D_CONVERGENCE,
        "freeze_core": freeze_core,
    }
    if args.jk_basis is not None:
        opts["df_basis_scf"] = args.jk_basis
    psi4.set_options(opts)


def mp2_variables(psi4, open_shell):
    names = {
        "mp2_opposite_spin_correlation_energy": "MP2 OPPOSITE-SPIN CORRELATION ENERGY",
        "mp2_same_spin_correlation_energy": "MP2 SAME-SPIN CORRELATION ENERGY",
        "mp2_correlation_energy": "MP2 CORRELATION ENERGY",
        "mp2_total_energy": "MP2 TOTAL ENERGY",
    }
    if open_shell:  # RHF files keep exactly the version-1 reference datasets
        names["mp2_singles_energy"] = "MP2 SINGLES ENERGY"
    have = psi4.core.variables()
    out = {}
    for key, var in names.items():
        if var not in have:
            raise RuntimeError("Psi4 did not set the variable %r" % var)
        out[key] = float(psi4.variable(var))
    return out


def semicanonical(np, C, F, nocc):
    """ROHF-MBPT(2)'s semicanonical orbitals of one spin: F (AO Fock matrix of that spin) diagonalised within the
    first nocc orbitals of C and within the rest, eigenvalues ascending in each block. Returns the orbitals [nbf,
    nmo] (occupied first), their energies [nmo], and each occupied orbital's singles term -sum_a f_ia^2/(e_a - e_i)
    [nocc]. Each orbital's sign is fixed (its largest coefficient positive) so that the file does not depend on the
    eigensolver's choice."""
    F = 0.5 * (F + F.T)
    blocks = []
    for Cb in (C[:, :nocc], C[:, nocc:]):
        e, U = np.linalg.eigh(Cb.T @ F @ Cb)
        Cs = Cb @ U
        if Cs.shape[1]:
            big = np.argmax(np.abs(Cs), axis=0)
            Cs = Cs * np.where(Cs[big, np.arange(Cs.shape[1])] < 0, -1.0, 1.0)
        blocks.append((Cs, e))
    (Co, eo), (Cv, ev) = blocks
    if eo.size and ev.size and eo.max() >= ev.min():
        raise RuntimeError("semicanonical orbital energies: highest occupied %.6f is not below lowest virtual %.6f"
                           % (eo.max(), ev.min()))
    f = Co.T @ F @ Cv
    singles = -np.sum(f ** 2 / (ev[None, :] - eo[:, None]), axis=1)
    return np.hstack([Co, Cv]), np.concatenate([eo, ev]), singles


def check_orbital_order(np, eps, nocc, what):
    """The format's order: occupied energies ascending and below every virtual one, virtuals ascending."""
    if np.any(np.diff(eps[:nocc]) < 0) or np.any(np.diff(eps[nocc:]) < 0):
        raise RuntimeError("%s orbital energies are not ascending within the occupied and the virtual orbitals" % what)
    if 0 < nocc < eps.size and eps[nocc - 1] >= eps[nocc]:
        raise RuntimeError("%s orbital energies: highest occupied %.6f is not below lowest virtual %.6f"
                           % (what, eps[nocc - 1], eps[nocc]))


def run_psi4(psi4, np, args, atoms, workdir):
    """Run SCF and both DF-MP2 references; return a dict with everything the file needs."""
    psi4.core.set_output_file(os.path.join(workdir, "psi4.out"), False)
    psi4.core.IOManager.shared_object().set_default_path(workdir)
    psi4.set_memory(args.memory)
    psi4.set_num_threads(args.threads)

    geom = "\n".join(["units angstrom", "symmetry c1", "no_reorient", "no_com",
                      "%d %d" % (args.charge, args.multiplicity)] + molecule_lines(atoms))
    mol = psi4.geometry(geom, name="dfmp2_export")
    mol.update_geometry()

    # 1. SCF (all-electron wavefunction: frzcpi = 0).
    set_common_options(psi4, args, freeze_core=False)
    e_scf, wfn = psi4.energy("scf", return_wfn=True)
    open_shell = args.reference != "rhf"
    if wfn.nirrep() != 1:
        raise RuntimeError("expected a C1 wavefunction")
    if not open_shell and wfn.soccpi().sum() != 0:
        raise RuntimeError("expected a closed-shell C1 wavefunction")
    if open_shell and int(wfn.nalpha()) - int(wfn.nbeta()) != args.multiplicity - 1:
        raise RuntimeError("expected nalpha - nbeta = %d, got nalpha %d nbeta %d"
                           % (args.multiplicity - 1, wfn.nalpha(), wfn.nbeta()))
    basis = wfn.basisset()
    nbf = basis.nbf()
    nmo = wfn.nmo()
    nocc = int(wfn.nalpha()) if open_shell else int(wfn.doccpi().sum())
    nocc_b = int(wfn.nbeta()) if open_shell else nocc
    if not 1 <= nocc < nmo:
        raise RuntimeError("need 1 <= nocc < nmo, got nocc=%d nmo=%d" % (nocc, nmo))
    C = np.array(wfn.Ca())  # [nbf, nmo]
    eps = np.array(wfn.epsilon_a())  # [nmo]
    if C.shape != (nbf, nmo) or eps.shape != (nmo,):
        raise RuntimeError("unexpected shapes: Ca %s, epsilon %s" % (C.shape, eps.shape))
    if np.any(np.diff(eps) < 0):
        raise RuntimeError("orbital energies are not in ascending order")
    e_nuc = float(mol.nuclear_repulsion_energy())
    C_scf = C  # the orbitals as the SCF left them (ROHF: DFMP2 semicanonicalises the wavefunction in place)
    Cb = eps_b = singles_a = singles_b = None
    if open_shell:
        Cb = np.array(wfn.Cb())
        eps_b = np.array(wfn.epsilon_b())
        if Cb.shape != (nbf, nmo) or eps_b.shape != (nmo,):
            raise RuntimeError("unexpected shapes: Cb %s, epsilon_b %s" % (Cb.shape, eps_b.shape))
    if args.reference == "uhf":
        check_orbital_order(np, eps, nocc, "alpha")
        check_orbital_order(np, eps_b, nocc_b, "beta")
    elif args.reference == "rohf":
        if np.abs(Cb - C).max() != 0.0:
            raise RuntimeError("ROHF wavefunction has different alpha and beta orbitals")
        # Psi4 1.3.2's ROHF keeps the AO spin Fock matrices H + J[Da+Db] - K[Da|Db] (its own J/K) in Fa/Fb;
        # make sure by recomputing the SCF energy from them.
        Fa, Fb = np.array(wfn.Fa()), np.array(wfn.Fb())
        if Fa.shape != (nbf, nbf) or Fb.shape != (nbf, nbf):
            raise RuntimeError("unexpected shapes: Fa %s, Fb %s" % (Fa.shape, Fb.shape))
        Da, Db = C[:, :nocc] @ C[:, :nocc].T, C[:, :nocc_b] @ C[:, :nocc_b].T
        mints_h = psi4.core.MintsHelper(basis)
        H = np.array(mints_h.ao_kinetic()) + np.array(mints_h.ao_potential())
        e_fock = e_nuc + 0.5 * (np.sum((Da + Db) * H) + np.sum(Da * Fa) + np.sum(Db * Fb))
        if abs(e_fock - e_scf) > FOCK_ENERGY_AGREEMENT:
            raise RuntimeError("ROHF Fa/Fb do not reproduce the SCF energy: %.12f vs %.12f" % (e_fock, e_scf))
        C, eps, singles_a = semicanonical(np, C_scf, Fa, nocc)
        Cb, eps_b, singles_b = semicanonical(np, C_scf, Fb, nocc_b)
        check_orbital_order(np, eps, nocc, "semicanonical alpha")
        check_orbital_order(np, eps_b, nocc_b, "semicanonical beta")

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
    refs = {nfrz_ae: mp2_variables(psi4, open_shell)}
    # The aux basis DFMP2 used must be ours.
    aux_used = wfn.get_basisset("DF_BASIS_MP2")
    if (aux_used.nbf() != naux or aux_used.nshell() != aux.nshell()
            or aux_used.has_puream() != aux.has_puream()):
        raise RuntimeError("aux basis mismatch: DFMP2 used nbf=%d nshell=%d puream=%s, exporter built "
                           "nbf=%d nshell=%d puream=%s" % (aux_used.nbf(), aux_used.nshell(),
                                                           aux_used.has_puream(), naux, aux.nshell(),
                                                           aux.has_puream()))
    if args.reference == "rohf":
        # DFMP2 semicanonicalised the wavefunction: its orbital energies must be ours.
        for what, ours, theirs in (("alpha", eps, wfn.epsilon_a()), ("beta", eps_b, wfn.epsilon_b())):
            diff = float(np.abs(np.array(theirs) - ours).max())
            if diff > SEMICANONICAL_AGREEMENT:
                raise RuntimeError("semicanonical %s orbital energies differ from Psi4's by %.3e" % (what, diff))
    else:
        if np.abs(np.array(wfn.Ca()) - C).max() != 0.0:
            raise RuntimeError("DFMP2 changed the SCF orbitals")
        if open_shell and np.abs(np.array(wfn.Cb()) - Cb).max() != 0.0:
            raise RuntimeError("DFMP2 changed the SCF beta orbitals")

    # 4. Psi4's DF-MP2 with frozen core. The number of frozen orbitals is fixed when a wavefunction is
    # built, so this needs a fresh SCF; it must reproduce the first one.
    psi4.core.clean()
    set_common_options(psi4, args, freeze_core=True)
    e_mp2_fc, wfn_fc = psi4.energy("mp2", return_wfn=True)
    e_scf_fc = float(psi4.variable("SCF TOTAL ENERGY"))
    if abs(e_scf_fc - e_scf) > SCF_AGREEMENT:
        raise RuntimeError("second SCF energy %.12f differs from the first %.12f by %.3e > %.0e"
                           % (e_scf_fc, e_scf, e_scf_fc - e_scf, SCF_AGREEMENT))
    eps_fc = np.array(wfn_fc.epsilon_a())  # ROHF: semicanonical, as DFMP2 left the wavefunction
    max_eps_diff_fc = float(np.abs(eps_fc - eps).max())
    if open_shell:
        max_eps_diff_fc = max(max_eps_diff_fc, float(np.abs(np.array(wfn_fc.epsilon_b()) - eps_b).max()))
    nfrz_fc = int(wfn_fc.frzcpi().sum())
    fc_vals = mp2_variables(psi4, open_shell)
    if nfrz_fc in refs:
        # no core to freeze: both runs are the same calculation
        diff = abs(fc_vals["mp2_correlation_energy"] - refs[nfrz_fc]["mp2_correlation_energy"])
        if diff > SCF_AGREEMENT:
            raise RuntimeError("two MP2 runs with %d frozen orbitals differ by %.3e" % (nfrz_fc, diff))
    else:
        refs[nfrz_fc] = fc_vals
    psi4.core.clean()

    singles_diff = {}
    if args.reference == "rohf":
        # Psi4's singles energy with n frozen orbitals is the sum of the active orbitals' terms.
        for n, vals in refs.items():
            ours = float(np.sum(singles_a[n:]) + np.sum(singles_b[n:]))
            singles_diff[n] = ours - vals["mp2_singles_energy"]
            if abs(singles_diff[n]) > SINGLES_AGREEMENT:
                raise RuntimeError("ROHF singles terms from orbital %d on sum to %.12f, Psi4's MP2 SINGLES ENERGY is "
                                   "%.12f (difference %.3e > %.0e)" % (n, ours, vals["mp2_singles_energy"],
                                                                       singles_diff[n], SINGLES_AGREEMENT))

    return {
        "nbf": nbf, "nmo": nmo, "nocc": nocc, "naux": naux, "C": C, "eps": eps, "Pmn": Pmn, "J": J,
        "e_scf": float(e_scf), "e_nuc": e_nuc, "refs": refs, "puream": bool(basis.has_puream()),
        "aux_puream": bool(aux.has_puream()), "e_scf_fc": e_scf_fc,
        "max_eps_diff_fc": max_eps_diff_fc,
        "nocc_beta": nocc_b, "C_beta": Cb, "eps_beta": eps_b, "singles_alpha": singles_a,
        "singles_beta": singles_b, "singles_diff": singles_diff,
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
            open_shell = args.reference != "rhf"
            # RHF files stay version 1 (no `reference` attribute) so that older readers keep reading them.
            f.attrs["dfmp2_format_version"] = np.int64(2 if open_shell else 1)
            f.attrs["form"] = np.bytes_(args.form)
            if open_shell:
                f.attrs["reference"] = np.bytes_(args.reference)
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
            if open_shell:  # the beta orbitals (format version 2, "Open shells"); AO form only
                put(f, "nocc_beta", np.int64(res["nocc_beta"]), dtype="i8")
                put(f, "mo_coefficients_beta", res["C_beta"], chunks=(min(nbf, chunk_rows(nmo)), nmo))
                put(f, "orbital_energies_beta", res["eps_beta"], chunks=(min(nmo, chunk_rows(1)),))
                if args.reference == "rohf":
                    put(f, "singles_alpha", res["singles_alpha"], chunks=(max(1, min(nocc, chunk_rows(1))),))
                    put(f, "singles_beta", res["singles_beta"],
                        chunks=(max(1, min(res["nocc_beta"], chunk_rows(1))),))
            put(f, "scf_energy", np.float64(res["e_scf"]))
            put(f, "nuclear_repulsion_energy", np.float64(res["e_nuc"]))
            md = f.create_group("metadata")
            md.attrs["molecule"] = np.bytes_("\n".join(molecule_lines(atoms)))
            md.attrs["charge"] = np.int64(args.charge)
            if open_shell:
                md.attrs["multiplicity"] = np.int64(args.multiplicity)
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
                g.attrs["program"] = np.bytes_("psi4 1.3.2 dfmp2 (%smp2_type df, scf_type %s, df_basis_mp2 %s)" % (
                    "reference %s, " % args.reference if open_shell else "", args.scf_type, args.aux_basis.lower()))
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def one_line(msg):
    return " ".join(str(msg).split())


def check_electrons(atoms, args, parser):
    import qcelemental  # ships with (and is required by) Psi4 1.3.2
    charge, mult = args.charge, args.multiplicity
    nelec = -charge
    for sym, _ in atoms:
        try:
            nelec += qcelemental.periodictable.to_Z(sym)
        except Exception:
            parser.error("unknown element symbol %r" % sym)
    if nelec <= 0:
        parser.error("need a positive number of electrons; got %d (charge %d)" % (nelec, charge))
    if mult == 1 and nelec % 2:
        parser.error("an odd number of electrons (%d, charge %d) cannot have multiplicity 1; give --multiplicity 2 "
                     "(or another even multiplicity) for an open-shell reference" % (nelec, charge))
    if mult - 1 > nelec:
        parser.error("multiplicity %d needs %d unpaired electrons but there are only %d (charge %d)"
                     % (mult, mult - 1, nelec, charge))
    if (nelec - (mult - 1)) % 2:
        parser.error("charge %d and multiplicity %d are impossible together: %d electrons need %s multiplicity"
                     % (charge, mult, nelec, "an even" if nelec % 2 else "an odd"))
    if nelec == mult - 1:
        parser.error("multiplicity %d leaves no beta electron (%d electrons, charge %d): Psi4 1.3.2's DF-MP2, whose "
                     "energies the file records, needs at least one" % (mult, nelec, charge))


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
    check_electrons(atoms, args, parser)
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

    print("wrote %s (form %s, reference %s, format version %d, %d bytes)"
          % (out, args.form, args.reference, 1 if args.reference == "rhf" else 2, os.path.getsize(out)))
    print("  basis %s (puream %s), aux basis %s (puream %s), scf_type %s"
          % (args.basis.lower(), res["puream"], args.aux_basis.lower(), res["aux_puream"], args.scf_type))
    if args.reference == "rhf":
        print("  nbf %d  nmo %d  nocc %d  nvir %d  naux %d"
              % (res["nbf"], res["nmo"], res["nocc"], res["nmo"] - res["nocc"], res["naux"]))
    else:
        print("  nbf %d  nmo %d  multiplicity %d  nocc alpha %d beta %d  naux %d"
              % (res["nbf"], res["nmo"], args.multiplicity, res["nocc"], res["nocc_beta"], res["naux"]))
    print("  E(SCF) %.12f  E(nuc) %.12f  (frozen-core rerun SCF differs by %.1e, max |d eps| %.1e)"
          % (res["e_scf"], res["e_nuc"], res["e_scf_fc"] - res["e_scf"], res["max_eps_diff_fc"]))
    for n in sorted(res["refs"]):
        r = res["refs"][n]
        print("  psi4 DF-MP2 frozen_core_%d: OS %.12f  SS %.12f  corr %.12f  total %.12f"
              % (n, r["mp2_opposite_spin_correlation_energy"], r["mp2_same_spin_correlation_energy"],
                 r["mp2_correlation_energy"], r["mp2_total_energy"]))
        if "mp2_singles_energy" in r:
            print("  psi4 DF-MP2 frozen_core_%d: singles %.15f%s" % (
                n, r["mp2_singles_energy"], "  (semicanonical singles terms sum to it within %.1e)"
                % abs(res["singles_diff"][n]) if n in res["singles_diff"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
