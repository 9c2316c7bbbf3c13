"""Where a long production TopDown audit stands (not a test): per state of the spec, done or not,
what its tasks have cost (the costs a finished state's task keeps in the staging store, or, for
a finished store, the ``production`` group's ``state_costs``), the levels kept of an unfinished
one (its resume points), and the CPU the rest should need at the finished states' CPU per person.

    PYTHONPATH=. .venv/bin/python benchmarks/production_progress.py SPEC STORE

``STORE`` is the ``--store`` of the ``dpaudit run``: its staging copy (``.NAME.partial-RUNID``
beside it) is read while the run is unfinished. Reading does not disturb a running audit (it
opens the staging store read-only and takes no lock)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _machine import machine_info  # noqa: E402


def store_costs(spec: Any, plan: Any, store: str) -> tuple[Any, set[tuple[int, int]], dict]:
    """The store a production run's progress is read from (its staging copy while unfinished,
    else the published store), its finished (state, level) blocks, and per state the recorded
    CPU and wall seconds and worker peak (NaN: none recorded)."""
    import xarray as xr

    from flows.audit.flow import run_id_for
    from flows.audit.production_progress import state_costs
    from storage.result_store import ResultStore

    target = ResultStore.at(str(Path(store).resolve()))
    staging = target.staged(run_id_for(spec))
    n = len(plan.states)
    if staging.exists():
        return staging, staging.done_blocks(), state_costs(staging, n)
    if not target.exists():
        sys.exit(f"no store at {target.url} and no staging copy of run {run_id_for(spec)}")
    kept = xr.open_zarr(target.url, group="production").attrs.get("state_costs", {})
    costs = {k: np.full(n, np.nan) for k in ("cpu_s", "wall_s", "peak_rss")}
    for i, st in enumerate(plan.states):
        if st in kept:
            costs["cpu_s"][i] = kept[st]["cpu_s"]
            costs["wall_s"][i] = kept[st]["wall_s"]
            costs["peak_rss"][i] = kept[st]["worker_peak_rss_bytes"]
    return target, {(b.state, b.level) for b in plan.blocks}, costs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec")
    ap.add_argument("store")
    args = ap.parse_args()

    from flows.audit.production_progress import PRODUCTION_PROGRESS
    from flows.audit.spine_share import spine_of
    from flows.spec.files import load_spec
    from flows.spec.plan import make_plan

    spec = load_spec(args.spec)
    plan = make_plan(spec)
    assert plan.spine is not None, "a spine audit"
    where, done, costs = store_costs(spec, plan, args.store)
    people = spine_of(plan.spine).populations()["State"]
    try:
        keys = list(where.zarr_group(PRODUCTION_PROGRESS).group_keys())
    except Exception:  # a finished store, or no resume point kept yet
        keys = []
    print(machine_info())
    print(f"store: {where.url}")
    levels: dict[int, set[int]] = {}
    for k in keys:
        s, _, lv = k.split("-")[:3]
        levels.setdefault(int(s), set()).add(int(lv[1:]))
    rows, per_person = [], []
    print(f"{'state':<6} {'people':>11} {'status':<22} {'CPU-s':>9} {'wall s':>9} "
          f"{'peak GB':>8} {'ms/person':>9}")  # fmt: skip
    for i, st in enumerate(plan.states):
        if st == "US":
            continue
        pop = int(people[int(st[2:]) - 1])
        finished = all((b.state, b.level) in done for b in plan.blocks if b.state == i)
        cpu = float(costs["cpu_s"][i])
        if finished:
            status = "done"
        elif i in levels:
            status = f"levels 0-{max(levels[i])} kept"
        else:
            status = "not started"
        ms = 1e3 * cpu / pop if np.isfinite(cpu) else np.nan
        if finished and np.isfinite(ms):
            per_person.append(ms)
        rows.append((st, pop, finished, cpu))
        rss = float(costs["peak_rss"][i]) / 1e9
        wall = float(costs["wall_s"][i])
        figures = f"{cpu:>9.0f} {wall:>9.0f} {rss:>8.2f} {ms:>9.3f}" if np.isfinite(cpu) else ""
        print(f"{st:<6} {pop:>11,} {status:<22} {figures}".rstrip())
    done_people = sum(p for _, p, f, _ in rows if f)
    left_people = sum(p for _, p, f, _ in rows if not f)
    spent = np.nansum([c for *_, c in rows])
    print(f"states done: {sum(f for _, _, f, _ in rows)} of {len(rows)}; people done "
          f"{done_people:,} of {done_people + left_people:,}; CPU-s recorded {spent:,.0f}")  # fmt: skip
    if per_person:
        rate = float(np.median(per_person))
        print(f"median {rate:.3f} ms of CPU a person over the finished states: the rest "
              f"≈ {rate * left_people / 3.6e6:.1f} CPU-hours")  # fmt: skip


if __name__ == "__main__":
    main()
