"""Empirical f-DP points: simultaneous coverage and tightness on mechanisms with exact curves.

Cells: the Gaussian shift (μ ∈ {0.5, 1, 2}, T = G_μ), the Laplace shift (ε ∈ {0.5, 1, 2}), binary
randomized response (ε ∈ {0.5, 1, 2}; T = f_{ε,0}), 4-ary randomized response (ε = 1) and the
discrete Gaussian count (σ = 1/μ, μ ∈ {0.5, 1, 2}; truth: the upper end of the certified curve of
``auditlib.accounting.tradeoff``), plus the broken entries at parameter 1 (true parameter 1.5×
the claim). Each repetition selects K = 32 likelihood-ratio threshold tests on n_select = 2·10⁴
draws per input and certifies them on n = 10⁵ fresh draws per input, with both bands
(Clopper–Pearson with Bonferroni over the 2K bounds, and DKW) on the same draws, conf = 0.95.

    nice python benchmarks/fdp_coverage_study.py [--reps 400]    # ≈ 15 min of one core

The same repetitions on a grid of mechanisms × parameters, fanned out on a Dask cluster and
resumable after a kill, into the store's ``fdp_coverage`` group (every repetition kept):

    dpaudit fdp-coverage -m gaussian -m laplace -m dg_count -p 0.5 -p 1 -p 2 --reps 400

Writes ``benchmarks/results/fdp_coverage.csv``: per (mechanism, parameter, band) the coverage
(every point on or above the true curve) with its binomial standard error, the plug-in points'
coverage on the same draws, the median lower bounds on μ and ε (δ = 0) beside the true values,
and for broken entries the detection rate (a bound above the claim).
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
from _machine import machine_info
from _results import run_study, since, write_rows

from auditlib.mpl.tradeoff_coverage import known_tradeoff, refutes, tradeoff_coverage

CELLS: list[tuple[str, float]] = [
    *[("gaussian", p) for p in (0.5, 1.0, 2.0)],
    *[("laplace", p) for p in (0.5, 1.0, 2.0)],
    *[("randomized_response", p) for p in (0.5, 1.0, 2.0)],
    ("randomized_response_k4", 1.0),
    *[("dg_count", p) for p in (0.5, 1.0, 2.0)],
    ("gaussian_broken", 1.0),
    ("laplace_broken", 1.0),
    ("randomized_response_broken", 1.0),
    ("dg_count_broken", 1.0),
]
N_SELECT, N_FRESH, CONF = 20_000, 100_000, 0.95


def run(reps: int, out: Path, seed: int) -> None:
    print(machine_info(), flush=True)
    rows = []
    t0 = time.perf_counter()
    for ci, (name, param) in enumerate(CELLS):
        known = known_tradeoff(name, param)
        res = tradeoff_coverage(
            known, 0, reps, n_select=N_SELECT, n=N_FRESH, seed=seed, conf=CONF, cell=(ci,)
        )
        for band in ("clopper-pearson", "dkw"):
            r = res[band]
            p = float(r["covered"].mean())
            det = np.mean(
                [
                    refutes(known, m, e)
                    for m, e in zip(r["mu_lower"], r["epsilon_lower"], strict=True)
                ]
            )
            rows.append(
                {
                    "mechanism": name,
                    "parameter": param,
                    "band": band,
                    "reps": reps,
                    "coverage": p,
                    "coverage_se": math.sqrt(max(p * (1 - p), 1e-12) / reps),
                    "plugin_coverage": float(r["plugin_covered"].mean()),
                    "mu": known.mu,
                    "median_mu_lower": float(np.median(r["mu_lower"])),
                    "epsilon": known.epsilon,
                    "median_epsilon_lower": float(np.median(r["epsilon_lower"])),
                    "claimed_mu": known.claimed_mu,
                    "claimed_epsilon": known.claimed_epsilon,
                    "detection_rate": float(det),
                }
            )
        print(
            f"{name} {param:g}: "
            + ", ".join(
                f"{row['band']} cov {row['coverage']:.3f} (plug-in {row['plugin_coverage']:.3f}) "
                f"mu_lb {row['median_mu_lower']:.3f}/{row['mu']:.3f} "
                f"eps_lb {row['median_epsilon_lower']:.3f}/{row['epsilon']:.3f} "
                f"det {row['detection_rate']:.2f}"
                for row in rows[-2:]
            )
            + f" ({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
    print(f"{write_rows(out, rows)}; {since(t0)}")


def main() -> None:
    run_study(run, __doc__, reps=400, seed=2026, table="fdp_coverage.csv")


if __name__ == "__main__":
    main()
