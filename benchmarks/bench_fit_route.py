"""Benchmark: a setting of the sparse TopDown fit, old value against new, on whole spine states.

    PYTHONPATH=. python benchmarks/bench_fit_route.py --old 100 --new 10 [--rounds R] \
        [--case dhc_production:S18:0.05 --case pl94_production:S41:1 …]
    PYTHONPATH=. python benchmarks/bench_fit_route.py --knob CG_RTOL --old 1e-3 --new 1e-2
    PYTHONPATH=. python benchmarks/bench_fit_route.py --knob CG_RTOL --old 1e-3 --new 1e-2 \
        --case dhc_production:S46:1 --rounds 1 --warmup 0
    PYTHONPATH=. python benchmarks/bench_fit_route.py --knob SCREEN_PEOPLE --old 0 --new 0.25

``--knob COARSE_RATIO`` (the default): a fit part goes to the dual route
(:mod:`auditlib.simulate.sparse_coarse`) when its coarse rows' Lipschitz constant is more than
this many times the fine terms' (:mod:`auditlib.simulate.sparse_fit`); ``--knob CG_RTOL``: the
relative residual at which the dual's conjugate gradients stop; ``--knob SCREEN_MIN`` /
``SCREEN_PEOPLE``: problems of more variables than the one and fewer people a variable than the
other are solved on a working set (:mod:`auditlib.simulate.sparse_fista`; ``SCREEN_PEOPLE 0``:
never). Per case (schema, spine state,
spine scale) the state's people are drawn once, then one replicate of the sparse TopDown (every
level, same noise generators) is run with the old and the new value alternated after a warm-up of
each (``_timing.alternate``): median CPU-s of the replicate and of each level, the largest part's
FISTA iterations per level, whether the releases are the same (they need not be: a different
route stops at a different point within the tolerance, and the rounding may then differ), and
whether either breaks a production constraint at any level
(:func:`~auditlib.geography.sparse_histograms.invariant_violations`).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np
from _machine import machine_info
from _timing import alternate, method_line
from bench_sparse_topdown import ALLOCATION, ALLOCATION_LEVELS

from auditlib.allocations import load_allocation
from auditlib.geography.schema import schema
from auditlib.geography.sparse_histograms import invariant_violations
from auditlib.geography.sparse_population import spine_state_sparse_population
from auditlib.geography.spine import Spine, generate_spine, tallies_2020
from auditlib.simulate import sparse_coarse, sparse_fit
from auditlib.simulate.measured import allocation_measured
from auditlib.simulate.sparse_topdown import noise_rngs, sparse_topdown
from auditlib.simulate.topdown import spine_state
from flows.spec.sources import spine_levels

CASES = ("dhc_production:S18:0.05", "pl94_production:S41:1")
KNOBS = {
    "COARSE_RATIO": sparse_fit,
    "CG_RTOL": sparse_coarse,
    "SCREEN_MIN": sparse_fit,
    "SCREEN_PEOPLE": sparse_fit,
}
SEED = 20200325


def _spine(scale: float) -> Spine:
    if scale < 1:
        return generate_spine(
            4,
            totals={"US": tallies_2020()["US"].scaled(scale)},
            population={"US": int(331_449_281 * scale)},
        )
    return generate_spine(SEED)


def state_case(text: str) -> tuple[int, Any, Any, Any, Any]:
    """A case ``schema:state:spine-scale``: the state's index, hierarchy, true block histograms,
    invariants and the allocation's measurements, its people drawn once (printed)."""
    name, state, scale = text.split(":")
    spine = _spine(float(scale))
    st = list(spine.state_names).index(state)
    levels = ALLOCATION_LEVELS[name]
    sch = schema(name)
    measured = allocation_measured(
        load_allocation(ALLOCATION[name]), levels, sch.query_names, "bounded", schema=sch
    )
    hierarchy, _ = spine_state(spine, st, spine_levels(tuple(levels)))
    pop = spine_state_sparse_population(spine, st, SEED)
    hist, inv = pop.histograms(name), pop.invariants(name)
    print(f"{name} {state} (spine scale {scale}): {hist.n_units:,} blocks, {inv.state_total:,} "
          f"people, {hist.nnz:,} non-zero block cells")  # fmt: skip
    return st, hierarchy, hist, inv, measured


def _case(text: str, rounds: int, warmup: int, knob: str, old: float, new: float) -> None:
    st, hierarchy, hist, inv, measured = state_case(text)
    per_level: dict[float, list[list[float]]] = {old: [], new: []}

    module = KNOBS[knob]
    kept = getattr(module, knob)

    def run(value: float) -> Any:
        setattr(module, knob, value)
        cpu: list[float] = []
        clock = [time.process_time()]

        def on_level(i: int, level: str) -> None:
            cpu.append(time.process_time() - clock[0])
            clock[0] = time.process_time()

        rel = sparse_topdown(
            hierarchy.parents, hierarchy.levels, hist, inv, measured,
            noise_rngs(SEED, st, len(hierarchy.levels), 0), on_level=on_level,
        )  # fmt: skip
        per_level[value].append(cpu)
        return rel

    try:
        paired = alternate(
            lambda: run(old), lambda: run(new), rounds=rounds, warmup=warmup,
            labels=(f"{knob} {old:g}", f"{knob} {new:g}"),
        )  # fmt: skip
    finally:
        setattr(module, knob, kept)
    print("  " + paired.line(1))
    a, b = paired.values
    print(f"  {'level':<20} {'old CPU-s':>9} {'new CPU-s':>9} {'old its':>7} {'new its':>7}")
    for i, level in enumerate(hierarchy.levels):
        med = [statistics.median(r[i] for r in per_level[x][warmup:]) for x in (old, new)]
        print(f"  {level:<20} {med[0]:9.1f} {med[1]:9.1f} {a.iterations[i]:7d} "
              f"{b.iterations[i]:7d}")  # fmt: skip
    same = all(
        np.array_equal(x.cells, y.cells) and np.array_equal(x.counts, y.counts)
        for x, y in zip(a.dp, b.dp, strict=True)
    )
    bad = [
        (label, rel.levels[i])
        for label, rel in (("old", a), ("new", b))
        for i in range(len(rel.levels))
        if any(invariant_violations(rel.dp[i], rel.invariants[i]).values())
    ]
    print(f"  releases identical: {same}; non-zero block cells {a.dp[-1].nnz:,} / "
          f"{b.dp[-1].nnz:,}; constraints broken: {bad or 'none'}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1, help="0 for a large state")
    ap.add_argument("--knob", default="COARSE_RATIO", choices=sorted(KNOBS))
    ap.add_argument("--old", type=float, required=True)
    ap.add_argument("--new", type=float, required=True)
    ap.add_argument("--case", action="append", help="schema:state:spine-scale")
    args = ap.parse_args()
    print(machine_info())
    print(method_line(args.rounds, args.warmup))
    for case in args.case or CASES:
        _case(case, args.rounds, args.warmup, args.knob, args.old, args.new)


if __name__ == "__main__":
    main()
