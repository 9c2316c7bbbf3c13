"""What TopDown's rounding adds to the noise of unit totals (run by hand).

Synthetic ``pl94`` states (28 cells; the audit's default hierarchy: County 3, Tract 6, Block group 3,
Block 8 per parent; default population: 30 people per non-empty block, 20 % empty) are released
with the ``pl94_2021_production`` queries the schema expresses (9 per level, ``hhgq`` and
``hhinstlevels`` left out), under both neighbour conventions, with three roundings of each level's
real-valued solution: ``controlled`` (the default: every cell and every unit's total within one of
it), ``independent`` (each (parent, cell) on its own, the former default) and ``none`` (the
real-valued solutions; not a release, the reference). Every (state, replicate) uses the same noise
under the three roundings (keyed streams), so the columns are paired.

Per (neighbours, rounding, geolevel) and state (``all``: pooled): ``mse_ratio`` = mean of (released − true total)² over units,
states and replicates / σ² of the total's own measurement at that level, ``var_ratio`` the same with
the variance, the bias by truth (``bias_empty``, ``bias_populated``: mean released − true total of
units whose true total is 0 / > 0), and the CPU seconds per release (one BLAS thread, as Dask's
workers run: a second thread only spins on the solver's small products).

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python benchmarks/bench_topdown_rounding.py [--reps 200] \\
        [--states 3] [--out benchmarks/results/topdown_rounding.csv]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np
from _machine import machine_info
from _pl94_production import FANOUTS, LEVELS, measured_for
from _results import write_rows

from auditlib import seeds
from auditlib.geography import PopulationParams, SyntheticHierarchy
from auditlib.geography.schema import schema
from auditlib.simulate.topdown import (
    ROUNDINGS,
    TOPDOWN_NOISE,
    synthetic_state,
    topdown,
)


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    sch = schema("pl94")
    q = {name: sch.query_matrix(name) for name in sch.query_names}
    h = SyntheticHierarchy(LEVELS, FANOUTS, args.states)
    states = [
        synthetic_state(h, PopulationParams(seed=args.seed), s, sch)
        for s in range(1, args.states + 1)
    ]
    rows = []
    for neighbours in ("add_remove", "bounded"):
        measured = measured_for(neighbours)
        sigma2 = [dict(level)["total"] for level in measured]
        for rounding in ROUNDINGS:
            diffs: list[list[np.ndarray]] = [[] for _ in LEVELS]
            truths: list[list[np.ndarray]] = [[] for _ in LEVELS]
            t0 = time.process_time()
            for s, (hier, hist) in enumerate(states, start=1):
                for r in range(args.reps):
                    rngs = [
                        seeds.rng(args.seed, TOPDOWN_NOISE, s, i, r) for i in range(len(LEVELS))
                    ]
                    rel = topdown(hier, hist, q, measured, rngs, rounding=rounding)
                    for i in range(len(LEVELS)):
                        t = rel.truth[i].sum(axis=1)
                        diffs[i].append(np.asarray(rel.dp[i], dtype=np.float64).sum(axis=1) - t)
                        truths[i].append(t)
            per_release = (time.process_time() - t0) / (args.states * args.reps)
            for i, g in enumerate(LEVELS):
                by_state = np.repeat(np.arange(1, args.states + 1), args.reps)
                sizes = np.array([d.size for d in diffs[i]])
                owner = np.repeat(by_state, sizes)
                d_all, t_all = np.concatenate(diffs[i]), np.concatenate(truths[i])
                for state in [*range(1, args.states + 1), "all"]:
                    keep = owner == state if state != "all" else np.ones(d_all.size, dtype=bool)
                    d, t = d_all[keep], t_all[keep]
                    rows.append(
                        {
                            "neighbours": neighbours,
                            "rounding": rounding,
                            "geolevel": g,
                            "state": state,
                            "sigma2_total": sigma2[i],
                            "n": d.size,
                            "mse_ratio": float(np.mean(d**2) / sigma2[i]),
                            "var_ratio": float(np.var(d) / sigma2[i]),
                            "bias_empty": float(d[t == 0].mean()) if (t == 0).any() else np.nan,
                            "bias_populated": float(d[t > 0].mean()),
                            "cpu_s_per_release": per_release,
                        }
                    )
            pooled = [
                row for row in rows[-len(LEVELS) * (args.states + 1) :] if row["state"] == "all"
            ]
            print(
                f"{neighbours:10s} {rounding:11s} "
                + "  ".join(f"{row['geolevel']} {row['mse_ratio']:.3f}" for row in pooled[1:-1])
                + f"  ({per_release * 1e3:.0f} ms CPU per release)",
                flush=True,
            )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--states", type=int, default=3)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/topdown_rounding.csv"))
    args = ap.parse_args()
    print(machine_info())
    rows = run(args)
    write_rows(args.out, rows)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
