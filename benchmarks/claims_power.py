"""Power of the claim verdict: the smallest misclaim refuted with 80 % power, and false refutations.

One level of a published release: R runs × C cells of a sensitivity-1 count query under add/remove
neighbours, so R·C residuals of the real noise, judged as :func:`auditlib.claims.judge_residuals`
judges them (two tests at α/m, α = 0.05, m = 2; δ = 1e-10). Per mechanism family the real noise is
fixed (discrete Gaussian σ² = 4 and Gaussian σ = 2: ε ≈ 3.10; geometric and Laplace b = 1: ε ≈ 1)
and the declared one is the noise whose exact ε(δ) is ρ × the real ε (ρ = declared ε / real ε;
``calibrate_mixed``'s certified factor, its upper end). ρ = 1 is the true claim.

    PYTHONPATH=. python benchmarks/claims_power.py [--seeds 200] [--true-seeds 1000] [--check 32]

For each family, (R, C) in {1, 5, 20, 50} × {100, 437, 2000} and seed, one release's residuals are
drawn with dpaudit's samplers and judged against every ρ of the grid (the same residuals for every
claim, and the fit test's randomization drawn from the same seed: but for the fitted scale's last
bits, a release refuted at ρ is refuted at every smaller ρ); ``--seeds`` releases per cell for the misclaims, ``--true-seeds`` (the first
``--seeds`` of them the same releases) for the true claim, whose false-refutation rate is bounded
per cell. The decision is computed by the verdict's own pieces without the ε interval's
two accountant calls per verdict: the fit test (``fitted_factor``, ``FitCounts``, ``fit_test``)
first, then the scale test's Z(1) (``residual_tests._z_of``), and for a claim neither test rejects
the ε interval's upper end against 2 × the declared ε, decided by Z at the two ends of a bracket on
the variance factor where that end crosses 2 × ε (found once per claim by the accountant itself;
between them, or on any doubt, ``scale_test`` and ``epsilon_interval`` are called). ``--check``
releases per family (a quarter nearest the scale test's threshold, a quarter nearest the fit
test's, the rest at random) are judged again by ``judge_residuals`` itself; every verdict must
agree.

Writes ``benchmarks/results/claims_power.csv`` (per family, R, C and ρ: the verdicts' counts, the
refutation rate with its one-sided 95 % Clopper–Pearson upper bound), ``claims_power_summary.csv``
(per family, R and C: the false-refutation rate, the share of true claims read consistent, the
largest ρ refuted with ≥ 80 % power, on the grid and interpolated) and ``claims_power.json`` (the
machine, commit, CPU time, the claims and the check).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from _machine import machine_info
from scipy import optimize, stats

from auditlib.accounting import (
    DiscreteGaussianLoss,
    GaussianLoss,
    GeometricLoss,
    LaplaceLoss,
    PrivacyLossComposition,
)
from auditlib.accounting.calibrate import calibrate_mixed, scale_components
from auditlib.claims import (
    RESOLVE_RATIO,
    FitCounts,
    LawMoments,
    NoiseLaw,
    epsilon_interval,
    fit_test,
    fitted_factor,
    judge_residuals,
    scale_test,
)
from auditlib.claims.residual_tests import _z_of
from auditlib.simulate.noise import NoiseVariance, noise_sampler

HERE = Path(__file__).resolve().parent
FAMILIES: dict[str, NoiseLaw] = {
    "discrete_gaussian": NoiseLaw("discrete_gaussian", 4.0),
    "geometric": NoiseLaw("geometric", 1.0),
    "laplace": NoiseLaw("laplace", 1.0),
    "gaussian": NoiseLaw("gaussian", 2.0),
}
RUNS = (1, 5, 20, 50)
CELLS = (100, 437, 2000)
#: declared ε / real ε; 1 is the true claim
RHOS = (1.0, 0.995, 0.99, 0.985, 0.98, 0.97, 0.96, 0.95, 0.925, 0.9, 0.85, 0.8, 0.75, 0.7, 0.6, 0.5)
ALPHA, TESTS, DELTA, POWER = 0.05, 2, 1e-10, 0.8
THRESHOLD = ALPHA / TESTS
Q = float(stats.norm.ppf(1.0 - THRESHOLD))
#: verdict codes
REFUTED, CONSISTENT, UNDECIDED_FIT, UNDECIDED_WIDTH = 0, 1, 2, 3
CODES = ("refuted", "consistent", "undecided_fit", "undecided_width")


def draw(law: NoiseLaw, n: int, rng: np.random.Generator) -> np.ndarray:
    """n draws of ``law`` by dpaudit's samplers (as the simulation draws a release's noise)."""
    if law.mechanism == "discrete_gaussian":
        return np.asarray(noise_sampler(law.parameter).rvs(n, rng), dtype=np.float64)
    sampler = noise_sampler(NoiseVariance(law.mechanism, law.parameter))
    return np.asarray(sampler.rvs(n, rng), dtype=np.float64)


def loss(law: NoiseLaw) -> Any:
    """The accountant's component of one sensitivity-1 query with this noise."""
    p = law.parameter
    if law.mechanism == "discrete_gaussian":
        return DiscreteGaussianLoss(p, 1)
    if law.mechanism == "geometric":
        return GeometricLoss(1.0 / p, 1)
    if law.mechanism == "laplace":
        return LaplaceLoss(p, 1)
    return GaussianLoss(p, 1)


def exact_eps(component: Any) -> float:
    return float(PrivacyLossComposition([component]).epsilon(DELTA).upper)


def gaussian_eps(sigma: float) -> float:
    """ε(δ) of the continuous Gaussian mechanism (sensitivity 1), Balle & Wang's exact curve."""

    def d(e: float) -> float:
        a, b = 0.5 / sigma - e * sigma, -0.5 / sigma - e * sigma
        return float(stats.norm.cdf(a) - math.exp(e) * stats.norm.cdf(b)) - DELTA

    return float(optimize.brentq(d, 0.0, 200.0, xtol=1e-14))


def approx_eps(law: NoiseLaw) -> float:
    """A closed-form ε(δ) near the accountant's: a starting point, never a decision."""
    if law.mechanism == "discrete_gaussian":
        return gaussian_eps(math.sqrt(law.parameter))
    if law.mechanism == "gaussian":
        return gaussian_eps(law.parameter)
    return 1.0 / law.parameter  # Laplace, geometric: ε₀ = 1/b, δ(ε₀) = 0


@dataclass
class Claim:
    """A declared claim: ρ, its variance factor, law, accounting component and exact ε; ``width``
    brackets the factor k at which the ε interval's upper end crosses 2 × ε (above ``width[0]``'s
    end: undecided; at or below ``width[1]``'s: not)."""

    rho_target: float
    factor: float
    law: NoiseLaw
    component: Any
    eps: float
    width: tuple[float, float] = (0.0, 0.0)
    accountant_calls: int = 0


def make_claim(real: NoiseLaw, real_eps: float, rho: float) -> Claim:
    comp = loss(real)
    if rho == 1.0:
        c, law, eps = 1.0, real, real_eps
    else:
        cal = calibrate_mixed([comp], DELTA, rho * real_eps)
        c = float(cal.factor.upper)
        law = real.scaled(c)
        (comp,) = scale_components([comp], c)
        eps = exact_eps(comp)
    claim = Claim(rho, c, law, comp, eps)
    claim.width = width_bracket(claim)
    return claim


def width_bracket(claim: Claim, rel: float = 1e-4) -> tuple[float, float]:
    """(k_a, k_b), k_b / k_a − 1 ≤ ``rel``: the judge's ε upper end at k_a exceeds 2 × ε, at k_b
    it does not (evaluated by :func:`epsilon_interval` itself, as the verdict does)."""
    target = RESOLVE_RATIO * claim.eps

    def g(k: float) -> float:
        claim.accountant_calls += 1
        return epsilon_interval([claim.component], DELTA, k, math.inf)[1]

    def over(k: float) -> bool:
        return not g(k) <= target

    t0 = float(
        optimize.brentq(
            lambda t: approx_eps(claim.law.scaled(math.exp(t))) - target, -6.0, 6.0, xtol=1e-13
        )
    )
    k0 = math.exp(t0)
    w = 1e-6
    while not over(lo := k0 * (1.0 - w)):
        w *= 4.0
        if w >= 1.0:
            raise RuntimeError(f"no lower end for {claim}")
    w = 1e-6
    while over(hi := k0 * (1.0 + w)):
        w *= 4.0
        if w > 1e3:
            raise RuntimeError(f"no upper end for {claim}")
    while hi / lo - 1.0 > rel:
        mid = math.sqrt(lo * hi)
        if over(mid):
            lo = mid
        else:
            hi = mid
    return lo, hi


def fast_verdict(
    m_real: LawMoments, r: np.ndarray, claim: Claim, fit_seed: list[int]
) -> tuple[int, float, float, bool]:
    """(code, scale p, fit p, exact): the verdict ``judge_residuals`` gives ``r`` against
    ``claim`` with ``rng = default_rng(fit_seed)``, without the ε interval unless it is needed."""
    m = dataclasses.replace(m_real, law=claim.law)
    fitted = claim.law.scaled(fitted_factor(m))
    fit = fit_test(FitCounts().add(r, fitted, np.random.default_rng(fit_seed))).p_value
    _, z = _z_of([m])
    p = float(stats.norm.cdf(z(1.0)))
    if fit < THRESHOLD:
        return UNDECIDED_FIT, p, fit, False
    if p < THRESHOLD:
        return REFUTED, p, fit, False
    lo, hi = claim.width
    if z(lo) < Q:  # k_low < lo: the ε interval's upper end is above 2 × ε
        return UNDECIDED_WIDTH, p, fit, False
    if z(hi) > Q:  # k_low > hi: at or below it
        return CONSISTENT, p, fit, False
    t = scale_test([m], 1.0 - THRESHOLD)
    claim.accountant_calls += 2
    upper = epsilon_interval([claim.component], DELTA, t.k_low, t.k_high)[1]
    return (CONSISTENT if upper <= RESOLVE_RATIO * claim.eps else UNDECIDED_WIDTH), p, fit, True


def judged(r: np.ndarray, claim: Claim, fit_seed: list[int]) -> int:
    """The verdict code of ``judge_residuals`` itself."""
    v = judge_residuals(
        [(claim.law, r)],
        [claim.component],
        delta=DELTA,
        declared_eps=claim.eps,
        threshold=THRESHOLD,
        geolevel="L",
        rng=np.random.default_rng(fit_seed),
    )
    if v.verdict == "undecided":
        return UNDECIDED_FIT if v.evidence.get("test") == "fit" else UNDECIDED_WIDTH
    return REFUTED if v.verdict == "refuted" else CONSISTENT


def cp_upper(k: int, n: int, conf: float = 0.95) -> float:
    """One-sided Clopper–Pearson upper bound on a binomial rate."""
    return 1.0 if k >= n else float(stats.beta.ppf(conf, k + 1, n - k))


def rho80(power: dict[float, float]) -> tuple[str, float]:
    """(on the grid, interpolated): the largest ρ < 1 refuted with ≥ 80 % power with every smaller
    grid ρ too, and the ρ where linear interpolation of the power between it and the next grid ρ
    crosses 80 % (NaN when no grid ρ, or the largest, reaches it)."""
    rs = sorted(power)  # ascending
    best = None
    for i in range(len(rs)):
        if all(power[x] >= POWER for x in rs[: i + 1]):
            best = i
    if best is None:
        return f"<{rs[0]:g}", math.nan
    if best == len(rs) - 1:
        return f">={rs[-1]:g}", math.nan
    a, b = rs[best], rs[best + 1]
    pa, pb = power[a], power[b]
    return f"{a:g}", a + (pa - POWER) / (pa - pb) * (b - a)


def commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True
        )
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def run(seeds: int, true_seeds: int, check: int, base: int, out: Path, families: list[str]) -> None:
    print(machine_info(), flush=True)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    grid = [(r, c) for r in RUNS for c in CELLS]
    rows: list[dict[str, Any]] = []
    summary: list[dict[str, Any]] = []
    meta: dict[str, Any] = {"families": {}, "check": {}}
    checked = mismatched = exact_total = 0
    mismatches: list[dict[str, Any]] = []
    for fi, fam in enumerate(FAMILIES):
        if fam not in families:
            continue
        real = FAMILIES[fam]
        real_eps = exact_eps(loss(real))
        t = time.process_time()
        claims = [make_claim(real, real_eps, rho) for rho in RHOS]
        cal_cpu = time.process_time() - t
        print(
            f"{fam}: real {real.describe()}, ε(1e-10) = {real_eps:.6f}; claims "
            + ", ".join(f"ρ {c.rho_target:g}: ×{c.factor:.4f}" for c in claims)
            + f" ({cal_cpu:.1f} CPU-s)",
            flush=True,
        )
        total = max(seeds, true_seeds)
        codes = np.full((len(grid), len(RHOS), total), -1, np.int8)  # -1: not judged
        pval = np.full((len(grid), len(RHOS), total, 2), np.nan)
        exact = 0
        t = time.process_time()
        for gi, (runs, cells) in enumerate(grid):
            n = runs * cells
            for s in range(total):
                r = draw(real, n, np.random.default_rng([base, fi, gi, s, 0]))
                m_real = LawMoments(real).add(r)
                for ri, claim in enumerate(claims):
                    if s >= (true_seeds if claim.rho_target == 1.0 else seeds):
                        continue
                    code, p, fp, ex = fast_verdict(m_real, r, claim, [base, fi, gi, s, 1])
                    codes[gi, ri, s] = code
                    pval[gi, ri, s] = p, fp
                    exact += ex
        grid_cpu = time.process_time() - t
        exact_total += exact
        # the check: judge_residuals itself on a subsample
        t = time.process_time()
        judged_at = np.flatnonzero(codes.ravel() >= 0)
        pick = np.random.default_rng([base, fi, 99]).permutation(judged_at)
        flat_p = pval[..., 0].ravel()[judged_at]
        flat_f = pval[..., 1].ravel()[judged_at]
        near_scale = judged_at[np.argsort(np.abs(np.log(flat_p + 1e-300) - math.log(THRESHOLD)))]
        near_fit = judged_at[np.argsort(np.abs(np.log(flat_f + 1e-300) - math.log(THRESHOLD)))]
        chosen: list[int] = []
        for src, k in ((near_scale, check // 4), (near_fit, check // 4), (pick, check)):
            for idx in src:
                if len(chosen) >= check or k == 0:
                    break
                if int(idx) not in chosen:
                    chosen.append(int(idx))
                    k -= 1
        fam_checked = fam_mismatched = 0
        by_verdict = dict.fromkeys(CODES, 0)
        for idx in chosen:
            cg, cr, cs = (int(x) for x in np.unravel_index(idx, codes.shape))
            runs, cells = grid[cg]
            r = draw(real, runs * cells, np.random.default_rng([base, fi, cg, cs, 0]))
            want = judged(r, claims[cr], [base, fi, cg, cs, 1])
            fam_checked += 1
            by_verdict[CODES[want]] += 1
            if want != codes[cg, cr, cs]:
                fam_mismatched += 1
                mismatches.append(
                    {
                        "family": fam,
                        "R": runs,
                        "C": cells,
                        "rho": RHOS[cr],
                        "seed": cs,
                        "judge": CODES[want],
                        "fast": CODES[codes[cg, cr, cs]],
                    }
                )
        check_cpu = time.process_time() - t
        checked += fam_checked
        mismatched += fam_mismatched
        print(
            f"  grid {grid_cpu:.1f} CPU-s ({exact} verdicts needed the ε interval); check: "
            f"{fam_checked} verdicts by judge_residuals, {fam_mismatched} differ "
            f"({check_cpu:.1f} CPU-s)",
            flush=True,
        )
        meta["families"][fam] = {
            "real": real.describe(),
            "real_eps": real_eps,
            "claims": [
                {
                    "rho_target": c.rho_target,
                    "rho": c.eps / real_eps,
                    "factor": c.factor,
                    "declared": c.law.describe(),
                    "declared_eps": c.eps,
                    "width_bracket": list(c.width),
                    "accountant_calls": c.accountant_calls,
                }
                for c in claims
            ],
            "cpu_s": {"claims": cal_cpu, "grid": grid_cpu, "check": check_cpu},
            "verdicts_with_eps_interval": exact,
            "checked": fam_checked,
            "checked_by_verdict": by_verdict,
            "check_mismatches": fam_mismatched,
        }
        # rows
        for gi, (runs, cells) in enumerate(grid):
            power: dict[float, float] = {}
            for ri, claim in enumerate(claims):
                done = codes[gi, ri][codes[gi, ri] >= 0]
                cnt = np.bincount(done, minlength=4)
                ref, k = int(cnt[REFUTED]), int(done.size)
                rows.append(
                    {
                        "family": fam,
                        "real": real.describe(),
                        "real_eps": real_eps,
                        "R": runs,
                        "C": cells,
                        "n": runs * cells,
                        "rho_target": claim.rho_target,
                        "rho": claim.eps / real_eps,
                        "variance_factor": claim.factor,
                        "declared": claim.law.describe(),
                        "declared_eps": claim.eps,
                        "seeds": k,
                        **{CODES[j]: int(cnt[j]) for j in range(4)},
                        "refuted_rate": ref / k,
                        "refuted_upper95": cp_upper(ref, k),
                    }
                )
                if claim.rho_target < 1.0:
                    power[claim.rho_target] = ref / k
            true = np.bincount(codes[gi, 0, :true_seeds], minlength=4)
            grid_rho, interp = rho80(power)
            summary.append(
                {
                    "family": fam,
                    "R": runs,
                    "C": cells,
                    "n": runs * cells,
                    "true_seeds": true_seeds,
                    "false_refuted": int(true[REFUTED]),
                    "false_refutation_rate": true[REFUTED] / true_seeds,
                    "false_refutation_upper95": cp_upper(int(true[REFUTED]), true_seeds),
                    "true_consistent": true[CONSISTENT] / true_seeds,
                    "true_undecided_fit": true[UNDECIDED_FIT] / true_seeds,
                    "true_undecided_width": true[UNDECIDED_WIDTH] / true_seeds,
                    "misclaim_seeds": seeds,
                    "rho80_grid": grid_rho,
                    "rho80_interpolated": interp,
                    **{f"power_{rho:g}": power[rho] for rho in sorted(power, reverse=True)},
                }
            )
        pooled = np.bincount(codes[:, 0, :true_seeds].ravel(), minlength=4)
        tot = len(grid) * true_seeds
        summary.append(
            {
                "family": fam,
                "R": "all",
                "C": "all",
                "n": "all",
                "true_seeds": tot,
                "false_refuted": int(pooled[REFUTED]),
                "false_refutation_rate": pooled[REFUTED] / tot,
                "false_refutation_upper95": cp_upper(int(pooled[REFUTED]), tot),
                "true_consistent": pooled[CONSISTENT] / tot,
                "true_undecided_fit": pooled[UNDECIDED_FIT] / tot,
                "true_undecided_width": pooled[UNDECIDED_WIDTH] / tot,
                "misclaim_seeds": len(grid) * seeds,
                "rho80_grid": "",
                "rho80_interpolated": math.nan,
            }
        )
        for row in summary[-len(grid) - 1 :]:
            print(
                f"  R {row['R']!s:>3} C {row['C']!s:>4} n {row['n']!s:>6}: false refutation "
                f"{row['false_refuted']}/{row['true_seeds']} (≤ {row['false_refutation_upper95']:.3f})"
                f", consistent {row['true_consistent']:.3f}; ρ80 {row['rho80_grid']} "
                f"({row['rho80_interpolated']:.3f})",
                flush=True,
            )
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    meta["check"] = {
        "checked": checked,
        "mismatches": mismatched,
        "detail": mismatches,
        "verdicts_with_eps_interval": exact_total,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    write_csv(out, rows)
    write_csv(out.with_name(out.stem + "_summary.csv"), summary)
    info = {
        "measured_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "commit": commit(),
        "command": " ".join(["python benchmarks/claims_power.py", *sys.argv[1:]]),
        "seeds": seeds,
        "true_seeds": true_seeds,
        "alpha": ALPHA,
        "tests": TESTS,
        "delta": DELTA,
        "cpu_s": round(cpu, 1),
        "wall_s": round(wall, 1),
        **meta,
    }
    out.with_suffix(".json").write_text(json.dumps(info, indent=1, default=float) + "\n")
    print(
        f"{len(rows)} rows -> {out}; checked {checked} verdicts by judge_residuals, "
        f"{mismatched} differ; {cpu:.0f} CPU-s, {wall:.0f} s wall",
        flush=True,
    )


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    fields: list[str] = []
    for row in rows:
        fields += [k for k in row if k not in fields]
    fmt: Callable[[Any], Any] = lambda v: f"{v:.6g}" if isinstance(v, float) else v  # noqa: E731
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        for row in rows:
            w.writerow({k: fmt(v) for k, v in row.items()})


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--seeds", type=int, default=200, help="releases per (family, R, C, ρ)")
    ap.add_argument(
        "--true-seeds", type=int, default=1000, help="releases per (family, R, C) of the true claim"
    )
    ap.add_argument(
        "--check", type=int, default=32, help="verdicts per family re-judged by judge_residuals"
    )
    ap.add_argument("--seed", type=int, default=28, help="the base of every generator's seed")
    ap.add_argument("--families", default=",".join(FAMILIES), help="comma-separated")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "claims_power.csv")
    a = ap.parse_args()
    fams = [f for f in a.families.split(",") if f]
    unknown = set(fams) - set(FAMILIES)
    if unknown:
        ap.error(f"unknown families: {', '.join(sorted(unknown))}")
    run(a.seeds, a.true_seeds, a.check, a.seed, a.out, fams)


if __name__ == "__main__":
    main()
