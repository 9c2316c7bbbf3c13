"""Benchmark: the memory of one level's fit of a spine state (not a test), for the largest states,
whose County level is one problem (one parent, the State: S32's DHC County is 182 counties × the
State's cells, ≈ 14 M variables).

    PYTHONPATH=. python benchmarks/bench_fit_memory.py SPEC STATE [--seconds 110]

The state's people are drawn as a ``dpaudit run`` of SPEC draws them; the level below the State
is fitted on noisy measurements with the State's *true* histogram as its parent (the release's
State histogram differs a little: a real run's peak is somewhat higher). Python's allocation
tracer (numpy's arrays included) gives the memory held after each step of the setup (the
variables, the measurements, the coarse rows, the fine terms' gradient) and the peak inside the
first Newton steps of the dual route, where the largest temporaries are made; RSS beside it. The
fit stops after ``--seconds`` (its first steps hold the peak; a whole County fit of S32 is ≈ 15
CPU-minutes).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
from _machine import machine_info

from auditlib.simulate import sparse_coarse, sparse_fit, sparse_terms
from auditlib.simulate import sparse_topdown as td


def _rss_gb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1e6
    return float("nan")


def _say(t0: float, what: str) -> None:
    cur, peak = tracemalloc.get_traced_memory()
    print(f"{time.time() - t0:6.1f} s  {what:<28} held {cur / 1e9:5.2f} GB  peak since last "
          f"{peak / 1e9:5.2f} GB  RSS {_rss_gb():5.2f} GB", flush=True)  # fmt: skip
    tracemalloc.reset_peak()


def _wrap(owner: Any, name: str, t0: float, first: int = 2, label: str = "") -> None:
    f: Callable[..., Any] = getattr(owner, name)
    calls = [0]

    def g(*a: Any, **k: Any) -> Any:
        calls[0] += 1
        out = f(*a, **k)
        if calls[0] <= first:
            _say(t0, f"{label or name} #{calls[0]}")
        return out

    setattr(owner, name, g)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec")
    ap.add_argument("state")
    ap.add_argument("--seconds", type=float, default=110.0)
    args = ap.parse_args()
    from auditlib.geography.sparse_population import spine_state_sparse_population
    from auditlib.simulate.topdown import spine_state
    from flows.audit.blocks import run_levels
    from flows.audit.spine_share import spine_of
    from flows.spec.files import load_spec
    from flows.spec.plan import make_plan
    from flows.spec.sources import spine_levels

    print(machine_info(), flush=True)
    plan = make_plan(load_spec(args.spec))
    if args.state not in plan.states:
        sys.exit(f"bench_fit_memory: {args.state} is not a state of {args.spec}")
    block = next(b for b in plan.blocks if b.state == list(plan.states).index(args.state))
    prod, topdown, gis = plan.production, plan.topdown, run_levels(plan)
    assert prod is not None and topdown is not None and plan.spine is not None
    spine = spine_of(plan.spine)
    names = tuple(plan.geolevels[g] for g in gis)
    hierarchy, _ = spine_state(spine, block.state_key - 1, spine_levels(names))
    pop = spine_state_sparse_population(
        spine, block.state_key - 1, plan.population.seed, schemas=(prod.schema,)
    )
    hist, inv = pop.histograms(prod.schema), pop.invariants(prod.schema)
    parent = hierarchy.parents[0]
    truth, invs = hist, inv
    for p in reversed(hierarchy.parents[1:]):
        truth, invs = truth.aggregate(p, int(p.max()) + 1), invs.aggregate(p, int(p.max()) + 1)
    state = truth.aggregate(parent, 1)
    del pop, hist, inv
    tol = topdown.tol if isinstance(topdown.tol, float) else topdown.tol[1]
    level = td._Level(
        truth, invs.units, invs.lower(), int(invs.state_total), topdown.measured[names[1]],
        np.random.default_rng(1), 20_000, tol, 40,
    )  # fmt: skip
    n_var = parent.size * state.nnz
    print(f"{args.state} {names[1]}: {parent.size:,} units under the State, whose {state.nnz:,} "
          f"non-zero cells make {n_var:,} candidate variables", flush=True)  # fmt: skip
    t0 = time.time()
    tracemalloc.start()
    _wrap(sparse_fit._Fit, "measure", t0, 1)
    _wrap(sparse_fit, "constraint_rows", t0, 1)
    _wrap(sparse_terms.TermsGradient, "__init__", t0, 1, "TermsGradient")
    for name in ("_parts", "_preconditioner", "_direction"):
        _wrap(sparse_coarse.CoarseProx, name, t0)

    def stop() -> None:
        time.sleep(args.seconds)
        _say(t0, "stopped")
        os._exit(0)

    threading.Thread(target=stop, daemon=True).start()
    td._child_start(level, state, parent, 0, parent.size)()
    _say(t0, "fitted")


if __name__ == "__main__":
    main()
