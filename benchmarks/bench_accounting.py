"""Timing of the certified discrete-Gaussian accountant on Su, Su & Wang's setting (not a test).

Run: ``python benchmarks/bench_accounting.py``. Prints the machine, then for each geolevel
(10 i.i.d. queries) and for the 8-level composition: build time, time of eps(delta) at three deltas,
time of delta(eps) at the three resulting eps, and the certified bracket widths. If Google's ``dp_accounting``
is importable it is timed side by side (its PLD is an FFT-based estimate, not a certified bracket).

Times are CPU-s (``time.process_time``): medians of repeated calls (``_timing.median_cpu``) and,
beside ``dp_accounting``, medians of calls alternated with its own (``_timing.alternate``); the
bracket-mode rows are single calls. Every figure is taken with the accountant's in-process caches
off (``auditlib.accounting._memo.caching(False)``): each call builds its measures, as a process's
first call does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
from _timing import alternate, median_cpu, method_line

from auditlib.accounting import DiscreteGaussianComposition, _memo, bureau_epsilon, cks_epsilon

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
ROUNDS = 5


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Median CPU-s of :data:`ROUNDS` calls of ``fn`` (after one more), and its value."""
    return median_cpu(fn, rounds=ROUNDS)[0], fn()


def sigma2(share: int) -> Fraction:
    return Fraction(10) / (2 * Fraction(share, 1000) * RHO)


def machine() -> None:
    from _machine import machine_info

    print(machine_info())
    print(method_line(ROUNDS) + "; accountant caches off")
    print()


def bench_levels() -> None:
    print("per level, 10 i.i.d. queries (exact lattice)")
    print(
        f"{'level':<13}{'build ms':>9}{'delta ms':>9}{'eps ms':>8}"
        f"{'eps(1e-10)':>15}{'eps width':>11}{'delta rel width':>17}"
    )
    for level, share in LEVELS.items():
        comps = [(sigma2(share), 10)]
        t_build, acc = timed(lambda comps=comps: DiscreteGaussianComposition(comps))
        t_eps, e = timed(lambda acc=acc: acc.epsilon(DELTAS))
        # delta at the level's own eps(1e-5), eps(1e-10), eps(1e-11): relative widths are meaningful
        t_delta, d = timed(lambda acc=acc, e=e: acc.delta(e.midpoint))
        rel = float(np.max((d.upper - d.lower) / d.upper))
        print(
            f"{level:<13}{1e3 * t_build:9.2f}{1e3 * t_delta:9.2f}{1e3 * t_eps:8.2f}"
            f"{e.midpoint[1]:15.9f}{np.max(e.width):11.1e}{rel:17.1e}"
        )
    print()


def bench_composed() -> None:
    comps = [(sigma2(share), 10) for share in LEVELS.values()]
    t_build, acc = timed(lambda: DiscreteGaussianComposition(comps))
    t_eps, e = timed(lambda: acc.epsilon(DELTAS))
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
        t0 = time.process_time()
        br = DiscreteGaussianComposition(comps, mode="bracket-grid", grid=grid)
        t_b = time.process_time() - t0
        t0 = time.process_time()
        eb = br.epsilon(1e-10)
        t_e = time.process_time() - t0
        print(
            f"  bracket mode grid={br.grid:.3g}: build {t_b:.2f} s, eps(1e-10) {t_e:.2f} s,"
            f" [{eb.lower:.9f}, {eb.upper:.9f}] width {eb.width:.1e}, lattice {br.lattice_size}"
        )
    print()


def bench_production() -> None:
    """Production allocations with no common lattice: rounded-only vs split brackets, eps(1e-10)."""
    from auditlib.allocations import RELEASED_PRODUCTS, cumulative_components, load_allocation

    print("production, US, all levels composed: eps(1e-10), rounded only vs with splits")
    cases: list[tuple[str, list[Any]]] = []
    for nb in ("add_remove", "bounded"):
        pl94 = load_allocation("pl94_2021_production")
        cases.append((f"PL94 persons {nb}", pl94.components(nb, "persons", "US")))
    cases.append(("PL94+DHC cumulative", cumulative_components(RELEASED_PRODUCTS, "add_remove")))
    for name, comps in cases:
        for refine in (False, True):
            t0 = time.process_time()
            acc = DiscreteGaussianComposition(comps, refine=refine)
            e = acc.epsilon(1e-10)
            t = time.process_time() - t0
            print(
                f"  {name:<24} refine={refine!s:<5} {acc.method:<13} {t:6.2f} s"
                f"  [{e.lower:.9f}, {e.upper:.9f}] width {e.width:.1e}"
                f"  (rounded grid {acc.grid:.3g}, split grid {acc.split_grid:.3g})"
            )
    print()


def bench_dp_accounting() -> None:
    """Side by side in one process: per level and the 8-level composition, time and width."""
    try:
        from dp_accounting.pld import privacy_loss_distribution as pld
    except ImportError:
        print("dp_accounting not installed: side-by-side timing skipped")
        return
    truth = 20.3246897508  # REFERENCE.md, certified
    for interval in (1e-4, 1e-5):
        print(
            f"dp_accounting PLD (pessimistic, value_discretization_interval={interval:g}; FFT,"
            " one-sided estimate) vs certified bracket, 3 deltas"
        )
        plds = {}
        for level, share in LEVELS.items():
            sigma = float(sigma2(share)) ** 0.5

            def build(sigma: float = sigma, interval: float = interval) -> Any:
                base = pld.from_discrete_gaussian_mechanism(
                    sigma, value_discretization_interval=interval
                )
                return base.self_compose(10)

            def theirs(build: Callable[[], Any] = build) -> Any:
                p = build()
                return p, [p.get_epsilon_for_delta(d) for d in DELTAS]

            def ours(share: int = share) -> Any:
                return DiscreteGaussianComposition([(sigma2(share), 10)]).epsilon(DELTAS)

            pair = alternate(theirs, ours, rounds=3, labels=("dp", "certified"))
            t_dp, t_us = pair.median_cpu(0), pair.median_cpu(1)
            (p, eps), e = pair.values
            plds[level] = p
            err = np.max(np.abs(np.asarray(eps) - e.midpoint))
            print(
                f"  {level:<13} dp {1e3 * t_dp:8.1f} ms (off by {err:.1e})"
                f"   certified {1e3 * t_us:6.2f} ms (width {np.max(e.width):.1e})"
            )

        def compose_all(plds: dict[str, Any] = plds) -> Any:
            total = None
            for p in plds.values():
                total = p if total is None else total.compose(p)
            return total, total.get_epsilon_for_delta(1e-10)

        comps = [(sigma2(share), 10) for share in LEVELS.values()]
        pair = alternate(
            compose_all,
            lambda comps=comps: DiscreteGaussianComposition(comps).epsilon(1e-10),  # type: ignore[misc]
            rounds=3,
            labels=("dp", "certified"),
        )
        t_dp, t_us = pair.median_cpu(0), pair.median_cpu(1)
        (_, eps), e = pair.values
        print(
            f"  8 levels eps(1e-10): dp {t_dp:.2f} s, {eps:.9f} (off by {abs(eps - truth):.1e});"
            f" certified {t_us:.3f} s, [{e.lower:.11f}, {e.upper:.11f}] width {e.width:.1e}"
            f" ({abs(eps - truth) / e.width:.1e} x narrower than dp's error); load {pair.load_range}"
        )
        print()


if __name__ == "__main__":
    machine()
    with _memo.caching(False):
        bench_levels()
        bench_composed()
        bench_production()
        bench_dp_accounting()
