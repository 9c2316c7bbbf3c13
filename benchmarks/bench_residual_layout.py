"""Size of the residuals group of the full-US spine audit (the spec of ``bench_orchestration.py
--mode spine``: TopDown, total query, 1 replicate, ``pl94_2021_production``), built in one process
without Prefect or Dask: the same plan, seeds and block writes as the flow's tasks
(``flows.audit.blocks.topdown_state`` per state, then the nation), into a fresh store.

    .venv/bin/python benchmarks/bench_residual_layout.py [--states N]

Prints the bytes on disk (sum of file sizes) and files of each residual array, the total, the length
of the item axis and the largest block. ``--states N``: the first N states only. Run it on two
checkouts to compare their layouts (a checkout that predates the flat item axis writes every block
padded to the largest).
"""

from __future__ import annotations

import argparse
import inspect
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from _machine import machine_info

SPEC = {
    "audit": {"allocation": "pl94_2021_production", "replicates": 1},
    "population": {"kind": "spine", "spine_states": "all", "attributes": "total"},
    "release": {"kind": "topdown"},
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--states", type=int, default=None, help="the first N states only")
    args = ap.parse_args()
    from flows.audit.blocks import topdown_nation, topdown_state
    from flows.spec import parse_spec
    from flows.spec.plan import make_plan
    from storage import store

    spec = {k: dict(v) for k, v in SPEC.items()}
    if args.states is not None:
        spec["population"]["spine_states"] = args.states
    print(machine_info(), flush=True)
    plan = make_plan(parse_spec(spec))
    tmp = Path(tempfile.mkdtemp(prefix="dpaudit-layout-"))
    url = str(tmp / "s.zarr")
    store.create_residual_template(url, **plan.template_layout(), attrs={"run_id": "bench"})
    params = inspect.signature(store.write_residual_block).parameters
    extra = (getattr(plan, "n_items_max", 0),) if "n_items_max" in params else ()
    t0 = time.perf_counter()
    dp, truth = [], []
    for b in plan.blocks_at(plan.topdown_top):
        blocks, state_dp, state_truth = topdown_state(plan, b)
        for gi, res in blocks.items():
            store.write_residual_block(url, b.state, gi, res, *extra)
        dp.append(state_dp)
        truth.append(state_truth)
    for b in plan.blocks:
        if b.state_key == 0:
            res = topdown_nation(plan, b.level, dp, truth)
            store.write_residual_block(url, b.state, b.level, res, *extra)
    for s, g in plan.empty:
        store.write_residual_block(url, s, g, None, *extra)
    wall = time.perf_counter() - t0
    root = Path(url, "residuals")
    total = 0
    for arr in sorted(p for p in root.iterdir() if p.is_dir()):
        files = [f for f in arr.rglob("*") if f.is_file()]
        size = sum(f.stat().st_size for f in files)
        total += size
        print(f"  {arr.name:14s} {size / 2**20:9.2f} MiB  {len(files):6d} files", flush=True)
    items = sum(b.n_items for b in plan.blocks)
    largest = max(b.n_items for b in plan.blocks)
    print(
        f"residuals group: {total / 2**20:.2f} MiB on disk, {len(plan.blocks)} blocks, "
        f"{items:,} items (largest block {largest:,}); simulated and written in {wall:.1f} s; "
        f"load {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
