"""Benchmark: one MPL run at the sizes of Askin, Kutta & Dette §V (n = 2·10⁴, N = 5·10⁴, B = 10, τ = 10⁻³;
SVTs: n = 10⁵, N = 5·10⁵, τ = 10⁻⁴).

Times each mechanism of the catalogue (best of ``--repeat`` runs, one core: set the thread count
of the BLAS to 1 if it matters on your machine; MPL does not use it) and prints the bound. Building
a catalogue entry (exact ε*_C) is timed separately: it is done once per mechanism, not per run.

    PYTHONPATH=. python benchmarks/bench_mpl.py
    PYTHONPATH=. python benchmarks/bench_mpl.py --epsilon 1.5 --repeat 20
    PYTHONPATH=. python benchmarks/bench_mpl.py --no-svt --delta   # + hockey-stick δ at 4 ε

Census releases (``auditlib.mpl.census``): the DG count of the State level's least noisy query
(dhcp_20220825_paper, add/remove, σ² ≈ 5), the same clipped at 0 (count 1), GDPC at ε₀; their
samplers run the simulation module's release on databases D and D′ (B = 3 pairs).

Target: ≤ 0.1 s per run for Laplace, Report Noisy Max and the exponential mechanism.
Measured on a 2-core AMD EPYC (numpy 2.4, scipy 1.17), ε = 0.7, best of 10 (SVTs: of 3):
Laplace 0.039 s, Report Noisy Max 0.054 s, exponential 0.038 s, continuous Noisy Max 0.062 s,
counts 0.005-0.009 s; SVTs 0.33-0.67 s at their larger sizes. Randomized response (binary / k = 4,
B = 1 / 6 pairs): 0.002 / 0.022 s at load 8.5. The authors' R code: 4.7-11.3 s (SVTs 24-57 s) on 4 cores.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _machine import machine_info

from auditlib.mpl import (
    continuous_noisy_max,
    discrete_gaussian_count,
    exponential_mechanism,
    geometric_count,
    laplace_mechanism,
    randomized_response,
    report_noisy_max,
    svt2,
    svt4,
    svt5,
    svt6,
)
from auditlib.mpl.census import allocation_count, allocation_query_count, gdpc_count
from auditlib.mpl.mpl import mpl_known


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--epsilon", type=float, default=0.7)
    ap.add_argument("--n", type=float, default=2e4)
    ap.add_argument("--n-confidence", type=float, default=5e4)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--seed", type=int, default=2022)
    ap.add_argument("--no-svt", action="store_true", help="skip the SVTs (~1 s per run)")
    ap.add_argument("--delta", action="store_true", help="also estimate δ(ε) at ε = 0, .1, .5, 1")
    args = ap.parse_args()
    n, big_n = int(args.n), int(args.n_confidence)
    print(machine_info())
    print(f"MPL, n = {n}, N = {big_n}, alpha = 0.05, tau = 1e-3, eps0 = {args.epsilon}")
    print(f"{'mechanism':26s} {'setup s':>8s} {'run s':>8s} {'LB':>8s} {'eps*_C':>8s}  flags")
    small = (n, big_n, 1e-3, args.repeat)
    large = (10 * n // 2, 10 * big_n, 1e-4, max(1, args.repeat // 3))
    factories = [
        ("laplace", lambda: laplace_mechanism(args.epsilon), small),
        ("report_noisy_max", lambda: report_noisy_max(args.epsilon), small),
        ("exponential", lambda: exponential_mechanism(args.epsilon), small),
        ("continuous_noisy_max", lambda: continuous_noisy_max(args.epsilon), small),
        ("geometric_count", lambda: geometric_count(args.epsilon), small),
        ("randomized_response", lambda: randomized_response(args.epsilon), small),
        ("randomized_response k=4", lambda: randomized_response(args.epsilon, k=4), small),
        ("discrete_gaussian_count", lambda: discrete_gaussian_count(5.0), small),
        (
            "census DG State (B=3)",
            lambda: allocation_query_count("dhcp_20220825_paper", "State"),
            small,
        ),
        (
            "census DG clipped (B=3)",
            lambda: allocation_count(5.0, count=1, postprocess="nonnegative"),
            small,
        ),
        ("census GDPC (B=3)", lambda: gdpc_count(args.epsilon), small),
    ]
    if not args.no_svt:
        factories += [
            ("svt2 (n=1e5, N=5e5)", lambda: svt2(args.epsilon), large),
            ("svt4 (n=1e5, N=5e5)", lambda: svt4(args.epsilon), large),
            ("svt5 (n=1e5, N=5e5)", lambda: svt5(args.epsilon), large),
            ("svt6 (n=1e5, N=5e5)", lambda: svt6(args.epsilon), large),
        ]
    seeds = np.random.SeedSequence(args.seed)
    for name, factory, (nn, nc, tau, repeat) in factories:
        t0 = time.perf_counter()
        e = factory()
        setup = time.perf_counter() - t0
        best = float("inf")
        result = None
        for child in seeds.spawn(repeat):
            rng = np.random.default_rng(child)
            t0 = time.perf_counter()
            deltas = [0.0, 0.1, 0.5, 1.0] if args.delta else None
            result = mpl_known(e, nn, nc, rng, tau=tau, delta_epsilons=deltas)
            best = min(best, time.perf_counter() - t0)
        assert result is not None
        flags = [f for f in ("floor_driven", "edge", "sparse_support") if getattr(result, f)]
        print(
            f"{name:26s} {setup:8.3f} {best:8.3f} {result.lb:8.4f} {e.epsilon_c:8.4f}  "
            + ",".join(flags)
        )


if __name__ == "__main__":
    main()
