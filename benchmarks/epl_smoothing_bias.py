"""The EPL estimator's deterministic errors on the exact pmf of averaged geometric noise (run by hand).

For the mean of P two-sided geometrics G(ε/P) (Flaxman's ADPC; P = 1 is GDPC) the pmf is known
(``auditlib.epl.exact.adpc_pmf``). On it, with no sampling at all, compare over the population's
5–95 % window:

* ``exact`` — max |log P(x)/P(x+1)| over the lattice ℤ/P (the target);
* ``integer_grid`` — the same over the integers only (what the estimate used before);
* ``smoothed`` — the KDE's loss, the pmf convolved with N(0, h²), h = 0.3 sd (the kernel's bias);
* ``extrapolated_1``, ``extrapolated_2`` — first-order (2·L_h − L_√2h) and second-order
  (3·L_h − 3·L_√2h + L_√3h) extrapolation to h → 0, pointwise in x, then the maximum.

The smoothed pmf is the exact mixture (``auditlib.epl.kde.mixture_logpdf`` with the pmf as weights).

    python benchmarks/epl_smoothing_bias.py      # ≈ 2 min

Writes ``benchmarks/results/epl_smoothing_bias.csv`` (each loss divided by the exact one).
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
from _results import write_rows

from auditlib.epl.exact import adpc_pmf, windowed_loss
from auditlib.epl.extrapolate import MULTIPLIERS
from auditlib.epl.kde import mixture_logpdf

RUNS = (1, 2, 3, 4, 8)
EPSILONS = (0.01, 0.1, 0.5, 1.0, 2.0)


def row(p: int, eps: float) -> dict[str, float | int]:
    values, pmf = adpc_pmf(eps, p)
    exact = windowed_loss(values, pmf)
    cdf = np.cumsum(pmf)
    lo = values[int(np.searchsorted(cdf, 0.05))]
    hi = values[int(np.searchsorted(cdf, 0.95))]
    keep = pmf > 1e-30
    pts, w = values[keep], pmf[keep]
    x = values[(values >= lo) & (values + 1.0 <= hi)]
    xi = x[x == np.round(x)]
    sd = math.sqrt(float(np.dot(pmf, values**2)))
    h = 0.3 * sd
    curves = []
    for m in MULTIPLIERS:
        lf = mixture_logpdf(pts, w, h * m, np.concatenate([x, x + 1.0]))
        curves.append(lf[: x.size] - lf[x.size :])
    idx = np.round((xi - values[0]) * p).astype(int)
    integer = float(np.max(np.abs(np.log(pmf[idx]) - np.log(pmf[idx + p]))))
    c1, c2, c3 = curves
    return {
        "runs": p,
        "epsilon": eps,
        "sd": sd,
        "bandwidth": h,
        "window_high": float(hi),
        "grid_points": int(x.size),
        "exact_over_eps": exact / eps,
        "integer_grid": integer / exact,
        "smoothed": float(np.max(np.abs(c1))) / exact,
        "extrapolated_1": float(np.max(np.abs(2 * c1 - c2))) / exact,
        "extrapolated_2": float(np.max(np.abs(3 * c1 - 3 * c2 + c3))) / exact,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "epl_smoothing_bias.csv"
    )
    a = ap.parse_args()
    t0 = time.perf_counter()
    rows = []
    for p in RUNS:
        for eps in EPSILONS:
            rows.append(row(p, eps))
            r = rows[-1]
            print(
                f"P={p} eps={eps:g}: exact {r['exact_over_eps']:.4f} eps; integers "
                f"{r['integer_grid']:.4f}, smoothed {r['smoothed']:.4f}, extrapolated "
                f"{r['extrapolated_1']:.4f} / {r['extrapolated_2']:.4f} "
                f"({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )
    print(write_rows(a.out, rows))


if __name__ == "__main__":
    main()
