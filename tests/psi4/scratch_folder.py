"""A live Psi4 test's scratch folder, removed when the test ends.

Psi4 writes timer.dat and scratch files into its working directory and PSI_SCRATCH, some of them from its exit
handlers, so the folder cannot be removed from inside the process that ran Psi4. The test therefore runs itself
again as a child process that works in the folder, and the parent removes the folder once the child has exited.
"""
import os
import shutil
import subprocess
import sys
import tempfile

_FOLDER_VARIABLE = "DFMP2_LIVE_TEST_FOLDER"


def scratch_folder(prefix):
    """In the child: the folder to work in (PSI_SCRATCH already points there). In the parent: run this script again
    as the child with the same arguments and working directory, remove the folder, exit with the child's status."""
    folder = os.environ.get(_FOLDER_VARIABLE)
    if folder:
        return folder
    folder = tempfile.mkdtemp(prefix=prefix)
    try:
        child_env = dict(os.environ, **{_FOLDER_VARIABLE: folder, "PSI_SCRATCH": folder})
        status = subprocess.run([sys.executable, os.path.abspath(sys.argv[0])] + sys.argv[1:], env=child_env).returncode
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    sys.exit(status)
