"""Benchmark: the sizes of one spine state's TopDown problems, level by level (not a test).

    PYTHONPATH=. python benchmarks/bench_state_problems.py SPEC ST32 [ST19 ...] [--kept STORE]

For each named state of ``SPEC`` (a production TopDown spec on the spine, e.g.
``specs/dhc_production_us.toml``): its people drawn as the audit draws them, and per run level
the units, the true non-zero cells, and the fit's variables — every child × its parent's non-zero
cells that the child may hold (``may_hold``: it has housing units or facilities of the cell's unit
type, and the cell is no structural zero) — in all, in the largest problem of one parent, and in
the chunks of whole parents the run releases the level in (``sparse_topdown._chunks``, about
``CHUNK_VARIABLES`` candidates each).

The run fits below the *released* parent's non-zero cells, known only once the level above is
released (a large state's County fit alone is a quarter of an hour); here the parent is its true
histogram, so the sizes are the problems of the true parents, not the release's. ``--kept STORE``
(the ``--store`` of a ``dpaudit run`` of the spec, unfinished) reads the variables its chunks
recorded for the same states, so the two can be compared level by level where a level is kept
whole.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
from _machine import machine_info


def problems(plan: Any, name: str) -> list[dict[str, Any]]:
    """Per run level of state ``name``: units, true non-zero cells, and the fit's variables with
    the true parent (in all, the largest parent's, the chunks')."""
    from auditlib.geography.sparse_histograms import may_hold
    from auditlib.geography.sparse_population import spine_state_sparse_population
    from auditlib.simulate.sparse_topdown import CHUNK_VARIABLES, _child_variables, _chunks
    from auditlib.simulate.topdown import spine_state
    from flows.audit.blocks import run_levels
    from flows.audit.spine_share import spine_of
    from flows.spec.sources import spine_levels

    prod = plan.production
    spine = spine_of(plan.spine)
    keys = {plan.states[b.state]: b.state_key for b in plan.blocks if b.state_key}
    if name not in keys:
        raise SystemExit(f"{name} is no spine state of the spec: {sorted(keys)}")
    st = keys[name] - 1  # the spine's index
    gis = run_levels(plan)
    chain = spine_levels(tuple(plan.geolevels[gi] for gi in gis))
    hierarchy, _ = spine_state(spine, st, chain)
    t = time.perf_counter()
    pop = spine_state_sparse_population(spine, st, plan.population.seed, schemas=(prod.schema,))
    drawn = time.perf_counter() - t
    truth, invs = [pop.histograms(prod.schema)], [pop.invariants(prod.schema)]
    for p in reversed(hierarchy.parents):
        truth.insert(0, truth[0].aggregate(p, int(p.max()) + 1))
        invs.insert(0, invs[0].aggregate(p, int(p.max()) + 1))
    schema = truth[0].schema_name
    people = int(truth[0].counts.sum())
    print(f"{name}: {people:,} people drawn in {drawn:.1f} s; levels {' > '.join(chain)}")
    cells = np.arange(truth[0].schema.n_cells, dtype=np.int64)
    rows = [
        {
            "level": chain[0], "units": 1, "nnz": int(truth[0].counts.size),
            "variables": int(may_hold(cells, np.zeros_like(cells), invs[0].units, schema).sum()),
            "largest": None, "chunks": 1, "largest_chunk": None,
        }
    ]  # fmt: skip
    for i, parent in enumerate(hierarchy.parents, start=1):
        up = truth[i - 1]
        per_parent = np.zeros(up.n_units, np.int64)
        sizes = []
        for c0, c1 in _chunks(up, parent, CHUNK_VARIABLES):
            unit, cell, _ = _child_variables(up, parent[c0:c1])
            keep = may_hold(cell, unit + c0, invs[i].units, schema)
            sizes.append(int(keep.sum()))
            np.add.at(per_parent, parent[c0:c1][unit[keep]], 1)
        rows.append(
            {
                "level": chain[i], "units": int(parent.size), "nnz": int(truth[i].counts.size),
                "variables": int(sum(sizes)), "largest": int(per_parent.max()),
                "chunks": len(sizes), "largest_chunk": max(sizes),
            }
        )  # fmt: skip
    return rows


def kept(spec_path: str, plan: Any, store: str) -> dict[tuple[str, int], tuple[int, int]]:
    """(state, run level index) → the variables the unfinished run's kept chunks recorded, and
    the children they cover from the first (the level is kept whole if that is all of them)."""
    from pathlib import Path

    from flows.audit.flow import run_id_for
    from flows.audit.production_progress import StoreProgress
    from flows.spec.files import load_spec
    from storage.result_store import ResultStore

    staging = ResultStore.at(str(Path(store).resolve())).staged(run_id_for(load_spec(spec_path)))
    out = {}
    for s, name in enumerate(plan.states):
        for i in range(len(_levels(plan))):
            batches = StoreProgress(staging, s, 0).load(i)
            if not batches:
                continue
            chunks = [c for b in sorted(batches, key=lambda b: b.first) for c in b.chunks]
            ends = [c.c0 for c in chunks[1:]] + [-1]
            covered = next(c.c1 for c, e in zip(chunks, ends, strict=True) if c.c1 != e)
            out[name, i] = (sum(c.variables for c in chunks), covered if chunks[0].c0 == 0 else 0)
    return out


def _levels(plan: Any) -> list[int]:
    from flows.audit.blocks import run_levels

    return list(run_levels(plan))


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("spec")
    ap.add_argument("states", nargs="+")
    ap.add_argument("--kept", help="an unfinished run's --store: the variables its chunks recorded")
    args = ap.parse_args()
    from flows.spec.files import load_spec
    from flows.spec.plan import make_plan

    print(machine_info())
    spec = load_spec(args.spec)
    states = spec.population.spine_states
    if states != "all":  # a batch's spec: its own states only
        missing = [s for s in args.states if s not in states]
        if missing:
            raise SystemExit(f"{missing} are not states of {args.spec}: {states}")
    plan = make_plan(spec)
    got = kept(args.spec, plan, args.kept) if args.kept else {}
    for name in args.states:
        rows = problems(plan, name)
        print(
            f"{'level':<20} {'units':>9} {'true nnz':>11} {'variables':>13} {'largest parent':>14} "
            f"{'chunks':>6} {'largest chunk':>13}"
            + ("  run's variables (released parent)" if got else "")
        )  # fmt: skip
        for i, r in enumerate(rows):
            run = got.get((name, i))
            whole = run is not None and run[1] == r["units"]
            note = "" if run is None else f"  {run[0]:,}" + ("" if whole else " (part kept)")
            if run is not None and whole:
                note += f"  × {run[0] / r['variables']:.2f}"
            big = "—" if r["largest"] is None else f"{r['largest']:,}"
            chunk = "—" if r["largest_chunk"] is None else f"{r['largest_chunk']:,}"
            print(
                f"{r['level']:<20} {r['units']:>9,} {r['nnz']:>11,} {r['variables']:>13,} "
                f"{big:>14} {r['chunks']:>6} {chunk:>13}{note}"
            )
        total = sum(r["variables"] for r in rows)
        print(f"in all: {total:,} variables over {sum(r['chunks'] for r in rows)} problems\n")


if __name__ == "__main__":
    main()
