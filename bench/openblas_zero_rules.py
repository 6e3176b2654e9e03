#!/usr/bin/python3
"""What keeping BLAS's zero rules in the openblas backend costs (README "Backends", bench/README.md "OpenBLAS's zero
rules"). alpha = 0 and k = 0 are handled by dfmp2 (OpenBLAS's AVX-512 kernel sets read A and B there); the cost of
also clearing C before every beta = 0 product is the time of that clear, which is what a call with alpha = 0 and
beta = 0 does, against the product itself. Medians of 15 calls, at the shapes of DF-MP2's steps and two extremes.

    PYTHONPATH=build/python /usr/bin/python3 bench/openblas_zero_rules.py [--threads 2]
"""
import argparse
import statistics

import numpy as np
import dfmp2

SHAPES = [("pair energy, (H2O)16 cc-pVDZ (nvir x nvir, k = naux)", 328, 328, 1312),
          ("SCF density, (H2O)16 cc-pVDZ (nbf x nbf, k = nocc)", 384, 384, 40),
          ("square", 1024, 1024, 1024),
          ("thin", 2048, 2048, 32)]


def median_seconds(call, backend, repeat=15):
    times = []
    for _ in range(repeat):
        call()
        times.append(backend.last_call["seconds"])
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    be = dfmp2.Backend("openblas", threads=args.threads)
    rng = np.random.default_rng(1)
    print("openblas: %s" % be.details)
    print("| product | m x n x k | product (ms) | clearing C (ms) | clear / product |")
    print("|---|---|---|---|---|")
    for name, m, n, k in SHAPES:
        a, b, c = rng.standard_normal((m, k)), rng.standard_normal((k, n)), rng.standard_normal((m, n))
        product = median_seconds(lambda: be.gemm(a, b, beta=0.0, c=c), be)
        clear = median_seconds(lambda: be.gemm(a, b, alpha=0.0, beta=0.0, c=c), be)
        print("| %s | %d x %d x %d | %.3f | %.3f | %.2f |" % (name, m, n, k, 1e3 * product, 1e3 * clear,
                                                              clear / product))


if __name__ == "__main__":
    main()
