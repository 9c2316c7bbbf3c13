"""Coverage of the exact loss by the EPL interval of Flaxman's ADPC and GDPC residuals (run by hand).

ADPC releases the mean of P = 4 GDPC runs at ε/4: residuals on ℤ/4. GDPC adds G(ε): residuals on
ℤ. Both are drawn with the library's own releases (``auditlib.simulate.hierarchical.adpc`` /
``gdpc`` on zero counts: the residual law does not depend on the counts, so a table's cells and
Flaxman's leaves give the same residuals). The target is the *exact* loss over the population's
5–95 % window, from the pmf (``auditlib.epl.exact``): for ADPC 0.568 ε at ε = 0.01 down to 0.495 ε
at ε = 2; for GDPC ε.

Estimators, all on the same draws (90 % basic intervals, B = 200, no reference floor):

* ``default`` — ``estimate_epl(r)``: the residuals' lattice, ``ci_target="auto"`` (ADPC: the
  ``"exact"`` bracket; GDPC, on ℤ: the smoothed interval, as before);
* ``lattice_smoothed`` (ADPC) — the lattice grid with the smoothed interval;
* ``integer_grid`` (ADPC) — ``grid="integers"``: the estimate before the lattice was used;
* ``exact_opt_in`` (GDPC) — ``ci_target="exact"`` on ℤ.

    nice python benchmarks/epl_lattice_coverage.py --release adpc   # ≈ 10 min on one core
    nice python benchmarks/epl_lattice_coverage.py --release gdpc   # ≈ 4 min

Writes ``benchmarks/results/epl_lattice_coverage_<release>.csv``: per (ε, n, estimator) the mean
EPL / exact, the mean extrapolated EPL / exact, the coverage and its binomial standard error, how
often the lower end is above the exact loss and the upper end below it, and the mean width / exact.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np
from _results import study_parser, where, write_rows

from auditlib.epl import estimate_epl
from auditlib.epl.exact import adpc_pmf, windowed_loss
from auditlib.simulate.hierarchical import adpc, gdpc

EPSILONS = (0.01, 0.1, 0.5, 1.0, 2.0)
#: Flaxman-Petti's C, Flaxman's leaves, a table's cells, 20 replicates of the leaves
SIZES = (2_663, 9_261, 40_170, 185_220)
RUNS = 4


def estimators(release: str, eps: float) -> dict[str, dict[str, Any]]:
    if release == "gdpc":
        return {"default": {}, "exact_opt_in": {"ci_target": "exact"}}
    out: dict[str, dict[str, Any]] = {"default": {}, "lattice_smoothed": {"ci_target": "smoothed"}}
    if eps >= 0.1:  # at 0.01 the kernel spans 340 lattice steps: the integer grid changes nothing
        out["integer_grid"] = {"grid": "integers"}
    return out


def run(release: str, reps: int, out: Path, seed: int) -> None:
    rows = []
    t0 = time.perf_counter()
    root = np.random.SeedSequence([seed, 1 if release == "adpc" else 0])
    for eps, ss_eps in zip(EPSILONS, root.spawn(len(EPSILONS)), strict=True):
        runs = RUNS if release == "adpc" else 1
        values, pmf = adpc_pmf(eps, runs)
        exact = windowed_loss(values, pmf)
        r_eps = reps if eps >= 0.1 or release == "gdpc" else max(reps * 3 // 10, 10)
        for n, ss_n in zip(SIZES, ss_eps.spawn(len(SIZES)), strict=True):
            rng = np.random.default_rng(ss_n)
            kinds = estimators(release, eps)
            res: dict[str, list[tuple[float, ...]]] = {k: [] for k in kinds}
            secs = dict.fromkeys(kinds, 0.0)
            targets: dict[str, str] = {}
            zero = np.zeros(n, dtype=np.int64)
            for i in range(r_eps):
                r = adpc(zero, eps, RUNS, rng) if release == "adpc" else gdpc(zero, eps, rng)
                for k, kw in kinds.items():
                    t = time.perf_counter()
                    e = estimate_epl(r, n_null=None, seed=i, **kw)
                    secs[k] += time.perf_counter() - t
                    targets[k] = f"{e.grid}/{e.ci_target}"
                    res[k].append((e.epl, e.epl_extrapolated, e.ci_low, e.ci_high))
            for k, vals in res.items():
                a = np.array(vals)
                cov = (a[:, 2] <= exact) & (exact <= a[:, 3])
                p = float(cov.mean())
                rows.append(
                    {
                        "release": release,
                        "runs": runs,
                        "epsilon": eps,
                        "n": n,
                        "estimator": k,
                        "grid_target": targets[k],
                        "reps": r_eps,
                        "exact_loss": exact,
                        "exact_over_eps": exact / eps,
                        "epl_over_exact": float(np.mean(a[:, 0])) / exact,
                        "extrapolated_over_exact": float(np.mean(a[:, 1])) / exact,
                        "coverage": p,
                        "coverage_se": math.sqrt(max(p * (1.0 - p), 1e-12) / r_eps),
                        "low_end_above": float(np.mean(a[:, 2] > exact)),
                        "high_end_below": float(np.mean(a[:, 3] < exact)),
                        "width_over_exact": float(np.mean(a[:, 3] - a[:, 2])) / exact,
                        "seconds_per_estimate": secs[k] / r_eps,
                    }
                )
            print(
                f"{release} eps={eps:g} n={n}: "
                + ", ".join(
                    f"{k} {np.mean(rows[-len(res) + j]['coverage']):.2f}" for j, k in enumerate(res)
                )
                + f" ({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )
    print(f"{write_rows(out, rows)}; {where(t0)}")


def main() -> None:
    ap = study_parser(__doc__, reps=100, seed=2020, table=None)
    ap.add_argument("--release", choices=("adpc", "gdpc"), required=True)
    a = ap.parse_args()
    out = a.out or Path(__file__).parent / "results" / f"epl_lattice_coverage_{a.release}.csv"
    run(a.release, a.reps, out, a.seed)


if __name__ == "__main__":
    main()
