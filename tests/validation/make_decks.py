#!/usr/bin/env python3
"""Writes the validation decks that come from Psi4 reference energies: tests/validation/decks/NAME.yaml (a dfmp2
input) and NAME.expected.json (the energies it must give, each with its tolerance and source).

    tests/validation/make_decks.py            # from tests/validation/reference/psi4_refs.json

The reference file is a copy of shared/reference/psi4_refs.json (Psi4 1.3.2 from Debian; its README there says
how it was made), kept in the repository so that a fresh clone runs every case. For each case it writes:
  - <molecule>_<basis>[_fc]_pk and _df: molecule input, exact (pk) or density-fitted SCF, then DF-MP2; against
    Psi4 run with the same settings: SCF within 1e-6 Eh, MP2 energies within 1e-7 Eh (the project's molecule
    tolerances; different integral codes and SCF convergence paths);
  - fixture_<molecule>[_fc] (cc-pVDZ cases whose orbitals are committed in inputs/): DF-MP2 on the integral file,
    whose orbitals came from Psi4's exact SCF, against the independent pk references within 1e-9 Eh.
Other decks (hand-written) live beside these; this script only rewrites the ones it makes.
"""
import json
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
DECKS = os.path.join(HERE, "decks")
REFERENCE = os.path.join(HERE, "reference", "psi4_refs.json")
FIXTURES = {"water": "water-cc-pvdz.h5", "methane": "methane-cc-pvdz.h5"}


def name_of(*parts):
    return re.sub(r"[^A-Za-z0-9]+", "_", "_".join(parts)).strip("_").lower()


def expected(source, values):
    return {"source": source, "properties": {k: {"value": v, "tolerance": t} for k, (v, t) in values.items()}}


def write(name, yaml_text, exp):
    with open(os.path.join(DECKS, name + ".yaml"), "w") as f:
        f.write(yaml_text)
    with open(os.path.join(DECKS, name + ".expected.json"), "w") as f:
        json.dump(exp, f, indent=1)
        f.write("\n")


def main():
    with open(REFERENCE) as f:
        refs = json.load(f)
    os.makedirs(DECKS, exist_ok=True)
    written = 0
    for c in refs["cases"]:
        fc = c["frozen_core"]
        geometry = "\n".join("    " + ln for ln in c["geometry_angstrom"].splitlines())
        for scf in ("pk", "df"):
            r = c["scf_" + scf]
            name = name_of(c["molecule"], c["basis"], "fc" if fc else "", scf)
            yaml_text = (
                "# %s in %s / %s, %s SCF%s, then DF-MP2: against Psi4 1.3.2 (tests/validation/reference/psi4_refs.json).\n"
                "# Written by tests/validation/make_decks.py.\n"
                "molecule:\n  xyz: |\n%s\n"
                "basis: %s\naux_basis: %s\n"
                "scf: {type: %s%s, e_convergence: 1e-10, d_convergence: 1e-8}\n"
                "frozen_core: %s\nbackends: [openblas]\nthreads: 2\nsave_integrals: false\n"
                % (c["molecule"], c["basis"], c["aux_basis"], "exact" if scf == "pk" else "density-fitted",
                   ", frozen core" if fc else "", geometry, c["basis"], c["aux_basis"],
                   "exact" if scf == "pk" else "df", "" if scf == "pk" else ", jk_basis: " + c["jk_basis"],
                   "true" if fc else "false"))
            src = "Psi4 1.3.2, scf_type %s, mp2_type df (tests/validation/reference/psi4_refs.json)" % scf
            write(name, yaml_text, expected(src, {
                "nuclear_repulsion_energy": (r["e_nuc"], 1e-9),
                "scf_total_energy": (r["e_scf"], 1e-6),
                "mp2_correlation_energy": (r["e_corr"], 1e-7),
                "mp2_opposite_spin_correlation_energy": (r["e_os"], 1e-7),
                "mp2_same_spin_correlation_energy": (r["e_ss"], 1e-7),
                "mp2_total_energy": (r["e_total"], 1e-6),
                "calcinfo_nbasis": (c["nbf"], 0),
            }))
            written += 1
        if c["basis"] == "cc-pvdz" and c["aux_basis"] == "cc-pvdz-ri" and c["molecule"] in FIXTURES:
            r = c["scf_pk"]
            name = name_of("fixture", c["molecule"], "fc" if fc else "")
            yaml_text = (
                "# DF-MP2 on the committed %s integral file%s: against Psi4's independent pk references\n"
                "# (tests/validation/reference/psi4_refs.json). Written by tests/validation/make_decks.py.\n"
                "integrals: ../../../inputs/%s\nfrozen_core: %s\nbackends: [openblas]\nthreads: 2\n"
                % (c["molecule"], ", frozen core" if fc else "", FIXTURES[c["molecule"]], "true" if fc else "false"))
            src = "Psi4 1.3.2, scf_type pk, mp2_type df (tests/validation/reference/psi4_refs.json)"
            write(name, yaml_text, expected(src, {
                "scf_total_energy": (r["e_scf"], 1e-8),
                "mp2_correlation_energy": (r["e_corr"], 1e-9),
                "mp2_opposite_spin_correlation_energy": (r["e_os"], 1e-9),
                "mp2_same_spin_correlation_energy": (r["e_ss"], 1e-9),
                "mp2_total_energy": (r["e_total"], 1e-8),
            }))
            written += 1
    written += open_shell_decks()
    written += interaction_decks()
    print("wrote %d decks in %s" % (written, DECKS))


def open_shell_decks():
    """<molecule>_<basis>_<uhf|rohf>_<pk|df> from reference/psi4_open_shell.json (scripts/psi4_open_shell_refs.py):
    radicals, triplets, a cation and an anion, against Psi4 with the same settings: SCF within 1e-6 Eh, MP2 energies
    (singles included) within 1e-7 Eh, UHF <S^2> within 1e-5. The SCF is converged to 1e-10 (gradient): the MP2
    energy of a spin-contaminated UHF (CN, NO) moves by up to 8e-8 Eh between 1e-8 and 1e-10."""
    with open(os.path.join(HERE, "reference", "psi4_open_shell.json")) as f:
        refs = json.load(f)
    written = 0
    for c in refs["cases"]:
        name = name_of(c["name"], c["basis"], c["reference"], c["scf_type"])
        geometry = "\n".join("    " + ln for ln in c["xyz"].splitlines())
        pk = c["scf_type"] == "pk"
        yaml_text = (
            "# %s (charge %d, multiplicity %d) in %s, %s %s SCF, then %s: against Psi4 1.3.2\n"
            "# (tests/validation/reference/psi4_open_shell.json). Written by tests/validation/make_decks.py.\n"
            "molecule:\n  units: angstrom\n  charge: %d\n  multiplicity: %d\n  xyz: |\n%s\n"
            "basis: %s\nreference: %s\n"
            "scf: {type: %s, e_convergence: 1e-10, d_convergence: 1e-10, max_iterations: 200}\n"
            "backends: [openblas]\nthreads: 2\n"
            % (c["name"], c["charge"], c["multiplicity"], c["basis"], c["reference"].upper(),
               "exact" if pk else "density-fitted", "DF-UMP2" if c["reference"] == "uhf" else "ROHF-MBPT(2)",
               c["charge"], c["multiplicity"], geometry, c["basis"], c["reference"], "exact" if pk else "df"))
        values = {
            "scf_total_energy": (c["scf"], 1e-6),
            "mp2_correlation_energy": (c["mp2_correlation"], 1e-7),
            "mp2_same_spin_correlation_energy": (c["same_spin"], 1e-7),
            "mp2_opposite_spin_correlation_energy": (c["opposite_spin"], 1e-7),
            "mp2_singles_energy": (c["singles"], 1e-7),
        }
        if c["s_squared"] is not None:
            values["extras.dfmp2.problem.scf.s_squared"] = (c["s_squared"], 1e-5)
        src = "Psi4 1.3.2, reference %s, scf_type %s, mp2_type df (tests/validation/reference/psi4_open_shell.json)" % (
            c["reference"], c["scf_type"])
        write(name, yaml_text, expected(src, values))
        written += 1
    return written


def interaction_decks():
    """ie_<complex>_<basis> from reference/psi4_interaction.json (tests/psi4/live_interaction_test.py): Psi4's S22
    dimers and its dfmp2-1 formic acid dimer, CP and non-CP DF-MP2 interaction energies within 1e-7 Eh of Psi4's
    energy('mp2', bsse_type=['cp', 'nocp']), the complex's MP2 total energy within 1e-6 Eh."""
    with open(os.path.join(HERE, "reference", "psi4_interaction.json")) as f:
        refs = json.load(f)
    written = 0
    for c in refs["cases"]:
        name = name_of("ie", c["name"].split(" ", 1)[1], c["basis"])
        geometry = "\n".join("    " + ln for ln in c["xyz"].splitlines())
        yaml_text = (
            "# %s in %s: CP and non-CP DF-MP2 interaction energies (DF-SCF) against Psi4 1.3.2's\n"
            "# energy('mp2', bsse_type=['cp', 'nocp']) (tests/validation/reference/psi4_interaction.json).\n"
            "# Written by tests/validation/make_decks.py.\n"
            "molecule:\n  xyz: |\n%s\n"
            "basis: %s\n"
            "scf: {type: df, e_convergence: 1e-10, d_convergence: 1e-10}\n"
            "interaction: {bsse: both}\nbackends: [openblas]\nthreads: 2\n"
            % (c["name"], c["basis"], geometry, c["basis"]))
        p = c["psi4"]
        values = {
            "extras.qcvars.CP-CORRECTED INTERACTION ENERGY": (p["CP-CORRECTED 2-BODY INTERACTION ENERGY"], 1e-7),
            "extras.qcvars.NOCP-CORRECTED INTERACTION ENERGY": (p["NOCP-CORRECTED 2-BODY INTERACTION ENERGY"], 1e-7),
            "mp2_total_energy": (p["N-BODY (1, 2)@(1, 2) TOTAL ENERGY"], 1e-6),
        }
        write(name, yaml_text, expected(refs["source"], values))
        written += 1
    return written


if __name__ == "__main__":
    main()
