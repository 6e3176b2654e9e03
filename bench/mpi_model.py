#!/usr/bin/env python3
"""A model of dfmp2's distributed DF-SCF and DF-MP2 (README "MPI"): the time of each phase on P ranks from per-rank
rates measured here on one rank, the work and communication volumes of the algorithm as dfmp2 runs it, and a
network's latency and bandwidth.

    mpi_model.py check   --measured bench/mpi/h2o16_scaling.json
        the model, with this machine's shared-memory transfer rates, against the measured runs on 1 to 8 ranks
    mpi_model.py predict --measured bench/mpi/h2o16_scaling.json --sizes bench/mpi/problem_sizes.json
        (H2O)64 to (H2O)512 in cc-pVTZ on 10 to 1,000 nodes at 100 and 400 Gb/s: time, parallel efficiency, and
        the node count at which the efficiency falls below 80 %

What is modelled, per phase (each a sum of kernels, each kernel's time its work over the rate measured for that
kernel on one rank of the 1-rank run; work from the sizes alone, as in the code). "On the grid" applies to a matrix
of order >= the distributed minimum order (dfmp2's mpi.distributed_min_order, 3,000 by default) with more than one
rank; --replicated models dfmp2 before the distributed factorisations (issue 28), for the "before" tables.

  SCF J/K setup   three-centre integrals (naux_jk x npacked triples) / P, the fitting TRSM (npacked naux_jk^2) / P,
                  the redistribution there and back (each rank sends 16 npacked naux_jk (P - 1) / P^2 bytes in P - 1
                  messages each way), and the metric's Cholesky (naux_jk^3 / 3): on every rank, or on the grid
                  (dense(): its flops / P at the 2-rank efficiency measured here, 8 n^2 log2 P / sqrt P bytes and
                  2 (n / 64) log2 P messages per rank) with the factor's panels broadcast to the row solves (4 n^2
                  bytes per rank)
  SCF J/K         per iteration: the batched GEMM and SYRK of K (3 nbf^2 nocc naux_jk flops) / P, the unpacking of
                  B (8 naux_jk nbf^2 bytes) / P, J (4 npacked naux_jk flops) / P, then J and K summed over the ranks
                  (reduce and broadcast of 8 (npacked + nbf^2) bytes: 2 (ceil(log2 P) latency + 2 m / bandwidth))
  SCF other       per iteration: the eigensolver and the nbf^3 products (X^T F X, X C', the DIIS orbital gradient),
                  from the measured eigh and GEMM times scaled by (nbf / nbf_measured)^3, on every rank or on the
                  grid (/ P, pdgemm's SUMMA traffic 16 nbf^2 / sqrt P bytes per product, and the two results
                  gathered: reduce and broadcast of 8 nbf^2 bytes each); the rest of the measured time (the Fock
                  matrix, DIIS extrapolation: nbf^2 work) scaled by (nbf / nbf_measured)^2 on every rank
  MP2 metric      the Cholesky of (P|Q) (naux_ri^3 / 3), on every rank or on the grid, as the JK metric's
  MP2 transform   the integrals (naux_ri x npacked_ri) and both GEMMs (2 nact nbf^2 naux + 2 nact nvir nbf naux) / P
  MP2 fitting     the redistribution (each rank 8 nact nvir naux (P - 1) / P^2 bytes, P - 1 messages) and the TRSM
                  (nact nvir naux^2) / P, on the grid at pdtrsm's measured share of the local rate and with the
                  factor broadcast once per round (a round: one block per holder)
  MP2 pairs       the GEMMs ((nact nvir)^2 naux flops) and the reduction ((nact nvir)^2 / 2 elements): dfmp2's own
                  schedule (chem/mp2/layout.cpp make_layout: largest first to the less loaded holder, or to any rank less
                  loaded by more than the pair's cost, which fetches both blocks; --replicated: holders only), run
                  here pair by pair where it has at most 200,000 pairs, and for larger ones its balanced limit (every
                  rank an even share, a pair's blocks fetched as often as with the old rule plus twice per pair on a
                  rank holding neither); the busiest rank's cost, overlapped with its fetches (8 nb nvir naux bytes each)

A phase's time is its busiest rank's; the efficiency on P nodes is T(1) / (P T(P)). Compute rates scale with the
node: by default a node is one rank of this machine as measured (1 thread); --node-speed multiplies every rate
(a 64-core node is about 32 times this 2-core machine). Only the standard library is used.
"""
import argparse
import heapq
import json
import math
import sys

GB = 1e9
# Collective and exchange costs (log-tree latency, pipelined bandwidth): see the docstring.
PHASES = ["SCF J/K setup", "SCF J/K", "SCF other", "metric", "transform", "fitting", "pair_energy"]


# ----------------------------------------------------------------------------------------------------------------
# The algorithm's volumes, as dfmp2 runs it (chem/mp2/dfmp2.cpp, chem/scf/df_jk.cpp)


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


_SCHEDULES = {}


def schedule(nact, nb, ranks, every_rank=True):
    """dfmp2's pair schedule (chem/mp2/layout.cpp make_layout), simulated: per rank its pair cost (in units of nb^2
    orbital pairs) and the blocks it fetches. Blocks are held in contiguous runs (b * ranks // nbo); pairs largest
    first to the less loaded holder (a tie: I's when I + J is odd), or, with `every_rank`, to the least loaded rank
    when that is less loaded by more than the pair's cost. A rank fetches a partner it does not hold once per pair
    and an anchor it does not hold once (pairs are grouped by anchor)."""
    key = (nact, nb, ranks, every_rank)
    if key in _SCHEDULES:
        return _SCHEDULES[key]
    nbo = math.ceil(nact / nb)
    sizes = [min(nb, nact - b * nb) for b in range(nbo)]
    holder = [b * ranks // nbo for b in range(nbo)]
    pairs = [(bi, bj) for bi in range(nbo) for bj in range(bi + 1)]
    cost = [sizes[i] * sizes[j] * (0.5 if i == j else 1.0) for i, j in pairs]
    order = sorted(range(len(pairs)), key=lambda k: -cost[k])  # stable: ties keep pair order
    load = [0.0] * ranks
    heap = [(0.0, r) for r in range(ranks)]
    fetched = [set() for _ in range(ranks)]
    fetches = [0] * ranks
    for k in order:
        bi, bj = pairs[k]
        ri, rj = holder[bi], holder[bj]
        r = ri if (load[ri] < load[rj] or (load[ri] == load[rj] and (bi + bj) % 2 == 1)) else rj
        if every_rank:
            while heap[0][0] != load[heap[0][1]]:
                heapq.heappop(heap)
            least = min(r2 for l2, r2 in heap if l2 == heap[0][0])  # the first least loaded, as std::min_element
            if load[least] + cost[k] < load[r]:
                r = least
        load[r] += cost[k]
        heapq.heappush(heap, (load[r], r))
        anchor, partner = (bi, bj) if holder[bi] == r or holder[bj] != r else (bj, bi)
        if holder[anchor] != r and anchor not in fetched[r]:
            fetched[r].add(anchor)
            fetches[r] += 1
        if partner != anchor and holder[partner] != r:
            fetches[r] += 1
    out = {"load": load, "fetches": fetches, "nbo": nbo, "total": sum(cost)}
    _SCHEDULES[key] = out
    return out


def volumes(size, ranks, iterations, mp2_word=8, every_rank=True):
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
    npairs = nbo * (nbo + 1) // 2
    if npairs <= 200000:
        sched = schedule(nact, nb, p, every_rank)
        busiest = max(range(p), key=lambda r: sched["load"][r])
        share = sched["load"][busiest] / sched["total"]   # the busiest rank's share of the pair cost
        fetches, mine = sum(sched["fetches"]), sched["fetches"][busiest]
    else:
        # The balanced limit (many pairs per rank): an even share; the old rule's fetches, plus two per pair on a
        # rank holding neither block when there are more ranks than blocks.
        share = 1.0 / (p if every_rank else min(p, nbo))
        away = npairs * max(0, p - nbo) / p if every_rank else 0
        fetches = shared_pairs(nbo, p) + 2 * away
        mine = fetches / p
    out["pair_energy"] = {"total": fetches * block, "per_rank": mine * block, "messages": 2 * mine,
                          "fetches": mine, "block_bytes": block, "nbo": nbo, "share": share}
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
        # Of it, the nbf^3 part (eigensolver and products), which the grid shares; the rest is nbf^2 work.
        "scf_cubic_per_iteration": (k.get("scf/eigh", {}).get("seconds", 0.0) + k.get("scf/gemm", {}).get("seconds", 0.0))
                                   / one["iterations"],
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


# Measured on two ranks of this machine (bench/README.md "Distributed factorisations", order 4,000): the grid's
# Cholesky and eigensolver at 0.72 and 0.85 of a perfect split of one rank's time, pdtrsm's row solves at 0.76 of the
# local DTRSM's rate; pdgemm assumed at the eigensolver's.
DENSE_EFFICIENCY = {"cholesky": 0.72, "eigh": 0.85, "row_solve": 0.76}
DENSE_BLOCK = 64


def phase_times(size, ranks, rates, net, iterations, cores=None, node_speed=1.0, min_order=3000, replicated=False):
    """Seconds of each phase on `ranks` ranks (the busiest rank's). `net`: latency (s) and bandwidth (B/s) of
    exchanges (strided blocks) and of contiguous transfers. `cores`: the cores the ranks share (local checks; a rank
    runs at cores / ranks of its speed when there are more ranks than cores)."""
    p = ranks
    slow = max(1.0, p / cores) if cores else 1.0
    speed = node_speed / slow
    nbf, nocc, nact = size["nbf"], size["nocc"], size.get("nact", size["nocc"])
    nvir = nbf - nocc
    naux, naux_jk, npk, npr = size["naux_ri"], size["naux_jk"], size["npacked_jk"], size["npacked_ri"]
    vol = volumes(size, p, iterations, every_rank=not replicated)
    lat, bw_x, bw_c = net["latency"], net["exchange_bandwidth"], net["bandwidth"]
    log_p = math.ceil(math.log2(p)) if p > 1 else 0

    def t(work, rate):
        return work / (rate * speed)

    def exchange(bytes_, messages):
        return 0.0 if p == 1 else messages * lat + bytes_ / bw_x

    def on_grid(n):
        return p > 1 and not replicated and n >= min_order

    def cholesky(n):
        """The metric's factor: on every rank, or on the grid with its panels' traffic."""
        if not on_grid(n):
            return t(n ** 3 / 3.0, rates["cholesky"])
        traffic = 8.0 * n * n * log_p / math.sqrt(p) / bw_c + 2.0 * (n / DENSE_BLOCK) * log_p * lat
        return t(n ** 3 / 3.0 / p, rates["cholesky"]) / DENSE_EFFICIENCY["cholesky"] + traffic

    def row_solves(n, flops, rate, rounds):
        """The fitting's solves of each rank's rows with the factor: local, or pdtrsm with the factor's panels
        broadcast once per round."""
        if not on_grid(n):
            return t(flops, rate)
        broadcast = rounds * (4.0 * n * n / bw_c + (n / DENSE_BLOCK) * log_p * lat)
        return t(flops, rate) / DENSE_EFFICIENCY["row_solve"] + broadcast

    out = {}
    out["SCF J/K setup"] = (t(naux_jk * npk / p, rates["jk_integrals"])
                            + row_solves(naux_jk, npk * naux_jk ** 2 / p, rates["jk_fitting"], 1)
                            + cholesky(naux_jk)
                            + exchange(vol["SCF J/K setup"]["per_rank"], vol["SCF J/K setup"]["messages"]))
    m = 8.0 * (npk + nbf * nbf)
    reduce_bcast = 0.0 if p == 1 else 2.0 * (log_p * lat + 2.0 * m / bw_c)
    out["SCF J/K"] = iterations * (t(3.0 * nbf * nbf * nocc * naux_jk / p, rates["k_build"])
                                   + t(8.0 * naux_jk * nbf * nbf / p, rates["unpack"])
                                   + t(4.0 * npk * naux_jk / p, rates["j_build"]) + reduce_bcast)
    cubic = rates["scf_cubic_per_iteration"] * (nbf / rates["nbf"]) ** 3 / speed
    square = (rates["scf_other_per_iteration"] - rates["scf_cubic_per_iteration"]) * (nbf / rates["nbf"]) ** 2 / speed
    if on_grid(nbf):
        # Five products (SUMMA: 16 nbf^2 / sqrt P bytes each) and two gathers (C, the orbital gradient) per iteration.
        gathers = 2.0 * 2.0 * (log_p * lat + 2.0 * 8.0 * nbf * nbf / bw_c)
        cubic = cubic / (p * DENSE_EFFICIENCY["eigh"]) + 5.0 * 16.0 * nbf * nbf / math.sqrt(p) / bw_c + gathers
    out["SCF other"] = iterations * (cubic + square)
    out["metric"] = cholesky(naux)
    out["transform"] = (t(naux * npr / p, rates["mp2_integrals"])
                        + t((2.0 * nact * nbf * nbf * naux + 2.0 * nact * nvir * nbf * naux) / p,
                            rates["transform_gemm"]))
    rounds = math.ceil(vol["pair_energy"]["nbo"] / p)  # blocks per holder: the fitting's rounds
    out["fitting"] = exchange(vol["fitting"]["per_rank"], vol["fitting"]["messages"]) + row_solves(
        naux, nact * nvir * naux ** 2 / p, rates["fitting"], rounds)
    share = vol["pair_energy"]["share"]  # the busiest rank's share of the pair cost (the schedule)
    compute = t((nact * nvir) ** 2 * naux * share, rates["pair_gemm"]) + t(
        (nact * nvir) ** 2 / 2.0 * share, rates["pair_reduce"])
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
        model = phase_times(size, ranks, rates, net, run["iterations"], cores=measured["cores"],
                            min_order=measured.get("min_order") or 3000, replicated=args.replicated)
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


def efficiency_row(name, size, rates, net, iterations, nodes, node_speed, min_order, replicated):
    """A molecule's row: time and efficiency at each node count, the first count below 80 %, the replicated share."""
    def total(p):
        return sum(phase_times(size, p, rates, net, iterations, node_speed=node_speed, min_order=min_order,
                               replicated=replicated).values())
    one = total(1)
    below = None
    p = 1
    while p <= 100000:
        if one / (p * total(p)) < 0.8:
            below = p
            break
        p = p + 1 if p < 16 else int(p * 1.05) + 1
    cells = [name, size["nbf"], "%.3g" % one]
    effs = []
    for n in nodes:
        t = total(n)
        effs.append(one / (n * t))
        cells.append("%.3g s (%.0f %%)" % (t, 100 * effs[-1]))
    cells.append(str(below) if below else "> 100000")
    ph = phase_times(size, nodes[-1], rates, net, iterations, node_speed=node_speed, min_order=min_order,
                     replicated=replicated)
    return cells, effs, ph


def per_rank_memory(size, p, min_order, replicated):
    """Bytes one rank holds of the dense matrices that do not shrink with the work's share: the metric factors
    (each 8 naux^2 replicated, or 16 naux^2 / P on the grid: its two layouts while the fitting runs), and the
    SCF's replicated nbf^2 matrices (S, X, H, F, D, C, J, K and 8 DIIS pairs: 24 of them; on every rank in both)."""
    def factor(n):
        return 8.0 * n * n if (replicated or p == 1 or n < min_order) else 16.0 * n * n / p
    return factor(size["naux_jk"]), factor(size["naux_ri"]), 24 * 8.0 * size["nbf"] ** 2


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
        print("\n### %g Gb/s, latency %.1f us; a node = %g x one rank measured here; %d SCF iterations; "
              "distributed from order %d\n" % (gbs, args.latency * 1e6, args.node_speed, iterations, args.min_order))
        rows, compare = [], []
        for name, size in sizes.items():
            after, eff_after, ph = efficiency_row(name, size, rates, net, iterations, nodes, args.node_speed,
                                                  args.min_order, False)
            _, eff_before, ph_before = efficiency_row(name, size, rates, net, iterations, nodes, args.node_speed,
                                                      args.min_order, True)
            t = sum(ph.values())
            after.append("%.0f %%" % (100 * (ph["SCF other"] + ph["metric"]) / t))
            rows.append(after)
            compare.append([name] + ["%.0f %% -> %.0f %%" % (100 * b, 100 * a) for b, a in zip(eff_before, eff_after)])
        table(["molecule", "nbf", "1 node s"] + ["%d nodes" % n for n in nodes] +
              ["efficiency < 80 % from", "SCF other + MP2 metric share at %d" % nodes[-1]], rows)
        print("\nefficiency before (replicated factorisations, pairs on holders only) -> after:\n")
        table(["molecule"] + ["%d nodes" % n for n in nodes], compare)
    print("\nper-rank memory of the dense matrices that do not shrink with the work (JK metric factor, MP2 metric "
          "factor, SCF nbf^2 matrices), before -> after:\n")
    rows = []
    for name, size in sizes.items():
        cells = [name]
        for n in [1] + nodes:
            jb, mb, scf = per_rank_memory(size, n, args.min_order, True)
            ja, ma, _ = per_rank_memory(size, n, args.min_order, False)
            cells.append("%.2g + %.2g -> %.2g + %.2g (+ %.2g)" % (jb / 2**30, mb / 2**30, ja / 2**30, ma / 2**30,
                                                                    scf / 2**30))
        rows.append(cells)
    table(["molecule (GiB)"] + ["%d node%s" % (n, "s" if n > 1 else "") for n in [1] + nodes], rows)
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)
    c = sub.add_parser("check")
    c.add_argument("--measured", required=True)
    # This machine's shared memory between two ranks (bench/README.md "Distributed factorisations"): strided
    # exchanges 4.2 GB/s since they are packed (1.4 before), contiguous blocks 5.5 GB/s, measured with Open MPI 4.1.4
    # between two processes.
    c.add_argument("--latency", type=float, default=2e-6)
    c.add_argument("--exchange-gbs", type=float, default=4.2)
    c.add_argument("--gbs", type=float, default=5.5)
    c.add_argument("--replicated", action="store_true", help="model dfmp2 before the distributed factorisations")
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
    q.add_argument("--min-order", type=int, default=3000, help="dfmp2's mpi.distributed_min_order")
    args = p.parse_args(argv)
    return check(args) if args.mode == "check" else predict(args)


if __name__ == "__main__":
    sys.exit(main())
