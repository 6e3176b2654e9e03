"""What the live Psi4 tier's tests share: running dfmp2 on YAML text and printing a check's line."""
import json
import os
import subprocess


def run_text(binary, workdir, text):
    """dfmp2 on the YAML `text` (one thread: ctest runs two tests at once) in `workdir`; its results file, parsed."""
    with open(os.path.join(workdir, "in.yaml"), "w") as f:
        f.write(text + "output: e.json\nthreads: 1\n")
    subprocess.run([binary, "in.yaml"], check=True, stdout=subprocess.DEVNULL, cwd=workdir)
    with open(os.path.join(workdir, "e.json")) as f:
        return json.load(f)


def report(ok, text):
    """Prints the check's line; 0 when it passed, 1 when not (to add up failures)."""
    print("%s %s" % ("ok  " if ok else "FAIL", text))
    return 0 if ok else 1
