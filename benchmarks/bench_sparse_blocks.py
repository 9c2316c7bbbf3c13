"""Benchmark: a production state's residual blocks built from its sparse TopDown releases (what
``dpaudit run`` does between a state's TopDown and its writes), this checkout against another
revision's ``auditlib/simulate/sparse_release.py``, alternated in one process.

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python benchmarks/bench_sparse_blocks.py \
        [--spec benchmarks/specs/pl94_production_us_r10.toml] [--state ST48] [--replicates 3] \
        [--rounds 3] [--before REV] [--out benchmarks/results/sparse_blocks.json]

The state's replicates are simulated once (the spec's spine, seed and allocation; not timed).
Then, in each round, every level's block is built by ``REV``'s ``sparse_level_residuals`` and by
this checkout's (``sparse_level_parts``, the block as its parts; and ``StreamedParts`` read
forwards in the store's pieces, as a state's replicates in ranges are written), in turn, each
timed with ``time.process_time()`` (one thread), with the peak resident memory it added (sampled
every 20 ms). Printed: the median CPU-s of each, the ratios, and whether the blocks are the same
(a SHA-256 of every level's arrays in item order).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import statistics
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
from _machine import commit, machine_info

ROOT = Path(__file__).resolve().parent.parent
VARS = ("residual", "truth", "query_index", "unit_index", "cell_index")


def _rss() -> int:
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * 4096


class _Peak:
    """The most resident memory above the start while the block is built, sampled every 20 ms."""

    def __enter__(self) -> _Peak:
        self.base = self.peak = _rss()
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, _rss())

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, _rss())


def _old_module(rev: str) -> Any:
    src = subprocess.run(
        ["git", "show", f"{rev}:auditlib/simulate/sparse_release.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    path = Path("/tmp") / f"sparse_release_{rev}.py"
    path.write_text(src, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"sparse_release_{rev}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _digest(h: Any, block: Any, piece: int) -> None:
    """Feed a block's arrays to ``h`` piece by piece (``piece`` items, as the store's writer
    reads it; the same pieces for every kind of block, none of them kept)."""
    n = block.n_items
    for a in range(0, n, piece):
        got = block.items(a, min(a + piece, n))
        for name in VARS:
            h.update(np.ascontiguousarray(getattr(got, name)).tobytes())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", default="benchmarks/specs/pl94_production_us_r10.toml")
    ap.add_argument("--state", default="ST48")
    ap.add_argument("--replicates", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--before", default="04c0cf3")
    ap.add_argument("--out", default="")
    args = ap.parse_args()

    from auditlib.simulate import ResidualParts
    from auditlib.simulate import sparse_release as new
    from flows.audit.blocks import run_levels
    from flows.audit.production import production_runs
    from flows.spec import parse_spec
    from flows.spec.plan import make_plan
    from storage.residuals import item_chunk, pieces

    data = tomllib.loads(Path(args.spec).read_text(encoding="utf-8"))
    data["population"]["spine_states"] = [args.state]
    data["audit"]["replicates"] = args.replicates
    plan = make_plan(parse_spec(data))
    block = next(b for b in plan.blocks if b.state_key != 0)
    print(machine_info(), "| commit", commit(), flush=True)
    t0 = time.process_time()
    dps, truth = production_runs(plan, block, (0, args.replicates))
    print(f"{args.state}: {args.replicates} replicate(s) simulated, "
          f"{time.process_time() - t0:.1f} CPU-s", flush=True)  # fmt: skip
    ids = {q: i for i, q in enumerate(plan.queries)}
    levels = [
        (i, [q.name for _, q in plan.level_queries[gi]]) for i, gi in enumerate(run_levels(plan))
    ]
    old = _old_module(args.before)
    chunk = item_chunk(args.replicates)
    step = pieces(chunk * 10**4, chunk, args.replicates)[0][1]  # the writer's piece

    def build(kind: str) -> tuple[float, int, str]:
        h = hashlib.sha256()
        cpu = 0.0
        with _Peak() as peak:
            for i, queries in levels:
                args_ = (truth[i], [run[i] for run in dps], queries, ids)
                c = time.process_time()
                if kind == "before":
                    b = old.sparse_level_residuals(*args_)
                elif kind == "parts":
                    b = new.sparse_level_parts(*args_)
                else:
                    b = new.StreamedParts(*args_)
                if kind != "streamed":
                    cpu += time.process_time() - c
                    _digest(h, b if kind == "parts" else ResidualParts((b,)), step)
                else:  # its work is done as it is read
                    _digest(h, b, step)
                    cpu += time.process_time() - c
                del b
        return cpu, peak.peak - peak.base, h.hexdigest()

    kinds = ("before", "parts", "streamed")
    runs: dict[str, list[tuple[float, int, str]]] = {k: [] for k in kinds}
    for r in range(args.rounds):
        for k in kinds if r % 2 == 0 else kinds[::-1]:
            runs[k].append(build(k))
            cpu, mem, _ = runs[k][-1]
            print(f"  round {r + 1} {k:8s} {cpu:7.2f} CPU-s  +{mem / 1e9:.2f} GB", flush=True)
    med = {k: statistics.median(c for c, _, _ in v) for k, v in runs.items()}
    peak = {k: max(m for _, m, _ in v) for k, v in runs.items()}
    same = len({d for v in runs.values() for _, _, d in v}) == 1
    for k in kinds:
        print(f"{k:8s} median {med[k]:7.2f} CPU-s ({med['before'] / med[k]:.2f}× before), "
              f"peak +{peak[k] / 1e9:.2f} GB")  # fmt: skip
    print("blocks identical:", same)
    if args.out:
        rec = {
            "machine": machine_info(),
            "commit": commit(),
            "before": args.before,
            "state": args.state,
            "replicates": args.replicates,
            "rounds": args.rounds,
            "median_cpu_s": med,
            "peak_added_bytes": peak,
            "identical": same,
        }
        with open(args.out, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec) + "\n")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
