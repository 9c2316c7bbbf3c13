"""Benchmark: the sort-free projection (``Segments.project``) against the sort-based one it replaced.

    PYTHONPATH=. python benchmarks/bench_projection.py --states S41 --baseline c978ca7

One replicate of sparse TopDown of each state (PL94 production schema, every query of
``pl94_2021_production``, as ``bench_sparse_topdown.py``), in one process:

1. *paired*: every projection the fit makes (one per FISTA iteration) is computed by both
   implementations on the same input, one after the other; per level the CPU-s of each, their
   ratio, the layout (variables, segments, largest segment) and the largest difference of the
   results. The fit follows the new projection.
2. *whole*: the state's TopDown with the baseline projection and with the new one, alternately
   (``_timing.alternate``: ``--warmup`` runs of each, then ``--repeat`` rounds; the median CPU-s
   of each and their ratio), then with the baseline projection of its inputs scaled by
   ``1 + 2⁻⁵⁰`` (a last-bit change); each release's production invariants checked; the last
   baseline release compared with the new one and with the scaled one, level by level: cells
   whose released count differs, and the largest difference of the real-valued fits (levels whose
   parents were released alike).

The baseline is the ``Segments`` of ``auditlib/simulate/postprocess.py`` at the git revision
``--baseline`` (read with ``git show``; the repository must be a git checkout).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _machine import machine_info
from _timing import alternate, method_line

from auditlib.allocations import load_allocation
from auditlib.geography.schema import schema
from auditlib.geography.sparse_histograms import SparseHistograms, invariant_violations
from auditlib.geography.sparse_population import spine_state_sparse_population
from auditlib.geography.spine import generate_spine
from auditlib.simulate import postprocess, sparse_fit
from auditlib.simulate.measured import allocation_measured
from auditlib.simulate.sparse_topdown import noise_rngs, sparse_topdown
from auditlib.simulate.topdown import spine_state

LEVELS = ["State", "County", "Tract", "Block_Group", "Block"]


def baseline_segments(rev: str) -> Any:
    """``Segments`` of ``postprocess.py`` at git revision ``rev``, as a module of its own."""
    root = Path(__file__).resolve().parent.parent
    src = subprocess.run(
        ["git", "show", f"{rev}:auditlib/simulate/postprocess.py"],
        cwd=root, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    mod = types.ModuleType("postprocess_baseline")
    sys.modules[mod.__name__] = mod
    exec(compile(src, f"{rev}:postprocess.py", "exec"), mod.__dict__)
    return mod.Segments


def diff_cells(a: SparseHistograms, b: SparseHistograms) -> int:
    """Cells (unit, cell) whose count differs between two releases of the same units."""
    n = a.schema.n_cells

    def keyed(h: SparseHistograms) -> tuple[np.ndarray, np.ndarray]:
        units = np.repeat(np.arange(h.indptr.size - 1), np.diff(h.indptr))
        return units * n + h.cells, h.counts.astype(np.int64)

    ka, ca = keyed(a)
    kb, cb = keyed(b)
    keys = np.union1d(ka, kb)
    va, vb = np.zeros(keys.size, np.int64), np.zeros(keys.size, np.int64)
    va[np.searchsorted(keys, ka)] = ca
    vb[np.searchsorted(keys, kb)] = cb
    return int((va != vb).sum())


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--states", default="S49", help="spine state names, comma-separated")
    ap.add_argument("--baseline", default="c978ca7", help="git revision of the sort projection")
    ap.add_argument("--seed", type=int, default=20200401, help="spine and noise (bench_production)")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--repeat", type=int, default=3, help="alternated rounds of the whole TopDown")
    ap.add_argument("--warmup", type=int, default=1, help="whole TopDowns of each before them")
    ap.add_argument("--skip-paired", action="store_true")
    args = ap.parse_args()
    print(machine_info())
    old_segments, new_segments = baseline_segments(args.baseline), postprocess.Segments
    spine = generate_spine(args.seed)
    sch = schema("pl94_production")
    measured = allocation_measured(
        load_allocation("pl94_2021_production"), LEVELS, sch.query_names, "bounded", schema=sch
    )
    for name in args.states.split(","):
        bench_state(args, spine, name, measured, old_segments, new_segments)


def bench_state(
    args: argparse.Namespace,
    spine: Any,
    name: str,
    measured: Any,
    old_segments: Any,
    new_segments: Any,
) -> None:
    """The paired and whole runs of one state (module docstring)."""
    st = list(spine.state_names).index(name)
    hierarchy, _ = spine_state(spine, st)
    pop = spine_state_sparse_population(spine, st, args.seed)
    hist, inv = pop.histograms("pl94_production"), pop.invariants("pl94_production")
    print(f"{name}: {hist.n_units:,} blocks, {inv.state_total:,} people")

    def run(segments: Any, on_level: Any = None) -> Any:
        sparse_fit.Segments = segments  # type: ignore[attr-defined]
        try:
            return sparse_topdown(
                hierarchy.parents, hierarchy.levels, hist, inv, measured,
                noise_rngs(args.seed, st, len(hierarchy.levels), 0),
                tol=args.tol, on_level=on_level,
            )  # fmt: skip
        finally:
            sparse_fit.Segments = new_segments  # type: ignore[attr-defined]

    if not args.skip_paired:
        acc: dict[str, Any] = {"old": 0.0, "new": 0.0, "calls": 0, "diff": 0.0, "layout": ""}
        rows: list[str] = []

        class Paired(new_segments):  # type: ignore[misc, valid-type]
            def __init__(self, segment: Any, target: Any) -> None:
                super().__init__(segment, target)
                self.old = old_segments(segment, target)
                acc["layout"] = (
                    f"{self.seg.size:,} variables, {self.target.size:,} segments, largest "
                    f"{int(self.sizes.max(initial=0)):,}, padded (baseline) {self.old.padded}"
                )

            def project(self, y: Any) -> Any:
                t0 = time.process_time()
                a = self.old.project(y)
                t1 = time.process_time()
                b = super().project(y)
                t2 = time.process_time()
                acc["old"] += t1 - t0
                acc["new"] += t2 - t1
                acc["calls"] += 1
                scale = max(1.0, float(np.abs(a).max(initial=0.0)))
                acc["diff"] = max(acc["diff"], float(np.abs(a - b).max(initial=0.0)) / scale)
                return b

        def on_level(i: int, level: str) -> None:
            old, new = acc["old"], acc["new"]
            rows.append(
                f"| {level} | {acc['layout']} | {acc['calls']} | {old:.3f} | {new:.3f} | "
                f"{old / max(new, 1e-9):.1f} | {acc['diff']:.1e} |"
            )
            acc.update(old=0.0, new=0.0, calls=0, diff=0.0)

        run(Paired, on_level)
        print("| level | layout | projections | baseline CPU-s | new CPU-s | ratio | max diff |")
        print("|---|---|---|---|---|---|---|")
        print("\n".join(rows))
    jitter = 1.0 + 2.0**-50

    class Jittered(old_segments):  # type: ignore[misc, valid-type]
        """The baseline projection of its input scaled by ``1 + 2⁻⁵⁰``: the yardstick of
        what a last-bit change of the projection does to the release."""

        def project(self, y: Any) -> Any:
            return super().project(np.asarray(y) * jitter)

    fits: list[list[np.ndarray]] = []
    solve = sparse_fit._Fit.solve

    def keep_fit(self: Any, *a: Any, **k: Any) -> Any:
        x, its = solve(self, *a, **k)
        fits[-1].append(x.copy())
        return x, its

    def checked(label: str, segments: Any) -> Callable[[], Any]:
        def once() -> Any:
            fits.append([])
            t = time.process_time()
            rel = run(segments)
            cpu = time.process_time() - t
            bad = [
                rel.levels[i]
                for i in range(len(rel.levels))
                if any(invariant_violations(rel.dp[i], rel.invariants[i]).values())
            ]
            print(
                f"  whole TopDown, {label} projection: {cpu:.1f} CPU-s; iterations "
                f"{rel.iterations}; invariants broken at {bad or 'no level'}",
                flush=True,
            )
            return rel, fits[-1]

        return once

    sparse_fit._Fit.solve = keep_fit  # type: ignore[method-assign]
    print(method_line(args.repeat, args.warmup))
    paired = alternate(
        checked("baseline", old_segments),
        checked("new", new_segments),
        rounds=args.repeat,
        warmup=args.warmup,
        labels=("baseline", "sort-free"),
    )
    print(f"  whole TopDown of {name}: {paired.line(2)}", flush=True)
    (base, base_fits), (new, new_fits) = paired.values
    jittered, jittered_fits = checked("baseline, inputs x (1 + 2^-50)", Jittered)()
    sparse_fit._Fit.solve = solve  # type: ignore[method-assign]
    nnz = [h.nnz for h in base.dp]
    for label, rel, rel_fits in (
        ("new", new, new_fits),
        ("baseline, inputs x (1 + 2^-50)", jittered, jittered_fits),
    ):
        cells = [diff_cells(a, b) for a, b in zip(base.dp, rel.dp, strict=True)]
        fit = [
            f"{np.abs(a - b).max(initial=0.0):.1e}" if a.shape == b.shape else "-"
            for a, b in zip(base_fits, rel_fits, strict=True)
        ]
        print(
            f"  baseline vs {label}: released cells differing per level {cells} (of {nnz} "
            f"non-zero); fit max |difference| per level {fit} (- : other variables)"
        )


if __name__ == "__main__":
    main()
