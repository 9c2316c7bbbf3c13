"""Sequential vs fixed-size audits: draws to a decision and error rates, MPL and the f-DP points.

Both methods use the same decision rule (refuted: the lower bound exceeds the claim; consistent:
the upper bound on what the selected tests / t̂ can show is at most claim + tolerance; else
undecided) and the same budget; the fixed-size method takes one look at the full budget at level
conf, the sequential one looks at batch, 2·batch, … , max_n at risk (1 − conf)/J per look.

* Curve (``auditlib.mpl.sequential.sequential_tradeoff``): the Gaussian shift (claim μ = 1), the
  Laplace shift and binary randomized response (claim ε = 1), the discrete Gaussian count (σ = 1,
  claim its μ), each correct and broken (true parameter 1.5× the claim; randomized response: 4-ary
  with the binary keep probability); n_select = 2·10⁴, batch 5·10³, max_n = 3.2·10⁵ (J = 7),
  K = 32 Clopper–Pearson tests, tolerance 0.2, conf 0.95.
* MPL (``sequential_mpl``): catalogue entries at ε₀ = 0.7 (Laplace, Laplace with scale 1/(2ε₀),
  4-ary RR, 4-ary RR with the binary keep probability, the geometric count), step 1 at n = 2·10⁴,
  B as in the catalogue; batch 6 250, max_n = 2·10⁵ (J = 6), α = 0.05, tolerance 0.2.

    nice python benchmarks/fdp_sequential_study.py [--reps 200]    # ≈ 15 min of one core
    nice python benchmarks/fdp_sequential_study.py --modes curve --methods mixture \
        --out benchmarks/results/fdp_sequential_mixture.csv    # the curve with confidence sequences

Writes ``benchmarks/results/fdp_sequential.csv``: per (mode, mechanism, method) the fractions
refuted / consistent / undecided, the wrong-decision rate (refuting a correct claim; declaring a
broken one consistent), the mean and median draws (both inputs, step 1 included) and the mean
fresh draws per input.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
from _machine import machine_info
from _results import since, study_parser, write_rows

from auditlib import seeds
from auditlib.mpl.coverage import known_mechanism
from auditlib.mpl.sequential import Claim, SequentialResult, sequential_mpl, sequential_tradeoff
from auditlib.mpl.tradeoff_coverage import known_tradeoff

SEQUENTIAL_STUDY = 41  # stream id
TOL, CONF = 0.2, 0.95
CURVE = {"n_select": 20_000, "batch": 5_000, "max_n": 320_000}
MPL = {"n": 20_000, "batch": 6_250, "max_n": 200_000}
CURVE_CELLS: list[tuple[str, str]] = [
    ("gaussian", "mu"),
    ("gaussian_broken", "mu"),
    ("laplace", "epsilon"),
    ("laplace_broken", "epsilon"),
    ("randomized_response", "epsilon"),
    ("randomized_response_broken", "epsilon"),
    ("dg_count", "mu"),
    ("dg_count_broken", "mu"),
]
MPL_CELLS = [
    "laplace",
    "laplace_broken",
    "randomized_response_k4",
    "randomized_response_broken",
    "geometric_count",
]


def _curve_run(
    name: str, parameter: str, batch: int, band: str, rng: np.random.Generator
) -> SequentialResult:
    k = known_tradeoff(name, 1.0)
    value = k.claimed_mu if parameter == "mu" else k.claimed_epsilon
    return sequential_tradeoff(
        k.mechanism,
        k.x,
        k.x_prime,
        Claim(parameter, value),  # type: ignore[arg-type]
        n_select=CURVE["n_select"],
        batch=batch,
        max_n=CURVE["max_n"],
        rng=rng,
        conf=CONF,
        band=band,  # type: ignore[arg-type]
        tolerance=TOL,
    )


def _mpl_run(name: str, batch: int, rng: np.random.Generator) -> SequentialResult:
    e = known_mechanism(name, 0.7)
    return sequential_mpl(
        e.mechanism,
        e.pairs,
        0.7,
        n=MPL["n"],
        batch=batch,
        max_n=MPL["max_n"],
        region=e.region,
        rng=rng,
        alpha=1.0 - CONF,
        tolerance=TOL,
    )


def _row(
    mode: str, name: str, method: str, broken: bool, res: list[SequentialResult]
) -> dict[str, Any]:
    dec = np.array([r.decision for r in res])
    draws = np.array([r.draws for r in res], dtype=np.float64)
    wrong = "consistent" if broken else "refuted"
    return {
        "mode": mode,
        "mechanism": name,
        "method": method,
        "broken": broken,
        "reps": len(res),
        "refuted": float(np.mean(dec == "refuted")),
        "consistent": float(np.mean(dec == "consistent")),
        "undecided": float(np.mean(dec == "undecided")),
        "wrong_rate": float(np.mean(dec == wrong)),
        "mean_draws": float(draws.mean()),
        "median_draws": float(np.median(draws)),
        "mean_fresh_per_input": float(np.mean([r.n for r in res])),
        "mean_lower_at_stop": float(np.mean([r.lower for r in res])),
    }


#: method -> (batch, band) of the curve audits; "mixture": confidence sequences, no union bound
CURVE_METHODS = {
    "sequential": (CURVE["batch"], "clopper-pearson"),
    "fixed": (CURVE["max_n"], "clopper-pearson"),
    "mixture": (CURVE["batch"], "mixture"),
}


def run(reps: int, out: Path, seed: int, modes: list[str], methods: list[str]) -> None:
    print(machine_info(), flush=True)
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for ci, (name, parameter) in enumerate(CURVE_CELLS if "curve" in modes else []):
        for mi, method in enumerate(CURVE_METHODS):
            if method not in methods:
                continue
            batch, band = CURVE_METHODS[method]
            res = [
                _curve_run(
                    name, parameter, batch, band, seeds.rng(seed, SEQUENTIAL_STUDY, 0, ci, mi, r)
                )
                for r in range(reps)
            ]
            rows.append(_row("curve", name, method, name.endswith("broken"), res))
        _report(rows, t0)
    for ci, name in enumerate(MPL_CELLS if "mpl" in modes else []):
        for mi, (method, batch) in enumerate(
            (("sequential", MPL["batch"]), ("fixed", MPL["max_n"]))
        ):
            if method not in methods:
                continue
            res = [
                _mpl_run(name, batch, seeds.rng(seed, SEQUENTIAL_STUDY, 1, ci, mi, r))
                for r in range(reps)
            ]
            rows.append(_row("mpl", name, method, name.endswith("broken"), res))
        _report(rows, t0)
    print(f"{write_rows(out, rows)}; {since(t0)}")


def _report(rows: list[dict[str, Any]], t0: float) -> None:
    for r in rows[-2:]:
        print(
            f"{r['mode']} {r['mechanism']} {r['method']}: refuted {r['refuted']:.3f} consistent "
            f"{r['consistent']:.3f} undecided {r['undecided']:.3f} wrong {r['wrong_rate']:.3f} "
            f"draws mean {r['mean_draws']:.0f} median {r['median_draws']:.0f}",
            flush=True,
        )
    print(f"  ({time.perf_counter() - t0:.0f} s)", flush=True)


def main() -> None:
    ap = study_parser(__doc__, reps=200, seed=2026, table="fdp_sequential.csv")
    ap.add_argument("--modes", default="curve,mpl", help="comma-separated: curve, mpl")
    ap.add_argument(
        "--methods",
        default="sequential,fixed",
        help="comma-separated: sequential, fixed, mixture (curve only: confidence sequences)",
    )
    a = ap.parse_args()
    run(a.reps, a.out, a.seed, a.modes.split(","), a.methods.split(","))


if __name__ == "__main__":
    main()
