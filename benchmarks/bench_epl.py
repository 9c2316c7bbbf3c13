"""Benchmark: EPL of 10⁷ residuals with the lattice KDE vs scipy's gaussian_kde; sampler rates.

scipy's KDE costs n × grid kernel evaluations, so it is timed on a subsample and scaled up linearly
(the scaled figure is an estimate, labelled as such); on that subsample both give the same EPL(x).
Every time is the median CPU-s (``time.process_time``) of calls alternated in one process
(``_timing.alternate``: the reference, then the lattice KDE, ``--rounds`` times after a warm-up of
each; ``--scipy-full``: after the subsample's warm-up, no further one); the sampler rates are
draws per median CPU-s of ``--rounds`` calls.

From the repository root (or with the package installed):

    PYTHONPATH=. python benchmarks/bench_epl.py                 # n = 10⁷
    PYTHONPATH=. python benchmarks/bench_epl.py --scipy-full    # also scipy on all n (~20 s)
    PYTHONPATH=. python benchmarks/bench_epl.py --n 1e6 --scipy-n 2e4
    PYTHONPATH=. python benchmarks/bench_epl.py --stream 1e8 --stream-dir /tmp/x  # Zarr streaming
    PYTHONPATH=. python benchmarks/bench_epl.py --audit-level --states 8 --stream-dir /tmp/x

Figures, their machine and load: benchmarks/README.md ("EPL").
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
from _machine import machine_info
from _timing import alternate, median_cpu, method_line

from auditlib.epl import EPLKnobs, epl, flaxman_petti_reference
from auditlib.mechanisms import DiscreteGaussian, TwoSidedGeometric


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=float, default=1e7, help="residuals for the lattice EPL")
    ap.add_argument("--scipy-n", type=float, default=1e5, help="subsample for scipy's KDE")
    ap.add_argument("--seed", type=int, default=20200325)
    ap.add_argument("--rounds", type=int, default=5, help="alternated rounds of each comparison")
    ap.add_argument("--scipy-full", action="store_true", help="also time scipy on all n points")
    ap.add_argument(
        "--stream", type=float, default=0, help="residuals to stream from Zarr (0: skip)"
    )
    ap.add_argument("--stream-dir", default=".", help="where the streamed Zarr array is written")
    ap.add_argument(
        "--audit-level",
        action="store_true",
        help="peak memory of one level's EPL task on an audit store, streamed vs concatenated",
    )
    ap.add_argument("--states", type=int, default=8, help="--audit-level: states of the audit")
    ap.add_argument("--replicates", type=int, default=25, help="--audit-level: replicates")
    args = ap.parse_args()
    if args.stream:
        stream(int(args.stream), args.stream_dir, args.seed)
        return
    if args.audit_level:
        audit_level(args.states, args.replicates, args.stream_dir)
        return
    n, n_sub = int(args.n), int(args.scipy_n)
    rng = np.random.default_rng(args.seed)
    print(machine_info())
    print(method_line(args.rounds))

    print(f"\n# samplers (10^7 draws a call, median CPU-s of {args.rounds} calls)")
    for name, mech in [
        ("DiscreteGaussian(4.9995)", DiscreteGaussian(4.9995)),
        ("DiscreteGaussian(456.62)", DiscreteGaussian(456.62)),
        ("TwoSidedGeometric(0.05)", TwoSidedGeometric(0.05)),
    ]:
        cpu, _ = median_cpu(lambda m=mech: m.rvs(10**7, rng), rounds=args.rounds)  # type: ignore[misc]
        tv = getattr(mech, "sampler_tv_bound", 0.0)
        print(f"{name:26s} {1e7 / cpu / 1e6:7.1f} M samples/CPU-s   TV bound {tv:.1e}")

    # Flaxman & Petti's setting at ε = 0.05 (p = ε/2), but with n residuals
    mech = TwoSidedGeometric.from_success_probability(0.025)
    r = mech.rvs(n, rng)
    sub = r[:n_sub]
    on_sub = alternate(
        lambda: flaxman_petti_reference(sub),
        lambda: epl(sub),
        rounds=args.rounds,
        labels=("scipy KDE", "lattice KDE"),
    )
    _, _, ref_epl_x = on_sub.values[0]
    agree = float(np.max(np.abs(on_sub.values[1].epl_x - ref_epl_x)))
    print(f"\n# EPL on the subsample n = {n_sub:,}: {on_sub.line()}")
    print(f"  max |EPL(x) diff| = {agree:.1e}")
    cpu_lat, _ = median_cpu(lambda: epl(r), rounds=args.rounds)
    res = epl(r)
    est = on_sub.median_cpu(0) * n / n_sub
    print(f"\n# EPL, n = {n:,}, grid {res.x.size + 1} points, factor 0.1, window 5-95 %")
    print(
        f"lattice KDE : {cpu_lat:8.3f} CPU-s (median of {args.rounds})   EPL = {res.epl:.5f} "
        f"(true loss {mech.epsilon:.5f})"
    )
    print(
        f"scipy KDE   : ~{est:.1f} CPU-s estimated at {n:,} (scaled linearly from {n_sub:,}): "
        f"~{est / cpu_lat:,.0f}x"
    )
    if args.scipy_full:
        full = alternate(
            lambda: flaxman_petti_reference(r),
            lambda: epl(r),
            rounds=args.rounds,
            warmup=0,
            labels=("scipy KDE", "lattice KDE"),
        )
        print(f"both on all n = {n:,}: {full.line()}; scipy EPL {full.values[0][0]:.5f}")


def stream(n: int, where: str, seed: int, chunk: int = 10**6) -> None:
    """EPL of n float32 residuals in a Zarr array, read chunk by chunk into a lattice histogram:
    peak traced memory (numpy allocations) against the size of the residuals themselves."""
    import pathlib
    import shutil
    import tracemalloc

    import zarr

    from auditlib.epl import estimate_epl, histogram_of_zarr

    print(machine_info())
    path = pathlib.Path(where) / "bench_epl_stream.zarr"
    rows = -(-n // chunk)
    arr = zarr.create_array(str(path), shape=(rows, chunk), chunks=(1, chunk), dtype="float32")
    mech = TwoSidedGeometric(0.05)
    rng = np.random.default_rng(seed)
    t = time.perf_counter()
    for i in range(rows):
        arr[i] = mech.rvs(chunk, rng).astype(np.float32)
    print(
        f"wrote {rows * chunk:,} residuals ({rows * chunk * 4 / 2**20:,.0f} MiB float32) "
        f"in {time.perf_counter() - t:.1f} s"
    )
    tracemalloc.start()
    t = time.perf_counter()
    hist = histogram_of_zarr(zarr.open_array(str(path), mode="r"))
    t_hist = time.perf_counter() - t
    t = time.perf_counter()
    est = estimate_epl(hist, seed=1)
    t_est = time.perf_counter() - t
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(
        f"histogram over {rows} chunks: {t_hist:.1f} s; estimate_epl (B = 200, null 100): "
        f"{t_est:.2f} s; EPL {est.epl:.5f} [{est.ci_low:.5f}, {est.ci_high:.5f}] (true 0.05)"
    )
    print(
        f"peak traced memory {peak / 2**20:.1f} MiB vs residuals {rows * chunk * 4 / 2**20:,.0f}"
        " MiB (float32) in memory"
    )
    shutil.rmtree(path)


def concatenated_level(url: str, plan: Any, g: int, factor: float) -> dict[str, Any]:
    """The EPL task before streaming: every state's residuals of the level concatenated in memory,
    then the rows from the residuals (auditlib.summaries.epl_by_query). Timed here against the
    streamed task; tests/unit/test_epl_geolevel_stream.py checks the streamed task's rows against
    it."""
    from auditlib import seeds
    from auditlib.summaries import epl_by_query
    from storage import store

    nq, perc = len(plan.queries), (5.0, 95.0)
    per_state, res, qis = {}, [], []
    for b in plan.blocks_at(g):
        r, q = store.read_residuals(url, b.state, b.level)
        s = seeds.seed_sequence(plan.noise_seed, seeds.EPL_BOOTSTRAP, g, 1 + b.state)
        per_state[b.state] = epl_by_query(
            r,
            q,
            nq,
            bandwidth_factor=factor,
            percentiles=perc,
            surface_seed=int(s.generate_state(1)[0]),
        )
        res.append(r)
        qis.append(q)
    u = seeds.seed_sequence(plan.noise_seed, seeds.EPL_BOOTSTRAP, g)
    s = seeds.seed_sequence(plan.noise_seed, seeds.EPL_BOOTSTRAP, g, 0)
    pooled = epl_by_query(
        np.concatenate(res, axis=1),
        np.concatenate(qis),
        nq,
        bandwidth_factor=factor,
        percentiles=perc,
        uncertainty_seed=int(u.generate_state(1)[0]),
        surface_seed=int(s.generate_state(1)[0]),
    )
    return {"per_state": per_state, "pooled": pooled}


def audit_level(states: int, replicates: int, where: str) -> None:
    """Peak traced memory (numpy and zarr buffers) of one level's EPL on a real audit store: the
    streamed level (flows.audit.epl_level.epl_geolevel) against the concatenated residuals it replaced."""
    import pathlib
    import shutil
    import tracemalloc

    from flows.audit import epl_level, tasks
    from flows.spec import parse_spec
    from flows.spec.plan import make_plan
    from storage import store
    from storage.result_store import ResultStore

    print(machine_info())
    spec = parse_spec(
        {"audit": {"replicates": replicates, "seed": 7}, "population": {"states": states}}
    )
    plan = make_plan(spec)
    path = pathlib.Path(where) / "bench_epl_audit.zarr"
    shutil.rmtree(path, ignore_errors=True)
    url = str(path)
    store.create_residual_template(
        url,
        **plan.template_layout(),
        attrs={},
    )
    g = plan.geolevels.index("Block")
    t = time.perf_counter()
    for b in plan.blocks_at(g):
        tasks.simulate_block.fn(ResultStore.at(url), plan, b)
    items = sum(b.n_items for b in plan.blocks_at(g))
    level_mib = items * replicates * 4 / 2**20
    print(
        f"Block level: {states} states x {replicates} replicates, {items:,} items, "
        f"{items * replicates:,} residuals ({level_mib:,.1f} MiB float32; one state's block "
        f"{level_mib / states:,.1f} MiB); written in {time.perf_counter() - t:.1f} s"
    )
    for name, fn in (
        ("concatenated (before)", lambda: concatenated_level(url, plan, g, 0.1)),
        (
            "streamed (epl_geolevel)",
            lambda: epl_level.epl_geolevel(
                ResultStore.at(url), plan, g, EPLKnobs(0.1, (5.0, 95.0))
            ),
        ),
    ):
        tracemalloc.start()
        t = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        e = [r["epl"] for r in out["pooled"] if r is not None]
        print(
            f"{name:24s}: {dt:6.1f} s, peak traced memory {peak / 2**20:7.1f} MiB "
            f"({peak / 2**20 / level_mib:.2f}x the level); pooled EPL of query 0 {e[0]:.6f}"
        )
    shutil.rmtree(path)


if __name__ == "__main__":
    main()
