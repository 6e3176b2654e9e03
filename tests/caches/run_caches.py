#!/usr/bin/python3
"""The files dfmp2 keeps for a user between runs, as an attacker or an accident could leave them (README "Files
dfmp2 keeps"): the backend calibration's cache and lock in $XDG_CACHE_HOME/dfmp2, and the device models' compile
cache in $XDG_CACHE_HOME/dfmp2/neuron. Each case prepares a fresh cache folder, runs the `dfmp2` binary on a small
input with XDG_CACHE_HOME pointing at it, and checks what a user must be able to rely on:

  - the run ends, with its usual exit code, well within its time limit (a FIFO or a held lock never stops it);
  - no file outside the cache folder is written or created through a link planted in it;
  - nothing is read beyond what a valid cache file holds (a 1 GiB file does not raise the peak memory);
  - the report says what was wrong with the cache, and no temporary is left behind.

    run_caches.py --dfmp2 build/app/dfmp2 --repo . [--only WORD]
Prints one line per check and a summary (the number of cases); exits 1 if any check failed.
"""
import argparse
import fcntl
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

TIME_LIMIT = 120  # seconds: a hang fails the case
PATIENCE = 20     # devices/calibration.hpp kCalibrationLockPatience: how long a held lock is waited for
NOBODY = 65534


class Checks:
    def __init__(self):
        self.failed = 0
        self.cases = 0

    def check(self, ok, what):
        print("%s %s" % ("ok  " if ok else "FAIL", what), flush=True)
        if not ok:
            self.failed += 1
        return ok


def run(args, cwd, cache_home, input_text, env_extra=None, timeout=TIME_LIMIT):
    """Runs dfmp2 on `input_text`; returns (exit code or None on a hang, stdout, stderr, seconds, peak RSS bytes)."""
    path = os.path.join(cwd, "in.yaml")
    with open(path, "w") as f:
        f.write(input_text)
    env = dict(os.environ, XDG_CACHE_HOME=cache_home, OMP_NUM_THREADS="1")
    env.update(env_extra or {})
    out, err = os.path.join(cwd, "stdout"), os.path.join(cwd, "stderr")
    start = time.monotonic()
    with open(out, "wb") as o, open(err, "wb") as e:
        p = subprocess.Popen([args.dfmp2, path], cwd=cwd, env=env, stdout=o, stderr=e, stdin=subprocess.DEVNULL)
        code, rss = None, 0
        while time.monotonic() - start < timeout:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid == p.pid:
                code = os.waitstatus_to_exitcode(status)
                rss = usage.ru_maxrss * 1024
                break
            time.sleep(0.05)
        if code is None:
            p.kill()
            p.wait()
    seconds = time.monotonic() - start
    with open(out, errors="replace") as o, open(err, errors="replace") as e:
        return code, o.read(), e.read(), seconds, rss


def default_line(stdout):
    return next((line.strip() for line in stdout.splitlines() if line.strip().startswith("default")), "")


def temporaries(folder):
    return [p for p in glob.glob(os.path.join(folder, "**", "*"), recursive=True) if p.endswith(".tmp")]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dfmp2", required=True)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--only", default=None)
    args = ap.parse_args()
    args.dfmp2 = os.path.abspath(args.dfmp2)
    water = os.path.join(os.path.abspath(args.repo), "inputs", "water-cc-pvdz.h5")
    energy_input = "integrals: %s\nthreads: 1\n" % water  # no `backends`: the calibration runs
    device_input = ("synthetic: {nbasis: 40, nocc: 5, naux: 100, seed: 1}\nbackends: [trn1]\nthreads: 1\n"
                    "cost: false\n")
    c = Checks()
    root = os.geteuid() == 0

    with tempfile.TemporaryDirectory(prefix="dfmp2-caches-") as work:
        # The names the caches use on this machine: learnt from one clean run of each kind.
        learn = os.path.join(work, "learn")
        os.makedirs(os.path.join(learn, "home"))
        code, out, err, _, plain_rss = run(args, learn, os.path.join(learn, "home"), energy_input)
        if not c.check(code == 0, "a run with a new cache folder exits 0 (%s)" % err.strip()[-200:]):
            return 1
        folder = os.path.join(learn, "home", "dfmp2")
        cache_name = next(n for n in os.listdir(folder) if n.startswith("backend-calibration-"))
        code, out, err, _, _ = run(args, learn, os.path.join(learn, "home"), device_input)
        if not c.check(code == 0, "a device-model run with a new compile cache exits 0 (%s)" % err.strip()[-200:]):
            return 1
        kernels = sorted(os.listdir(os.path.join(folder, "neuron")))
        c.check(len(kernels) > 0, "the compile cache holds the run's kernel files (%d)" % len(kernels))

        def case(name, prepare, expect_exit=0, says=None, kind="energy", extra_checks=None, env_extra=None,
                 max_seconds=TIME_LIMIT, needs_root=False):
            if args.only and args.only not in name:
                return
            if needs_root and not root:
                print("skip %s: needs root (to give a file to another user)" % name)
                return
            c.cases += 1
            d = os.path.join(work, name)
            home = os.path.join(d, "home")
            os.makedirs(home)
            ctx = {"dir": d, "home": home, "folder": os.path.join(home, "dfmp2"),
                   "cache": os.path.join(home, "dfmp2", cache_name),
                   "lock": os.path.join(home, "dfmp2", "backend-calibration.lock"),
                   "neuron": os.path.join(home, "dfmp2", "neuron"), "kernels": kernels,
                   "outside": os.path.join(d, "users-file")}
            with open(ctx["outside"], "w") as f:
                f.write("precious\n")
            cleanup = prepare(ctx)
            try:
                code, out, err, seconds, rss = run(args, d, home, energy_input if kind == "energy" else device_input,
                                                   env_extra)
            finally:
                if cleanup:
                    cleanup()
            if not c.check(code is not None, "%s: ends within %d s" % (name, TIME_LIMIT)):
                return
            c.check(code == expect_exit, "%s: exit %d (got %d; %s)" % (name, expect_exit, code, err.strip()[-300:]))
            c.check(seconds <= max_seconds, "%s: done in %.1f s (at most %d)" % (name, seconds, max_seconds))
            with open(ctx["outside"]) as f:
                c.check(f.read() == "precious\n", "%s: the user's file outside the cache is untouched" % name)
            if says:
                text = default_line(out) if expect_exit == 0 else err
                c.check(says in text, "%s: says '%s' (%s)" % (name, says, text[-400:]))
            if os.path.isdir(ctx["folder"]) and not os.path.islink(ctx["folder"]):
                left = temporaries(ctx["folder"])
                c.check(not left, "%s: no temporary left in the cache folder %s" % (name, left))
            if extra_checks:
                extra_checks(ctx, out, err, rss)

        def plant_link(target_key):
            def prepare(ctx):
                os.makedirs(ctx["folder"], mode=0o700)
                os.symlink(ctx["outside"], ctx[target_key])
            return prepare

        def is_regular(key):
            def check(ctx, out, err, rss):
                c.check(os.path.isfile(ctx[key]) and not os.path.islink(ctx[key]),
                        "the entry at %s is now a regular file of the run's" % os.path.basename(ctx[key]))
            return check

        # The calibration cache.
        case("cache_is_a_link_to_a_users_file", plant_link("cache"), says="symbolic link",
             extra_checks=is_regular("cache"))

        def dangling(ctx):
            os.makedirs(ctx["folder"], mode=0o700)
            os.symlink(os.path.join(ctx["dir"], "created-through-the-link"), ctx["cache"])
        case("cache_is_a_dangling_link", dangling,
             extra_checks=lambda ctx, out, err, rss: c.check(
                 not os.path.exists(os.path.join(ctx["dir"], "created-through-the-link")),
                 "no file created at the dangling link's target"))

        def fifo(key):
            def prepare(ctx):
                os.makedirs(ctx["folder"], mode=0o700, exist_ok=True)
                os.mkfifo(ctx[key])
            return prepare
        case("cache_is_a_fifo", fifo("cache"), says="a FIFO", max_seconds=30)

        def folder_at(ctx):
            os.makedirs(os.path.join(ctx["cache"], "inside"))
        case("cache_is_a_folder", folder_at, says="a folder")

        def huge(ctx):
            os.makedirs(ctx["folder"], mode=0o700)
            with open(ctx["cache"], "wb") as f:
                f.truncate(1 << 30)
        case("cache_of_1_gib", huge, says="more than the",
             extra_checks=lambda ctx, out, err, rss: c.check(
                 rss < plain_rss + (128 << 20), "peak resident %.0f MiB, a plain run's %.0f MiB: the file was not "
                 "read whole" % (rss / 2**20, plain_rss / 2**20)))

        def garbage(ctx):
            os.makedirs(ctx["folder"], mode=0o700)
            with open(ctx["cache"], "wb") as f:
                f.write(b"# dfmp2 backend calibration\nrate eigen -1 nan\n\xff\xfe")
        case("cache_of_garbage", garbage, says="measured now, cached in")

        def theirs(ctx):
            os.makedirs(ctx["folder"], mode=0o700)
            shutil.copy(os.path.join(folder, cache_name), ctx["cache"])
            os.chown(ctx["cache"], NOBODY, NOBODY)
        case("cache_of_another_user", theirs, says="belongs to another user", needs_root=True)

        # The lock beside it.
        case("lock_is_a_fifo", fifo("lock"), says="a FIFO", max_seconds=30)
        def lock_dangling(ctx):
            os.makedirs(ctx["folder"], mode=0o700)
            os.symlink(os.path.join(ctx["dir"], "made-by-lock"), ctx["lock"])
        case("lock_is_a_dangling_link", lock_dangling, says="symbolic link",
             extra_checks=lambda ctx, out, err, rss: c.check(
                 not os.path.exists(os.path.join(ctx["dir"], "made-by-lock")),
                 "no lock file created outside the cache folder"))
        case("lock_is_a_link_to_a_users_file", plant_link("lock"), says="symbolic link")

        def stale(ctx):
            os.makedirs(ctx["folder"], mode=0o700)
            open(ctx["lock"], "w").close()
        case("lock_left_by_an_earlier_run", stale, says="measured now, cached in")

        held = {}

        def held_lock(ctx):
            os.makedirs(ctx["folder"], mode=0o700)
            # A run stopped with Ctrl-Z during its calibration: another process holds the lock and never lets go.
            holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time\n"
                                       "f = open(sys.argv[1], 'w'); fcntl.flock(f, fcntl.LOCK_EX)\n"
                                       "print('held', flush=True); time.sleep(600)", ctx["lock"]],
                                      stdout=subprocess.PIPE)
            holder.stdout.readline()
            held["p"] = holder
            return lambda: (holder.send_signal(signal.SIGKILL), holder.wait())
        case("lock_held_by_a_stopped_run", held_lock, says="held by another process",
             max_seconds=PATIENCE + 40)

        # The folder itself.
        def world_writable(ctx):
            os.makedirs(ctx["folder"])
            os.chmod(ctx["folder"], 0o777)
        case("folder_writable_by_others", world_writable, says="writable by other users",
             extra_checks=lambda ctx, out, err, rss: c.check(not os.path.exists(ctx["cache"]),
                                                             "nothing written into a folder others can write"))

        def their_folder(ctx):
            os.makedirs(ctx["folder"], mode=0o700)
            os.chown(ctx["folder"], NOBODY, NOBODY)
        case("folder_of_another_user", their_folder, says="belongs to another user", needs_root=True)

        def file_as_folder(ctx):
            with open(ctx["folder"], "w") as f:
                f.write("not a folder\n")
        case("folder_is_a_file", file_as_folder, says="is not a folder")

        def unset_home(ctx):
            return None
        case("no_cache_folder_at_all", unset_home, says="neither XDG_CACHE_HOME nor HOME is set",
             env_extra={"XDG_CACHE_HOME": "", "HOME": ""})

        # Runs that start together: one measures, the others wait and read its figures; all agree.
        if not args.only or "concurrent" in args.only:
            c.cases += 1
            d = os.path.join(work, "concurrent")
            home = os.path.join(d, "home")
            os.makedirs(home)
            procs = []
            for k in range(3):
                sub = os.path.join(d, "run%d" % k)
                os.makedirs(sub)
                with open(os.path.join(sub, "in.yaml"), "w") as f:
                    f.write(energy_input)
                procs.append(subprocess.Popen([args.dfmp2, "in.yaml"], cwd=sub, stdout=subprocess.PIPE,
                                              stderr=subprocess.PIPE, text=True,
                                              env=dict(os.environ, XDG_CACHE_HOME=home, OMP_NUM_THREADS="1")))
            outs = [p.communicate(timeout=TIME_LIMIT) for p in procs]
            c.check(all(p.returncode == 0 for p in procs), "concurrent: three runs started together exit 0")
            defaults = {default_line(o).split(" (")[0] for o, _ in outs}
            c.check(len(defaults) == 1, "concurrent: they agree on the default backend (%s)" % defaults)
            cached = sum("cached " in default_line(o) and "measured now" not in default_line(o) for o, _ in outs)
            c.check(cached >= 1, "concurrent: the later ones read the first one's figures (%d of 3)" % cached)
            entries = sorted(os.listdir(os.path.join(home, "dfmp2")))
            c.check(entries == sorted([cache_name, "backend-calibration.lock"]),
                    "concurrent: one cache file and the lock, no temporaries (%s)" % entries)

        # The compile cache of the device models.
        def kernel_link(ctx):
            os.makedirs(ctx["neuron"], mode=0o700)
            for k in ctx["kernels"]:
                os.symlink(ctx["outside"], os.path.join(ctx["neuron"], k))
        case("kernel_files_are_links_to_a_users_file", kernel_link, kind="device",
             extra_checks=lambda ctx, out, err, rss: c.check(
                 all(not os.path.islink(os.path.join(ctx["neuron"], k)) for k in ctx["kernels"]),
                 "every kernel file is now the run's own regular file"))

        def kernel_fifo(ctx):
            os.makedirs(ctx["neuron"], mode=0o700)
            for k in ctx["kernels"]:
                os.mkfifo(os.path.join(ctx["neuron"], k))
        case("kernel_files_are_fifos", kernel_fifo, kind="device", max_seconds=60)

        def kernel_huge(ctx):
            os.makedirs(ctx["neuron"], mode=0o700)
            for k in ctx["kernels"]:
                with open(os.path.join(ctx["neuron"], k), "wb") as f:
                    f.truncate(1 << 30)
        case("kernel_files_of_1_gib", kernel_huge, kind="device",
             extra_checks=lambda ctx, out, err, rss: c.check(
                 rss < plain_rss + (256 << 20), "peak resident %.0f MiB: no kernel file read whole" % (rss / 2**20)))

        def neuron_world_writable(ctx):
            os.makedirs(ctx["neuron"])
            os.chmod(ctx["neuron"], 0o777)
        case("compile_cache_writable_by_others", neuron_world_writable, kind="device", expect_exit=7,
             says="compile cache folder: '")

        def neuron_is_file(ctx):
            os.makedirs(ctx["folder"], mode=0o700)
            with open(ctx["neuron"], "w") as f:
                f.write("x")
        case("compile_cache_is_a_file", neuron_is_file, kind="device", expect_exit=7, says="is not a folder")

    print("caches: %d cases, %s" % (c.cases, "all checks passed" if c.failed == 0 else "%d checks failed" % c.failed))
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
