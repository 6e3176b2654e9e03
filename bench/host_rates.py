#!/usr/bin/env python3
"""The host-side rates of the trn1 device model, measured on this machine as a stand-in for the trn1 host.

The published library runs part of every composite call on the host CPU (torch): the TRSM's 128-row panel solves,
the metric's Cholesky, and passes over memory (padding copies, contiguous copies of transposed views, alpha *
result, the TRSM's subtraction), some into freshly mapped tensors. No host-side timing of these is published for
the trn1.2xlarge; its host's torch.matmul rate is (trnsci/trntensor docs/design/matmul_dispatch_findings.md, the
PT column: 1024^3 fp32 in 2.899-2.938 ms, 0.73-0.74 TFLOP/s). So this script measures, on this machine:

  - the panel solves and the Cholesky as fractions of this machine's own SGEMM 1024^3 rate (dfmp2 bench
    --trace bench/traces/host_rates.yaml on the openblas backend, all cores), which the model multiplies by the
    published trn1 host SGEMM rate (host_gflops, host_lapack_gflops);
  - the memory passes (numpy, one thread): a subtraction into an existing tensor (bytes read plus written per
    second, host_stream_gbps) and the first touch of a freshly mapped tensor above glibc's 32 MiB mmap threshold
    (host_first_touch_gbps), which the model takes as they are (a stand-in: the trn1 host's own are not published).

    bench/host_rates.py                 # prints the table and the parameter values
    bench/host_rates.py --json rates.json

Results: bench/README.md, "Device model: calibration and check rows".
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

PUBLISHED_HOST_SGEMM_GFLOPS = 2 * 1024 ** 3 / 2.918e-3 / 1e9  # trn1.2xlarge torch.matmul 1024^3: mean of 2.899, 2.938 ms
MMAP_THRESHOLD_MAX = 32 * 1024 * 1024


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            info = {}
            for line in f:
                if ":" in line:
                    key, value = line.split(":", 1)
                    info.setdefault(key.strip(), value.strip())
        return "{} (family {}, model {})".format(info.get("model name", "?"), info.get("cpu family", "?"),
                                                 info.get("model", "?"))
    except OSError:
        return "unknown CPU"


def blas_fractions(dfmp2, threads, repeat):
    with tempfile.TemporaryDirectory(prefix="dfmp2-host-rates-") as tmp:
        out = os.path.join(tmp, "rates.json")
        cmd = [dfmp2, "bench", "--trace", os.path.join(HERE, "traces", "host_rates.yaml"), "--backends", "openblas",
               "--threads", str(threads), "--repeat", str(repeat), "--warmup", "2", "--json", out]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            rows = json.load(f)["rows"]
    rates = {r["label"]: r["gflops"] for r in rows if r["label"] != "total"}
    reference = rates["reference: sgemm 1024^3"]
    return reference, {label: rate / reference for label, rate in rates.items()}


def hockney_fit(points):
    """r_inf and n_1/2 of r(n) = r_inf n / (n + n_1/2) through (n, r) points: 1/r = 1/r_inf + (n_1/2 / r_inf) / n is
    a straight line in 1/n, fitted by least squares."""
    xs = [1.0 / n for n, _ in points]
    ys = [1.0 / r for _, r in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    intercept = my - slope * mx
    return 1.0 / intercept, slope / intercept


def memory_passes(repeat):
    try:
        import numpy as np
    except ImportError:
        sys.exit("host_rates.py: numpy is needed for the memory passes (Debian's python3-numpy; run it with "
                 "/usr/bin/python3)")

    # A pass into an existing tensor: x = a - b over three arrays of 1 MiB (in cache, as the TRSM's updates of
    # 0.2-4 MiB) and of 256 MiB (from memory, as the half transformation's passes of 0.2-1.6 GB); bytes read plus
    # written per second, best of `repeat`.
    stream = {}
    for mib in (1, 256):
        n = mib * 1024 * 1024 // 4
        a, b, c = np.ones(n, np.float32), np.ones(n, np.float32), np.ones(n, np.float32)
        np.subtract(a, b, out=c)
        best = min(timed(lambda: np.subtract(a, b, out=c)) for _ in range(max(repeat, 20 if mib == 1 else repeat)))
        stream[mib] = 3 * 4 * n / best / 1e9
        del a, b, c
    # First touch: filling a fresh 512 MiB array (mapped by malloc, its pages faulted and zeroed as they are first
    # written) against filling it again; the difference is the first touch. In 4 KiB pages, as torch's CPU
    # allocator leaves them: numpy asks for transparent huge pages on large arrays, which is switched off here.
    madvise = getattr(np.core.multiarray, "_set_madvise_hugepage", None)
    if madvise:
        madvise(False)
    m = 128 * 1024 * 1024
    first, again = [], []
    for _ in range(repeat):
        x = np.empty(m, np.float32)
        first.append(timed(lambda: x.fill(0)))
        again.append(timed(lambda: x.fill(0)))
        del x
    touch = 4 * m / (min(first) - min(again)) / 1e9
    fill = 4 * m / min(again) / 1e9
    return stream, touch, fill


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dfmp2", default=os.path.join(ROOT, "build", "app", "dfmp2"))
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()

    reference, fractions = blas_fractions(args.dfmp2, args.threads, args.repeat)
    stream, touch, fill = memory_passes(args.repeat)
    env = {k: os.environ.get(k, "unset") for k in ("OPENBLAS_CORETYPE", "OMP_NUM_THREADS")}
    print("host rates on {}, {} threads, OpenBLAS ({})".format(cpu_name(), args.threads,
                                                              ", ".join(f"{k}={v}" for k, v in env.items())))
    print(f"  sgemm 1024^3 here: {reference:.1f} GFLOP/s; published trn1.2xlarge host torch.matmul: "
          f"{PUBLISHED_HOST_SGEMM_GFLOPS:.1f} GFLOP/s")
    for label, fraction in fractions.items():
        print(f"  {label:<28} {fraction:6.3f} of sgemm -> {fraction * PUBLISHED_HOST_SGEMM_GFLOPS:7.1f} GFLOP/s on the "
              f"trn1 host")
    print(f"  memory pass (x = a - b): {stream[1]:.1f} GB/s read + written on 1 MiB arrays, {stream[256]:.1f} on "
          f"256 MiB; first touch of a fresh 512 MiB tensor in 4 KiB pages: {touch:.2f} GB/s (a warm fill runs at "
          f"{fill:.1f} GB/s)")

    def family(prefix):
        points = [(float(label.split()[-1]), f * PUBLISHED_HOST_SGEMM_GFLOPS) for label, f in fractions.items()
                  if label.startswith(prefix)]
        r_inf, half = hockney_fit(points)
        worst = max(abs(r_inf * n / (n + half) / r - 1) for n, r in points)
        print(f"  {prefix}: r_inf {r_inf:.1f} GFLOP/s on the trn1 host, n_1/2 {half:.0f}; largest misfit "
              f"{worst * 100:.1f} %")
        return r_inf, half

    panel_rate, panel_half = family("panel solve")
    cholesky_rate, cholesky_half = family("Cholesky")
    params = {
        "host_gflops": panel_rate,
        "host_gflops_half_rhs": panel_half,
        "host_lapack_gflops": cholesky_rate,
        "host_lapack_half_n": cholesky_half,
        "host_stream_gbps": stream[1],
        "host_stream_memory_gbps": stream[256],
        "host_first_touch_gbps": touch,
    }
    print("parameters: " + ", ".join(f"{k} {v:.3g}" for k, v in params.items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cpu": cpu_name(), "threads": args.threads, "environment": env, "sgemm_gflops": reference,
                       "published_host_sgemm_gflops": PUBLISHED_HOST_SGEMM_GFLOPS, "fractions": fractions,
                       "stream_gbps": stream, "first_touch_gbps": touch, "warm_fill_gbps": fill,
                       "parameters": params}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
