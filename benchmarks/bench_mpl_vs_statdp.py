"""Benchmark: MPL beside StatDP (Ding et al., CCS 2018) on the same mechanisms.

StatDP is not on PyPI and needs numpy < 1.24, so it runs in a *separate* interpreter: install
StatDP from https://github.com/cmla-psu/statdp into a separate venv with numpy<1.24, e.g.

    python3 -m venv statdp-venv
    statdp-venv/bin/pip install "numpy==1.23.5" tqdm "numba<0.59"
    statdp-venv/bin/pip install -e path/to/statdp          # a checkout of the repository

and pass that interpreter:

    PYTHONPATH=. python benchmarks/bench_mpl_vs_statdp.py --statdp-python statdp-venv/bin/python
    PYTHONPATH=. python benchmarks/bench_mpl_vs_statdp.py --mechanisms svt2,isvt1,isvt2 \\
        --test-epsilons 0.5,0.7,0.9 --statdp-python statdp-venv/bin/python

Without ``--statdp-python`` only the MPL side runs. The mechanisms are the same on both sides:

| name | StatDP algorithm (shipped) | MPL side |
|---|---|---|
| laplace | ``histogram`` (q₀ + Lap(1/ε)) | ``laplace_mechanism(ε₀)`` |
| laplace_broken | ``histogram_eps`` (q₀ + Lap(ε): truly 1/ε-DP) | ``laplace_mechanism(ε₀, scale=ε₀)`` |
| report_noisy_max | ``noisy_max_v1a`` (argmax, Lap(2/ε)), 6 queries | ``report_noisy_max(ε₀)`` |
| randomized_response_k4 | ``rr4`` (defined by this script: 4-ary RR of q₀) | ``randomized_response(ε₀, k=4)`` |
| randomized_response_broken | ``rr4_broken`` (binary keep probability on 4 values) | same, ln(1 + 2(e^ε − 1))-DP |
| svt2 | ``SVT`` with N = 1, T = 1 (# ⊥ before the first ⊤), 10 queries | ``svt2(ε₀)`` (same law) |
| isvt1 | ``iSVT1`` (no query noise; Hamming distance to ⊤⁵⊥⁵) | SVT5's sampler, same distance |
| isvt2 | ``iSVT2`` (ν ~ Lap(2/ε), no cutoff; same distance) | SVT6's sampler, same distance |

For isvt1/isvt2 the MPL side runs the identical mechanism (the Hamming distance of the ⊤/⊥ vector
to ⊤⁵⊥⁵, outputs 0..10) on the 10 query patterns of ``SVT_PATTERNS``, with the exact ε*_C of that
output from the exact bit-vector laws of the catalogue.

Reported per mechanism. StatDP: the p-value per tested ε (a small p rejects ε-DP: StatDP found a
counterexample), the largest tested ε it rejects at p < 0.05, the draws it used (event selection:
``event_iterations`` × 2 × inputs per tested ε; detection: ``detect_iterations`` × 2), wall time
(its own, and of the whole subprocess with imports and numba's compilation) and CPU time of the
subprocess and its pool. StatDP seeds nothing (``default_rng()``): its p-values vary run to run.
MPL: LB at 95 % (median over ``--reps`` runs at fixed seeds, and the share of runs with LB > ε₀),
ε*_C, draws 2nB + 2N, wall and CPU time per run (median). Both run on one core by default.

Measured on a shared 2-core AMD EPYC at ε₀ = 0.7 (benchmarks/README.md has the table): StatDP
8–28 CPU-s and 2.6·10⁶ draws per tested ε, same verdicts as MPL; MPL 0.03–0.06 CPU-s per run at
5·10⁵ draws (SVTs 0.5–0.8 s at 3·10⁶), LB 0.03–0.15 below ε*_C.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from _machine import machine_info

from auditlib.mpl import laplace_mechanism, mpl, randomized_response, report_noisy_max, svt2
from auditlib.mpl.catalogue import KnownMechanism
from auditlib.mpl.dpl import Region
from auditlib.mpl.protocol import MechanismUnderTest
from auditlib.mpl.randomized_response import rr_keep_probability
from auditlib.mpl.svt import SVT_PATTERNS, SVTSampler, svt_bits_pmf, svt_no_query_noise_pmf

#: runs in the StatDP interpreter; argv[1] is a JSON job, one JSON line of results is printed
STATDP_DRIVER = r"""
import json, logging, math, sys, time
from statdp import detect_counterexample
import statdp.algorithms as algs


def rr4(prng, queries, epsilon):
    # 4-ary randomized response of queries[0]: keep w.p. (e^eps - 1)/(e^eps + 3), else uniform
    keep = math.expm1(epsilon) / (math.exp(epsilon) + 3.0)
    return int(queries[0]) if prng.random() < keep else int(prng.integers(0, 4))


def rr4_broken(prng, queries, epsilon):
    # the binary keep probability (e^eps - 1)/(e^eps + 1) on 4 values
    keep = math.expm1(epsilon) / (math.exp(epsilon) + 1.0)
    return int(queries[0]) if prng.random() < keep else int(prng.integers(0, 4))


job = json.loads(sys.argv[1])
name = job["algorithm"]
algorithm = globals()[name] if name in ("rr4", "rr4_broken") else getattr(algs, name)
t0 = time.perf_counter()
res = detect_counterexample(
    algorithm, tuple(job["test_epsilons"]), job["kwargs"], num_input=tuple(job["num_input"]),
    event_iterations=job["event_iterations"], detect_iterations=job["detect_iterations"],
    cores=job["cores"], quiet=True, loglevel=logging.WARNING,
)
wall = time.perf_counter() - t0
print(json.dumps({
    "wall": wall,
    "tests": [{"epsilon": e, "p": p, "d1": list(d1), "d2": list(d2), "event": repr(ev)}
              for e, p, d1, d2, _kw, ev in res],
}))
"""


@dataclass(frozen=True)
class Case:
    name: str
    statdp_algorithm: str
    statdp_kwargs: dict[str, float]
    num_input: int
    ours: Callable[[float], KnownMechanism]
    large: bool  # SVT sizes (n = 10⁵, N = 5·10⁵, τ = 10⁻⁴) on the MPL side


PATTERN = np.array([1] * 5 + [0] * 5, dtype=np.int64)  # ⊤⁵⊥⁵, StatDP's iSVT reference output


@dataclass(frozen=True)
class HammingSampler:
    """SVT without cutoff, reported as the Hamming distance of its ⊤/⊥ bits to ⊤⁵⊥⁵."""

    svt: SVTSampler

    def __call__(self, q: Any, n: int, rng: np.random.Generator) -> npt.NDArray[np.int64]:
        code = self.svt(q, n, rng)
        bits = (code[:, None] >> np.arange(PATTERN.size)) & 1
        return np.asarray((bits != PATTERN).sum(axis=1), dtype=np.int64)


def _hamming_entry(name: str, svt: SVTSampler) -> KnownMechanism:
    codes = np.arange(1 << PATTERN.size)
    dist = ((codes[:, None] >> np.arange(PATTERN.size)) & 1 != PATTERN).sum(axis=1)

    def law(q: Any) -> npt.NDArray[np.float64]:
        if svt.nu_scale > 0:
            p = svt_bits_pmf(q, svt.rho_scale, svt.nu_scale)
        else:
            table = svt_no_query_noise_pmf(q, svt.rho_scale)
            p = np.array([table.get(int(c), 0.0) for c in codes])
        return np.asarray(np.bincount(dist, weights=p, minlength=PATTERN.size + 1), dtype=float)

    laws = {q: law(q) for pair in SVT_PATTERNS for q in pair}

    def loss(a: Any, b: Any, t: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
        idx = np.asarray(t, dtype=np.int64)
        with np.errstate(divide="ignore", invalid="ignore"):
            la, lb = np.log(laws[tuple(a)][idx]), np.log(laws[tuple(b)][idx])
            return np.asarray(np.where(la == lb, 0.0, np.abs(la - lb)))

    region = Region.integers((0, PATTERN.size))
    eps_c = np.array([float(np.max(loss(a, b, region.points))) for a, b in SVT_PATTERNS])
    return KnownMechanism(
        mechanism=MechanismUnderTest(name, HammingSampler(svt), "discrete"),
        pairs=SVT_PATTERNS,
        region=region,
        claimed_epsilon=math.nan,
        epsilon=math.inf,
        epsilon_c_pairs=eps_c,
        loss=loss,
    )


CASES = {
    c.name: c
    for c in (
        Case("laplace", "histogram", {}, 1, laplace_mechanism, False),
        Case(
            "laplace_broken",
            "histogram_eps",
            {},
            1,
            lambda e: laplace_mechanism(e, scale=e),
            False,
        ),
        Case("report_noisy_max", "noisy_max_v1a", {}, 6, report_noisy_max, False),
        Case(
            "randomized_response_k4",
            "rr4",
            {},
            1,
            lambda e: randomized_response(e, k=4),
            False,
        ),
        Case(
            "randomized_response_broken",
            "rr4_broken",
            {},
            1,
            lambda e: randomized_response(e, k=4, keep=rr_keep_probability(e, 2)),
            False,
        ),
        Case("svt2", "SVT", {"N": 1, "T": 1.0}, 10, svt2, True),
        Case(
            "isvt1",
            "iSVT1",
            {"N": 1, "T": 1.0},
            10,
            lambda e: _hamming_entry("isvt1", SVTSampler(2.0 / e, 0.0, first_above=False)),
            True,
        ),
        Case(
            "isvt2",
            "iSVT2",
            {"N": 1, "T": 1.0},
            10,
            lambda e: _hamming_entry("isvt2", SVTSampler(2.0 / e, 2.0 / e, first_above=False)),
            True,
        ),
    )
}


def run_statdp(case: Case, eps0: float, args: argparse.Namespace) -> dict[str, Any]:
    job = {
        "algorithm": case.statdp_algorithm,
        "kwargs": {"epsilon": eps0, **case.statdp_kwargs},
        "num_input": [case.num_input],
        "test_epsilons": args.test_epsilons,
        "event_iterations": args.event_iterations,
        "detect_iterations": args.detect_iterations,
        "cores": args.statdp_cores,
    }
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [args.statdp_python, "-c", STATDP_DRIVER, json.dumps(job)],
        capture_output=True,
        text=True,
        check=False,
        cwd="/",  # keep a checkout named statdp in the working directory from shadowing the package
    )
    total = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"StatDP failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["total_wall"] = total
    out["cpu"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    inputs = 8  # generate_databases(..., ALL_DIFFER): 8 (d1, d2) patterns per input length
    per_eps = args.event_iterations * 2 * inputs + args.detect_iterations * 2
    out["draws"] = per_eps * len(args.test_epsilons)
    return out


def run_mpl(case: Case, eps0: float, args: argparse.Namespace) -> dict[str, Any]:
    e = case.ours(eps0)
    n, big_n, tau = (100_000, 500_000, 1e-4) if case.large else (20_000, 50_000, 1e-3)
    lbs, walls, cpus = [], [], []
    for child in np.random.SeedSequence(args.seed).spawn(args.reps):
        rng = np.random.default_rng(child)
        w0, c0 = time.perf_counter(), time.process_time()
        r = mpl(e.mechanism, e.pairs, n=n, n_confidence=big_n, region=e.region, rng=rng, tau=tau)
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
        lbs.append(r.lb)
    lb = np.array(lbs)
    return {
        "lb_median": float(np.median(lb)),
        "exceeds_eps0": float(np.mean(lb > eps0)),
        "covered": float(np.mean(lb <= e.epsilon_c)),
        "epsilon_c": e.epsilon_c,
        "draws": 2 * n * len(e.pairs) + 2 * big_n,
        "wall": float(np.median(walls)),
        "cpu": float(np.median(cpus)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--statdp-python", default="", help="interpreter of a venv with StatDP")
    ap.add_argument("--mechanisms", default="laplace,laplace_broken,report_noisy_max")
    ap.add_argument("--epsilon", type=float, default=0.7, help="ε₀ the mechanisms are run at")
    ap.add_argument("--test-epsilons", default="0.5,0.7,0.9,1.2,1.6")
    ap.add_argument("--event-iterations", type=int, default=100_000, help="StatDP's default")
    ap.add_argument("--detect-iterations", type=int, default=500_000, help="StatDP's default")
    ap.add_argument("--statdp-cores", type=int, default=1)
    ap.add_argument("--reps", type=int, default=10, help="MPL runs per mechanism")
    ap.add_argument("--seed", type=int, default=2022)
    ap.add_argument("--json", action="store_true", help="also print the results as JSON")
    args = ap.parse_args()
    args.test_epsilons = [float(v) for v in args.test_epsilons.split(",")]
    names = args.mechanisms.split(",")
    unknown = [m for m in names if m not in CASES]
    if unknown:
        raise SystemExit(f"unknown mechanism(s) {unknown}; allowed: {', '.join(CASES)}")
    print(machine_info())
    print(
        f"eps0 = {args.epsilon}; StatDP tested eps = {args.test_epsilons}, event/detect "
        f"iterations {args.event_iterations}/{args.detect_iterations}, {args.statdp_cores} core(s)"
    )
    results: dict[str, Any] = {}
    for m in names:
        case = CASES[m]
        ours = run_mpl(case, args.epsilon, args)
        results[m] = {"mpl": ours}
        print(
            f"\n{m}\n  MPL    : LB95 median {ours['lb_median']:.3f} (eps*_C {ours['epsilon_c']:.3f}; "
            f"LB > eps0 in {ours['exceeds_eps0']:.0%}, LB <= eps*_C in {ours['covered']:.0%} of "
            f"{args.reps}), draws {ours['draws']:.3g}, wall {ours['wall']:.3f} s, "
            f"CPU {ours['cpu']:.3f} s per run"
        )
        if args.statdp_python:
            st = run_statdp(case, args.epsilon, args)
            results[m]["statdp"] = st
            ps = ", ".join(f"{t['epsilon']:g}: {t['p']:.3g}" for t in st["tests"])
            rejected = [t["epsilon"] for t in st["tests"] if t["p"] < 0.05]
            up_to = f"rejects eps-DP up to eps = {max(rejected):g}" if rejected else "rejects none"
            print(
                f"  StatDP : p per eps {{{ps}}}; {up_to}; draws {st['draws']:.3g}, wall "
                f"{st['wall']:.1f} s ({st['total_wall']:.1f} s with start-up), "
                f"CPU {st['cpu']:.1f} s"
            )
            sys.stdout.flush()
    if args.json:
        print(json.dumps(results, indent=1, default=float))


if __name__ == "__main__":
    main()
