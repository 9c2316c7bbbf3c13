"""Benchmark: a production state's residual blocks built from its sparse TopDown releases (what
``dpaudit run`` does between a state's TopDown and its writes), this checkout against another
revision's ``auditlib/simulate/sparse_release.py``, alternated in one process.

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python benchmarks/bench_sparse_blocks.py \
        [--spec benchmarks/specs/pl94_production_us_r10.toml] [--state ST48] [--replicates 3] \
        [--rounds 3] [--before REV] [--out benchmarks/results/sparse_blocks.json]

The state's replicates are simulated once (the spec's spine, seed and allocation; not timed).
Then every level's block is built and read in the writer's pieces, two pairs alternated by
``_timing.alternate`` (one warm-up each, then ``--rounds`` rounds, median ``time.process_time()``):
``REV``'s ``sparse_level_residuals`` against this checkout's ``sparse_level_parts`` (the block as its
parts), then those parts against ``StreamedParts`` (computed as it is read, as a state's replicates
in ranges are written). Each build's peak resident memory above its start is sampled every 20 ms
(``_timing.PeakRSS``). Printed: the medians, the ratios, the memory of each's last build, and
whether the blocks are the same (a SHA-256 of every level's arrays, read piece by piece).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
from _machine import commit, machine_info
from _timing import PeakRSS, alternate, method_line

ROOT = Path(__file__).resolve().parent.parent
VARS = ("residual", "truth", "query_index", "unit_index", "cell_index")


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

    from auditlib.exceptions import SpecError
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
    try:
        plan = make_plan(parse_spec(data))
    except SpecError as err:  # an unknown state, a bad replicate count: named, exit 2
        ap.error(str(err))
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

    def build(kind: str) -> tuple[int, str]:
        """Every level's block built by ``kind`` and read in the writer's pieces: the most memory
        it added and the blocks' digest."""
        h = hashlib.sha256()
        with PeakRSS(every=0.02) as peak:
            base = peak.peak
            for i, queries in levels:
                args_ = (truth[i], [run[i] for run in dps], queries, ids)
                if kind == "before":
                    b: Any = ResidualParts((old.sparse_level_residuals(*args_),))
                elif kind == "parts":
                    b = new.sparse_level_parts(*args_)
                else:
                    b = new.StreamedParts(*args_)
                _digest(h, b, step)
                del b
        return peak.peak - base, h.hexdigest()

    print(method_line(args.rounds), flush=True)
    pairs = [
        alternate(lambda: build("before"), lambda: build("parts"), rounds=args.rounds,
                  labels=("before", "parts")),
        alternate(lambda: build("parts"), lambda: build("streamed"), rounds=args.rounds,
                  labels=("parts", "streamed")),
    ]  # fmt: skip
    for p in pairs:
        print(p.line(2), flush=True)
        for label, (mem, _) in zip(p.labels, p.values, strict=True):
            print(f"  {label}: +{mem / 1e9:.2f} GB (its last build)")
    digests = {d for p in pairs for _, d in p.values}
    same = len(digests) == 1
    print("blocks identical:", same)
    if args.out:
        rec = {
            "machine": machine_info(),
            "commit": commit(),
            "before": args.before,
            "state": args.state,
            "replicates": args.replicates,
            "rounds": args.rounds,
            "median_cpu_s": {
                "before": pairs[0].median_cpu(0),
                "parts": [pairs[0].median_cpu(1), pairs[1].median_cpu(0)],
                "streamed": pairs[1].median_cpu(1),
            },
            "added_bytes": {
                "before": pairs[0].values[0][0],
                "parts": pairs[0].values[1][0],
                "streamed": pairs[1].values[1][0],
            },
            "load": [pairs[0].load_range, pairs[1].load_range],
            "identical": same,
        }
        with open(args.out, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec) + "\n")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
