#!/usr/bin/env python3
"""Runs a test program under one OpenBLAS kernel set (OPENBLAS_CORETYPE), or skips it (exit 77) when this CPU
cannot execute that kernel set's instructions.

    run_with_coretype.py --core Cooperlake -- build/tests/test_backends

OpenBLAS picks its kernels at run time from the CPU, so a user's machine may run kernels that the development
machine never does (README "Tests", label coretypes). Forcing a kernel set the CPU lacks the instructions for would
end in SIGILL, not in a test result, hence the check. The test program itself checks that OpenBLAS took the kernel
set asked for (KernelSet.IsTheOneAskedFor), so a run that silently fell back to another one fails.
"""
import argparse
import os
import sys

# The CPU flags (as /proc/cpuinfo names them) each kernel set's code needs: OpenBLAS's own x86-64 targets
# (Makefile.x86_64 and driver/others/dynamic.c of OpenBLAS 0.3.21).
NEEDS = {
    "Prescott": ["sse2", "pni"],
    "Nehalem": ["sse2", "pni", "ssse3", "sse4_1", "sse4_2", "popcnt"],
    "Sandybridge": ["avx"],
    "Haswell": ["avx", "avx2", "fma"],
    "Zen": ["avx", "avx2", "fma"],
    "SkylakeX": ["avx2", "fma", "avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"],
    "Cooperlake": ["avx2", "fma", "avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx512_bf16"],
}
SKIP = 77


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--core", required=True, choices=sorted(NEEDS))
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args()
    missing = [f for f in NEEDS[args.core] if f not in cpu_flags()]
    if missing:
        print("skipped: this CPU cannot run OpenBLAS's %s kernels (no %s)" % (args.core, ", ".join(missing)))
        return SKIP
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("no command to run")
    env = dict(os.environ, OPENBLAS_CORETYPE=args.core, DFMP2_EXPECT_OPENBLAS_CORETYPE=args.core)
    sys.stdout.flush()
    os.execvpe(command[0], command, env)


if __name__ == "__main__":
    sys.exit(main())
