"""Benchmark: the draw of one spine state's sparse population, both production schemas against
PL94 alone (what a ``pl94_production`` run draws), and optionally against another checkout.

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python benchmarks/bench_population_draw.py \
        [--states S13,S41,S04] [--seed 20200325] [--rounds 3] [--old OTHER_CHECKOUT]

Per state (default: the three with the most people in the spine of ``--seed``) the draw
(:func:`~auditlib.geography.sparse_population.spine_state_sparse_population`; the spine is drawn
once, outside the timing) is timed with ``time.thread_time()`` — the draw runs in one thread with
``OPENBLAS_NUM_THREADS=1`` — in alternated rounds: in each round every state is drawn with both
schemas, then with ``schemas=("pl94_production",)``, then (``--old``) by the other checkout's code in
a fresh process, which draws the spine and then times its own draws of every state the same way
(its default schemas: both, in a checkout from before ``schemas=``). Printed: the median CPU-s per
state and per person of each, the ratios, and whether the draws are the same: PL94 alone against
both (array for array), and ``--old`` against this checkout (a SHA-256 of every histogram's arrays
and of the invariants, computed in each process).
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from _machine import commit, machine_info

from auditlib.geography.spine import generate_spine

PL94 = ("pl94_production",)


def digest(pop: Any) -> str:
    """The SHA-256 of a both-schemas draw: every histogram's and invariant's arrays, in field order
    (the ``--old`` process runs this function's source)."""
    h = hashlib.sha256()
    for part in (pop.pl94, pop.dhc, pop.pl94_invariants, pop.dhc_invariants):
        for name in ("indptr", "cells", "counts", "units"):
            if hasattr(part, name):
                h.update(np.ascontiguousarray(getattr(part, name)).tobytes())
    return h.hexdigest()


#: the code a fresh process runs for ``--old``: argv seed, state indices; prints a line per state
CHILD = f"""
from __future__ import annotations
import hashlib, sys, time
from typing import Any
import numpy as np
from auditlib.geography.spine import generate_spine
from auditlib.geography.sparse_population import spine_state_sparse_population
{inspect.getsource(digest)}
seed = int(sys.argv[1])
spine = generate_spine(seed)
for st in map(int, sys.argv[2:]):
    t = time.thread_time()
    pop = spine_state_sparse_population(spine, st, seed)
    cpu = time.thread_time() - t
    print(f"state {{st}} cpu {{cpu:.4f}} sha256 {{digest(pop)}}", flush=True)
"""


def same_histograms(a: Any, b: Any) -> bool:
    return all(
        np.array_equal(getattr(a, f), getattr(b, f)) and getattr(a, f).dtype == getattr(b, f).dtype
        for f in ("indptr", "cells", "counts")
    )


def old_draws(tree: Path, seed: int, states: list[int]) -> dict[int, tuple[float, str]]:
    """Thread CPU-s and digest of each state's draw by the checkout ``tree``, in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(tree), "OPENBLAS_NUM_THREADS": "1"}
    argv = [sys.executable, "-c", CHILD, str(seed), *map(str, states)]
    out = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, check=True)
    got = {}
    for line in out.stdout.splitlines():
        _, st, _, cpu, _, sha = line.split()
        got[int(st)] = (float(cpu), sha)
    return got


def main() -> None:
    from auditlib.geography.sparse_population import spine_state_sparse_population

    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--seed", type=int, default=20200325, help="the spine's and the draws' seed")
    ap.add_argument("--states", default=None, help="comma-separated names (default: 3 largest)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--old", type=Path, default=None, help="another checkout to time beside")
    args = ap.parse_args()
    print(machine_info())
    print(f"commit {commit()} | seed {args.seed} | {args.rounds} alternated rounds, no warm-up | "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")  # fmt: skip
    spine = generate_spine(args.seed)
    block_state = spine.state_of("Block")
    people = np.bincount(block_state, weights=spine.block_population, minlength=spine.n_states)
    names = list(spine.state_names)
    if args.states:
        states = [names.index(s) for s in args.states.split(",")]
    else:
        states = [int(s) for s in np.argsort(-people, kind="stable")[:3]]
    variants = ["both", "pl94"] + (["old"] if args.old else [])
    cpu: dict[tuple[str, int], list[float]] = {(v, st): [] for v in variants for st in states}
    same_pl94: dict[int, bool] = {}
    mine: dict[int, str] = {}
    theirs: dict[int, str] = {}
    load = [os.getloadavg()[0]]
    for r in range(args.rounds):
        for st in states:
            t = time.thread_time()
            both = spine_state_sparse_population(spine, st, args.seed)
            cpu["both", st].append(time.thread_time() - t)
            t = time.thread_time()
            pl94 = spine_state_sparse_population(spine, st, args.seed, schemas=PL94)
            cpu["pl94", st].append(time.thread_time() - t)
            same_pl94[st] = same_histograms(pl94.pl94, both.pl94) and np.array_equal(
                pl94.pl94_invariants.units, both.pl94_invariants.units
            )
            if args.old and r == 0:
                mine[st] = digest(both)
            del both, pl94
        if args.old:
            for st, (c, sha) in old_draws(args.old.resolve(), args.seed, states).items():
                cpu["old", st].append(c)
                theirs.setdefault(st, sha)
        load.append(os.getloadavg()[0])
        print(f"  round {r + 1}: load {load[-1]:.2f}", flush=True)
    med = {k: statistics.median(v) for k, v in cpu.items()}
    head = f"{'state':<6} {'people':>11} " + " ".join(f"{v + ' CPU-s':>11}" for v in variants)
    head += " " + " ".join(f"{v + ' ns/person':>15}" for v in variants)
    print(f"median thread CPU-s of the draw (load {min(load):.1f}-{max(load):.1f})")
    print(head)
    total = {v: 0.0 for v in variants}
    for st in states:
        n = int(people[st])
        row = f"{names[st]:<6} {n:>11,} " + " ".join(f"{med[v, st]:>11.2f}" for v in variants)
        row += " " + " ".join(f"{med[v, st] / n * 1e9:>15.0f}" for v in variants)
        print(row)
        for v in variants:
            total[v] += med[v, st]
    n_all = int(sum(people[st] for st in states))
    print(f"{'all':<6} {n_all:>11,} " + " ".join(f"{total[v]:>11.2f}" for v in variants) + " "
          + " ".join(f"{total[v] / n_all * 1e9:>15.0f}" for v in variants))  # fmt: skip
    print(f"both / pl94: {total['both'] / total['pl94']:.2f}x")
    if args.old:
        print(f"old (both) / both: {total['old'] / total['both']:.2f}x; "
              f"old (both) / pl94: {total['old'] / total['pl94']:.2f}x")  # fmt: skip
        print("same draw as --old (SHA-256 of every array): "
              + ", ".join(f"{names[st]} {mine[st] == theirs[st]}" for st in states))  # fmt: skip
    print("PL94 alone == PL94 of both, array for array: "
          + ", ".join(f"{names[st]} {same_pl94[st]}" for st in states))  # fmt: skip


if __name__ == "__main__":
    main()
