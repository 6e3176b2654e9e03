#!/usr/bin/env python3
"""A model of dfmp2's distributed DF-SCF and DF-MP2 (README "MPI"): the time of each phase on P ranks from per-rank
rates measured here on one rank, the work and communication volumes of the algorithm as dfmp2 runs it, and a
network's latency and bandwidth.

    mpi_model.py check   --measured bench/mpi/h2o16_scaling.json
        the model, with this machine's shared-memory transfer rates, against the measured 1 to 4 rank runs
    mpi_model.py predict --measured bench/mpi/h2o16_scaling.json --sizes bench/mpi/problem_sizes.json
        (H2O)64 to (H2O)512 in cc-pVTZ on 10 to 1,000 nodes at 100 and 400 Gb/s: time, parallel efficiency, and
        the node count at which the efficiency falls below 80 %

What is modelled, per phase (each a sum of kernels, each kernel's time its work over the rate measured for that
kernel on one rank of the 1-rank run; work from the sizes alone, as in the code):

  SCF J/K setup   three-centre integrals (naux_jk x npacked triples) / P, the fitting TRSM (npacked naux_jk^2) / P,
                  the metric Cholesky (naux_jk^3 / 3) on every rank, and the redistribution there and back:
                  each rank sends 16 npacked naux_jk (P - 1) / P^2 bytes in P - 1 messages each way
  SCF J/K         per iteration: the batched GEMM and SYRK of K (3 nbf^2 nocc naux_jk flops) / P, the unpacking of
                  B (8 naux_jk nbf^2 bytes) / P, J (4 npacked naux_jk flops) / P, then J and K summed over the ranks
                  (reduce and broadcast of 8 (npacked + nbf^2) bytes: 2 (ceil(log2 P) latency + 2 m / bandwidth))
  SCF other       per iteration the Fock matrix, DIIS and diagonalisation on every rank (nbf^3, scaled from the
                  measured time by (nbf / nbf_measured)^3)
  MP2 metric      the Cholesky of (P|Q) on every rank (naux_ri^3 / 3)
  MP2 transform   the integrals (naux_ri x npacked_ri) and both GEMMs (2 nact nbf^2 naux + 2 nact nvir nbf naux) / P
  MP2 fitting     the redistribution (each rank 8 nact nvir naux (P - 1) / P^2 bytes, P - 1 messages) and the TRSM
                  (nact nvir naux^2) / P
  MP2 pairs       the GEMMs ((nact nvir)^2 naux flops) and the reduction ((nact nvir)^2 / 2 elements) shared by the
                  ranks that hold blocks (min(P, nbo) of them, nbo = nact / nb with dfmp2's block rule), overlapped
                  with the fetches: one block (8 nb nvir naux bytes) for each pair whose blocks two ranks hold,
                  nbo (nbo + 1) / 2 - P k (k + 1) / 2 of them with k = nbo / P, shared evenly

A phase's time is its busiest rank's; the efficiency on P nodes is T(1) / (P T(P)). Compute rates scale with the
node: by default a node is one rank of this machine as measured (1 thread); --node-speed multiplies every rate
(a 64-core node is about 32 times this 2-core machine). Only the standard library is used.
"""
import argparse
import json
import math
import sys

GB = 1e9
# Collective and exchange costs (log-tree latency, pipelined bandwidth): see the docstring.
PHASES = ["SCF J/K setup", "SCF J/K", "SCF other", "metric", "transform", "fitting", "pair_energy"]


# ----------------------------------------------------------------------------------------------------------------
# The algorithm's volumes, as dfmp2 runs it (chem/dfmp2.cpp, chem/df_jk.cpp)


def block_size(nact, nvir, ranks):
    """dfmp2's occupied block (plan_blocks without a memory limit): at least 8 orbitals or 1024 rows (whichever is
    fewer orbitals), at least four blocks, and two per rank where that allows."""
    smallest = max(1, min(8, math.ceil(1024 / max(nvir, 1))))
    balanced = max(smallest, math.ceil(nact / max(4, 2 * ranks)))
    return min(max(nact, 1), balanced)


def shared_pairs(nbo, ranks):
    """Block pairs whose two blocks different ranks hold (each fetches one block): blocks in contiguous runs of
    about nbo / ranks."""
    holders = [b * ranks // nbo for b in range(nbo)]
    counts = {}
    for r in holders:
        counts[r] = counts.get(r, 0) + 1
    within = sum(k * (k + 1) // 2 for k in counts.values())
    return nbo * (nbo + 1) // 2 - within


def volumes(size, ranks, iterations, mp2_word=8):
    """Per phase: `total`, the bytes all ranks send together (as dfmp2 counts them: a sum over the ranks counts, for
    each rank but rank 0, its part sent once and the result received once, and for rank 0 the others' parts); `per_rank`,
    what one rank moves (for the time); and the messages per rank."""
    p = ranks
    nbf, nocc, nact = size["nbf"], size["nocc"], size.get("nact", size["nocc"])
    nvir = nbf - nocc
    out = {}
    # The fitting's redistribution there and back: every rank's columns of the other ranks' rows.
    setup = 16.0 * size["npacked_jk"] * size["naux_jk"] * (p - 1) / p
    out["SCF J/K setup"] = {"total": setup, "per_rank": setup / p, "messages": 2 * (p - 1)}
    m = 8.0 * (size["npacked_jk"] + nbf * nbf)  # J (packed) and K summed each iteration
    out["SCF J/K"] = {"total": 2.0 * (p - 1) * m * iterations, "per_rank": m * iterations if p > 1 else 0.0,
                      "messages": 2 * iterations * (p > 1)}
    for ph in ("SCF other", "metric", "transform"):
        out[ph] = {"total": 0.0, "per_rank": 0.0, "messages": 0}
    # The redistribution from auxiliary columns to occupied blocks.
    fitting = mp2_word * nact * nvir * size["naux_ri"] * (p - 1) / p
    out["fitting"] = {"total": fitting, "per_rank": fitting / p, "messages": p - 1}
    nb = block_size(nact, nvir, p)
    nbo = math.ceil(nact / nb)
    block = mp2_word * (nact / nbo) * nvir * size["naux_ri"]  # the mean block: the last one may be smaller
    fetches = shared_pairs(nbo, p)
    out["pair_energy"] = {"total": fetches * block, "per_rank": fetches * block / p, "messages": 2 * fetches / p,
                          "fetches": fetches / p, "block_bytes": block, "nbo": nbo}
    return out


# ----------------------------------------------------------------------------------------------------------------
# Rates measured on one rank


def kernel_rates(measured):
    """Per-rank rates of the 1-rank run: flop/s of each kernel class, and the integral and unpack rates."""
    one = measured["runs"]["1"]
    size = measured["size"]
    k = one["kernels"]  # {step/kernel: {seconds, flops, bytes}} of rank 0

    def rate(keys, work):
        seconds = sum(k[x]["seconds"] for x in keys if x in k)
        return work / seconds if seconds > 0 else float("inf")

    def flops(keys):
        return sum(k[x]["flops"] for x in keys if x in k)

    nbf, nocc = size["nbf"], size["nocc"]
    nvir = nbf - nocc
    naux, naux_jk, npk, npr = size["naux_ri"], size["naux_jk"], size["npacked_jk"], size["npacked_ri"]
    return {
        "jk_integrals": rate(["scf_integrals/three_center"], naux_jk * npk),
        "jk_fitting": rate(["scf_fitting/trsm"], flops(["scf_fitting/trsm"])),
        "cholesky": rate(["scf_fitting/cholesky", "metric/cholesky"], flops(["scf_fitting/cholesky", "metric/cholesky"])),
        "k_build": rate(["scf_jk/gemm_batched", "scf_jk/syrk"], flops(["scf_jk/gemm_batched", "scf_jk/syrk"])),
        "unpack": rate(["scf_jk/unpack"], k.get("scf_jk/unpack", {}).get("bytes", 0.0)),
        "j_build": rate(["scf_jk/gemm"], flops(["scf_jk/gemm"])),
        "scf_other_per_iteration": one["phases"]["SCF other"]["busy"] / one["iterations"],
        "mp2_integrals": rate(["transform/read_3index"], naux * npr),
        "transform_gemm": rate(["transform/gemm", "transform/gemm_batched"],
                               flops(["transform/gemm", "transform/gemm_batched"])),
        "fitting": rate(["fitting/trsm"], flops(["fitting/trsm"])),
        "pair_gemm": rate(["pair_energy/gemm", "pair_energy/syrk"], flops(["pair_energy/gemm", "pair_energy/syrk"])),
        "pair_reduce": rate(["pair_energy/pair_reduce"], (nocc * nvir) ** 2 / 2.0),
        "nbf": nbf,
    }


# ----------------------------------------------------------------------------------------------------------------
# The model


def phase_times(size, ranks, rates, net, iterations, cores=None, node_speed=1.0):
    """Seconds of each phase on `ranks` ranks (the busiest rank's). `net`: latency (s) and bandwidth (B/s) of
    exchanges (strided blocks) and of contiguous transfers. `cores`: the cores the ranks share (local checks; a rank
    runs at cores / ranks of its speed when there are more ranks than cores)."""
    p = ranks
    slow = max(1.0, p / cores) if cores else 1.0
    speed = node_speed / slow
    nbf, nocc, nact = size["nbf"], size["nocc"], size.get("nact", size["nocc"])
    nvir = nbf - nocc
    naux, naux_jk, npk, npr = size["naux_ri"], size["naux_jk"], size["npacked_jk"], size["npacked_ri"]
    vol = volumes(size, p, iterations)
    lat, bw_x, bw_c = net["latency"], net["exchange_bandwidth"], net["bandwidth"]
    log_p = math.ceil(math.log2(p)) if p > 1 else 0

    def t(work, rate):
        return work / (rate * speed)

    def exchange(bytes_, messages):
        return 0.0 if p == 1 else messages * lat + bytes_ / bw_x

    out = {}
    out["SCF J/K setup"] = (t(naux_jk * npk / p, rates["jk_integrals"]) + t(npk * naux_jk ** 2 / p, rates["jk_fitting"])
                            + t(naux_jk ** 3 / 3.0, rates["cholesky"])
                            + exchange(vol["SCF J/K setup"]["per_rank"], vol["SCF J/K setup"]["messages"]))
    m = 8.0 * (npk + nbf * nbf)
    reduce_bcast = 0.0 if p == 1 else 2.0 * (log_p * lat + 2.0 * m / bw_c)
    out["SCF J/K"] = iterations * (t(3.0 * nbf * nbf * nocc * naux_jk / p, rates["k_build"])
                                   + t(8.0 * naux_jk * nbf * nbf / p, rates["unpack"])
                                   + t(4.0 * npk * naux_jk / p, rates["j_build"]) + reduce_bcast)
    out["SCF other"] = iterations * rates["scf_other_per_iteration"] * (nbf / rates["nbf"]) ** 3 / speed
    out["metric"] = t(naux ** 3 / 3.0, rates["cholesky"])
    out["transform"] = (t(naux * npr / p, rates["mp2_integrals"])
                        + t((2.0 * nact * nbf * nbf * naux + 2.0 * nact * nvir * nbf * naux) / p,
                            rates["transform_gemm"]))
    out["fitting"] = exchange(vol["fitting"]["per_rank"], vol["fitting"]["messages"]) + t(
        nact * nvir * naux ** 2 / p, rates["fitting"])
    working = min(p, vol["pair_energy"]["nbo"])  # only ranks that hold blocks compute pairs
    compute = t((nact * nvir) ** 2 * naux / working, rates["pair_gemm"]) + t(
        (nact * nvir) ** 2 / 2.0 / working, rates["pair_reduce"])
    fetch = vol["pair_energy"]["fetches"] * (lat + vol["pair_energy"]["block_bytes"] / bw_c)
    out["pair_energy"] = max(compute, fetch) + (lat + vol["pair_energy"]["block_bytes"] / bw_c if p > 1 else 0.0)
    return out


# ----------------------------------------------------------------------------------------------------------------


def table(headers, rows):
    widths = [max(len(str(h)), max((len(str(r[i])) for r in rows), default=0)) for i, h in enumerate(headers)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"
    print(line(headers))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print(line(r))


def check(args):
    with open(args.measured) as f:
        measured = json.load(f)
    rates = kernel_rates(measured)
    size = measured["size"]
    net = {"latency": args.latency, "exchange_bandwidth": args.exchange_gbs * GB, "bandwidth": args.gbs * GB}
    print("model against the measured runs of %s (%s; %d cores; local transfers: latency %.1f us, exchanges %.1f "
          "GB/s, contiguous %.1f GB/s)" % (measured["molecule"], measured["machine"]["cpu"], measured["cores"],
                                            args.latency * 1e6, args.exchange_gbs, args.gbs))
    rows = []
    worst = 0.0
    for ranks in sorted(int(r) for r in measured["runs"]):
        run = measured["runs"][str(ranks)]
        model = phase_times(size, ranks, rates, net, run["iterations"], cores=measured["cores"])
        total_m, total_p = 0.0, 0.0
        for ph in PHASES:
            got = run["phases"][ph]["wall"]
            total_m += got
            total_p += model[ph]
            rows.append([ranks, ph, "%.3f" % got, "%.3f" % model[ph],
                         "%+.0f %%" % (100 * (model[ph] - got) / got) if got > 0.05 else "-"])
        rows.append([ranks, "**all phases**", "%.2f" % total_m, "%.2f" % total_p,
                     "%+.0f %%" % (100 * (total_p - total_m) / total_m)])
        worst = max(worst, abs(total_p - total_m) / total_m)
    table(["ranks", "phase", "measured s", "model s", "model - measured"], rows)
    print("\nlargest difference of the whole run: %.0f %%" % (100 * worst))
    return 0


def predict(args):
    with open(args.measured) as f:
        measured = json.load(f)
    with open(args.sizes) as f:
        sizes = json.load(f)
    rates = kernel_rates(measured)
    nodes = [int(x) for x in args.nodes.split(",")]
    iterations = args.iterations
    for gbs in [float(x) for x in args.network_gbits.split(",")]:
        net = {"latency": args.latency, "exchange_bandwidth": gbs / 8 * GB * args.exchange_efficiency,
               "bandwidth": gbs / 8 * GB}
        print("\n### %g Gb/s, latency %.1f us; a node = %g x one rank measured here; %d SCF iterations\n" % (
            gbs, args.latency * 1e6, args.node_speed, iterations))
        rows = []
        for name, size in sizes.items():
            one = sum(phase_times(size, 1, rates, net, iterations, node_speed=args.node_speed).values())
            below = None
            p = 1
            while p <= 100000:
                t = sum(phase_times(size, p, rates, net, iterations, node_speed=args.node_speed).values())
                if one / (p * t) < 0.8:
                    below = p
                    break
                p = p + 1 if p < 16 else int(p * 1.05) + 1
            cells = [name, size["nbf"], "%.3g" % one]
            for n in nodes:
                ph = phase_times(size, n, rates, net, iterations, node_speed=args.node_speed)
                t = sum(ph.values())
                cells.append("%.3g s (%.0f %%)" % (t, 100 * one / (n * t)))
            cells.append(str(below) if below else "> 100000")
            replicated = ph["SCF other"] + ph["metric"]
            cells.append("%.0f %%" % (100 * replicated / t))
            rows.append(cells)
        table(["molecule", "nbf", "1 node s"] + ["%d nodes" % n for n in nodes] +
              ["efficiency < 80 % from", "replicated share at %d" % nodes[-1]], rows)
    print("\nmemory per rank that does not shrink with the ranks (the replicated metric factors, 8 naux^2 each):")
    for name, size in sizes.items():
        print("  %s: MP2 %.1f GiB, JK %.1f GiB" % (name, 8 * size["naux_ri"] ** 2 / 2**30, 8 * size["naux_jk"] ** 2 / 2**30))
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)
    c = sub.add_parser("check")
    c.add_argument("--measured", required=True)
    # This machine's shared memory between two ranks (bench/README.md "MPI scaling"): strided exchanges 1.4 GB/s,
    # contiguous blocks 5.5 GB/s, measured with Open MPI 4.1.4 between two processes.
    c.add_argument("--latency", type=float, default=2e-6)
    c.add_argument("--exchange-gbs", type=float, default=1.4)
    c.add_argument("--gbs", type=float, default=5.5)
    q = sub.add_parser("predict")
    q.add_argument("--measured", required=True)
    q.add_argument("--sizes", required=True, help="JSON {name: bench_problem_size output}")
    q.add_argument("--nodes", default="10,30,100,300,1000")
    q.add_argument("--network-gbits", default="100,400")
    q.add_argument("--latency", type=float, default=2e-6)
    q.add_argument("--exchange-efficiency", type=float, default=0.5,
                   help="strided exchanges reach this share of the link (packing; measured 0.25 here)")
    q.add_argument("--node-speed", type=float, default=1.0)
    q.add_argument("--iterations", type=int, default=15)
    args = p.parse_args(argv)
    return check(args) if args.mode == "check" else predict(args)


if __name__ == "__main__":
    sys.exit(main())
