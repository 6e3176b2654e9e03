#!/usr/bin/python3
"""Live Psi4 tier, basis-set extrapolation (issue 47): dfmp2's `basis: cc-pv[dt]z` and key `cbs` against Psi4 1.3.2's
cbs() run live, DF-SCF and DF-MP2 (each basis with its own default fitting sets, as both programs choose them):

- the MP2 parts of Psi4's cbs-xtpl-energy, cbs-xtpl-wrapper and cbs-xtpl-alpha samples on their water:
  energy('mp2/aug-cc-pv[dt]z') (the SCF of the largest basis, corl_xtpl_helgaker_2), the SCF by
  scf_xtpl_helgaker_2 with corl_alpha 3.1, def2-[st]zvpd by both two-point schemes, the SCF's three-point
  scf_xtpl_helgaker_3 over cc-pv[dtq]z with the correlation from cc-pv[tq]z, and the truhlar and karton SCF schemes:
  CBS TOTAL, REFERENCE and CORRELATION ENERGY within 1e-7 Eh;
- energy('mp2/aug-cc-pv[dt]z', bsse_type='cp') on two S22 complexes (the ammonia and the water dimer): the
  counterpoise-corrected interaction energy at the limit within 1e-7 Eh;
- gradient('mp2/cc-pv[dt]z') of water (Psi4's analytic DF-MP2 gradients, extrapolated): within 1e-6 Eh/bohr.

    PYTHONPATH=/usr/lib/x86_64-linux-gnu /usr/bin/python3 tests/psi4/live_cbs_test.py --dfmp2 build/app/dfmp2
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from live_common import report, run_text  # noqa: E402

TOLERANCE = 1e-7           # Eh
GRADIENT_TOLERANCE = 1e-6  # Eh/bohr
KEYS = ("CBS TOTAL ENERGY", "CBS REFERENCE ENERGY", "CBS CORRELATION ENERGY")

# The samples' water (O, H 1 1.0, H 1 1.0 2 104.5) in cartesian form.
WATER = ("O 0.0 0.0 -0.0680545\nH 0.0 -0.7907380 0.5400303\nH 0.0 0.7907380 0.5400303")
AMMONIA_DIMER = ("N -1.578718 -0.046611 0.000000\nH -2.158621 0.136396 -0.809565\nH -2.158621 0.136396 0.809565\n"
                 "H -0.849471 0.658193 0.000000\n--\nN 1.578718 0.046611 0.000000\nH 2.158621 -0.136396 -0.809565\n"
                 "H 0.849471 -0.658193 0.000000\nH 2.158621 -0.136396 0.809565")
WATER_DIMER = ("O -1.551007 -0.114520 0.000000\nH -1.934259 0.762503 0.000000\nH -0.599677 0.040712 0.000000\n--\n"
               "O 1.350625 0.111469 0.000000\nH 1.680398 -0.373741 -0.758561\nH 1.680398 -0.373741 0.758561")

# (name, Psi4's cbs() keyword arguments, dfmp2's basis and cbs keys)
ENERGIES = [
    ("mp2/aug-cc-pv[dt]z", {"corl_wfn": "mp2", "corl_basis": "aug-cc-pv[dt]z"}, "aug-cc-pv[dt]z", None),
    ("scf helgaker_2 + corl alpha 3.1", {"scf_wfn": "scf", "scf_basis": "cc-pv[dt]z", "scf_scheme": "scf_xtpl_helgaker_2",
                                         "corl_wfn": "mp2", "corl_basis": "cc-pv[dt]z",
                                         "corl_scheme": "corl_xtpl_helgaker_2", "corl_alpha": 3.1},
     "cc-pv[dt]z", {"scf_basis": "cc-pv[dt]z", "scf_scheme": "scf_xtpl_helgaker_2", "corl_alpha": 3.1}),
    ("def2-[st]zvpd", {"scf_wfn": "scf", "scf_basis": "def2-[st]zvpd", "scf_scheme": "scf_xtpl_helgaker_2",
                       "corl_wfn": "mp2", "corl_basis": "def2-[st]zvpd", "corl_scheme": "corl_xtpl_helgaker_2"},
     "def2-[st]zvpd", {"scf_basis": "def2-[st]zvpd"}),
    ("scf helgaker_3 over [dtq], corl [tq]", {"scf_wfn": "scf", "scf_basis": "cc-pv[dtq]z",
                                            "scf_scheme": "scf_xtpl_helgaker_3", "corl_wfn": "mp2",
                                            "corl_basis": "cc-pv[tq]z"},
     "cc-pv[tq]z", {"scf_basis": "cc-pv[dtq]z"}),
    ("scf truhlar_2", {"scf_wfn": "scf", "scf_basis": "cc-pv[dt]z", "scf_scheme": "scf_xtpl_truhlar_2",
                       "corl_wfn": "mp2", "corl_basis": "cc-pv[dt]z"},
     "cc-pv[dt]z", {"scf_basis": "cc-pv[dt]z", "scf_scheme": "scf_xtpl_truhlar_2"}),
    ("scf karton_2 alpha 6.0", {"scf_wfn": "scf", "scf_basis": "cc-pv[dt]z", "scf_scheme": "scf_xtpl_karton_2",
                                "scf_alpha": 6.0, "corl_wfn": "mp2", "corl_basis": "cc-pv[dt]z"},
     "cc-pv[dt]z", {"scf_basis": "cc-pv[dt]z", "scf_scheme": "scf_xtpl_karton_2", "scf_alpha": 6.0}),
]


def psi4_molecule(xyz):
    import psi4
    psi4.core.be_quiet()
    psi4.core.clean()
    psi4.core.clean_options()
    psi4.core.clean_variables()
    psi4.geometry("0 1\n%s\nunits angstrom\nsymmetry c1\nno_reorient\nno_com\n" % xyz)
    psi4.set_options({"scf_type": "df", "mp2_type": "df", "e_convergence": 1e-10, "d_convergence": 1e-10})
    return psi4


def psi4_cbs_energy(kwargs):
    psi4 = psi4_molecule(WATER)
    from psi4.driver import driver_cbs
    args = dict(kwargs)
    for key in ("scf_scheme", "corl_scheme"):
        if key in args:
            args[key] = getattr(driver_cbs, args[key])
    psi4.energy(psi4.cbs, **args)
    return {k: psi4.variable(k) for k in KEYS}


def molecule_text(xyz):
    return ("molecule:\n  xyz: |\n" + "".join("    %s\n" % l for l in xyz.splitlines()) +
            "scf: {e_convergence: 1e-10, d_convergence: 1e-10}\n")


def energies(binary, workdir):
    failures = 0
    for name, kwargs, basis, cbs in ENERGIES:
        theirs = psi4_cbs_energy(kwargs)
        text = molecule_text(WATER) + "basis: %s\n" % basis
        if cbs:
            text += "cbs:\n" + "".join("  %s: %s\n" % kv for kv in cbs.items())
        ours = run_text(binary, workdir, text)["extras"]["qcvars"]
        for key in KEYS:
            diff = ours[key] - theirs[key]
            failures += report(abs(diff) < TOLERANCE, "water %-38s %-24s %.10f %+.1e" % (name, key, ours[key], diff))
    return failures


def interaction(binary, workdir):
    failures = 0
    for name, xyz in (("S22 ammonia dimer", AMMONIA_DIMER), ("S22 water dimer", WATER_DIMER)):
        psi4 = psi4_molecule(xyz)
        theirs = psi4.energy("mp2/aug-cc-pv[dt]z", bsse_type="cp")
        got = run_text(binary, workdir, molecule_text(xyz) + "basis: aug-cc-pv[dt]z\ninteraction: {bsse: cp}\n")
        ours = got["extras"]["qcvars"]["CP-CORRECTED INTERACTION ENERGY"]
        failures += report(abs(ours - theirs) < TOLERANCE, "%-18s MP2/aug-cc-pV[DT]Z CP interaction energy %.10f %+.1e" % (
            name, ours, ours - theirs))
    return failures


def gradient(binary, workdir):
    psi4 = psi4_molecule(WATER)
    theirs = psi4.gradient("mp2/cc-pv[dt]z").np.ravel().tolist()
    ours = run_text(binary, workdir, molecule_text(WATER) + "basis: cc-pv[dt]z\ndriver: gradient\n")["return_result"]
    worst = max(abs(a - b) for a, b in zip(ours, theirs))
    return report(worst < GRADIENT_TOLERANCE, "water MP2/cc-pV[DT]Z gradient against Psi4's: %.1e Eh/bohr" % worst)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dfmp2", required=True)
    args = parser.parse_args()
    binary = os.path.abspath(args.dfmp2)
    with tempfile.TemporaryDirectory() as workdir:
        failures = energies(binary, workdir) + interaction(binary, workdir) + gradient(binary, workdir)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
