"""Benchmark: the discrete-Gaussian table sampler beside the reference, at the σ² of the PL94
production allocation — draws per second, build time, stated bounds, and a χ² fit at 10⁸ draws.

    PYTHONPATH=. python benchmarks/bench_dg_sampler.py               # speed and bounds
    PYTHONPATH=. python benchmarks/bench_dg_sampler.py --chi2 1e8    # and the χ² fit at 10⁸ draws

Speed: draws of 10⁷ a call, the reference and the table sampler alternated in one process
(``_timing.alternate``: one warm-up call each, then ``--reps`` rounds; median CPU-s of each and the
ratio of the medians; draws/s from the median CPU-s), one core. The
χ² fit compares the counts of ``--chi2`` draws (in chunks of 10⁷ from one generator: the same
draws as one call) with the exact pmf (60-digit mpmath), over the bins with ≥ 20 expected draws and
the two tails pooled; its power is the same fit of draws at σ²·1.02.
"""

from __future__ import annotations

import argparse
import time

import mpmath
import numpy as np
from _machine import machine_info
from _timing import alternate, method_line
from scipy import stats

from auditlib.mechanisms import DiscreteGaussian, DiscreteGaussianTable

#: State total, Block group total, Tract total, Block detailed, Block hispanic * cenrace,
#: Block total (pl94_2021_production); a tiny and a large σ²
SIGMA2 = (0.05, 1.209192398, 1.972493896, 5.808005026, 10.09284849, 1896.013681, 7963.257459, 1e4)
CHUNK = 10**7


def exact_pmf(sigma2: float, ks: np.ndarray) -> np.ndarray:
    """P(X = k) in 60-digit arithmetic, the normaliser summed far beyond any kept term (also the
    reference of tests/unit/test_dg_table.py)."""
    with mpmath.workdps(60):
        s2 = mpmath.mpf(sigma2)
        far = int(40 * mpmath.sqrt(s2)) + 40
        z = 1 + 2 * mpmath.fsum(mpmath.exp(-mpmath.mpf(k * k) / (2 * s2)) for k in range(1, far))
        return np.array([float(mpmath.exp(-mpmath.mpf(int(k) ** 2) / (2 * s2)) / z) for k in ks])


def chi2_fit(sampler: DiscreteGaussianTable, sigma2: float, n: int, seed: int) -> tuple[float, int]:
    """p-value and degrees of freedom of the fit of ``n`` draws to N_Z(0, σ²)'s exact pmf."""
    half = int(np.ceil(12 * np.sqrt(sigma2))) + 2
    ks = np.arange(-half, half + 1)
    expected = exact_pmf(sigma2, ks) * n
    keep = np.flatnonzero(expected >= 20)
    lo, hi = int(ks[keep[0]]), int(ks[keep[-1]])
    counts = np.zeros(hi - lo + 1, dtype=np.int64)
    g = np.random.default_rng(seed)
    for start in range(0, n, CHUNK):
        x = sampler.rvs(min(CHUNK, n - start), g)
        counts += np.bincount(np.clip(x, lo, hi) - lo, minlength=hi - lo + 1)
    exp = np.concatenate(
        [[expected[ks <= lo].sum()], expected[(ks > lo) & (ks < hi)], [expected[ks >= hi].sum()]]
    )
    chi2 = float(np.sum((counts - exp) ** 2 / exp))
    return float(stats.chi2.sf(chi2, counts.size - 1)), counts.size - 1


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--reps", type=int, default=5, help="alternated rounds of the speed figures")
    ap.add_argument("--chi2", type=float, default=0.0, help="draws of the χ² fit (0: none)")
    ap.add_argument("--seed", type=int, default=20260325)
    args = ap.parse_args()
    print(machine_info())
    print(method_line(args.reps))
    print(
        "sigma2 | levels A | build s (table / ref) | truncated mass | TV bound (table) | "
        "TV bound (ref) | M draws/CPU-s table / ref | ratio of median CPU-s | load"
    )
    for s2 in SIGMA2:
        t = time.perf_counter()
        tab = DiscreteGaussianTable(s2)
        b_tab = time.perf_counter() - t
        t = time.perf_counter()
        ref = DiscreteGaussian(s2)
        b_ref = time.perf_counter() - t
        g = np.random.default_rng(args.seed)
        p = alternate(
            lambda ref=ref, g=g: ref.rvs(CHUNK, g),  # type: ignore[misc]
            lambda tab=tab, g=g: tab.rvs(CHUNK, g),  # type: ignore[misc]
            rounds=args.reps,
            labels=("reference", "table"),
        )
        r_ref, r_tab = (CHUNK / p.median_cpu(i) / 1e6 for i in (0, 1))
        print(
            f"{s2:g} | {tab.levels} | {b_tab:.3f} / {b_ref:.4f} | {tab.truncated_mass:.2e} | "
            f"{tab.tv_bound:.2e} | {ref.sampler_tv_bound:.2e} | {r_tab:.0f} / {r_ref:.0f} | "
            f"{p.ratio:.2f}× | {p.load_range}",
            flush=True,
        )
        print(f"  {p.line()}", flush=True)
    if args.chi2:
        n = int(args.chi2)
        print(f"χ² fit at {n:.0e} draws (tails pooled): sigma2 | p-value (df) | σ²·1.02: p-value")
        for s2 in SIGMA2:
            p, df = chi2_fit(DiscreteGaussianTable(s2), s2, n, args.seed)
            p_off, _ = chi2_fit(DiscreteGaussianTable(s2 * 1.02), s2, n, args.seed)
            print(f"{s2:g} | {p:.3f} ({df}) | {p_off:.1e}", flush=True)


if __name__ == "__main__":
    main()
