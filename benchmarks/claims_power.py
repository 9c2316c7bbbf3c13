"""Power of the claim verdict: the smallest misclaim refuted with 80 % power, and false refutations.

One level of a published release: R runs × C cells of a sensitivity-1 count query under add/remove
neighbours, so R·C residuals of the real noise, judged as :func:`auditlib.claims.judge_residuals`
judges them (three tests at α/m, α = 0.05, m = ``TESTS_PER_LEVEL`` = 3; δ = 1e-10): the trade-off
test (a certified f-DP point of the residuals below the declared law's curve: refuted), the fit
test (rejects: undecided), the scale test (rejects and the ε interval's lower end lies above the
declared ε: refuted; rejects but it does not: undecided), and ``consistent`` when the interval's
upper end is within ``RESOLVE_RATIO`` (1.25) × the declared ε. Per mechanism family the real noise
is fixed (discrete Gaussian σ² = 4 and Gaussian σ = 2: ε ≈ 3.10; geometric and Laplace b = 1:
ε ≈ 1) and the declared one is the noise whose exact ε(δ) is ρ × the real ε (ρ = declared ε / real
ε; ``calibrate_mixed``'s certified factor, its upper end). ρ = 1 is the true claim.

    PYTHONPATH=. python benchmarks/claims_power.py [--seeds 200] [--true-seeds 1000] [--check 40]

For each family, (R, C) in ``GRID`` and seed, one release's residuals are drawn with dpaudit's
samplers and judged against every ρ of ``RHOS`` (the same residuals for every claim, and the fit
test's randomization and the trade-off test's permutation drawn from the same seed);
``--seeds`` releases per cell for the misclaims, ``--true-seeds`` (the first ``--seeds`` of them
the same releases) for the true claim, whose false-refutation rate is bounded per cell.

The decision is computed by the verdict's own pieces without the ε interval's accountant calls
(up to 42 per verdict for the discrete Gaussian, 2 of 0.7 CPU-s each for the Gaussian) and without
evaluating the declared trade-off curve per verdict (0.2–0.4 CPU-s for Laplace and Gaussian):

* the trade-off test's certified points do not depend on the declared law (only on its family's
  kind), so they are computed once per release (``tradeoff_from_samples`` on the permutation
  ``judge_residuals`` draws after the fit test's randomization); the declared curve's certified
  lower end, non-increasing in α, is tabulated once per claim on ``ALPHA_GRID``, which decides
  ``below`` unless a point's β lies between the curve's values at its α's grid neighbours, where
  ``tradeoff`` is called on the release's points;
* the fit test (``fitted_factor``, ``FitCounts``, ``fit_test``) as ``judge_residuals`` runs it;
* the scale test's Z (``residual_tests._z_of``), decreasing in the variance factor k: Z(1) gives
  its p-value, and Z at the ends of two brackets per claim places the factor interval's ends
  against the two crossings the rule needs — the ε interval's lower end at k_high against the
  declared ε, its upper end at k_low against 1.25 × it. For Laplace, Gaussian (ε monotone in the
  factor) each bracket is found by the accountant (a secant step on ln ε, then both ends checked,
  relative width ~1e-5); for the discrete Gaussian, whose ε is not monotone in σ², and the
  geometric, the pointwise ε bracket is tabulated on a geometric factor grid (step 1e-3) and the
  brackets are where every factor below (above) is surely on one side, with a margin twice the
  largest step of ln ε between neighbours nearby, over the rule's 10 % span beyond the interval's ends
  (``verdict.WIGGLE``). Between a bracket's ends (or outside the tabulated factors)
  ``scale_test`` and ``epsilon_interval`` are called.

``--check`` releases per family (a fifth each nearest the scale test's threshold, the fit test's,
the trade-off test's zero margin, and among the verdicts that needed the exact pieces; the rest
at random) are judged again by ``judge_residuals`` itself; every verdict must agree.

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
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
from _machine import commit, machine_info
from scipy import stats
from scipy.ndimage import maximum_filter1d

from auditlib.accounting import (
    DiscreteGaussianLoss,
    GaussianLoss,
    GeometricLoss,
    LaplaceLoss,
    PrivacyLossComposition,
    tradeoff,
)
from auditlib.accounting.calibrate import calibrate_mixed, scale_components
from auditlib.claims import (
    RESOLVE_RATIO,
    TESTS_PER_LEVEL,
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
from auditlib.claims.tradeoff_test import MAX_PER_PART, MIN_RESIDUALS, _one_count
from auditlib.claims.verdict import WIGGLE
from auditlib.mpl.tradeoff_lower import TradeoffPoints, tradeoff_from_samples
from auditlib.simulate.noise import NoiseVariance, noise_sampler

HERE = Path(__file__).resolve().parent
FAMILIES: dict[str, NoiseLaw] = {
    "discrete_gaussian": NoiseLaw("discrete_gaussian", 4.0),
    "geometric": NoiseLaw("geometric", 1.0),
    "laplace": NoiseLaw("laplace", 1.0),
    "gaussian": NoiseLaw("gaussian", 2.0),
}
#: families whose accountant is cheap enough to tabulate ε over a factor grid
TABULATED = ("discrete_gaussian", "geometric")
#: (runs R, cells C)
GRID = ((1, 100), (1, 437), (5, 437), (20, 437), (20, 2000))
#: declared ε / real ε; 1 is the true claim
RHOS = (1.0, 0.99, 0.98, 0.95, 0.9, 0.85, 0.8, 0.7, 0.5)
ALPHA, DELTA, POWER = 0.05, 1e-10, 0.8
TESTS = TESTS_PER_LEVEL
THRESHOLD = ALPHA / TESTS
Q = float(stats.norm.ppf(1.0 - THRESHOLD))
#: verdict codes
REFUTED_TRADEOFF, REFUTED_SCALE, CONSISTENT, UNDECIDED_FIT, UNDECIDED_SCALE, UNDECIDED_WIDTH = (
    range(6)
)
CODES = (
    "refuted_tradeoff",
    "refuted_scale",
    "consistent",
    "undecided_fit",
    "undecided_scale",
    "undecided_width",
)
#: the declared curve's tabulated type I errors (dense near 0, where it is steep)
ALPHA_GRID = np.unique(
    np.concatenate([[0.0, 1.0], np.geomspace(1e-7, 0.02, 600), np.linspace(0.0, 1.0, 1201)])
)
#: the factor grid of tabulated families: k from K_GRID[0] to K_GRID[1], step ``K_STEP`` in ln k
K_GRID, K_STEP = (0.05, 6.0), 1e-3


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


def eps_at(component: Any, k: float) -> tuple[float, float]:
    """(lower, upper) of ε(δ) at the variance factor k, evaluated as :func:`epsilon_interval`
    evaluates each of its factors (the factor rounded to a denominator ≤ 2²⁰)."""
    kf = float(Fraction(k).limit_denominator(1 << 20)) or k
    b = PrivacyLossComposition(scale_components([component], kf)).epsilon(DELTA)
    return float(b.lower), float(b.upper)


@dataclass
class Claim:
    """A declared claim: ρ, its variance factor, law, accounting component and exact ε.

    ``low`` = (a, b): the ε interval's lower end is surely above ε when k_high ≤ a, surely not
    when k_high ≥ b; ``high`` = (a, b): its upper end is surely above 1.25 × ε when k_low ≤ a,
    surely not when k_low ≥ b (None: no such factor). Both hold for factors within ``valid``.
    ``curve``: the declared trade-off curve's certified lower end on ``ALPHA_GRID``."""

    rho_target: float
    factor: float
    law: NoiseLaw
    component: Any
    eps: float
    low: tuple[float | None, float | None] = (None, None)
    high: tuple[float | None, float | None] = (None, None)
    valid: tuple[float, float] = (0.0, math.inf)
    curve: np.ndarray = field(default_factory=lambda: np.zeros(0))
    accountant_calls: int = 0
    roots: list[float] = field(default_factory=list)
    cpu_s: float = 0.0


def make_claim(real: NoiseLaw, real_eps: float, rho: float, tabulated: bool) -> Claim:
    t = time.process_time()
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
    if tabulated:
        tabulate_brackets(claim)
    else:
        claim.low = secant_bracket(claim, 0, claim.eps, 1.0)
        claim.high = secant_bracket(claim, 1, RESOLVE_RATIO * claim.eps, RESOLVE_RATIO**-2)
    a = np.asarray(tradeoff(_one_count(law), ALPHA_GRID).lower, dtype=np.float64)
    claim.curve = a
    claim.cpu_s = time.process_time() - t
    return claim


def secant_bracket(claim: Claim, end: int, target: float, k0: float) -> tuple[float, float]:
    """(a, b), b / a − 1 ~ 1e-5: the ``end`` (0 lower, 1 upper) of ε at factor a is above
    ``target``, at b it is not (ε decreasing in the factor: Laplace, Gaussian)."""

    def f(k: float) -> float:
        claim.accountant_calls += 1
        return eps_at(claim.component, k)[end]

    k, fk = k0, f(k0)
    prev: tuple[float, float] | None = None
    for _ in range(12):
        if abs(math.log(fk / target)) < 2e-6:
            break
        slope = -0.5 if prev is None else (math.log(fk / prev[1]) / math.log(k / prev[0]))
        if not slope < -0.05:
            slope = -0.5
        prev = (k, fk)
        k = k * math.exp(math.log(target / fk) / slope)
        fk = f(k)
    w = 5e-6
    while w < 1.0:
        a, b = k * (1.0 - w), k * (1.0 + w)
        if f(a) > target and not f(b) > target:
            return a, b
        w *= 4.0
    raise RuntimeError(f"no bracket for {claim.law} at ε {target}")


def tabulate_brackets(claim: Claim) -> None:
    """The brackets of a family with a cheap accountant, from ε tabulated over the factor grid
    (no monotonicity assumed: each side's sure zone is where every tabulated factor is on it,
    with a margin twice the largest step of ln ε between grid neighbours nearby)."""
    ks = np.exp(np.arange(math.log(K_GRID[0]), math.log(K_GRID[1]), K_STEP))
    vals = np.array([eps_at(claim.component, float(k)) for k in ks])
    claim.accountant_calls += ks.size
    lo, up = vals[:, 0], vals[:, 1]

    def sides(f: np.ndarray, target: float) -> tuple[float | None, float | None]:
        # each grid factor's margin: twice the largest step of ln ε within 8 neighbours
        d = np.abs(np.diff(np.log(f)))
        m = 2.0 * maximum_filter1d(np.maximum(np.r_[d, 0.0], np.r_[0.0, d]), 17) + 1e-12
        above = f > target * np.exp(m)
        below = f < target * np.exp(-m)
        first_not_above = int(np.argmin(above)) if not above.all() else ks.size
        a = float(ks[first_not_above - 1]) if first_not_above > 0 else None
        last_not_below = ks.size - 1 - int(np.argmin(below[::-1])) if not below.all() else -1
        b = float(ks[last_not_below + 1]) if last_not_below + 1 < ks.size else None
        return a, b

    claim.low = sides(lo, claim.eps)
    claim.high = sides(up, RESOLVE_RATIO * claim.eps)
    # the rule's span: k_high's goes down to (1 − WIGGLE)·k_high, k_low's up to (1 + WIGGLE)·k_low
    claim.valid = (float(ks[0]) / (1.0 - WIGGLE) * 1.01, float(ks[-1]) / (1.0 + WIGGLE) / 1.01)


def calibration_roots(real: NoiseLaw, real_eps: float, rho: float) -> list[float]:
    """Every variance factor c ≥ 1 (to 5) at which the declared noise's exact ε equals ρ × the
    real ε, located to the tabulation step (the discrete Gaussian's ε is not monotone in σ²)."""
    comp = loss(real)
    cs = np.exp(np.arange(0.0, math.log(5.0), K_STEP))
    e = np.array([eps_at(comp, float(c))[1] for c in cs]) - rho * real_eps
    flips = np.flatnonzero(np.sign(e[:-1]) != np.sign(e[1:]))
    return [float(math.sqrt(cs[i] * cs[i + 1])) for i in flips]


def release_points(law: NoiseLaw, r: np.ndarray, seed: list[int]) -> TradeoffPoints | None:
    """The trade-off test's certified points on ``r`` as ``judge_residuals`` draws them: the fit
    test's randomization first (one uniform per residual under a lattice law), then the
    permutation; ``None`` below ``MIN_RESIDUALS``."""
    if r.size < MIN_RESIDUALS:
        return None
    rng = np.random.default_rng(seed)
    if law.discrete:
        rng.random(r.size)
    perm = rng.permutation(np.concatenate([r.ravel()]))
    m = min(perm.size // 4, MAX_PER_PART)
    parts = [perm[i * m : (i + 1) * m] for i in range(4)]
    if law.discrete:
        parts = [np.round(a).astype(np.int64) for a in parts]
    conf = 1.0 - THRESHOLD
    each = 1.0 - (1.0 - conf) / 1
    return tradeoff_from_samples(
        parts[0],
        parts[1] + 1,
        parts[2],
        parts[3] + 1,
        kind="discrete" if law.discrete else "continuous",
        conf=each,
    )


def tradeoff_below(pts: TradeoffPoints, claim: Claim) -> tuple[bool, float, bool]:
    """(below, margin, exact): does a certified point lie below the declared curve (as
    ``tradeoff_test`` decides), the smallest margin β − curve (from the grid unless exact), and
    whether ``tradeoff`` had to be called."""
    al = np.clip(pts.alpha_upper, 0.0, 1.0)
    beta = pts.beta_upper
    g, f = ALPHA_GRID, claim.curve
    j = np.clip(np.searchsorted(g, al, side="right") - 1, 0, g.size - 1)
    hit = g[j] == al
    upper = f[j]  # ≥ the curve at al (non-increasing)
    lower = np.where(hit, f[j], f[np.minimum(j + 1, g.size - 1)])  # ≤ it
    if np.any(beta < lower):
        return True, float(np.min(beta - lower)), False
    if np.all(beta >= upper):
        return False, float(np.min(beta - upper)), False
    declared = np.asarray(tradeoff(_one_count(claim.law), al).lower)
    margin = beta - declared
    return bool(np.min(margin) < 0.0), float(np.min(margin)), True


def fast_verdict(
    m_real: LawMoments, r: np.ndarray, claim: Claim, seed: list[int], pts: TradeoffPoints | None
) -> tuple[int, float, float, float, bool]:
    """(code, scale p, fit p, trade-off margin, exact): the verdict ``judge_residuals`` gives
    ``r`` against ``claim`` with ``rng = default_rng(seed)``, from its pieces (see the module
    docstring); ``exact``: a trade-off curve or ε interval had to be evaluated."""
    exact = False
    margin = math.inf
    if pts is not None:
        below, margin, exact = tradeoff_below(pts, claim)
        if below:
            return REFUTED_TRADEOFF, math.nan, math.nan, margin, exact
    m = dataclasses.replace(m_real, law=claim.law)
    fitted = claim.law.scaled(fitted_factor(m))
    fit = fit_test(FitCounts().add(r, fitted, np.random.default_rng(seed))).p_value
    _, z = _z_of([m])
    p = float(stats.norm.cdf(z(1.0)))
    if fit < THRESHOLD:
        return UNDECIDED_FIT, p, fit, margin, exact
    rejects = p < THRESHOLD
    kmin, kmax = claim.valid
    inside = (kmin <= 0.0 or z(kmin) > Q) and (not math.isfinite(kmax) or z(kmax) < -Q)
    interval: tuple[float, float] | None = None

    def exact_interval() -> tuple[float, float]:
        t = scale_test([m], 1.0 - THRESHOLD)
        claim.accountant_calls += 1
        return epsilon_interval([claim.component], DELTA, t.k_low, t.k_high)

    # the ε interval's lower end against the declared ε (k_high solves Z = −Q)
    a, b = claim.low
    if inside and a is not None and z(a) <= -Q:
        lo_above = True
    elif inside and b is not None and z(b) >= -Q:
        lo_above = False
    else:
        interval, exact = exact_interval(), True
        lo_above = interval[0] > claim.eps
    if rejects and lo_above:
        return REFUTED_SCALE, p, fit, margin, exact
    if rejects or lo_above:
        return UNDECIDED_SCALE, p, fit, margin, exact
    # its upper end against 1.25 × the declared ε (k_low solves Z = Q)
    if interval is None:
        a, b = claim.high
        if inside and a is not None and z(a) <= Q:
            return UNDECIDED_WIDTH, p, fit, margin, exact
        if inside and b is not None and z(b) >= Q:
            return CONSISTENT, p, fit, margin, exact
        interval, exact = exact_interval(), True
    ok = interval[1] <= RESOLVE_RATIO * claim.eps
    return (CONSISTENT if ok else UNDECIDED_WIDTH), p, fit, margin, exact


def judged(r: np.ndarray, claim: Claim, seed: list[int]) -> int:
    """The verdict code of ``judge_residuals`` itself."""
    v = judge_residuals(
        [(claim.law, r)],
        [claim.component],
        delta=DELTA,
        declared_eps=claim.eps,
        threshold=THRESHOLD,
        geolevel="L",
        rng=np.random.default_rng(seed),
    )
    test = v.evidence.get("test")
    if v.verdict == "refuted":
        return REFUTED_TRADEOFF if test == "tradeoff" else REFUTED_SCALE
    if v.verdict == "consistent":
        return CONSISTENT
    if test == "fit":
        return UNDECIDED_FIT
    lo = v.evidence["eps_interval"][0]
    if v.evidence["scale_p"] < THRESHOLD or lo > claim.eps:
        return UNDECIDED_SCALE
    return UNDECIDED_WIDTH


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


def nearest(at: np.ndarray, values: np.ndarray, target: float) -> np.ndarray:
    """``at`` ordered by |ln value − ln target| (NaN and infinite values last)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.abs(np.log(np.maximum(values, 1e-300)) - math.log(target))
    d = np.where(np.isfinite(d), d, np.inf)
    return at[np.argsort(d, kind="stable")]


def choose_check(
    codes: np.ndarray, stat: np.ndarray, exact: np.ndarray, check: int, rng: np.random.Generator
) -> list[int]:
    """Flat indices of ``check`` judged verdicts: a fifth each nearest the scale test's threshold,
    the fit test's, the trade-off test's zero margin, and among those that needed the exact
    pieces; the rest at random."""
    at = np.flatnonzero(codes.ravel() >= 0)
    flat = stat.reshape(-1, 3)[at]
    with np.errstate(invalid="ignore"):
        margin = np.abs(flat[:, 2])
    sources = [
        (nearest(at, flat[:, 0], THRESHOLD), check // 5),
        (nearest(at, flat[:, 1], THRESHOLD), check // 5),
        (at[np.argsort(np.where(np.isfinite(margin), margin, np.inf), kind="stable")], check // 5),
        (rng.permutation(at[exact.ravel()[at]]), check // 5),
        (rng.permutation(at), check),
    ]
    chosen: list[int] = []
    for src, k in sources:
        for idx in src:
            if len(chosen) >= check or k == 0:
                break
            if int(idx) not in chosen:
                chosen.append(int(idx))
                k -= 1
    return chosen


def run(seeds: int, true_seeds: int, check: int, base: int, out: Path, families: list[str]) -> None:
    print(machine_info(), flush=True)
    cpu0, wall0 = time.process_time(), time.perf_counter()
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
        tab = fam in TABULATED
        claims = [make_claim(real, real_eps, rho, tab) for rho in RHOS]
        if fam == "discrete_gaussian":
            for c in claims[1:]:
                c.roots = calibration_roots(real, real_eps, c.rho_target)
        cal_cpu = time.process_time() - t
        print(
            f"{fam}: real {real.describe()}, ε(1e-10) = {real_eps:.6f}; claims "
            + ", ".join(f"ρ {c.rho_target:g}: ×{c.factor:.4f}" for c in claims)
            + f" ({cal_cpu:.1f} CPU-s)",
            flush=True,
        )
        total = max(seeds, true_seeds)
        shape = (len(GRID), len(RHOS), total)
        codes = np.full(shape, -1, np.int8)  # -1: not judged
        stat = np.full((*shape, 3), np.nan)  # scale p, fit p, trade-off margin
        exact = np.zeros(shape, bool)
        t = time.process_time()
        for gi, (runs, cells) in enumerate(GRID):
            n = runs * cells
            for s in range(total):
                r = draw(real, n, np.random.default_rng([base, fi, gi, s, 0]))
                m_real = LawMoments(real).add(r)
                seed = [base, fi, gi, s, 1]
                pts = release_points(real, r, seed)
                for ri, claim in enumerate(claims):
                    if s >= (true_seeds if claim.rho_target == 1.0 else seeds):
                        continue
                    code, p, fp, mg, ex = fast_verdict(m_real, r, claim, seed, pts)
                    codes[gi, ri, s] = code
                    stat[gi, ri, s] = p, fp, mg
                    exact[gi, ri, s] = ex
        grid_cpu = time.process_time() - t
        n_exact = int(exact.sum())
        exact_total += n_exact
        # the check: judge_residuals itself on a subsample
        t = time.process_time()
        chosen = choose_check(codes, stat, exact, check, np.random.default_rng([base, fi, 99]))
        fam_checked = fam_mismatched = 0
        by_verdict = dict.fromkeys(CODES, 0)
        for idx in chosen:
            cg, cr, cs = (int(x) for x in np.unravel_index(idx, codes.shape))
            runs, cells = GRID[cg]
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
            f"  grid {grid_cpu:.1f} CPU-s ({n_exact} verdicts needed an exact piece); check: "
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
                    "calibration_roots": c.roots,
                    "low_bracket": list(c.low),
                    "high_bracket": list(c.high),
                    "accountant_calls": c.accountant_calls,
                    "cpu_s": round(c.cpu_s, 2),
                }
                for c in claims
            ],
            "cpu_s": {"claims": cal_cpu, "grid": grid_cpu, "check": check_cpu},
            "verdicts_with_exact_piece": n_exact,
            "checked": fam_checked,
            "checked_by_verdict": by_verdict,
            "check_mismatches": fam_mismatched,
        }
        fam_summary: list[dict[str, Any]] = []
        for gi, (runs, cells) in enumerate(GRID):
            power: dict[float, float] = {}
            for ri, claim in enumerate(claims):
                done = codes[gi, ri][codes[gi, ri] >= 0]
                cnt = np.bincount(done, minlength=len(CODES))
                ref, k = int(cnt[REFUTED_TRADEOFF] + cnt[REFUTED_SCALE]), int(done.size)
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
                        "refuted": ref,
                        **{CODES[j]: int(cnt[j]) for j in range(len(CODES))},
                        "refuted_rate": ref / k,
                        "refuted_upper95": cp_upper(ref, k),
                    }
                )
                if claim.rho_target < 1.0:
                    power[claim.rho_target] = ref / k
            true = np.bincount(codes[gi, 0, :true_seeds], minlength=len(CODES))
            fam_summary.append(
                true_row(fam, runs, cells, runs * cells, true, true_seeds, seeds, power)
            )
        pooled = np.bincount(codes[:, 0, :true_seeds].ravel(), minlength=len(CODES))
        tot = len(GRID) * true_seeds
        fam_summary.append(true_row(fam, "all", "all", "all", pooled, tot, len(GRID) * seeds, None))
        summary += fam_summary
        for row in fam_summary:
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
        "agree": checked - mismatched,
        "mismatches": mismatched,
        "detail": mismatches,
        "verdicts_with_exact_piece": exact_total,
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
        "threshold": THRESHOLD,
        "resolve_ratio": RESOLVE_RATIO,
        "wiggle": WIGGLE,
        "delta": DELTA,
        "grid": [list(g) for g in GRID],
        "rhos": list(RHOS),
        "cpu_s": round(cpu, 1),
        "wall_s": round(wall, 1),
        **meta,
    }
    out.with_suffix(".json").write_text(json.dumps(info, indent=1, default=float) + "\n")
    print(
        f"{len(rows)} rows -> {out}; checked {checked} verdicts by judge_residuals, "
        f"{checked - mismatched} agree, {mismatched} differ; {cpu:.0f} CPU-s, {wall:.0f} s wall",
        flush=True,
    )


def true_row(
    fam: str,
    runs: Any,
    cells: Any,
    n: Any,
    true: np.ndarray,
    k: int,
    misclaims: int,
    power: dict[float, float] | None,
) -> dict[str, Any]:
    """A summary row: the true claim's verdicts (``true``: counts per code, ``k`` releases) and,
    per cell, the misclaims' power."""
    ref = int(true[REFUTED_TRADEOFF] + true[REFUTED_SCALE])
    row: dict[str, Any] = {
        "family": fam,
        "R": runs,
        "C": cells,
        "n": n,
        "true_seeds": k,
        "false_refuted": ref,
        "false_refuted_tradeoff": int(true[REFUTED_TRADEOFF]),
        "false_refutation_rate": ref / k,
        "false_refutation_upper95": cp_upper(ref, k),
        "true_consistent": true[CONSISTENT] / k,
        "true_undecided_fit": true[UNDECIDED_FIT] / k,
        "true_undecided_scale": true[UNDECIDED_SCALE] / k,
        "true_undecided_width": true[UNDECIDED_WIDTH] / k,
        "misclaim_seeds": misclaims,
        "rho80_grid": "",
        "rho80_interpolated": math.nan,
    }
    if power is not None:
        row["rho80_grid"], row["rho80_interpolated"] = rho80(power)
        row.update({f"power_{rho:g}": power[rho] for rho in sorted(power, reverse=True)})
    return row


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
        "--check", type=int, default=40, help="verdicts per family re-judged by judge_residuals"
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
