"""Benchmark: one full-US block-level TopDown-style replicate (total query), state-parallel on Dask;
and one state's multi-query release over a PL94-like schema.

    PYTHONPATH=. python benchmarks/bench_topdown.py                  # both parts
    PYTHONPATH=. python benchmarks/bench_topdown.py --no-multi       # the full-US replicate only
    PYTHONPATH=. python benchmarks/bench_topdown.py --no-us --multi-fanouts 10,10,3,20
    PYTHONPATH=. python benchmarks/bench_topdown.py --no-multi --us-schema pl94
    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python benchmarks/bench_topdown.py --no-us --no-multi \
        --spine-states S16,S01,S09
    PYTHONPATH=. python benchmarks/bench_topdown.py --no-multi --us-schema pl94 --sampler reference

The full-US part generates the 2020-sized spine (8,132,968 blocks) in the client, sends each state's
slice to a 2-process ``LocalCluster`` (one thread each) and runs one TopDown replicate per state with
the ``pl94_2021_production`` total query's σ² per level (``--neighbours``). The replicate's time is
from the first submission to the last result (spine generation reported apart). Peak memory is the sum
of the client's and the workers' peak resident sets (an upper bound of the simultaneous peak).

``--spine-states`` runs whole states of the spine over the ``pl94`` schema (28 cells, the
``pl94_2021_production`` queries the schema expresses at every level, as the audit flow measures them)
in this process, one after the other, and extrapolates CPU time per block to the 8,132,968 blocks of
the full US. Run it with one BLAS thread (``OPENBLAS_NUM_THREADS=1``), as Dask's nanny starts its
workers: the solver's small (units × 28) @ (28 × 28) products only lose to a second BLAS thread.

``--sampler`` picks the discrete-Gaussian sampler of every part: ``table`` (the default,
:class:`auditlib.mechanisms.DiscreteGaussianTable`) or ``reference``; ``both`` (with
``--spine-states``) releases each spine state with the reference and with the table sampler,
alternated in this process (``_timing.alternate``: a warm-up of each, then ``--rounds`` rounds), and
prints the median CPU-s of each and their ratio. ``--against TREE`` (with ``--spine-states``)
instead alternates fresh processes of ``TREE``'s ``benchmarks/bench_topdown.py`` and this tree's,
each releasing the spine states once (``--rounds`` rounds, one BLAS thread), and prints the median
CPU-s of each state's TopDown: a change measured against the revision before it.
"""

from __future__ import annotations

import argparse
import resource
import time
from typing import Any

import numpy as np
from _machine import machine_info
from _pl94_production import LEVELS, measured_for
from _timing import alternate, method_line

from auditlib import seeds
from auditlib.allocations import load_allocation
from auditlib.simulate.topdown import (
    TOPDOWN_NOISE,
    TOTAL_QUERIES,
    StateHierarchy,
    allocation_measured,
    spine_state,
    topdown,
    unexpressible_queries,
)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def one_state(
    h: StateHierarchy,
    blocks: np.ndarray,
    measured: list[Any],
    seed: int,
    state: int,
    sampler: str = "table",
) -> dict[str, Any]:
    t = time.perf_counter()
    rngs = [seeds.rng(seed, TOPDOWN_NOISE, state + 1, i, 0) for i in range(len(h.levels))]
    rel = topdown(h, blocks, TOTAL_QUERIES, measured, rngs, sampler=sampler)  # type: ignore[arg-type]
    res = rel.dp[-1][:, 0] - rel.truth[-1][:, 0]
    return {
        "state": state,
        "blocks": int(blocks.shape[0]),
        "total": int(rel.dp[0][0, 0]),
        "truth_total": int(rel.truth[0][0, 0]),
        "block_sum": int(rel.dp[-1].sum()),
        "negative": int((rel.dp[-1] < 0).sum()),
        "block_rmse": float(np.sqrt(np.mean(res.astype(np.float64) ** 2))),
        "seconds": time.perf_counter() - t,
    }


def one_spine_state_pl94(
    spine: Any, measured: list[Any], seed: int, state: int, sampler: str = "table"
) -> dict[str, Any]:
    """One spine state over the ``pl94`` schema, its histograms drawn in the worker."""
    from auditlib.geography.populations import spine_state_histograms
    from auditlib.geography.schema import schema

    t, cpu = time.perf_counter(), time.process_time()
    sch = schema("pl94")
    queries = {q: sch.query_matrix(q) for q in sch.query_names}
    h, _ = spine_state(spine, state)
    hist = spine_state_histograms(spine, state, sch, seed)
    rngs = [seeds.rng(seed, TOPDOWN_NOISE, state + 1, i, 0) for i in range(len(h.levels))]
    rel = topdown(h, hist, queries, measured, rngs, sampler=sampler)  # type: ignore[arg-type]
    res = (rel.dp[-1] - rel.truth[-1]).astype(np.float64)
    return {
        "state": state,
        "blocks": int(hist.shape[0]),
        "total": int(rel.dp[0].sum()),
        "truth_total": int(rel.truth[0].sum()),
        "block_sum": int(rel.dp[-1].sum()),
        "negative": int((rel.dp[-1] < 0).sum()),
        "block_rmse": float(np.sqrt(np.mean(res**2))),
        "seconds": time.perf_counter() - t,
        "cpu": time.process_time() - cpu,
    }


def full_us(args: argparse.Namespace) -> None:
    from dask.distributed import Client, LocalCluster

    from auditlib.geography.spine import generate_spine

    pl94 = args.us_schema == "pl94"
    if pl94:
        measured = measured_for(args.neighbours)
        print("queries per level:", [len(m) for m in measured], "(pl94 schema, 28 cells)")
    else:
        alloc = load_allocation("pl94_2021_production")
        measured = allocation_measured(
            alloc,
            LEVELS,
            ["total"],
            args.neighbours,
            skip=unexpressible_queries(alloc, LEVELS, ["total"]),
        )
        print(
            "sigma2 of the total per level:",
            {g: m[0][1] for g, m in zip(LEVELS, measured, strict=True)},
        )
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            memory_limit="3GiB",
            dashboard_address=None,
        ) as cluster,
        Client(cluster) as client,
    ):
        t = time.perf_counter()
        spine = generate_spine(args.seed)
        t_spine = time.perf_counter() - t
        t0 = time.perf_counter()
        futures = []
        if pl94:  # histograms drawn in the workers; largest states first
            sf = client.scatter(spine, broadcast=True)
            order = np.argsort(-spine.units_per_state("Block"), kind="stable")
            for s in (int(i) for i in order):
                futures.append(
                    client.submit(
                        one_spine_state_pl94, sf, measured, args.seed, s, args.sampler, pure=False
                    )
                )
        for s in range(0 if pl94 else spine.n_states):
            h, bp = spine_state(spine, s)
            hf, bf = client.scatter([h, bp])
            futures.append(
                client.submit(one_state, hf, bf, measured, args.seed, s, args.sampler, pure=False)
            )
        out = client.gather(futures)
        wall = time.perf_counter() - t0
        worker_peaks = client.run(peak_rss_mb)
    blocks = sum(o["blocks"] for o in out)
    us = sum(o["total"] for o in out)
    assert all(o["total"] == o["truth_total"] == o["block_sum"] for o in out)
    assert sum(o["negative"] for o in out) == 0
    print(f"spine: {spine.n_states} states, {blocks:,} blocks, generated in {t_spine:.1f} s")
    print(
        f"one TopDown replicate, {args.us_schema}, sampler {args.sampler}, state-parallel "
        f"(2 workers): {wall:.1f} s; "
        f"state task times {min(o['seconds'] for o in out):.2f}–"
        f"{max(o['seconds'] for o in out):.2f} s (sum {sum(o['seconds'] for o in out):.1f} s"
        + (f", {sum(o['cpu'] for o in out):.1f} CPU-s)" if pl94 else ")")
    )
    print(
        f"US total {us:,} = sum of the invariant state totals; block RMSE "
        f"{np.median([o['block_rmse'] for o in out]):.2f} (median over states)"
    )
    total_peak = peak_rss_mb() + sum(worker_peaks.values())
    print(
        f"peak RSS: client {peak_rss_mb():.0f} MB, workers "
        f"{', '.join(f'{v:.0f}' for v in worker_peaks.values())} MB; sum {total_peak:.0f} MB"
    )


def multi_query(args: argparse.Namespace) -> None:
    """One state (regular hierarchy) over a 28-cell PL94-like schema, detailed and marginals."""
    n_cells = 28  # votingage 2 × hispanic 2 × race 7, cell order (v, h, r)
    idx = np.arange(n_cells)
    v, hisp, r = idx // 14, (idx // 7) % 2, idx % 7

    def onehot(labels: np.ndarray, k: int) -> np.ndarray:
        return (labels[None, :] == np.arange(k)[:, None]).astype(float)

    queries = {
        "total": np.ones((1, n_cells)),
        "votingage": onehot(v, 2),
        "hispanic": onehot(hisp, 2),
        "votingage * hispanic": onehot(v * 2 + hisp, 4),
        "race": onehot(r, 7),
        "detailed": np.eye(n_cells),
    }
    measured_names = list(queries)
    fan = [int(x) for x in args.multi_fanouts.split(",")]
    h = StateHierarchy.from_fanouts(LEVELS, fan)
    n_blocks = h.n_units(len(LEVELS) - 1)
    g = np.random.default_rng(args.seed)
    shares = g.dirichlet(np.full(n_cells, 0.5))
    pops = g.negative_binomial(1.5, 1.5 / (1.5 + 30.0), size=n_blocks)
    pops[g.random(n_blocks) < 0.3] = 0
    blocks = g.multinomial(pops, shares)
    # σ² of the PL94 production's per-level total and detailed queries, reused for the marginals
    alloc = load_allocation("pl94_2021_production")
    kept = ["total", "detailed"]
    pl = allocation_measured(
        alloc, LEVELS, kept, args.neighbours, skip=unexpressible_queries(alloc, LEVELS, kept)
    )
    measured = []
    for level in pl:
        s2 = dict(level)
        measured.append(
            [(q, s2.get(q, s2.get("detailed", next(iter(s2.values()))))) for q in measured_names]
        )
    rngs = [seeds.rng(args.seed, TOPDOWN_NOISE, 1, i, 0) for i in range(len(LEVELS))]
    t, cpu = time.perf_counter(), time.process_time()
    rel = topdown(h, blocks, queries, measured, rngs, tol=args.tol, sampler=args.sampler)
    wall, cpu = time.perf_counter() - t, time.process_time() - cpu
    print(
        f"one state, {n_blocks:,} blocks × {n_cells} cells, {len(queries)} queries per level "
        f"(fan-outs {fan}), tol {args.tol}: {wall:.1f} s ({cpu:.1f} CPU-s); iterations per level {rel.iterations}; "
        f"peak RSS {peak_rss_mb():.0f} MB"
    )


def spine_states(args: argparse.Namespace) -> None:
    """Whole spine states over the ``pl94`` schema, as the audit flow releases them."""
    from auditlib.geography.populations import spine_state_histograms
    from auditlib.geography.schema import schema
    from auditlib.geography.spine import generate_spine

    sch = schema("pl94")
    queries = {q: sch.query_matrix(q) for q in sch.query_names}
    measured = measured_for(args.neighbours)
    print("measured per level:", [[q for q, _ in level] for level in measured])
    spine = generate_spine(args.seed)
    names = list(spine.state_names)
    blocks_done, cpu_done = 0, 0.0
    for name in args.spine_states.split(","):
        s = names.index(name)
        h, _ = spine_state(spine, s)
        hist = spine_state_histograms(spine, s, sch, args.seed)

        def release(sampler: str, s: int = s, h: Any = h, hist: Any = hist) -> Any:
            rngs = [seeds.rng(args.seed, TOPDOWN_NOISE, s + 1, i, 0) for i in range(len(LEVELS))]
            return topdown(h, hist, queries, measured, rngs, tol=args.tol, sampler=sampler)

        if args.sampler == "both":
            print(method_line(args.rounds))
            p = alternate(
                lambda: release("reference"),
                lambda: release("table"),
                rounds=args.rounds,
                labels=("reference", "table"),
            )
            print(f"{name}: {hist.shape[0]:,} blocks, TopDown by sampler: {p.line(2)}", flush=True)
            continue
        t, cpu = time.perf_counter(), time.process_time()
        rel = release(args.sampler)
        wall, cpu = time.perf_counter() - t, time.process_time() - cpu
        assert (rel.dp[-1] >= 0).all() and rel.dp[0].sum() == rel.truth[0].sum()
        blocks_done += hist.shape[0]
        cpu_done += cpu
        print(
            f"{name}: {hist.shape[0]:,} blocks × {hist.shape[1]} cells, tol {args.tol}: {wall:.1f} s "
            f"({cpu:.1f} CPU-s); iterations per level {rel.iterations}; peak RSS "
            f"{peak_rss_mb():.0f} MB"
        )
    if not blocks_done:  # --sampler both: no single-sampler runs to extrapolate
        return
    us = 8_132_968 * cpu_done / blocks_done
    print(
        f"extrapolated full US (8,132,968 blocks): {us:.0f} CPU-s per replicate, "
        f"{us / 2:.0f} s on 2 cores"
    )


def against(args: argparse.Namespace) -> None:
    """Fresh processes of ``args.against``'s benchmark and this tree's, alternated (module doc)."""
    import os
    import sys
    from pathlib import Path

    from _timing import child_timed

    trees = (Path(args.against).resolve(), Path(__file__).resolve().parent.parent)
    print(method_line(args.rounds, 0) + " (a fresh process per run)")
    for name in args.spine_states.split(","):

        def run(tree: Path, name: str = name) -> Any:
            argv = [sys.executable, str(tree / "benchmarks" / "bench_topdown.py"), "--no-us"]
            argv += ["--no-multi", "--spine-states", name, "--seed", str(args.seed)]
            return child_timed(
                argv,
                cwd=tree,
                env=dict(os.environ, PYTHONPATH=str(tree), OPENBLAS_NUM_THREADS="1"),
                pattern=rf"{name}: .*?: (?P<wall>[0-9.]+) s \((?P<cpu>[0-9.]+) CPU-s\).*",
                label=tree.name,
            )

        p = alternate(
            lambda: run(trees[0]),
            lambda: run(trees[1]),
            rounds=args.rounds,
            warmup=0,
            labels=(trees[0].name, trees[1].name),
        )
        print(f"{name}: TopDown, {p.line(2)}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--seed", type=int, default=20200325)
    ap.add_argument("--neighbours", default="bounded", choices=("bounded", "add_remove"))
    ap.add_argument("--no-us", action="store_true", help="skip the full-US replicate")
    ap.add_argument("--no-multi", action="store_true", help="skip the multi-query state")
    ap.add_argument(
        "--multi-fanouts",
        default="60,25,3,40",
        help="children per County, Tract, Block group, Block (default: 180,000 blocks)",
    )
    ap.add_argument(
        "--us-schema",
        default="total",
        choices=("total", "pl94"),
        help="the full-US replicate's schema (pl94: 28 cells, histograms drawn in the workers)",
    )
    ap.add_argument(
        "--spine-states",
        default="",
        help="comma-separated spine state names to release over the pl94 schema (e.g. S16,S01)",
    )
    ap.add_argument("--tol", type=float, default=1e-3, help="WLS stopping step, in people")
    ap.add_argument(
        "--sampler",
        default="table",
        choices=("table", "reference", "both"),
        help="the discrete-Gaussian sampler of the measurements (default: table; both: the spine "
        "states' TopDown with each, alternated, median CPU-s)",
    )
    ap.add_argument(
        "--rounds", type=int, default=3, help="--sampler both, --against: alternated rounds"
    )
    ap.add_argument("--against", default="", help="a checkout to alternate with (see above)")
    args = ap.parse_args()
    print(machine_info())
    if args.against:
        against(args)
        return
    if not args.no_us:
        full_us(args)
    if not args.no_multi:
        multi_query(args)
    if args.spine_states:
        spine_states(args)


if __name__ == "__main__":
    main()
