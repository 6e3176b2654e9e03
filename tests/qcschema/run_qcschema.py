#!/usr/bin/python3
"""QCSchema in and out, and the QCEngine harness (README "QCSchema and QCEngine").

    run_qcschema.py --dfmp2 build/app/dfmp2 --repo . --group cli        # dfmp2 input.json against its YAML twin
    run_qcschema.py --dfmp2 build/app/dfmp2 --repo . --group qcengine   # qcengine.compute(..., "dfmp2") against "psi4"

cli       an AtomicInput gives the energies of the equivalent YAML input (1e-10 Eh) and an AtomicResult that validates
          with qcelemental; each bad AtomicInput (not JSON, a field missing or of the wrong type, an unsupported driver,
          method or keyword, a basis set that does not exist, an SCF that does not converge) exits with its code and
          one line naming the field, and writes a FailedOperation that validates, with the same line and the error
          type of its class
qcengine  the harness (app/python/dfmp2_qcengine) through qcengine.compute on the same AtomicInputs as QCEngine's
          Psi4 harness: SCF within 1e-6 Eh and MP2 correlation within 1e-7 Eh; a bad input comes back as the
          FailedOperation dfmp2 wrote
Needs Debian's python3-qcelemental (cli) and python3-qcengine with psi4 (qcengine), under /usr/bin/python3 with
PYTHONPATH=/usr/lib/x86_64-linux-gnu. Exit 0 when every check passes.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import qcelemental as qcel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import Checker  # noqa: E402

WATER = "O 0.000000 0.000000 0.117790\nH 0.000000 0.755453 -0.471161\nH 0.000000 -0.755453 -0.471161"
AMMONIA = "N 0.0 0.0 0.1\nH 0.0 0.94 -0.27\nH 0.81 -0.47 -0.27\nH -0.81 -0.47 -0.27"
HYDRONIUM = "O 0.0 0.0 0.05\nH 0.0 0.95 -0.25\nH 0.82 -0.47 -0.25\nH -0.82 -0.47 -0.25\n1 1"
HYDROXYL = "O 0 0 0\nH 0 0 0.97\n0 2"
WATER_GHOST_HE = "O 0.000000 0.000000 0.117790\nH 0.000000 0.755453 -0.471161\nH 0.000000 -0.755453 -0.471161\n@He 0 0 3.0"
# Tight enough that the two programs' SCF convergence does not decide the comparison.
CONVERGED = {"e_convergence": 1e-10, "d_convergence": 1e-10}


def atomic_input(xyz, basis, keywords, driver="energy", method="mp2"):
    mol = qcel.models.Molecule.from_data(xyz)
    return qcel.models.AtomicInput(molecule=mol, driver=driver, model={"method": method, "basis": basis},
                                   keywords=keywords)


def with_molecule(inp, **fields):
    """The AtomicInput `inp` (a dict) with these molecule fields replaced."""
    return dict(inp, molecule=dict(inp["molecule"], **fields))


def run(cmd, cwd):
    return subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)


def cli(args, c):
    with tempfile.TemporaryDirectory(prefix="dfmp2-qcschema-") as d:
        # The AtomicInput and its YAML twin (the same molecule in bohr, basis and keywords).
        inp = atomic_input(WATER, "cc-pvdz", dict(CONVERGED, scf_type="df", mp2_type="df", freeze_core=True,
                                                  dfmp2_threads=1))
        path = os.path.join(d, "water.json")
        with open(path, "w") as f:
            f.write(inp.json())
        p = run([args.dfmp2, path], d)
        c.check(p.returncode == 0, "AtomicInput runs (%s)" % p.stderr.strip())
        out = os.path.join(d, "water.result.json")
        if not c.check(os.path.exists(out), "the AtomicResult is written beside the input (water.result.json)"):
            return
        with open(out) as f:
            data = json.load(f)
        try:
            result = qcel.models.AtomicResult(**data)
            c.check(True, "the AtomicResult validates with qcelemental %s" % qcel.__version__)
        except Exception as e:  # noqa: BLE001 -- any validation error is the failure being tested
            c.check(False, "the AtomicResult validates with qcelemental: %s" % str(e)[:500])
            return
        c.check(result.molecule == inp.molecule and result.model == inp.model and result.driver == inp.driver,
                "the AtomicResult carries the input's molecule, model and driver as given")
        geometry = "\n".join("    %s %.17g %.17g %.17g" % (s, *inp.molecule.geometry[i])
                             for i, s in enumerate(inp.molecule.symbols))
        yaml = os.path.join(d, "water.yaml")
        with open(yaml, "w") as f:
            f.write("molecule:\n  units: bohr\n  xyz: |\n%s\nbasis: cc-pvdz\nscf: {type: df, e_convergence: 1e-10, "
                    "d_convergence: 1e-10}\nfrozen_core: true\nthreads: 1\noutput: twin.json\n" % geometry)
        p = run([args.dfmp2, yaml], d)
        with open(os.path.join(d, "twin.json")) as f:
            twin = json.load(f)["properties"]
        for key in ("scf_total_energy", "mp2_correlation_energy", "mp2_total_energy"):
            diff = getattr(result.properties, key) - twin[key]
            c.check(abs(diff) <= 1e-10, "%s of the AtomicInput and of its YAML twin: %+.1e Eh" % (key, diff))
        c.check(abs(result.return_result - twin["mp2_total_energy"]) <= 1e-10, "return_result is the MP2 total energy")

        # driver gradient: return_result is the natoms x 3 gradient (flat, as QCSchema stores arrays), the same as
        # its YAML twin's (driver: gradient); the properties hold the SCF gradient and both dipoles.
        grad_inp = atomic_input(WATER, "cc-pvdz", dict(CONVERGED, scf_type="df", freeze_core=True, dfmp2_threads=1),
                                driver="gradient")
        with open(os.path.join(d, "grad.json"), "w") as f:
            f.write(grad_inp.json())
        p = run([args.dfmp2, os.path.join(d, "grad.json")], d)
        c.check(p.returncode == 0, "a gradient AtomicInput runs (%s)" % p.stderr.strip())
        with open(os.path.join(d, "grad.result.json")) as f:
            grad_result = qcel.models.AtomicResult(**json.load(f))
        with open(yaml) as f:
            twin_yaml = f.read().replace("output: twin.json", "output: grad_twin.json") + "driver: gradient\n"
        with open(os.path.join(d, "grad.yaml"), "w") as f:
            f.write(twin_yaml)
        run([args.dfmp2, os.path.join(d, "grad.yaml")], d)
        with open(os.path.join(d, "grad_twin.json")) as f:
            twin_gradient = json.load(f)["return_result"]
        ours = [float(x) for x in grad_result.return_result.ravel()]
        c.check(grad_result.driver == "gradient" and len(ours) == 3 * len(grad_inp.molecule.symbols),
                "the gradient AtomicResult's return_result has natoms x 3 components (%d)" % len(ours))
        c.check(max(abs(a - b) for a, b in zip(ours, twin_gradient)) <= 1e-10,
                "the gradient of the AtomicInput and of its YAML twin agree within 1e-10 Eh/bohr")
        c.check(grad_result.properties.scf_total_gradient is not None and
                grad_result.properties.mp2_dipole_moment is not None,
                "the gradient AtomicResult's properties hold scf_total_gradient and mp2_dipole_moment")

        # An open shell's gradient (UHF, issue 45): H2O+ from molecular_charge and molecular_multiplicity, an
        # AtomicResult that validates with its gradient and relaxed dipole, not the neutral molecule's.
        cation = grad_inp.dict()
        cation["molecule"] = dict(grad_inp.molecule.dict(), molecular_charge=1, molecular_multiplicity=2)
        with open(os.path.join(d, "grad_uhf.json"), "w") as f:
            f.write(qcel.models.AtomicInput(**cation).json())
        p = run([args.dfmp2, os.path.join(d, "grad_uhf.json")], d)
        c.check(p.returncode == 0, "a UHF gradient AtomicInput runs (%s)" % p.stderr.strip())
        try:
            with open(os.path.join(d, "grad_uhf.result.json")) as f:
                uhf_result = qcel.models.AtomicResult(**json.load(f))
            uhf = [float(x) for x in uhf_result.return_result.ravel()]
            c.check(len(uhf) == len(ours) and max(abs(a - b) for a, b in zip(uhf, ours)) > 1e-3 and
                    uhf_result.properties.mp2_dipole_moment is not None and
                    uhf_result.properties.calcinfo_nalpha == uhf_result.properties.calcinfo_nbeta + 1,
                    "the UHF gradient AtomicResult validates: H2O+'s gradient (not water's) and relaxed dipole")
        except Exception as e:  # noqa: BLE001 -- any validation error is the failure being tested
            c.check(False, "the UHF gradient AtomicResult validates with qcelemental: %s" % str(e)[:500])

        # driver hessian: an AtomicResult that validates, return_result the 3 natoms x 3 natoms Hessian, the displaced
        # SCFs' iterations in extras.dfmp2.vibrations.
        hess_inp = atomic_input(WATER, "cc-pvdz", dict(scf_type="df", freeze_core=True, dfmp2_threads=1),
                                driver="hessian")
        with open(os.path.join(d, "hess.json"), "w") as f:
            f.write(hess_inp.json())
        p = run([args.dfmp2, os.path.join(d, "hess.json")], d)
        c.check(p.returncode == 0, "a Hessian AtomicInput runs (%s)" % p.stderr.strip())
        with open(os.path.join(d, "hess.result.json")) as f:
            hess_data = json.load(f)
        try:
            hess_result = qcel.models.AtomicResult(**hess_data)
            c.check(hess_result.driver == "hessian" and hess_result.return_result.size == 81 and
                    len(hess_data["extras"]["dfmp2"]["vibrations"]["displaced_scf_iterations"]) == 18,
                    "the Hessian AtomicResult validates, with a 9 x 9 return_result and 18 displaced SCFs' iterations")
        except Exception as e:  # noqa: BLE001 -- any validation error is the failure being tested
            c.check(False, "the Hessian AtomicResult validates with qcelemental: %s" % str(e)[:500])

        # driver properties (issue 46) in a field (Psi4's perturb_h, perturb_with, perturb_dipole): an AtomicResult that
        # validates, return_result the dictionary of properties, mp2_dipole_moment the relaxed dipole, as its YAML
        # twin's (perturb_dipole) within 1e-10 a.u.
        field = dict(perturb_h=True, perturb_with="dipole", perturb_dipole=[0.0, 0.0, 0.002])
        prop_inp = atomic_input(WATER, "cc-pvdz", dict(CONVERGED, scf_type="df", freeze_core=True, dfmp2_threads=1,
                                                       **field), driver="properties")
        with open(os.path.join(d, "prop.json"), "w") as f:
            f.write(prop_inp.json())
        p = run([args.dfmp2, os.path.join(d, "prop.json")], d)
        c.check(p.returncode == 0, "a properties AtomicInput in a field runs (%s)" % p.stderr.strip())
        with open(yaml) as f:
            prop_yaml = f.read().replace("output: twin.json", "output: prop_twin.json")
        with open(os.path.join(d, "prop.yaml"), "w") as f:
            f.write(prop_yaml + "driver: properties\nperturb_dipole: [0, 0, 0.002]\n")
        run([args.dfmp2, os.path.join(d, "prop.yaml")], d)
        try:
            with open(os.path.join(d, "prop.result.json")) as f:
                prop_result = qcel.models.AtomicResult(**json.load(f))
            with open(os.path.join(d, "prop_twin.json")) as f:
                prop_twin = json.load(f)["extras"]["dfmp2"]["properties"]["relaxed"]["dipole"]
            dipole = list(prop_result.properties.mp2_dipole_moment)
            c.check(prop_result.driver == "properties" and
                    list(prop_result.return_result["mp2_dipole_moment"]) == dipole and
                    len(prop_result.return_result["mulliken_charges"]) == 3 and
                    max(abs(a - b) for a, b in zip(dipole, prop_twin)) <= 1e-10 and
                    abs(prop_result.properties.scf_total_energy - result.properties.scf_total_energy) > 1e-5,
                    "the properties AtomicResult validates: its relaxed dipole in the field is its YAML twin's")
        except Exception as e:  # noqa: BLE001 -- any validation error is the failure being tested
            c.check(False, "the properties AtomicResult validates with qcelemental: %s" % str(e)[:500])

        # Spin-scaled methods as Psi4 names them: model.method scs-mp2 with keywords mp2_os_scale and mp2_ss_scale (a
        # gradient: return_result the SCS-MP2 gradient, as its YAML twin's), sos-mp2 (an energy: return_result
        # SCF + 1.3 E_os); both AtomicResults validate.
        scs_inp = atomic_input(WATER, "cc-pvdz", dict(CONVERGED, scf_type="df", freeze_core=True, dfmp2_threads=1,
                                                      mp2_os_scale=0.9,
                                                      mp2_ss_scale=0.5), driver="gradient", method="scs-mp2")
        sos_inp = atomic_input(WATER, "cc-pvdz", dict(CONVERGED, scf_type="df", dfmp2_threads=1), method="sos-mp2")
        scaled = {}
        for name, one in (("scs", scs_inp), ("sos", sos_inp)):
            with open(os.path.join(d, name + ".json"), "w") as f:
                f.write(one.json())
            p = run([args.dfmp2, os.path.join(d, name + ".json")], d)
            c.check(p.returncode == 0, "a %s-mp2 AtomicInput runs (%s)" % (name, p.stderr.strip()))
            with open(os.path.join(d, name + ".result.json")) as f:
                scaled[name] = json.load(f)
            try:
                qcel.models.AtomicResult(**scaled[name])
                c.check(True, "the %s-mp2 AtomicResult validates with qcelemental" % name)
            except Exception as e:  # noqa: BLE001 -- any validation error is the failure being tested
                c.check(False, "the %s-mp2 AtomicResult validates with qcelemental: %s" % (name, str(e)[:500]))
        # A basis series in model.basis (issue 47): return_result the CBS total energy, which validates, and the
        # limit of its two bases' own AtomicResults by corl_xtpl_helgaker_2 (keywords.dfmp2_cbs alpha 3.1).
        cbs_inp = atomic_input(WATER, "cc-pv[dt]z", dict(CONVERGED, scf_type="df", dfmp2_threads=1,
                                                          dfmp2_cbs={"corl_alpha": 3.1}))
        single = {}
        for name, one in (("cbs", cbs_inp), ("dz", atomic_input(WATER, "cc-pvdz", dict(CONVERGED, scf_type="df"))),
                          ("tz", atomic_input(WATER, "cc-pvtz", dict(CONVERGED, scf_type="df")))):
            with open(os.path.join(d, name + ".json"), "w") as f:
                f.write(one.json())
            p = run([args.dfmp2, os.path.join(d, name + ".json")], d)
            c.check(p.returncode == 0, "a %s AtomicInput runs (%s)" % (name, p.stderr.strip()))
            with open(os.path.join(d, name + ".result.json")) as f:
                single[name] = json.load(f)
        try:
            qcel.models.AtomicResult(**single["cbs"])
            c.check(True, "the cc-pv[dt]z AtomicResult validates with qcelemental")
        except Exception as e:  # noqa: BLE001 -- any validation error is the failure being tested
            c.check(False, "the cc-pv[dt]z AtomicResult validates with qcelemental: %s" % str(e)[:500])
        corl = [single[k]["properties"]["mp2_correlation_energy"] for k in ("dz", "tz")]
        limit = (single["tz"]["properties"]["scf_total_energy"] +
                 (corl[1] * 3 ** 3.1 - corl[0] * 2 ** 3.1) / (3 ** 3.1 - 2 ** 3.1))
        c.check(abs(single["cbs"]["return_result"] - limit) <= 1e-9 and
                single["cbs"]["extras"]["qcvars"]["CBS TOTAL ENERGY"] == single["cbs"]["return_result"],
                "cc-pv[dt]z: return_result and CBS TOTAL ENERGY are the limit of the two bases' energies (%.12f)" % limit)
        props = scaled["sos"]["properties"]
        sos = props["scf_total_energy"] + 1.3 * props["mp2_opposite_spin_correlation_energy"]
        c.check(abs(scaled["sos"]["return_result"] - sos) <= 1e-12 and
                abs(scaled["sos"]["extras"]["qcvars"]["SOS-MP2 TOTAL ENERGY"] - sos) <= 1e-12,
                "sos-mp2: return_result and SOS-MP2 TOTAL ENERGY are SCF + 1.3 E_os (%.12f)" % sos)
        with open(os.path.join(d, "scs.yaml"), "w") as f:
            f.write(twin_yaml.replace("output: grad_twin.json", "output: scs_twin.json") +
                    "method: scs-mp2\nmp2_os_scale: 0.9\nmp2_ss_scale: 0.5\n")
        run([args.dfmp2, os.path.join(d, "scs.yaml")], d)
        with open(os.path.join(d, "scs_twin.json")) as f:
            scs_twin = json.load(f)["return_result"]
        c.check(max(abs(a - b) for a, b in zip(scaled["scs"]["return_result"], scs_twin)) <= 1e-10 and
                max(abs(a - b) for a, b in zip(scaled["scs"]["return_result"], twin_gradient)) > 1e-5,
                "the SCS-MP2 gradient of the AtomicInput equals its YAML twin's (1e-10 Eh/bohr), not MP2's")

        # An interaction energy (keywords.dfmp2_interaction, the input key `interaction`) of a water dimer given as
        # QCSchema fragments: Psi4's variable names in extras.qcvars, as its YAML twin (Psi4's '--' fragments) gives.
        dimer = qcel.models.Molecule.from_data(WATER + "\n--\n" + "\n".join(
            "%s %s %s %.6f" % (ln.split()[0], ln.split()[1], ln.split()[2], float(ln.split()[3]) + 3.0)
            for ln in WATER.splitlines() if len(ln.split()) == 4))
        ie_inp = qcel.models.AtomicInput(molecule=dimer, driver="energy", model={"method": "mp2", "basis": "cc-pvdz"},
                                         keywords=dict(CONVERGED, scf_type="df", dfmp2_threads=1,
                                                       dfmp2_interaction={"bsse": "cp"}))
        path = os.path.join(d, "dimer.json")
        with open(path, "w") as f:
            f.write(ie_inp.json())
        p = run([args.dfmp2, path], d)
        c.check(p.returncode == 0, "an AtomicInput with fragments and dfmp2_interaction runs (%s)" % p.stderr.strip())
        with open(os.path.join(d, "dimer.result.json")) as f:
            ie_data = json.load(f)
        ie_result = qcel.models.AtomicResult(**ie_data)
        geometry = "\n".join("    %s %.17g %.17g %.17g" % (s, *dimer.geometry[i]) for i, s in enumerate(dimer.symbols))
        geometry = geometry.split("\n")
        geometry.insert(len(dimer.fragments[0]), "    --")
        with open(os.path.join(d, "dimer.yaml"), "w") as f:
            f.write("molecule:\n  units: bohr\n  xyz: |\n%s\nbasis: cc-pvdz\nscf: {type: df, e_convergence: 1e-10, "
                    "d_convergence: 1e-10}\nthreads: 1\ninteraction: {bsse: cp}\noutput: dimer_twin.json\n"
                    % "\n".join(geometry))
        run([args.dfmp2, os.path.join(d, "dimer.yaml")], d)
        with open(os.path.join(d, "dimer_twin.json")) as f:
            twin_ie = json.load(f)["extras"]["qcvars"]["CP-CORRECTED INTERACTION ENERGY"]
        diff = ie_result.extras["qcvars"]["CP-CORRECTED INTERACTION ENERGY"] - twin_ie
        c.check(abs(diff) <= 1e-10 and twin_ie < 0,
                "CP-CORRECTED INTERACTION ENERGY of the AtomicInput and of its YAML twin: %+.1e Eh" % diff)

        # Bad inputs: (name, the AtomicInput as a dict or text, exit code, error type, what the line says).
        base = json.loads(inp.json())
        cases = [
            ("not JSON", '{"driver": energy}', 2, "input_error", "not valid JSON"),
            ("no molecule", {k: v for k, v in base.items() if k != "molecule"}, 2, "input_error", "missing field 'molecule'"),
            ("optimize", dict(base, driver="optimize"), 2, "input_error",
             "field 'driver': 'optimize' is not supported"),
            ("field without perturb_h", dict(base, keywords={"perturb_dipole": [0, 0, 0.001]}), 2, "input_error",
             "field 'keywords.perturb_dipole': needs perturb_h: true"),
            ("perturb_h without a field", dict(base, keywords={"perturb_h": True}), 2, "input_error",
             "field 'keywords.perturb_h': true needs perturb_dipole"),
            ("perturb_with a sphere", dict(base, keywords={"perturb_h": True, "perturb_with": "sphere",
                                                           "perturb_dipole": [0, 0, 0.001]}), 2, "input_error",
             "field 'keywords.perturb_with': 'sphere' is not supported"),
            ("field too strong", dict(base, keywords={"perturb_h": True, "perturb_dipole": [0, 0, 2.0]}), 2,
             "input_error", "field 'keywords.perturb_dipole': component z is 2"),
            ("ccsd", dict(base, model={"method": "ccsd", "basis": "cc-pvdz"}), 2, "input_error",
             "field 'model.method': 'ccsd' is not supported"),
            ("sos scale with scs-mp2", dict(base, model={"method": "scs-mp2", "basis": "cc-pvdz"},
                                             keywords={"mp2_sos_scale": 1.2}), 2, "input_error",
             "field 'keywords.mp2_sos_scale': SOS-MP2's opposite-spin scale, used with 'method: sos-mp2' only"),
            ("negative spin scale", dict(base, model={"method": "scs-mp2", "basis": "cc-pvdz"},
                                         keywords={"mp2_os_scale": -1.2}), 2, "input_error",
             "field 'keywords.mp2_os_scale': expected a scale from 0 to 10"),
            ("method given twice", dict(base, keywords={"dfmp2_method": "sos-mp2"}), 2, "input_error",
             "field 'keywords.dfmp2_method': dfmp2's 'method' comes from 'model.method'"),
            ("unknown keyword", dict(base, keywords={"scf_typ": "df"}), 2, "input_error",
             "field 'keywords.scf_typ': unknown keyword (did you mean 'scf_type'?)"),
            ("conventional MP2", dict(base, keywords={"mp2_type": "conv"}), 2, "input_error",
             "field 'keywords.mp2_type': 'conv' is not supported"),
            ("geometry", dict(base, molecule=dict(base["molecule"], geometry=[0.0, 0.0, 0.0, 1.0])), 2,
             "input_error", "field 'molecule.geometry': expected 9 numbers"),
            ("charge type", dict(base, molecule=dict(base["molecule"], molecular_charge="one")), 2, "input_error",
             "field 'molecule.molecular_charge': expected a number"),
            ("unknown basis", dict(base, model={"method": "mp2", "basis": "cc-pv7z"}), 2, "input_error",
             "field 'model.basis': no basis set 'cc-pv7z'"),
            ("dfmp2 keyword", dict(base, keywords={"dfmp2_metric": "cholesk"}), 2, "input_error",
             "field 'keywords.dfmp2_metric'"),
            ("interaction of one fragment", dict(base, keywords={"dfmp2_interaction": {"bsse": "cp"}}), 2,
             "input_error", "field 'keywords.dfmp2_interaction': needs a molecule of two or more fragments"),
            ("own field", dict(base, keywords={"dfmp2_basis": "cc-pvtz"}), 2, "input_error",
             "field 'keywords.dfmp2_basis': dfmp2's 'basis' comes from 'model.basis'"),
            ("not converged", dict(base, keywords={"maxiter": 2, "dfmp2_threads": 1}), 5, "convergence_error",
             "SCF did not converge in 2 iterations"),
            # Wrong but parses: each was once run as something else, or ended in an internal error or a crash.
            ("charge out of range", with_molecule(base, molecular_charge=1e30), 2, "input_error",
             "field 'molecule.molecular_charge': 1e+30 is out of range (expected -1000 to 1000)"),
            ("charge not whole", with_molecule(base, molecular_charge=0.5), 2, "input_error",
             "field 'molecule.molecular_charge': expected a whole number, got 0.5"),
            ("charge as text", with_molecule(base, molecular_charge="1"), 2, "input_error",
             "field 'molecule.molecular_charge': expected a number"),
            ("odd electrons", with_molecule(base, molecular_charge=1), 2, "input_error",
             "field 'molecule.molecular_multiplicity': multiplicity 1 with charge 1 (9 electrons) is impossible"),
            ("fragments out of order", with_molecule(base, fragments=[[1, 2], [0]]), 2, "input_error",
             "dfmp2 takes fragments of consecutive atoms in order"),
            ("fragment charges do not add up", with_molecule(base, fragments=[[0], [1, 2]], fragment_charges=[0, 0],
                                                             fragment_multiplicities=[1, 1], molecular_charge=2), 2,
             "input_error", "the fragments' charges add up to 0"),
            ("rhf for a doublet", dict(with_molecule(base, molecular_charge=1, molecular_multiplicity=2),
                                        keywords={"reference": "RHF"}), 2, "input_error",
             "field 'keywords.reference': rhf is for closed shells"),
            ("no electrons", with_molecule(base, molecular_charge=10), 2, "input_error",
             "field 'molecule.molecular_charge': charge 10 leaves 0 electrons"),
            ("multiplicity zero", with_molecule(base, molecular_multiplicity=0), 2, "input_error",
             "field 'molecule.molecular_multiplicity': 0 is out of range"),
            ("multiplicity not whole", with_molecule(base, molecular_multiplicity=1.5), 2, "input_error",
             "field 'molecule.molecular_multiplicity': expected an integer, got '1.5'"),
            ("multiplicity huge", with_molecule(base, molecular_multiplicity=1e300), 2, "input_error",
             "field 'molecule.molecular_multiplicity': expected an integer"),
            # qcelemental refuses a multiplicity written as a float: the AtomicResult echoing it would not validate.
            ("multiplicity as a float", with_molecule(base, molecular_multiplicity=1.0), 2, "input_error",
             "field 'molecule.molecular_multiplicity': expected an integer, got '1.0'"),
            ("driver as a keyword", dict(base, keywords={"dfmp2_driver": "gradient"}), 2, "input_error",
             "field 'keywords.dfmp2_driver': dfmp2's 'driver' comes from 'driver' in QCSchema input"),
            ("fragment charges too few", with_molecule(base, fragments=[[0], [1, 2]], fragment_charges=[0]), 2,
             "input_error", "field 'molecule.fragment_charges': expected one entry per fragment (2), got 1"),
            ("fragment multiplicities too many", with_molecule(base, fragments=[[0], [1, 2]], fragment_charges=[0, 0],
                                                               fragment_multiplicities=[1, 1, 1]), 2,
             "input_error", "field 'molecule.fragment_multiplicities': expected one entry per fragment (2), got 3"),
            ("fragment charges without fragments", with_molecule(base, fragment_charges=[0, 0]), 2, "input_error",
             "field 'molecule.fragment_charges': expected one entry per fragment (1), got 2"),
            ("fragment index as a float", with_molecule(base, fragments=[[0], [1.0, 2]]), 2, "input_error",
             "field 'molecule.fragments': expected a list of lists of integers (atom indices)"),
            ("impossible fragment multiplicity", with_molecule(base, fragments=[[0, 1, 2]], fragment_multiplicities=[2]),
             2, "input_error", "field 'molecule.molecular_multiplicity': no charge and multiplicity of each fragment fit"),
            ("impossible fragment state", with_molecule(base, fragments=[[0], [1, 2]], fragment_charges=[0, 0],
                                                        fragment_multiplicities=[2, 1]), 2, "input_error",
             "field 'molecule.fragments[0]': multiplicity 2 with charge 0 (8 electrons) is impossible"),
            ("interaction with a ghost fragment", dict(with_molecule(base, fragments=[[0, 1], [2]], real=[True, True, False],
                                                                fragment_charges=[0, 0], fragment_multiplicities=[2, 1],
                                                                molecular_multiplicity=2),
                                                   keywords={"dfmp2_interaction": {"bsse": "cp"}}), 2, "input_error",
             "field 'molecule.fragments[1]' (atoms 3-3) holds only ghost atoms"),
            ("ghost fragment charged", with_molecule(base, fragments=[[0, 1], [2]], real=[True, True, False],
                                                     fragment_charges=[0, 1], fragment_multiplicities=[2, 1]), 2,
             "input_error", "field 'molecule.fragments[1]': holds only ghost atoms"),
            ("symbol with a newline", with_molecule(base, symbols=["O\nH 0 0 9", "H", "H"]), 2, "input_error",
             "field 'molecule.symbols[0]': 'O\\nH 0 0 9' is not an element symbol"),
            ("symbol with a blank", with_molecule(base, symbols=["O 1", "H", "H"]), 2, "input_error",
             "field 'molecule.symbols[0]': 'O 1' is not an element symbol"),
            ("symbol unknown", with_molecule(base, symbols=["Q", "H", "H"]), 2, "input_error",
             "field 'molecule.symbols[0]': 'Q' is not an element symbol"),
            ("duplicate key", json.dumps(base)[:-1] + ', "driver": "gradient"}', 2, "input_error",
             "field 'driver' is given twice"),
            ("duplicate nested key", json.dumps(base).replace('"basis": "cc-pvdz"', '"basis": "cc-pvdz", "basis": "sto-3g"'),
             2, "input_error", "field 'model.basis' is given twice"),
            ("number overflows", json.dumps(dict(base, extras={"note": [1, "@"]})).replace('"@"', "2e999"), 2, "input_error",
             "field 'extras.note[1]': the number 2e999 is beyond the range of a double"),
            ("a comma after the object", json.dumps(base) + ",\n", 2, "input_error",
             "YAML syntax error: ',' outside a flow collection"),
            ("a character the parser's message cuts in half", "\u03f9*".encode(), 2, "input_error",
             "last read: '\\xcf'"),
            ("deep nesting", json.dumps(dict(base, extras={"x": "@"})).replace('"@"', "[" * 100000 + "]" * 100000),
             2, "input_error", "nests deeper than 64 levels"),
            ("not UTF-8", json.dumps(dict(base, extras={"x": "@"})).encode().replace(b"@", b"\xff\xfe"), 2,
             "input_error", "(0xff) is not UTF-8"),
            ("keyword in two cases", dict(base, keywords={"scf_type": "df", "SCF_TYPE": "pk"}), 2, "input_error",
             "field 'keywords.SCF_TYPE': sets the same thing as 'keywords.scf_type'"),
            ("keyword by two names", dict(base, keywords={"maxiter": 5, "dfmp2_scf": {"max_iterations": 7}}), 2,
             "input_error", "field 'keywords.dfmp2_scf.max_iterations': sets the same thing as 'keywords.maxiter'"),
            ("id as an object", dict(base, id={"run": 1}), 2, "input_error",
             "field 'id': expected a string or null, got a mapping"),
            ("molecule name as a number", with_molecule(base, name=7), 2, "input_error",
             "field 'molecule.name': expected a string"),
            ("masses per atom", with_molecule(base, masses=[16.0, 1.0]), 2, "input_error",
             "field 'molecule.masses': expected one entry per atom (3), got 2"),
            ("no virtual orbitals", {**base, "molecule": {"symbols": ["He"], "geometry": [0, 0, 0]},
                                     "model": {"method": "mp2", "basis": "sto-3g"}}, 2, "input_error",
             "field 'model.basis': sto-3g gives this molecule 1 basis function for 1 occupied orbital"),
        ]
        for name, data, code, kind, message in cases:
            bad = os.path.join(d, "bad.json")
            with open(bad, "wb") as f:
                f.write(data if isinstance(data, bytes) else (data if isinstance(data, str) else json.dumps(data)).encode())
            out = os.path.join(d, "bad_out.json")
            if os.path.exists(out):
                os.remove(out)
            p = run([args.dfmp2, bad, "--json", out], d)
            lines = [l for l in p.stderr.splitlines() if l.strip()]
            c.check(p.returncode == code, "%s: exit %d (got %d)" % (name, code, p.returncode))
            c.check(len(lines) == 1 and lines[0].startswith("dfmp2: error: ") and message in lines[0],
                    "%s: one line naming the field ('%s'): %s" % (name, message, " | ".join(lines)[:300]))
            if not c.check(os.path.exists(out), "%s: a FailedOperation is written" % name):
                continue
            with open(out) as f:
                failed = json.load(f)
            try:
                op = qcel.models.FailedOperation(**failed)
                c.check(not op.success and op.error.error_type == kind and lines and
                        op.error.error_message == lines[0],
                        "%s: the FailedOperation validates, error_type %s, the printed line as its message" % (name, kind))
            except Exception as e:  # noqa: BLE001
                c.check(False, "%s: the FailedOperation validates: %s" % (name, str(e)[:300]))
        # The results file never replaces an input: --json naming the input itself is refused (exit 7), and no
        # FailedOperation is written over it.
        same = os.path.join(d, "same.json")
        with open(same, "w") as f:
            json.dump(base, f)
        before = open(same, "rb").read()
        p = run([args.dfmp2, same, "--json", same], d)
        c.check(p.returncode == 7 and "'" + same + "' is the input file" in p.stderr,
                "--json naming the input: exit 7 and one line (%d: %s)" % (p.returncode, p.stderr.strip()[:200]))
        c.check(open(same, "rb").read() == before, "--json naming the input: the input file is left as it was")
        c.check(not [x for x in os.listdir(d) if ".tmp." in x], "no temporary file left")


def qcengine_group(args, c):
    os.environ["DFMP2_BINARY"] = os.path.abspath(args.dfmp2)
    sys.path.insert(0, os.path.join(os.path.abspath(args.repo), "app", "python"))
    import qcengine
    import dfmp2_qcengine  # noqa: F401 -- registers the harness

    c.check("dfmp2" in qcengine.list_available_programs(), "QCEngine lists dfmp2 among its available programs")
    config = {"memory": 2, "ncores": 1}
    cases = [
        ("water cc-pVDZ, DF-SCF, frozen core", WATER, "cc-pvdz", {"scf_type": "df", "freeze_core": True}),
        ("ammonia def2-SVP, exact SCF", AMMONIA, "def2-svp", {"scf_type": "pk"}),
        ("hydronium aug-cc-pVDZ, DF-SCF", HYDRONIUM, "aug-cc-pvdz", {"scf_type": "df"}),
        # A ghost atom (molecule.real false): helium's basis functions beside the water.
        ("water + ghost He cc-pVDZ, exact SCF", WATER_GHOST_HE, "cc-pvdz", {"scf_type": "pk"}),
        # Open shells: the multiplicity from the molecule, the reference from Psi4's keyword.
        ("hydroxyl cc-pVDZ, UHF, DF-SCF", HYDROXYL, "cc-pvdz", {"scf_type": "df", "reference": "uhf"}),
        ("hydroxyl cc-pVDZ, ROHF, exact SCF, frozen core", HYDROXYL, "cc-pvdz",
         {"scf_type": "pk", "reference": "rohf", "freeze_core": True}),
    ]
    for name, xyz, basis, keywords in cases:
        inp = atomic_input(xyz, basis, dict(CONVERGED, mp2_type="df", **keywords))
        mine = qcengine.compute(inp, "dfmp2", task_config=config)
        theirs = qcengine.compute(inp, "psi4", task_config=config)
        if not c.check(mine.success, "%s: dfmp2 through QCEngine succeeds (%s)" % (
                name, "" if mine.success else mine.error.error_message[:300])):
            continue
        if not c.check(theirs.success, "%s: Psi4 through QCEngine succeeds (%s)" % (
                name, "" if theirs.success else theirs.error.error_message[:300])):
            continue
        d_scf = mine.properties.scf_total_energy - theirs.properties.scf_total_energy
        d_mp2 = mine.properties.mp2_correlation_energy - theirs.properties.mp2_correlation_energy
        c.check(abs(d_scf) <= 1e-6, "%s: SCF %.10f, %+.1e Eh from Psi4" % (name, mine.properties.scf_total_energy, d_scf))
        c.check(abs(d_mp2) <= 1e-7, "%s: MP2 correlation %.10f, %+.1e Eh from Psi4" % (
            name, mine.properties.mp2_correlation_energy, d_mp2))
        c.check(abs(mine.return_result - theirs.return_result) <= 1e-6, "%s: return_result %+.1e Eh from Psi4" % (
            name, mine.return_result - theirs.return_result))
        # Psi4's variable names in extras.qcvars, as QCEngine's Psi4 harness returns them.
        for var in ("MP2 SINGLES ENERGY", "MP2 SAME-SPIN CORRELATION ENERGY", "MP2 OPPOSITE-SPIN CORRELATION ENERGY"):
            ours, psi4s = mine.extras.get("qcvars", {}).get(var), theirs.extras.get("qcvars", {}).get(var)
            if psi4s is None:
                continue
            c.check(ours is not None and abs(float(ours) - float(psi4s)) <= 1e-7, "%s: qcvars '%s' %s, Psi4 %.10f" % (
                name, var, "missing" if ours is None else "%.10f" % float(ours), float(psi4s)))
    # The DF-MP2 gradient through QCEngine against Psi4's (its DF-MP2 gradient needs a DF-SCF).
    # The molecule's frame held (fix_com, fix_orientation): Psi4 would otherwise return the gradient in its own frame.
    inp = qcel.models.AtomicInput(
        molecule=qcel.models.Molecule.from_data(AMMONIA, fix_com=True, fix_orientation=True), driver="gradient",
        model={"method": "mp2", "basis": "cc-pvdz"},
        keywords=dict(CONVERGED, scf_type="df", mp2_type="df", freeze_core=True))
    mine = qcengine.compute(inp, "dfmp2", task_config=config)
    theirs = qcengine.compute(inp, "psi4", task_config=config)
    if c.check(mine.success and theirs.success, "ammonia gradient through QCEngine: both succeed (%s)" % (
            "" if mine.success else mine.error.error_message[:300])):
        diff = float(abs(mine.return_result.ravel() - theirs.return_result.ravel()).max())
        c.check(diff <= 1e-7, "ammonia cc-pVDZ DF-MP2 gradient, frozen core: %.1e Eh/bohr from Psi4's" % diff)
    bad = atomic_input(WATER, "cc-pvdz", {"scf_typ": "df"})
    failed = qcengine.compute(bad, "dfmp2", task_config=config)
    c.check(not failed.success and failed.error.error_type == "input_error" and
            "field 'keywords.scf_typ': unknown keyword" in failed.error.error_message,
            "a bad keyword through QCEngine comes back as dfmp2's FailedOperation: %s" % (
                failed.error.error_message if not failed.success else "succeeded"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dfmp2", required=True)
    p.add_argument("--repo", required=True)
    p.add_argument("--group", choices=["cli", "qcengine"], required=True)
    args = p.parse_args()
    args.dfmp2 = os.path.abspath(args.dfmp2)
    c = Checker()
    (cli if args.group == "cli" else qcengine_group)(args, c)
    print("%s: %s" % (args.group, "all checks passed" if c.failed == 0 else "%d checks failed" % c.failed))
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
