"""Damaged integral files, made from the committed water fixture (tests/bad_inputs/README.md).

structural_cases(): one case per kind of damage a file can carry (missing or misshapen datasets, wrong types,
NaN/Inf, absurd magnitudes, declared sizes with no data behind them, links out of the file, truncation, bad
attributes, the MO form), each with the exit code and the fragment of the one-line message dfmp2 must give.
byte_flip_cases(): one byte flipped at offsets spread over every region of three checksummed files (the Psi4
exporter's AO fixture, an MO-form file, and a file dfmp2 itself saved): each must be refused (exit 3) or, where
the byte is one HDF5 never reads, give exactly the energies of the undamaged file.
"""
import copy
import importlib.util
import os
import subprocess
import tempfile

import h5py
import numpy as np

FIXTURE = "inputs/water-cc-pvdz.h5"


def exporter(repo):
    spec = importlib.util.spec_from_file_location("export_psi4", os.path.join(repo, "scripts", "export_psi4.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_spec(path):
    """The file as plain data: root attributes, datasets by path, group attributes by path."""
    spec = {"attrs": {}, "data": {}, "groups": {}}
    with h5py.File(path, "r") as f:
        spec["attrs"] = dict(f.attrs)

        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                spec["data"][name] = obj[()]
            else:
                spec["groups"][name] = dict(obj.attrs)
        f.visititems(visit)
    return spec


def write_spec(repo, spec, path, checksums=True):
    """Writes `spec` as the exporter writes files (checksums=True), or as an older writer did (HDF5's earliest file
    format, contiguous datasets, variable-length strings: nothing checksummed)."""
    ex = exporter(repo)
    with h5py.File(path, "w", libver=("v110", "v110") if checksums else "earliest") as f:
        def attrs(obj, values):
            for k, v in values.items():
                if checksums and isinstance(v, (bytes, np.bytes_)):
                    obj.attrs[k] = np.bytes_(v)
                elif not checksums and isinstance(v, (bytes, np.bytes_)):
                    obj.attrs[k] = bytes(v).decode()
                else:
                    obj.attrs[k] = v
        attrs(f, spec["attrs"])
        for g, values in spec["groups"].items():
            attrs(f.require_group(g), values)
        for name, data in spec["data"].items():
            parent, _, leaf = name.rpartition("/")
            group = f.require_group(parent) if parent else f
            data = np.asarray(data)
            if checksums and data.dtype.kind in "fi" and data.dtype.itemsize == 8:
                chunks = None if data.ndim == 0 else tuple(min(n, 64) if i == 0 else n for i, n in enumerate(data.shape))
                ex.create_dataset(h5py, np, group, leaf, data, data.dtype, chunks=chunks)
            elif checksums and data.ndim > 0:  # another element type, checksummed as well
                group.create_dataset(leaf, data=data, chunks=True, fletcher32=True)
            else:
                group.create_dataset(leaf, data=data)


def to_mo_form(spec):
    """The MO-form file of the same molecule: (P|ia) from (P|mn) and the orbitals."""
    mo = copy.deepcopy(spec)
    c = mo["data"].pop("mo_coefficients")
    pmn = mo["data"].pop("ao_3index")
    nocc = int(mo["data"]["nocc"])
    mo["data"]["mo_3index"] = np.einsum("Pmn,mi,na->Pia", pmn, c[:, :nocc], c[:, nocc:], optimize=True)
    mo["attrs"]["form"] = np.bytes_("mo")
    return mo


class Maker:
    """Builds the bytes of one damaged file: `spec_edit` changes the plain data before writing, `file_edit` the
    written HDF5 file (through h5py), `byte_edit` its bytes."""

    def __init__(self, repo, work):
        self.repo, self.work = repo, work
        self.base = read_spec(os.path.join(repo, FIXTURE))
        self.count = 0

    def make(self, spec_edit=None, file_edit=None, byte_edit=None, checksums=True, base=None):
        spec = copy.deepcopy(base if base is not None else self.base)
        if spec_edit:
            spec_edit(spec)
        self.count += 1
        path = os.path.join(self.work, "gen%d.h5" % self.count)
        write_spec(self.repo, spec, path, checksums)
        if file_edit:
            with h5py.File(path, "r+") as f:
                file_edit(f)
        with open(path, "rb") as fh:
            data = fh.read()
        os.unlink(path)
        return byte_edit(data) if byte_edit else data


def set_data(name, value):
    def edit(spec):
        spec["data"][name] = value(spec["data"][name]) if callable(value) else value
    return edit


def drop(name):
    def edit(spec):
        del spec["data"][name]
    return edit


def set_attr(name, value, group=None):
    def edit(spec):
        (spec["groups"][group] if group else spec["attrs"])[name] = value
    return edit


def element(name, index, value):
    def edit(spec):
        a = np.array(spec["data"][name], dtype=float)
        a[index] = value
        spec["data"][name] = a
    return edit


def replace_dataset(name, make):
    """file_edit: deletes dataset `name` and lets `make(f, name)` create something else in its place."""
    def edit(f):
        del f[name]
        make(f, name)
    return edit


def not_positive_definite(spec):
    j = np.array(spec["data"]["metric"])
    w, v = np.linalg.eigh(j)
    j = j - 2 * w[0] * np.outer(v[:, 0], v[:, 0])  # the smallest eigenvalue becomes -w[0]
    spec["data"]["metric"] = (j + j.T) / 2


def swap_homo_lumo(spec):
    e = np.array(spec["data"]["orbital_energies"])
    n = int(spec["data"]["nocc"])
    e[n - 1], e[n] = e[n] + 1.0, e[n - 1]
    spec["data"]["orbital_energies"] = e


def open_shell(spec, reference):
    """A valid version-2 file of `reference` (uhf or rohf) from a closed-shell spec: its orbitals as both spins, one
    beta electron fewer (the numbers are not a real radical's; the reader only checks the form)."""
    out = copy.deepcopy(spec)
    out["attrs"]["dfmp2_format_version"] = np.int64(2)
    out["attrs"]["reference"] = np.bytes_(reference)
    nocc = int(out["data"]["nocc"])
    out["data"]["nocc_beta"] = np.int64(nocc - 1)
    out["data"]["orbital_energies_beta"] = np.array(out["data"]["orbital_energies"])
    out["data"]["mo_coefficients_beta"] = np.array(out["data"]["mo_coefficients"])
    if reference == "rohf":
        out["data"]["singles_alpha"] = np.full(nocc, -1e-4)
        out["data"]["singles_beta"] = np.full(nocc - 1, -1e-4)
    return out


def mo_base_v2(spec):
    out = copy.deepcopy(spec)
    out["attrs"]["dfmp2_format_version"] = np.int64(2)
    return out


def structural_cases(Case, repo, work):
    m = Maker(repo, work)
    mo_base = to_mo_form(m.base)
    cases = []

    def case(name, exit_code, message, data, body="integrals: f.h5\n"):
        c = Case("integral_files", name)
        c.exit, c.message, c.body, c.files = exit_code, message, body, {"f.h5": data}
        cases.append(c)

    whole = m.make()
    # The container.
    case("not_hdf5", 3, "f.h5: not an HDF5 file", b"integrals: this is YAML, not HDF5\n")
    case("empty_file", 3, "f.h5: not an HDF5 file", b"")
    for fraction in (0.02, 0.1, 0.5, 0.9):
        case("truncated_to_%d_percent" % int(fraction * 100), 3, "f.h5", whole[:int(len(whole) * fraction)])
    case("truncated_by_one_byte", 3, "f.h5", whole[:-1])
    case("zero_filled_tail", 3, "f.h5", whole[:len(whole) // 2] + bytes(len(whole) - len(whole) // 2))
    # Root attributes.
    case("format_attribute_missing", 3, "root attribute 'dfmp2_format' is missing", m.make(
        file_edit=lambda f: f.attrs.__delitem__("dfmp2_format")))
    case("format_attribute_other", 3, "root attribute 'dfmp2_format' is missing or not 'dfmp2-integrals'",
         m.make(set_attr("dfmp2_format", np.bytes_("psi4-wavefunction"))))
    case("format_version_3", 3, "format version 3 is not supported (this dfmp2 reads versions 1 and 2)", m.make(
        set_attr("dfmp2_format_version", np.int64(3))))
    case("format_version_string", 3, "attribute 'dfmp2_format_version' of '/' must be an integer", m.make(
        set_attr("dfmp2_format_version", np.bytes_("1"))))
    case("form_unknown", 3, "root attribute 'form' must be 'ao' or 'mo'", m.make(set_attr("form", np.bytes_("ri"))))
    case("form_array", 3, "attribute 'form' of '/' must hold one value", m.make(
        set_attr("form", np.array([b"ao", b"mo"]))))
    case("version_array", 3, "attribute 'dfmp2_format_version' of '/' must hold one value", m.make(
        set_attr("dfmp2_format_version", np.array([1, 1], dtype=np.int64))))
    # Required datasets: missing, misshapen, mistyped, not datasets at all.
    for name in ("orbital_energies", "nocc", "metric", "mo_coefficients", "ao_3index"):
        case("missing_" + name, 3, "dataset '%s' is missing" % name, m.make(drop(name)))
    case("orbital_energies_2d", 3, "dataset 'orbital_energies' has rank 2", m.make(
        set_data("orbital_energies", lambda e: e.reshape(4, 6))))
    case("metric_not_square", 3, "dataset 'metric' has shape [84, 83], expected [84, 84]", m.make(
        set_data("metric", lambda j: j[:, :83])))
    case("mo_coefficients_short", 3, "dataset 'mo_coefficients' has shape [24, 23], expected [24, 24]", m.make(
        set_data("mo_coefficients", lambda c: c[:, :23])))
    case("ao_3index_wrong_nbf", 3, "dataset 'ao_3index' has shape [84, 24, 23], expected [84, 24, 24]", m.make(
        set_data("ao_3index", lambda a: a[:, :, :23])))
    case("more_mos_than_aos", 3, "dataset 'mo_coefficients' has more MOs (25) than AOs (24)", m.make(
        lambda s: (set_data("orbital_energies", lambda e: np.append(e, 5.0))(s),
                   set_data("mo_coefficients", lambda c: np.hstack([c, c[:, -1:]]))(s))))
    # Orbital energies that parse but describe no SCF solution: frozen core would freeze the wrong orbital, and
    # denominators e_i + e_j - e_a - e_b of either sign would give a wrong energy without a word.
    def swap(i, j):
        def edit(e):
            e = e.copy()
            e[[i, j]] = e[[j, i]]
            return e
        return edit
    case("occupied_energies_not_ascending", 3, "dataset 'orbital_energies': the occupied energies must ascend "
         "(frozen core freezes the lowest), and element 1", m.make(set_data("orbital_energies", swap(0, 2))),
         body="integrals: f.h5\nfrozen_core: 1\n")
    case("occupied_energies_not_ascending_all_electrons", 3, "the occupied energies must ascend",
         m.make(set_data("orbital_energies", swap(3, 4))))
    case("virtual_equal_to_homo", 3, "is not above occupied element 4", m.make(
        set_data("orbital_energies", lambda e: np.concatenate([e[:5], [e[4]], e[6:]]))))
    case("mo_form_virtual_below_occupied", 3, "virtual element 9", m.make(
        set_data("orbital_energies", lambda e: np.concatenate([e[:9], [-30.0], e[10:]])), base=mo_base))
    case("metric_float32", 3, "dataset 'metric' must hold float64 values", m.make(
        set_data("metric", lambda j: j.astype(np.float32))))
    case("orbital_energies_integer", 3, "dataset 'orbital_energies' must hold float64 values", m.make(
        set_data("orbital_energies", lambda e: e.astype(np.int64))))
    case("nocc_float", 3, "dataset 'nocc' must hold an integer", m.make(set_data("nocc", np.float64(5))))
    case("nocc_string", 3, "dataset 'nocc' must hold an integer", m.make(set_data("nocc", np.bytes_("5"))))
    case("nocc_zero", 3, "dataset 'nocc' is 0, expected 1 <= nocc < nmo = 24", m.make(set_data("nocc", np.int64(0))))
    case("nocc_all", 3, "dataset 'nocc' is 24, expected 1 <= nocc < nmo = 24", m.make(set_data("nocc", np.int64(24))))
    case("nocc_negative", 3, "dataset 'nocc' is -3", m.make(set_data("nocc", np.int64(-3))))
    case("nocc_huge", 3, "dataset 'nocc' is 4611686018427387904", m.make(set_data("nocc", np.int64(2 ** 62))))
    case("nocc_array", 3, "dataset 'nocc' must be a scalar", m.make(set_data("nocc", np.array([5, 5], np.int64))))
    case("scf_energy_array", 3, "dataset 'scf_energy' must be a scalar", m.make(
        set_data("scf_energy", np.array([-76.0, -76.0]))))
    case("metric_is_group", 3, "'metric' is not a readable dataset", m.make(
        file_edit=replace_dataset("metric", lambda f, n: f.create_group(n))))
    # Non-finite values, in every dataset that holds numbers.
    case("orbital_energies_nan", 3, "dataset 'orbital_energies' holds a non-finite value (element 7)", m.make(
        element("orbital_energies", 7, np.nan)))
    case("metric_inf", 3, "dataset 'metric' holds a non-finite value", m.make(element("metric", (3, 4), np.inf)))
    case("mo_coefficients_nan", 3, "dataset 'mo_coefficients' holds a non-finite value", m.make(
        element("mo_coefficients", (2, 2), np.nan)))
    case("ao_3index_nan", 3, "dataset 'ao_3index' holds a non-finite value", m.make(
        element("ao_3index", (80, 3, 4), np.nan)))
    case("scf_energy_inf", 3, "dataset 'scf_energy' holds a non-finite value", m.make(
        set_data("scf_energy", np.float64(-np.inf))))
    # Absurd magnitudes: the bounds physics puts on each quantity (docs/integral-file-format.md, "Integrity").
    case("ao_3index_times_1e200", 3, "beyond the Cauchy-Schwarz bound", m.make(
        set_data("ao_3index", lambda a: a * 1e200)))
    case("ao_3index_times_1e4", 3, "beyond the Cauchy-Schwarz bound", m.make(set_data("ao_3index", lambda a: a * 1e4)))
    case("ao_3index_one_huge_element", 3, "dataset 'ao_3index': element", m.make(
        element("ao_3index", (40, 5, 6), 1e30)))
    case("metric_times_1e300", 3, "dataset 'metric': diagonal element (0, 0) is", m.make(
        set_data("metric", lambda j: j * 1e300)))
    case("metric_times_1e-300", 3, "beyond the Cauchy-Schwarz bound", m.make(set_data("metric", lambda j: j * 1e-300)))
    case("metric_negative_diagonal", 3, "dataset 'metric': diagonal element (5, 5) is", m.make(
        element("metric", (5, 5), -1.0)))
    case("metric_not_symmetric", 3, "dataset 'metric' is not symmetric", m.make(
        lambda s: element("metric", (10, 3), s["data"]["metric"][10, 3] + 1e-3 * s["data"]["metric"][3, 3])(s)))
    case("metric_beyond_cauchy_schwarz", 3, "exceeds sqrt((P|P)(Q|Q)) = ", m.make(
        lambda s: (element("metric", (10, 3), 1e3)(s), element("metric", (3, 10), 1e3)(s))))
    case("metric_not_positive_definite", 5, "metric (P|Q), cholesky", m.make(not_positive_definite))
    case("orbital_energy_absurd", 3, "dataset 'orbital_energies': element 20 is 1e+300 Eh", m.make(
        element("orbital_energies", 20, 1e300)))
    case("homo_above_lumo", 3, "dataset 'orbital_energies': virtual element 5 (-0.4932428427 Eh) is not above occupied "
         "element 4", m.make(swap_homo_lumo))
    case("mo_coefficient_absurd", 3, "dataset 'mo_coefficients': element [3, 4] is 1e+300", m.make(
        element("mo_coefficients", (3, 4), 1e300)))
    # Declared sizes with nothing (or not everything) behind them: HDF5 would read zeros.
    case("orbital_energies_declares_2_to_60", 3, "dataset 'orbital_energies' declares shape [1152921504606846976]",
         m.make(file_edit=replace_dataset("orbital_energies", lambda f, n: f.create_dataset(
             n, shape=(2 ** 60,), dtype="f8", chunks=(1024,)))))
    case("orbital_energies_never_written", 3, "dataset 'orbital_energies' has data for 0 of its 1 chunks", m.make(
        file_edit=replace_dataset("orbital_energies", lambda f, n: f.create_dataset(
            n, shape=(24,), dtype="f8", chunks=(24,)))))
    case("ao_3index_partly_written", 3, "dataset 'ao_3index' has data for 1 of its 2 chunks", m.make(
        file_edit=replace_dataset("ao_3index", lambda f, n: f.create_dataset(
            n, shape=(84, 24, 24), dtype="f8", chunks=(64, 24, 24)).__setitem__(slice(0, 10), 0.001))))

    def contiguous_unwritten(f, n):
        space = h5py.h5s.create_simple((84, 84))
        props = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        props.set_alloc_time(h5py.h5d.ALLOC_TIME_LATE)
        h5py.h5d.create(f.id, n.encode(), h5py.h5t.IEEE_F64LE, space, dcpl=props)
    case("metric_contiguous_unwritten", 3, "dataset 'metric' holds 0 bytes of data", m.make(
        file_edit=replace_dataset("metric", contiguous_unwritten)))
    # Data that would come from outside the file (a FIFO or a device there would hang the run).
    case("metric_external_link", 3, "'metric' is a link to", m.make(
        file_edit=replace_dataset("metric", lambda f, n: f.__setitem__(n, h5py.ExternalLink("/dev/zero", "/x")))))
    case("metric_soft_link", 3, "'metric' is a link to", m.make(
        file_edit=lambda f: (f.move("metric", "metric_real"), f.__setitem__("metric", h5py.SoftLink("/metric_real")))))

    def external_storage(f, n="metric"):
        data = f[n][()]
        del f[n]
        f.create_dataset(n, data=data, external=[("/dev/zero", 0, h5py.h5f.UNLIMITED)])
    case("metric_external_storage", 3, "dataset 'metric' keeps its data outside the file", m.make(
        file_edit=external_storage))

    def virtual(f, n="metric"):
        layout = h5py.VirtualLayout(shape=(84, 84), dtype="f8")
        layout[:] = h5py.VirtualSource("/dev/zero", "x", shape=(84, 84))
        del f[n]
        f.create_virtual_dataset(n, layout)
    case("metric_virtual_dataset", 3, "dataset 'metric' keeps its data outside the file", m.make(file_edit=virtual))
    # Optional groups and attributes.
    case("molecule_unknown_element", 3, "metadata attribute 'molecule': line 1: 'Xx' is not an element symbol",
         m.make(set_attr("molecule", np.bytes_("Xx 0 0 0\nH 0 0 1"), "metadata")))
    case("molecule_coincident_atoms", 3, "metadata attribute 'molecule': atoms 2 (H) and 3 (H) are 0 angstrom apart",
         m.make(set_attr("molecule", np.bytes_("O 0 0 0\nH 0 0 1\nH 0 0 1"), "metadata")))
    case("molecule_charge_array", 3, "attribute 'charge' of 'metadata' must hold one value", m.make(
        set_attr("charge", np.array([0, 0], np.int64), "metadata")))
    case("molecule_charge_absurd", 3, "metadata attribute 'charge' is 1000000000", m.make(
        set_attr("charge", np.int64(10 ** 9), "metadata")))
    case("reference_group_misnamed", 3, "group 'reference/frozen_core_x': expected frozen_core_<count>", m.make(
        file_edit=lambda f: f.move("reference/frozen_core_0", "reference/frozen_core_x")))
    case("reference_energy_missing", 3,
         "dataset 'reference/frozen_core_0/mp2_same_spin_correlation_energy' is missing",
         m.make(drop("reference/frozen_core_0/mp2_same_spin_correlation_energy")))
    # The MO form.
    case("mo_form_missing_3index", 3, "dataset 'mo_3index' is missing", m.make(drop("mo_3index"), base=mo_base))
    case("mo_form_3index_wrong_shape", 3, "dataset 'mo_3index' has shape [84, 5, 18], expected [84, 5, 19]",
         m.make(set_data("mo_3index", lambda a: a[:, :, :18]), base=mo_base))
    case("mo_form_3index_times_1e200", 3, "beyond the Cauchy-Schwarz bound", m.make(
        set_data("mo_3index", lambda a: a * 1e200), base=mo_base))
    case("mo_form_screening", 2, "key 'screening': screens AO integrals (P|mn)", m.make(base=mo_base),
         body="integrals: f.h5\nscreening: true\n")
    case("mo_form_orbital_energies_2_to_60", 3, "dataset 'orbital_energies' declares shape", m.make(
        file_edit=replace_dataset("orbital_energies", lambda f, n: f.create_dataset(
            n, shape=(2 ** 60,), dtype="f8", chunks=(1024,))), base=mo_base))
    # Open shells (format version 2): the fixture's orbitals as both spins of a UHF with one beta electron fewer.
    uhf = open_shell(m.base, "uhf")
    rohf = open_shell(m.base, "rohf")
    case("reference_in_version_1", 3, "root attribute 'reference' is a format version 2 attribute, and the file is "
         "version 1", m.make(set_attr("dfmp2_format_version", np.int64(1)), base=uhf))
    case("reference_unknown", 3, "root attribute 'reference' is 'ghf', expected rhf, uhf or rohf", m.make(
        set_attr("reference", np.bytes_("ghf")), base=uhf))
    case("open_shell_mo_form", 3, "an open shell needs form 'ao'", m.make(
        set_attr("reference", np.bytes_("uhf")), base=mo_base_v2(mo_base)))
    for name in ("nocc_beta", "orbital_energies_beta", "mo_coefficients_beta"):
        case("uhf_missing_" + name, 3, "dataset '%s' is missing" % name, m.make(drop(name), base=uhf))
    case("uhf_nocc_beta_above_nocc", 3, "dataset 'nocc_beta' is 6, expected 0 <= nocc_beta <= nocc = 5", m.make(
        set_data("nocc_beta", np.int64(6)), base=uhf))
    case("uhf_beta_energies_short", 3, "dataset 'orbital_energies_beta' has shape [23], expected [24]", m.make(
        set_data("orbital_energies_beta", lambda e: e[:23]), base=uhf))
    case("uhf_beta_energies_unordered", 3, "dataset 'orbital_energies_beta': the occupied energies must ascend",
         m.make(set_data("orbital_energies_beta", lambda e: np.concatenate([e[:2][::-1], e[2:]])), base=uhf))
    case("uhf_beta_coefficients_nan", 3, "dataset 'mo_coefficients_beta' holds a non-finite value", m.make(
        element("mo_coefficients_beta", (0, 0), np.nan), base=uhf))
    case("uhf_multiplicity_mismatch", 3, "metadata attribute 'multiplicity' is 3, and the file's orbitals have 5 "
         "alpha and 4 beta electrons (multiplicity 2)", m.make(set_attr("multiplicity", np.int64(3), "metadata"),
                                                               base=uhf))
    # An open shell's datasets without the reference that says so: read as RHF they would double-occupy the alpha
    # orbitals (one electron too many); a closed-shell file cannot be a triplet.
    case("uhf_reference_attribute_missing", 3, "dataset 'nocc_beta' belongs to an open shell, and the file's reference "
         "is rhf (root attribute 'reference' missing)", m.make(file_edit=lambda f: f.attrs.__delitem__("reference"),
                                                              base=uhf))
    case("uhf_reference_rhf", 3, "dataset 'nocc_beta' belongs to an open shell, and the file's reference is rhf "
         "(root attribute 'reference' rhf)", m.make(set_attr("reference", np.bytes_("rhf")), base=uhf))
    case("rhf_with_beta_orbitals_only", 3, "dataset 'mo_coefficients_beta' belongs to an open shell", m.make(
        file_edit=lambda f: (f.attrs.__delitem__("reference"), f.__delitem__("nocc_beta")), base=uhf))
    case("rhf_with_singles", 3, "dataset 'singles_alpha' belongs to an open shell", m.make(
        file_edit=lambda f: f.create_dataset("singles_alpha", data=np.full(5, -1e-4))))
    case("rhf_multiplicity_3", 3, "metadata attribute 'multiplicity' is 3, and the file holds a closed-shell (rhf) "
         "reference, a singlet", m.make(set_attr("multiplicity", np.int64(3), "metadata")))
    for name in ("singles_alpha", "singles_beta"):
        case("rohf_missing_" + name, 3, "dataset '%s' is missing" % name, m.make(drop(name), base=rohf))
    case("rohf_singles_positive", 3, "dataset 'singles_alpha': element 0 is 0.1 Eh; a singles term is never positive",
         m.make(element("singles_alpha", 0, 0.1), base=rohf))
    # Older writers: files without checksums are read (with a note), but gross damage is still caught.
    case("old_format_metric_times_1e300", 3, "dataset 'metric': diagonal element", m.make(
        set_data("metric", lambda j: j * 1e300), checksums=False))
    case("old_format_ao_3index_times_1e200", 3, "beyond the Cauchy-Schwarz bound", m.make(
        set_data("ao_3index", lambda a: a * 1e200), checksums=False))
    return cases


def data_regions(path):
    """(offset, size) of the stored data of every chunked or contiguous dataset in the file."""
    regions = []
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if not isinstance(obj, h5py.Dataset):
                return
            layout = obj.id.get_create_plist().get_layout()
            if layout == h5py.h5d.CHUNKED:
                count = obj.id.get_num_chunks()
                # Every chunk of small datasets; 16 spread over the others (dfmp2 writes one chunk per function).
                picks = range(count) if count <= 16 else sorted({int(k * (count - 1) / 15) for k in range(16)})
                for i in picks:
                    info = obj.id.get_chunk_info(i)
                    regions.append((name, info.byte_offset, info.size))
            elif layout == h5py.h5d.CONTIGUOUS and obj.id.get_offset() is not None:
                regions.append((name, obj.id.get_offset(), obj.id.get_storage_size()))
        f.visititems(visit)
    return regions


def byte_flip_cases(Case, repo, work, dfmp2, evenly=70):
    m = Maker(repo, work)
    sources = {"exporter_ao": open(os.path.join(repo, FIXTURE), "rb").read(),
               "mo_form": m.make(base=to_mo_form(m.base))}
    # A file dfmp2 saved itself after its own SCF (water, sto-3g with the def2-svp-jkfit / def2-qzvpp-ri sets).
    folder = tempfile.mkdtemp(dir=work)
    with open(os.path.join(folder, "w.yaml"), "w") as f:
        f.write('molecule: {xyz: "O 0 0 0.1178\\nH 0 0.7555 -0.4712\\nH 0 -0.7555 -0.4712"}\nbasis: sto-3g\n'
                'save_integrals: w.h5\nthreads: 1\n')
    subprocess.run([dfmp2, "w.yaml"], cwd=folder, check=True, capture_output=True)
    sources["dfmp2_saved"] = open(os.path.join(folder, "w.h5"), "rb").read()

    cases = []
    for label, data in sources.items():
        path = os.path.join(work, label + ".h5")
        with open(path, "wb") as f:
            f.write(data)
        offsets = {int(k * len(data) / evenly) for k in range(evenly)}
        for name, start, size in data_regions(path):  # the first, middle and last byte of every data region
            offsets |= {start, start + size // 2, start + size - 1}
        for offset in sorted(offsets):
            damaged = bytearray(data)
            damaged[offset] ^= 0x5a
            c = Case("integral_bytes", "%s_byte_%d" % (label, offset))
            c.exit, c.message, c.body = 3, "f.h5", "integrals: f.h5\nthreads: 1\n"
            c.files = {"f.h5": bytes(damaged)}
            c.args = ["{input}"]
            c.unchanged_ok = data  # a byte HDF5 never reads may change nothing: then the energies must not move
            cases.append(c)
    return cases
