"""dfmp2 as a QCEngine program (README "QCSchema and QCEngine").

    import dfmp2_qcengine                      # registers the harness with QCEngine
    qcengine.compute(atomic_input, "dfmp2")    # an AtomicResult, or a FailedOperation

The harness writes the AtomicInput to a scratch folder, runs `dfmp2 input.json --json result.json` and returns what
dfmp2 wrote: its AtomicResult (with the text report as `stdout`) or its FailedOperation (the message and error class
the command line prints). QCEngine's task configuration becomes dfmp2's keywords `dfmp2_memory` (config.memory GiB)
and `dfmp2_threads` (config.ncores), unless the input gives them. The binary is $DFMP2_BINARY, else the one installed with
this package (PREFIX/bin/dfmp2), else `dfmp2` on PATH, else the build tree's build/app/dfmp2 next to this package's
source.
"""
import json
import os
import shutil
import subprocess
import tempfile
from typing import Any, Dict, Union

import qcengine
from qcelemental.models import AtomicInput, AtomicResult, FailedOperation
from qcengine.config import TaskConfig
from qcengine.programs.model import ProgramHarness

_HERE = os.path.dirname(os.path.abspath(__file__))
# Installed: PREFIX/lib/python3/dist-packages/dfmp2_qcengine, beside PREFIX/bin/dfmp2. In the source tree:
# app/python/dfmp2_qcengine, beside build/app/dfmp2.
_INSTALLED = os.path.normpath(os.path.join(_HERE, "..", "..", "..", "..", "bin", "dfmp2"))
_SOURCE_BUILD = os.path.normpath(os.path.join(_HERE, "..", "..", "..", "build", "app", "dfmp2"))


def dfmp2_binary():
    """The dfmp2 executable this harness runs, or None: $DFMP2_BINARY, the one installed with this package, dfmp2 on
    PATH, the source tree's build."""
    env = os.environ.get("DFMP2_BINARY")
    if env:
        return env if os.access(env, os.X_OK) else None
    if os.path.basename(os.path.dirname(_HERE)) in ("dist-packages", "site-packages") and os.access(_INSTALLED, os.X_OK):
        return _INSTALLED
    on_path = shutil.which("dfmp2")
    if on_path:
        return on_path
    return _SOURCE_BUILD if os.access(_SOURCE_BUILD, os.X_OK) else None


class Dfmp2Harness(ProgramHarness):
    _defaults: Dict[str, Any] = {
        "name": "dfmp2",
        "scratch": True,
        "thread_safe": True,
        "thread_parallel": True,
        "node_parallel": False,
        "managed_memory": True,
    }
    version_cache: Dict[str, str] = {}

    class Config(ProgramHarness.Config):
        pass

    @staticmethod
    def found(raise_error: bool = False) -> bool:
        if dfmp2_binary() is not None:
            return True
        if raise_error:
            raise ModuleNotFoundError("dfmp2: no executable ($DFMP2_BINARY, %s, dfmp2 on PATH, or %s)" % (
                _INSTALLED, _SOURCE_BUILD))
        return False

    def get_version(self) -> str:
        binary = dfmp2_binary()
        if binary not in self.version_cache:
            out = subprocess.run([binary, "--version"], stdout=subprocess.PIPE, text=True, check=True).stdout
            self.version_cache[binary] = out.split()[0]
        return self.version_cache[binary]

    def compute(self, input_model: AtomicInput, config: TaskConfig) -> Union[AtomicResult, FailedOperation]:
        self.found(raise_error=True)
        data = json.loads(input_model.json())
        keywords = dict(data.get("keywords") or {})
        keywords.setdefault("dfmp2_memory", "%.6g GiB" % config.memory)
        keywords.setdefault("dfmp2_threads", int(config.ncores))
        data["keywords"] = keywords
        with tempfile.TemporaryDirectory(prefix="dfmp2-qcengine-", dir=config.scratch_directory) as d:
            inp, out = os.path.join(d, "input.json"), os.path.join(d, "result.json")
            with open(inp, "w") as f:
                json.dump(data, f)
            proc = subprocess.run([dfmp2_binary(), inp, "--json", out], cwd=d, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=dict(os.environ, TMPDIR=d))
            if not os.path.exists(out):  # dfmp2 always writes one of the two; anything else is a crash
                return FailedOperation(input_data=input_model, success=False,
                                       error={"error_type": "unknown_error",
                                              "error_message": "dfmp2 exited %d without a result: %s" % (
                                                  proc.returncode, proc.stderr.strip())})
            with open(out) as f:
                result = json.load(f)
        if result.get("success"):
            result["stdout"] = proc.stdout
            return AtomicResult(**result)
        return FailedOperation(**result)


def register():
    """Registers the harness with QCEngine (once)."""
    if "dfmp2" not in qcengine.list_all_programs() or "dfmp2" not in qcengine.programs.base.programs:
        qcengine.register_program(Dfmp2Harness())


register()
