"""Complexes of Psi4's own test material, read from the files Debian's psi4 installs: the S22 database
(/usr/share/psi4/databases/S22.py) and the formic acid dimer of the dfmp2-1 sample. Each is xyz text with Psi4's
fragment lines ('--' and 'charge multiplicity'), in angstrom, as both programs read it. Used by the live Psi4 tier
(tests/psi4/live_interaction_test.py) and the interaction benchmark (bench/psi4_interaction.py).
"""
import re

S22 = "/usr/share/psi4/databases/S22.py"
DFMP2_1 = "/usr/share/psi4/samples/dfmp2-1/input.dat"


def fragments_text(block):
    """A Psi4 molecule block as xyz text with its '--' and 'charge multiplicity' lines; its keyword lines (units,
    no_reorient, no_com, symmetry) left out: the callers give both programs angstrom and no reorientation."""
    keep = []
    for line in block.strip().splitlines():
        words = line.split()
        if not words or words[0].lower() in ("units", "no_reorient", "no_com", "symmetry"):
            continue
        keep.append(" ".join(words))
    return "\n".join(keep)


def s22_complex(index):
    """S22 entry `index` (1-22) as xyz text with fragments, and its name in the database (TAGL)."""
    with open(S22) as f:
        s22 = f.read()
    geometry = re.search(r"GEOS\['%%s-%%s-dimer' %% \(dbse, '%d'\)\] = qcdb\.Molecule\(\"\"\"(.*?)\"\"\"\)" % index,
                         s22, re.S)
    name = re.search(r"TAGL\['%%s-%%s'\s+%% \(dbse,\s*%d\)\] = '(.*?)'" % index, s22)
    return fragments_text(geometry.group(1)), name.group(1)


def formic_acid_dimer():
    """The formic acid dimer of Psi4's dfmp2-1 sample (its counterpoise-corrected DF-MP2 example)."""
    with open(DFMP2_1) as f:
        sample = f.read()
    return fragments_text(re.search(r"molecule formic_dim \{(.*?)\}", sample, re.S).group(1))
