"""Bias and RMSE of EPL against the true loss, by sample size and bandwidth (run by hand).

Noise: two-sided geometric with ε ∈ {0.05, 0.25, 1} (true loss ε: |log P(x)/P(x+1)| = ε at every
integer x) and discrete Gaussian with σ² ∈ {4, 100} (log P(x)/P(x+1) = (2x+1)/2σ², linear in x; the
true loss is its exact max over the *same* window as the estimate, from the DG pmf, per replicate).
Sizes n ∈ {10³, 10⁴, 10⁵, 10⁶}; the same draws are scored at every bandwidth (paired).

Estimators: ``bias_aware`` (integer window between the 5th and 95th percentiles, Δ = 1) at
bandwidth factors 0.1 … 1 and the Scott and Silverman rules, and ``flaxman_petti`` at factor 0.1
(its symmetric grid of bin centres; for the DG its truth uses the same centres).

    python benchmarks/epl_bandwidth_study.py [--reps 200] [--out benchmarks/results/epl_bandwidth_study.csv]

Replicates: ``reps`` up to n = 10⁴, reps/2 at 10⁵, reps/5 at 10⁶ (≈2 min at reps = 200, 2 cores).

It then checks the bootstrap interval of :func:`auditlib.epl.estimate_epl` (90 %, B = 200): how
often the basic and the percentile interval cover the true loss, 0.8× and 1.25× it, for
``--coverage-sets`` data sets per cell (``epl_bootstrap_coverage.csv`` next to ``--out``; ≈1 min).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from _results import study_parser, where, write_rows

from auditlib.epl import epl
from auditlib.epl.bias_aware import estimate_epl
from auditlib.mechanisms import DiscreteGaussian, TwoSidedGeometric

SIZES = (1_000, 10_000, 100_000, 1_000_000)
FACTORS = (0.1, 0.2, 0.3, 0.5, 0.75, 1.0)
RULES = ("scott", "silverman")
NOISES: tuple[tuple[str, float], ...] = (
    ("geometric", 0.05),
    ("geometric", 0.25),
    ("geometric", 1.0),
    ("discrete_gaussian", 4.0),
    ("discrete_gaussian", 100.0),
)


def _true_loss(kind: str, param: float, x: np.ndarray) -> float:
    """Exact max |log P(x)/P(x+1)| over the grid x (DG: from the pmf; geometric: ε)."""
    if kind == "geometric":
        return param
    if np.all(x == np.round(x)):
        dg = DiscreteGaussian(param)
        return float(np.max(np.abs(dg.logpmf(x) - dg.logpmf(x + 1.0))))
    # bin centres (flaxman_petti grid): the same quadratic exponent, continued off the lattice
    return float(np.max(np.abs(2.0 * x + 1.0)) / (2.0 * param))


def _cells(
    noises: Sequence[tuple[str, float]], sizes: Sequence[int], seed: int
) -> Iterator[tuple[str, float, Any, int, np.random.Generator]]:
    """``(kind, param, noise, n, rng)`` for each noise law and each size n, the generators spawned
    from ``seed`` by law, then by size."""
    root = np.random.SeedSequence(seed)
    for (kind, param), ss in zip(noises, root.spawn(len(noises)), strict=True):
        noise = TwoSidedGeometric(param) if kind == "geometric" else DiscreteGaussian(param)
        for n, ss_n in zip(sizes, ss.spawn(len(sizes)), strict=True):
            yield kind, param, noise, n, np.random.default_rng(ss_n)


def run(reps: int, out: Path, seed: int = 20260) -> None:
    rows = []
    t0 = time.perf_counter()
    for kind, param, noise, n, rng in _cells(NOISES, SIZES, seed):
        r_n = reps if n <= 10_000 else (reps // 2 if n <= 100_000 else max(reps // 5, 10))
        labels = [f"factor={f:g}" for f in FACTORS] + list(RULES) + ["flaxman_petti"]
        est = {lab: np.empty(r_n) for lab in labels}
        tru = {lab: np.empty(r_n) for lab in labels}
        hs = {lab: np.empty(r_n) for lab in labels}
        for i in range(r_n):
            r = noise.rvs(n, rng)
            for f in FACTORS:
                e = estimate_epl(r, bandwidth=f, n_boot=None, n_null=None)
                lab = f"factor={f:g}"
                est[lab][i], tru[lab][i], hs[lab][i] = (
                    e.epl,
                    _true_loss(kind, param, e.x),
                    e.bandwidth,
                )
            for rule in RULES:
                e = estimate_epl(r, bandwidth_kind=rule, n_boot=None, n_null=None)
                est[rule][i], tru[rule][i], hs[rule][i] = (
                    e.epl,
                    _true_loss(kind, param, e.x),
                    e.bandwidth,
                )
            fp = epl(r)
            lab = "flaxman_petti"
            est[lab][i], tru[lab][i], hs[lab][i] = (
                fp.epl,
                _true_loss(kind, param, fp.x),
                fp.bandwidth,
            )
        for lab in labels:
            err = est[lab] - tru[lab]
            rel = est[lab] / tru[lab]
            rows.append(
                {
                    "noise": kind,
                    "param": param,
                    "n": n,
                    "estimator": "flaxman_petti" if lab == "flaxman_petti" else "bias_aware",
                    "bandwidth": "factor=0.1" if lab == "flaxman_petti" else lab,
                    "reps": r_n,
                    "h_mean": float(hs[lab].mean()),
                    "true_loss_mean": float(tru[lab].mean()),
                    "epl_mean": float(est[lab].mean()),
                    "epl_sd": float(est[lab].std(ddof=1)),
                    "bias": float(err.mean()),
                    "rmse": float(math.sqrt(np.mean(err * err))),
                    "ratio_mean": float(rel.mean()),
                    "rel_rmse": float(math.sqrt(np.mean((rel - 1.0) ** 2))),
                }
            )
        print(f"{kind} {param:g} n={n}: {time.perf_counter() - t0:.0f} s", flush=True)
    print(f"{write_rows(out, rows)}; {where(t0)}")


COVERAGE_NOISES: tuple[tuple[str, float], ...] = (
    ("geometric", 0.1),
    ("geometric", 0.25),
    ("geometric", 0.5),
    ("discrete_gaussian", 25.0),
)


def coverage(sets: int, out: Path, seed: int = 9090) -> None:
    rows = []
    t0 = time.perf_counter()
    for kind, param, noise, n, rng in _cells(COVERAGE_NOISES, (2663, 20_000), seed):
        ci = {k: np.empty((sets, 2)) for k in ("basic", "percentile")}
        truth = np.empty(sets)
        est = np.empty(sets)
        for i in range(sets):
            r = noise.rvs(n, rng)
            for k in ci:
                e = estimate_epl(r, ci_kind=k, n_null=None, seed=i)
                ci[k][i] = e.ci_low, e.ci_high
            truth[i] = _true_loss(kind, param, e.x)
            est[i] = e.epl
        for k, v in ci.items():
            row: dict[str, object] = {
                "noise": kind,
                "param": param,
                "n": n,
                "ci_kind": k,
                "sets": sets,
                "epl_over_truth": float(np.mean(est / truth)),
            }
            for name, mult in (
                ("cover_truth", 1.0),
                ("cover_0.8x", 0.8),
                ("cover_1.25x", 1.25),
            ):
                t = mult * truth
                row[name] = float(np.mean((v[:, 0] <= t) & (t <= v[:, 1])))
            row["mean_width_over_truth"] = float(np.mean((v[:, 1] - v[:, 0]) / truth))
            rows.append(row)
        print(f"coverage {kind} {param:g} n={n}: {time.perf_counter() - t0:.0f} s", flush=True)
    print(write_rows(out, rows))


def main() -> None:
    ap = study_parser(__doc__, reps=200, seed=20260, table="epl_bandwidth_study.csv")
    ap.add_argument("--coverage-sets", type=int, default=150)
    a = ap.parse_args()
    run(a.reps, a.out, a.seed)
    coverage(a.coverage_sets, a.out.parent / "epl_bootstrap_coverage.csv")


if __name__ == "__main__":
    main()
