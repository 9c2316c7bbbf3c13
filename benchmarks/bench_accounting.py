"""Timing of the certified discrete-Gaussian accountant on seed 004's setting (not a test).

Run: ``python benchmarks/bench_accounting.py``. Prints the machine, then for each geolevel
(10 i.i.d. queries) and for the 8-level composition: build time, time of eps(delta) at three deltas,
time of delta(eps) at the three resulting eps, and the certified bracket widths. If Google's ``dp_accounting``
is importable it is timed side by side (its PLD is an FFT-based estimate, not a certified bracket).
"""

from __future__ import annotations

import os
import platform
import sys
import time
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from auditlib.accounting import DiscreteGaussianComposition, bureau_epsilon, cks_epsilon

RHO = Fraction(73, 20)
LEVELS = {
    "US": 20,
    "State": 274,
    "County": 85,
    "PEPG": 131,
    "TSG": 131,
    "Tract subset": 238,
    "OBG": 118,
    "Block": 3,
}
DELTAS = [1e-5, 1e-10, 1e-11]


def sigma2(share: int) -> Fraction:
    return Fraction(10) / (2 * Fraction(share, 1000) * RHO)


def best_of(fn: Callable[[], Any], repeat: int = 3) -> tuple[float, Any]:
    """Smallest wall time over ``repeat`` runs (seconds) and the last result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def machine() -> None:
    print(f"platform   {platform.platform()}")
    print(f"processor  {platform.processor() or platform.machine()}")
    print(f"cpu_count  {os.cpu_count()}")
    print(f"python     {sys.version.split()[0]}  numpy {np.__version__}")
    print(f"load avg   {os.getloadavg() if hasattr(os, 'getloadavg') else 'n/a'}")
    print()


def bench_levels() -> None:
    print("per level, 10 i.i.d. queries (exact lattice)")
    print(
        f"{'level':<13}{'build ms':>9}{'delta ms':>9}{'eps ms':>8}"
        f"{'eps(1e-10)':>15}{'eps width':>11}{'delta rel width':>17}"
    )
    for level, share in LEVELS.items():
        comps = [(sigma2(share), 10)]
        t_build, acc = best_of(lambda comps=comps: DiscreteGaussianComposition(comps))
        t_eps, e = best_of(lambda acc=acc: acc.epsilon(DELTAS))
        # delta at the level's own eps(1e-5), eps(1e-10), eps(1e-11): relative widths are meaningful
        t_delta, d = best_of(lambda acc=acc, e=e: acc.delta(e.midpoint))
        rel = float(np.max((d.upper - d.lower) / d.upper))
        print(
            f"{level:<13}{1e3 * t_build:9.2f}{1e3 * t_delta:9.2f}{1e3 * t_eps:8.2f}"
            f"{e.midpoint[1]:15.9f}{np.max(e.width):11.1e}{rel:17.1e}"
        )
    print()


def bench_composed() -> None:
    comps = [(sigma2(share), 10) for share in LEVELS.values()]
    t_build, acc = best_of(lambda: DiscreteGaussianComposition(comps))
    t_eps, e = best_of(lambda: acc.epsilon(DELTAS))
    print(f"8 levels composed: {acc}")
    print(f"  build {t_build:.3f} s, eps at 3 deltas {t_eps:.3f} s")
    for delta, lo, hi in zip(DELTAS, e.lower, e.upper, strict=True):
        print(f"  eps({delta:g}) in [{lo:.12f}, {hi:.12f}]  width {hi - lo:.1e}")
    print(
        f"  truncated mass {acc.truncated_mass:.2e}, relative error radius {acc.relative_error:.1e}"
    )
    print(f"  Bureau eps {np.round(bureau_epsilon(acc.rho, DELTAS), 3)}")
    print(f"  CKS eps    {np.round(cks_epsilon(acc.rho, DELTAS), 3)}")
    print()
    for grid in (1e-3, 1e-4, None):
        t0 = time.perf_counter()
        br = DiscreteGaussianComposition(comps, mode="bracket-grid", grid=grid)
        t_b = time.perf_counter() - t0
        t0 = time.perf_counter()
        eb = br.epsilon(1e-10)
        t_e = time.perf_counter() - t0
        print(
            f"  bracket mode grid={br.grid:.3g}: build {t_b:.2f} s, eps(1e-10) {t_e:.2f} s,"
            f" [{eb.lower:.9f}, {eb.upper:.9f}] width {eb.width:.1e}, lattice {br.lattice_size}"
        )
    print()


def bench_dp_accounting() -> None:
    try:
        from dp_accounting.pld import privacy_loss_distribution as pld
    except ImportError:
        print("dp_accounting not installed: side-by-side timing skipped")
        return
    print("dp_accounting PLD (pessimistic, value_discretization_interval=1e-4; estimate, FFT)")
    # its `sigma` is the discrete Gaussian's parameter: pmf ~ exp(-k^2 / (2 sigma^2))
    plds = {}
    for level, share in LEVELS.items():
        sigma = float(sigma2(share)) ** 0.5

        def build(sigma: float = sigma) -> Any:
            return pld.from_discrete_gaussian_mechanism(sigma).self_compose(10)

        t_build, p = best_of(build, repeat=1)
        plds[level] = p
        t_eps, eps = best_of(lambda p=p: [p.get_epsilon_for_delta(d) for d in DELTAS], repeat=1)
        ours = DiscreteGaussianComposition([(sigma2(share), 10)]).epsilon(DELTAS).midpoint
        diff = np.max(np.abs(np.asarray(eps) - ours))
        print(
            f"  {level:<13} build {1e3 * t_build:8.1f} ms  eps {1e3 * t_eps:7.1f} ms"
            f"  max |eps - certified| {diff:.1e}"
        )

    def compose_all() -> Any:
        total = None
        for p in plds.values():
            total = p if total is None else total.compose(p)
        return total

    t_build, total = best_of(compose_all, repeat=1)
    t_eps, eps = best_of(lambda: [total.get_epsilon_for_delta(d) for d in DELTAS], repeat=1)
    print(f"  8 levels: compose {t_build:.2f} s, eps {t_eps:.2f} s, eps = {np.round(eps, 6)}")
    print()


if __name__ == "__main__":
    machine()
    bench_levels()
    bench_composed()
    bench_dp_accounting()
