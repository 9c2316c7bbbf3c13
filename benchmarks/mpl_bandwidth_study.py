"""MPL's confidence-step bandwidth rule: coverage and tightness per rule (run by hand).

The rule is h = scale · N^{−1/(2β+1) − γ} (``auditlib.mpl.density.undersmoothed_bandwidth``,
scale = 0.9·min(sd, IQR/1.34) averaged over the two samples). Rules compared, all admissible
under (C4) at Askin, Kutta & Dette's sizes (γ > ν/(6(1+ν)) = 0.014 for n = 2·10⁴, N = 5·10⁴):

* ``beta1``       β = 1, γ = 0.05 (N^−0.383): the Hölder/Lipschitz rule, the earlier default;
* ``beta1.5``     β = 1.5, γ = 0.05 (N^−0.300);
* ``beta2``       β = 2, γ = 0.05 (N^−0.250): R's bw.nrd0 · N^−γ, the reference implementation's;
* ``beta2_g0.02`` β = 2, γ = 0.02 (N^−0.220): barely undersmoothed.

Mechanisms: the catalogue's continuous ones (Laplace, exponential, continuous Noisy Max) at
ε₀ ∈ {0.2, 0.7, 1.5}, Askin, Kutta & Dette's sizes (n = 2·10⁴, N = 5·10⁴, B = 10, τ = 10⁻³, α = 0.05). Each
repetition runs step 1 once and draws the N confirmation samples once; every rule is applied to
those same draws (paired), exactly as ``auditlib.mpl.mpl`` would (checked on the first repetition
of each cell against ``mpl(..., beta, gamma)`` itself).

    nice python benchmarks/mpl_bandwidth_study.py [--reps 800]    # ≈ 6 min of CPU

Writes ``benchmarks/results/mpl_bandwidth_study.csv``: per (mechanism, ε₀, rule) the coverage
P(LB ≤ ε*_C) with its binomial standard error, the median and mean LB / ε*_C, and the mean h.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np
from _results import run_study, where, write_rows

from auditlib import seeds
from auditlib.mpl.catalogue import continuous_noisy_max, exponential_mechanism, laplace_mechanism
from auditlib.mpl.dpl import DEFAULT_TAU, as_region, dpl_from_samples
from auditlib.mpl.mpl import confidence_bound, mpl_known

RULES: dict[str, tuple[float, float]] = {
    "beta1": (1.0, 0.05),
    "beta1.5": (1.5, 0.05),
    "beta2": (2.0, 0.05),
    "beta2_g0.02": (2.0, 0.02),
}
MECHANISMS = {
    "laplace": laplace_mechanism,
    "exponential": exponential_mechanism,
    "continuous_noisy_max": continuous_noisy_max,
}
EPSILONS = (0.2, 0.7, 1.5)
N_STEP1, N_CONF, ALPHA = 20_000, 50_000, 0.05


def one_rep(e, rng: np.random.Generator) -> list[tuple[float, float]]:
    """LB and h of every rule on one repetition's draws (step 1 and the N draws shared)."""
    mech = e.mechanism
    reg = as_region(e.region, mech.kind, mech.dim)
    res = []
    for a, b in e.pairs:  # the draws and order of auditlib.mpl.mpl
        sx = mech.sample(a, N_STEP1, rng)
        sy = mech.sample(b, N_STEP1, rng)
        res.append(dpl_from_samples(sx, sy, reg, kind=mech.kind, tau=DEFAULT_TAU))
    best = int(np.argmax([r.eps_hat for r in res]))
    xs = mech.sample(e.pairs[best][0], N_CONF, rng)
    ys = mech.sample(e.pairs[best][1], N_CONF, rng)
    out = []
    for beta, gamma in RULES.values():
        c = confidence_bound(
            xs, ys, res[best].t_hat, kind=mech.kind, alpha=ALPHA, beta=beta, gamma=gamma
        )
        out.append((c.lb, float(c.bandwidth or math.nan)))
    return out


def _rule_columns(rule: str) -> dict[str, Any]:
    """A row's columns of a bandwidth rule: its name, beta, gamma and the rate exponent."""
    beta, gamma = RULES[rule]
    return {
        "rule": rule,
        "beta": beta,
        "gamma": gamma,
        "exponent": 1.0 / (2.0 * beta + 1.0) + gamma,
    }


def run(reps: int, out: Path, seed: int) -> None:
    rows = []
    t0 = time.perf_counter()
    for mi, (name, factory) in enumerate(MECHANISMS.items()):
        for ei, eps in enumerate(EPSILONS):
            e = factory(eps)
            vals = np.array(
                [one_rep(e, seeds.rng(seed, mi, ei, r)) for r in range(reps)]
            )  # reps × rules × (lb, h)
            for k, (beta, gamma) in enumerate(RULES.values()):  # the same numbers as mpl()
                g = seeds.rng(seed, mi, ei, 0)
                ref = mpl_known(e, N_STEP1, N_CONF, g, alpha=ALPHA, beta=beta, gamma=gamma)
                assert ref.lb == vals[0, k, 0], (name, eps, beta, gamma)
            for k, rule in enumerate(RULES):
                lb = vals[:, k, 0] / e.epsilon_c
                p = float(np.mean(vals[:, k, 0] <= e.epsilon_c))
                rows.append(
                    {
                        "mechanism": name,
                        "epsilon0": eps,
                        "epsilon_c": e.epsilon_c,
                        **_rule_columns(rule),
                        "reps": reps,
                        "coverage": p,
                        "coverage_se": math.sqrt(max(p * (1.0 - p), 1e-12) / reps),
                        "median_lb_over_eps_c": float(np.median(lb)),
                        "mean_lb_over_eps_c": float(np.mean(lb)),
                        "mean_bandwidth": float(np.mean(vals[:, k, 1])),
                    }
                )
            print(
                f"{name} eps0={eps:g}: "
                + ", ".join(
                    f"{r['rule']} {r['coverage']:.3f}/{r['median_lb_over_eps_c']:.3f}"
                    for r in rows[-len(RULES) :]
                )
                + f" ({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )
    for rule in RULES:  # pooled over the cells
        sel = [r for r in rows if r["rule"] == rule and r["mechanism"] != "pooled"]
        cov = float(np.mean([r["coverage"] for r in sel]))
        total = sum(int(r["reps"]) for r in sel)
        rows.append(
            {
                "mechanism": "pooled",
                "epsilon0": math.nan,
                "epsilon_c": math.nan,
                **_rule_columns(rule),
                "reps": total,
                "coverage": cov,
                "coverage_se": math.sqrt(cov * (1.0 - cov) / total),
                "median_lb_over_eps_c": float(np.median([r["median_lb_over_eps_c"] for r in sel])),
                "mean_lb_over_eps_c": float(np.mean([r["mean_lb_over_eps_c"] for r in sel])),
                "mean_bandwidth": math.nan,
            }
        )
    print(f"{write_rows(out, rows)}; {where(t0)}")


def main() -> None:
    run_study(run, __doc__, reps=800, seed=2022, table="mpl_bandwidth_study.csv")


if __name__ == "__main__":
    main()
