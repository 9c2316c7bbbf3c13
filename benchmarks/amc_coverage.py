"""Coverage of AMC intervals of true TopDown counts (run by hand).

A synthetic state (``pl94`` schema, 28 cells; the audit's default hierarchy: County 3, Tract 6,
Block group 3, Block 8 per parent, 432 blocks, about 10,000 people) has true histograms ``T``. Each
of ``--published`` seeds releases ``P = TopDown(T)`` with the ``pl94_2021_production`` queries the
schema expresses (``hhgq`` and ``hhinstlevels`` left out; ``--neighbours``), then runs AMC from
``P`` (:func:`auditlib.published.amc_replicates`, ``--replicates`` TopDown runs with ``P`` as the
truth) and builds level-(1 − ``--alpha``) intervals of ``T`` for every count of every schema query
(72 cells per unit) at every level, and for the sums of ``--areas`` fixed random sets of
``--area-blocks`` blocks (areas summed per replicate).

Per (target: level or ``areas``, queries: ``total`` or ``all`` 72 cells, size bin of the true
count: 0, 1-9, 10-99, 100+), the CSV has the number of counts and, pooled over counts and
published seeds, the coverage of five intervals (:func:`auditlib.published.amc_interval`):

* ``ct`` — the Bureau's: conditionally bias-corrected, √MSE, Student's t₅ (the default);
* ``t`` — √MSE, t₅, never bias-corrected; ``bct`` — always bias-corrected;
* ``cz`` — as ``ct`` with the normal quantile;
* ``z_sd`` — the replicates' sd with the normal quantile, never corrected (the paper's eq. (7):
  it ignores the bias);

with ``coverage_se`` the binomial standard error of ``ct``'s coverage as if the counts were
independent (they are not: cells of one unit and units of one parent are correlated, so it is a
lower bound), the mean width of ``ct``, and how well AMC estimates TopDown's error at ``T``: per
count, the true bias (mean of ``P − T`` over the published seeds), variance and MSE of ``P``
against the mean over seeds of the AMC estimates; the bin's ``bias_true`` and ``bias_amc`` are the
means over its counts, ``bias_error_rms`` the root mean square over counts of (AMC bias − true
bias), and ``var_ratio`` / ``mse_ratio`` the ratio of the bin's summed AMC estimates to the summed
true values. Every row carries the run's size and the machine.

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python benchmarks/amc_coverage.py [--published 200] \\
        [--replicates 25] [--out benchmarks/results/amc_coverage.csv]

The stored ``benchmarks/results/amc_coverage.csv`` was run at ``--published 200 --replicates 25``
(the defaults: 5,200 TopDown runs, 26 ms of CPU each, 4.5 min of wall clock on a loaded 2-core
machine); ``amc_coverage_large.csv`` at the same size with ``--fanouts 4,8,3,10
--block-population 100`` (960 blocks, 31 ms per run); ``amc_coverage_r10.csv`` the default state
with ``--replicates 10``. Each has a JSON sidecar with the CPU
seconds per published seed, the projection to 200 × 25 and the machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
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
from auditlib.published import Moments, amc_interval, amc_replicates
from auditlib.published.moments import area_map
from auditlib.simulate.topdown import (
    TOPDOWN_NOISE,
    synthetic_state,
    topdown,
)

#: the AMC replicates' stream: SeedSequence(seed, spawn_key=(AMC_STREAM, published seed))
AMC_STREAM = 101
BINS = (("0", 0, 0), ("1-9", 1, 9), ("10-99", 10, 99), ("100+", 100, np.inf))
INTERVALS: dict[str, dict[str, Any]] = {
    "ct": {},
    "t": {"bias_correction": "never"},
    "bct": {"bias_correction": "always"},
    "cz": {"distribution": "normal"},
    "z_sd": {"spread": "sd", "bias_correction": "never", "distribution": "normal"},
}


class Tally:
    """Per count of one target (n, K), sums over published seeds."""

    def __init__(self, truth: np.ndarray) -> None:
        self.truth = truth.astype(np.float64)
        z = np.zeros_like(self.truth)
        self.covered = {k: z.copy() for k in INTERVALS}
        self.width = z.copy()
        self.err, self.err2 = z.copy(), z.copy()  # P − T
        self.bias, self.var, self.mse = z.copy(), z.copy(), z.copy()  # AMC estimates
        self.n = 0

    def add(self, m: Moments, alpha: float) -> None:
        for kind, kw in INTERVALS.items():
            iv = amc_interval(m, alpha, **kw)
            self.covered[kind] += iv.covers(self.truth)
            if kind == "ct":
                self.width += iv.width
        e = m.published - self.truth
        self.err += e
        self.err2 += e * e
        self.bias += m.bias
        self.var += m.variance
        self.mse += m.mse
        self.n += 1

    def rows(self, target: str, cells: dict[str, slice]) -> list[dict[str, Any]]:
        n = self.n
        true_bias = self.err / n
        true_var = (self.err2 - self.err**2 / n) / max(n - 1, 1)
        true_mse = self.err2 / n
        out = []
        for qname, cols in cells.items():
            t = self.truth[:, cols]
            for label, lo, hi in BINS:
                mask = (t >= lo) & (t <= hi)
                k = int(mask.sum())
                if k == 0:
                    continue

                def pick(a: np.ndarray, mask: np.ndarray = mask, cols: slice = cols) -> np.ndarray:
                    return a[:, cols][mask]

                cov = {kind: float(pick(c).sum() / (k * n)) for kind, c in self.covered.items()}
                d_bias = pick(self.bias) / n - pick(true_bias)
                tv, tm = float(pick(true_var).sum()), float(pick(true_mse).sum())
                out.append(
                    {
                        "target": target,
                        "queries": qname,
                        "size_bin": label,
                        "counts": k,
                        **{f"coverage_{kind}": v for kind, v in cov.items()},
                        "coverage_se": float(np.sqrt(cov["ct"] * (1 - cov["ct"]) / (k * n))),
                        "width_ct": float(pick(self.width).sum() / (k * n)),
                        "bias_true": float(pick(true_bias).mean()),
                        "bias_amc": float((pick(self.bias) / n).mean()),
                        "bias_error_rms": float(np.sqrt(np.mean(d_bias**2))),
                        "var_true": tv / k,
                        "var_amc": float(pick(self.var).sum() / (k * n)),
                        "var_ratio": float(pick(self.var).sum() / n / tv) if tv > 0 else np.nan,
                        "mse_true": tm / k,
                        "mse_amc": float(pick(self.mse).sum() / (k * n)),
                        "mse_ratio": float(pick(self.mse).sum() / n / tm) if tm > 0 else np.nan,
                    }
                )
        return out


def run(args: argparse.Namespace) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    sch = schema("pl94")
    queries = {q: sch.query_matrix(q) for q in sch.query_names}
    stack = np.concatenate([queries[q] for q in sch.query_names]).astype(np.int64)
    measured = measured_for(args.neighbours)
    fanouts = tuple(int(x) for x in args.fanouts.split(","))
    h = SyntheticHierarchy(LEVELS, fanouts, 1)
    pop = PopulationParams(seed=args.seed, mean_block_population=args.block_population)
    hier, truth = synthetic_state(h, pop, 1, sch)
    n_blocks = truth.shape[0]
    g = np.random.default_rng([args.seed, AMC_STREAM])
    areas = {
        f"area{j}": np.sort(g.choice(n_blocks, size=args.area_blocks, replace=False))
        for j in range(args.areas)
    }
    amap = area_map(areas, n_blocks)
    truth_levels = hier.aggregate(truth)
    tallies = {lv: Tally(t @ stack.T) for lv, t in zip(LEVELS, truth_levels, strict=True)}
    tallies["areas"] = Tally(amap.sums(truth @ stack.T))
    cells = {"total": slice(0, 1), "all": slice(0, stack.shape[0])}
    t0, cpu0 = time.perf_counter(), time.process_time()
    for p in range(args.published):
        rngs = [seeds.rng(args.seed, TOPDOWN_NOISE, 1, i, p) for i in range(len(LEVELS))]
        published = topdown(hier, truth, queries, measured, rngs).dp[-1]
        res = amc_replicates(
            hier,
            published,
            queries,
            measured,
            args.replicates,
            np.random.SeedSequence(args.seed, spawn_key=(AMC_STREAM, p)),
            areas=amap,
        )
        for lv in LEVELS:
            tallies[lv].add(_all_cells(res.levels[lv], sch.query_names), args.alpha)
        tallies["areas"].add(_all_cells(res.areas, sch.query_names), args.alpha)
        if (p + 1) % max(1, args.published // 10) == 0:
            print(f"{p + 1}/{args.published} published seeds, {time.perf_counter() - t0:.0f} s")
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    rows = [row for target, tally in tallies.items() for row in tally.rows(target, cells)]
    size = {
        "published": args.published,
        "replicates": args.replicates,
        "alpha": args.alpha,
        "neighbours": args.neighbours,
        "seed": args.seed,
        "fanouts": args.fanouts,
        "block_population": args.block_population,
        "blocks": n_blocks,
        "people": int(truth.sum()),
        "areas": args.areas,
        "area_blocks": args.area_blocks,
    }
    per_p = cpu / args.published
    info = {
        **size,
        "machine": machine_info(),
        "commit": _commit(),
        "wall_s": wall,
        "cpu_s": cpu,
        "cpu_s_per_published": per_p,
        "cpu_s_per_release": per_p / (args.replicates + 1),
        "projected_cpu_s_200x25": per_p / (args.replicates + 1) * 200 * 26,
    }
    for row in rows:
        row.update({"published": args.published, "replicates": args.replicates})
        row["machine"] = info["machine"]
    return rows, info


def _all_cells(by_query: dict[str, Moments], names: tuple[str, ...]) -> Moments:
    """One query's-worth of moments per schema query, side by side (the stack's column order)."""
    ms = [by_query[q] for q in names]
    return Moments(
        np.concatenate([m.published for m in ms], axis=1),
        np.concatenate([m.sum_dev for m in ms], axis=1),
        np.concatenate([m.sum_sq_dev for m in ms], axis=1),
        ms[0].n_replicates,
    )


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--published", type=int, default=200, help="published seeds P = TopDown(T)")
    ap.add_argument("--replicates", type=int, default=25, help="AMC replicates per published P")
    ap.add_argument("--alpha", type=float, default=0.1)
    ap.add_argument("--neighbours", default="bounded", choices=("bounded", "add_remove"))
    ap.add_argument("--areas", type=int, default=20, help="random areas of blocks")
    ap.add_argument("--area-blocks", type=int, default=100, help="blocks per area")
    ap.add_argument("--seed", type=int, default=2020)
    ap.add_argument(
        "--fanouts",
        default=",".join(map(str, FANOUTS)),
        help="children per County, Tract, Block group, Block (default: the audit's 3,6,3,8)",
    )
    ap.add_argument(
        "--block-population", type=float, default=30.0, help="mean people per non-empty block"
    )
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/amc_coverage.csv"))
    args = ap.parse_args()
    print(machine_info(), flush=True)
    rows, info = run(args)
    write_rows(args.out, rows)
    args.out.with_suffix(".json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    print(
        f"{info['cpu_s_per_published']:.2f} CPU-s per published seed "
        f"({info['cpu_s_per_release'] * 1e3:.0f} ms per TopDown run); 200 seeds × 25 replicates: "
        f"{info['projected_cpu_s_200x25'] / 60:.0f} CPU-min"
    )
    for row in rows:
        if row["queries"] == "all" or row["target"] == "areas":
            print(
                f"{row['target']:11s} {row['queries']:5s} {row['size_bin']:6s} n={row['counts']:6d} "
                + " ".join(f"{k}={row[f'coverage_{k}']:.3f}" for k in INTERVALS)
                + f"  bias {row['bias_true']:+.2f}/{row['bias_amc']:+.2f}"
                f"  var×{row['var_ratio']:.2f} mse×{row['mse_ratio']:.2f}"
            )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
