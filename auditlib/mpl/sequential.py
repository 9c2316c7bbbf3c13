"""Sequential audits: draw in batches, stop as soon as the claim is refuted or cannot be.

Two modes, both with the same look schedule and the same error control under optional stopping:

* :func:`sequential_tradeoff` — the empirical f-DP points of :mod:`~auditlib.mpl.tradeoff_lower`
  against a claimed μ-GDP or (ε, δ)-DP (:class:`Claim`): tests selected once on ``n_select`` draws,
  then certified on a growing fresh sample;
* :func:`sequential_mpl` — MPL (Algorithm 4 of Askin, Kutta & Dette): step 1 once, then step 2's N fresh draws at
  the chosen (x, x′, t̂) in batches against a claimed ε.

**Looks.** Fresh draws per input N_1 = ``batch``, N_{j+1} = min(2 N_j, ``max_n``) until ``max_n``:
J looks, fixed before any draw. At each look every bound is taken at risk (1 − conf)/J (the union
bound over the J planned looks: α spent evenly per look), so with probability ≥ conf they hold at
*every* look at once — whichever look the procedure stops at, however the stopping depends on the
data (optional stopping is covered because the statement is simultaneous over all looks).
``batch = max_n`` is the fixed-size method (one look at the full level). For the curve,
``band="mixture"`` uses confidence sequences instead (:mod:`~auditlib.mpl.confseq`, Ville's
inequality): they hold at every n at once, so each look is taken at the full risk 1 − conf and the
schedule could be anything.

**Decisions** at each look, in this order:

* ``"refuted"`` — the lower bound on the privacy parameter exceeds the claim: the claim is false,
  wrongly so with probability ≤ 1 − conf (exact for the curve: Clopper–Pearson or DKW;
  asymptotic for MPL, whose bound per look is the normal approximation of eq. (26)).
* ``"consistent"`` — an upper confidence bound on what the chosen tests can ever show (the curve:
  their implied parameter with the type I/II errors floored at the smallest value the largest
  sample could certify; MPL: ℓ(t̂)) is at most claim + ``tolerance``: continuing to ``max_n``
  would not refute the claim by more than the tolerance. Wrongly so with probability ≤ 1 − conf.
  It says nothing about tests or outputs not selected in step 1.
* ``"undecided"`` — ``max_n`` reached without either.

The number of draws used (``draws``: all draws at both inputs, step 1 included) is returned.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from scipy.special import ndtri

from auditlib.exceptions import InvalidParameterError
from auditlib.mechanisms.base import check_rng
from auditlib.mpl.checks import check_alpha
from auditlib.mpl.density import CONFIDENCE_BETA, CONFIDENCE_GAMMA, check_smoothing, check_tau
from auditlib.mpl.dpl import DEFAULT_TAU, as_region, dpl_from_samples
from auditlib.mpl.mpl import confidence_bound
from auditlib.mpl.protocol import MechanismUnderTest, check_sample_size
from auditlib.mpl.rates import Band, check_band, error_bounds
from auditlib.mpl.tradeoff_geometry import check_delta, implied_epsilon, implied_mu
from auditlib.mpl.tradeoff_lower import (
    DEFAULT_TESTS,
    check_conf,
    check_tests,
    count_errors,
    select_tests,
)

Decision = Literal["refuted", "consistent", "undecided"]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Claim:
    """A claimed privacy parameter of the pair: ``"mu"`` (μ-GDP) or ``"epsilon"`` ((ε, δ)-DP)."""

    parameter: Literal["mu", "epsilon"]
    value: float
    delta: float = 0.0

    def __post_init__(self) -> None:
        if self.parameter not in ("mu", "epsilon"):
            raise InvalidParameterError(
                f"Invalid claim parameter: {self.parameter!r}; allowed: mu, epsilon."
            )
        v = float(self.value)
        if not (math.isfinite(v) and v >= 0.0):
            raise InvalidParameterError(
                f"Invalid claimed {self.parameter}: {self.value!r}; a finite value >= 0."
            )
        check_delta(self.delta)
        if self.parameter == "mu" and self.delta != 0.0:
            raise InvalidParameterError(f"Invalid delta: {self.delta!r}; a μ-GDP claim has none.")

    def implied(self, alpha: npt.ArrayLike, beta: npt.ArrayLike) -> FloatArray:
        """The least parameter a point (α, β) on or above the curve is consistent with (≥ 0);
        non-increasing in α and in β."""
        if self.parameter == "mu":
            return np.maximum(implied_mu(alpha, beta), 0.0)
        return implied_epsilon(alpha, beta, self.delta)


def look_schedule(batch: object, max_n: object) -> list[int]:
    """Fresh draws per input at each look: batch, 2·batch, 4·batch, … capped at (and ending on)
    ``max_n``."""
    b = check_sample_size("batch", batch)
    m = check_sample_size("max_n", max_n)
    if b > m:
        raise InvalidParameterError(f"Invalid batch: {batch!r} exceeds max_n = {max_n!r}.")
    out = [b]
    while out[-1] < m:
        out.append(min(2 * out[-1], m))
    return out


def check_tolerance(tolerance: object) -> float:
    """Return the tolerance as a finite float ≥ 0, or raise naming it."""
    try:
        t = float(tolerance)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidParameterError(f"Invalid tolerance: {tolerance!r} is not a number.") from None
    if not (math.isfinite(t) and t >= 0.0):
        raise InvalidParameterError(f"Invalid tolerance: {tolerance!r}; a finite value >= 0.")
    return t


@dataclass(frozen=True, eq=False)
class SequentialResult:
    """The outcome of a sequential audit.

    ``decision`` (see the module doc), ``n`` the fresh draws per input when it stopped, ``draws``
    all draws at both inputs (step 1 included), ``looks`` how many looks were taken of
    ``planned_looks``; ``lower``/``upper`` the bounds at the last look (``lower``: on the
    parameter, errs low; ``upper``: on what the tests can show, errs high); ``history`` one
    (n, lower, upper) row per look; ``risk_per_look`` = (1 − conf)/J.
    """

    decision: Decision
    claim: float
    tolerance: float
    n: int
    draws: int
    looks: int
    planned_looks: int
    lower: float
    upper: float
    conf: float
    risk_per_look: float
    history: list[tuple[int, float, float]] = field(default_factory=list)


def _decide(lower: float, upper: float, claim: float, tolerance: float) -> Decision:
    if lower > claim:
        return "refuted"
    if upper <= claim + tolerance:
        return "consistent"
    return "undecided"


def sequential_tradeoff(
    mechanism: MechanismUnderTest,
    x: Any,
    x_prime: Any,
    claim: Claim,
    *,
    n_select: int,
    batch: int,
    max_n: int,
    rng: np.random.Generator,
    conf: float = 0.95,
    band: Band = "clopper-pearson",
    tests: int = DEFAULT_TESTS,
    tolerance: float = 0.1,
) -> SequentialResult:
    """Certified trade-off points against ``claim``, fresh draws in doubling batches.

    At each look the K tests' counts on all fresh draws so far give upper points (α_u, β_u) and
    lower points (α_l, β_l), each family at risk (1 − conf)/(2J) per error type (Bonferroni or
    DKW within the look). ``lower`` = max_k claim.implied(α_u, β_u) errs low (a lower confidence
    bound on the pair's parameter); ``upper`` = max_k claim.implied(max(α_l, a_min), max(β_l,
    b_min)) errs high, a_min/b_min being the smallest errors a look with ``max_n`` draws could
    certify (no test's certified point can get below them, so none can imply more).
    """
    if mechanism.dim != 1:
        raise InvalidParameterError(
            f"Invalid mechanism {mechanism.name!r}: dimension {mechanism.dim}; the trade-off "
            "curve takes discrete or one-dimensional continuous outputs."
        )
    m = check_sample_size("n_select", n_select)
    schedule = look_schedule(batch, max_n)
    conf = check_conf(conf)
    band = check_band(band)
    check_tests(tests)
    tol = check_tolerance(tolerance)
    check_rng(rng)
    if not isinstance(claim, Claim):
        raise InvalidParameterError(f"Invalid claim: {claim!r}; pass a Claim(parameter, value).")
    score, cuts = select_tests(
        mechanism.sample(x, m, rng),
        mechanism.sample(x_prime, m, rng),
        kind=mechanism.kind,
        tests=tests,
        fresh=schedule[-1],
    )
    # confidence sequences hold at every n at once; other bands pay the union over the looks
    risk = (1.0 - conf) / (1 if band == "mixture" else len(schedule))
    # the smallest error a look can certify (no events; per-test level): at most max_n draws
    floor = float(
        error_bounds(np.zeros(cuts.size, dtype=np.int64), schedule[-1], risk / 2, band)[0]
    )
    k_a = np.zeros(cuts.size, dtype=np.int64)
    k_b = np.zeros(cuts.size, dtype=np.int64)
    history: list[tuple[int, float, float]] = []
    have = 0
    decision: Decision = "undecided"
    lo = hi = math.nan
    for big_n in schedule:
        ka, kb = count_errors(
            score,
            cuts,
            mechanism.sample(x, big_n - have, rng),
            mechanism.sample(x_prime, big_n - have, rng),
        )
        k_a += ka
        k_b += kb
        have = big_n
        a_u = error_bounds(k_a, big_n, risk / 2, band)
        b_u = error_bounds(k_b, big_n, risk / 2, band)
        a_l = np.maximum(error_bounds(k_a, big_n, risk / 2, band, upper=False), floor)
        b_l = np.maximum(error_bounds(k_b, big_n, risk / 2, band, upper=False), floor)
        lo = float(np.max(claim.implied(a_u, b_u)))
        hi = float(np.max(claim.implied(a_l, b_l)))
        history.append((big_n, lo, hi))
        decision = _decide(lo, hi, claim.value, tol)
        if decision != "undecided":
            break
    return SequentialResult(
        decision=decision,
        claim=claim.value,
        tolerance=tol,
        n=have,
        draws=2 * (m + have),
        looks=len(history),
        planned_looks=len(schedule),
        lower=lo,
        upper=hi,
        conf=conf,
        risk_per_look=risk,
        history=history,
    )


def sequential_mpl(
    mechanism: MechanismUnderTest,
    pairs: Sequence[tuple[Any, Any]],
    claimed_epsilon: float,
    *,
    n: int,
    batch: int,
    max_n: int,
    region: Any,
    rng: np.random.Generator,
    alpha: float = 0.05,
    tau: float = DEFAULT_TAU,
    beta: float = CONFIDENCE_BETA,
    gamma: float = CONFIDENCE_GAMMA,
    tolerance: float = 0.1,
    grid_size: int | None = None,
) -> SequentialResult:
    """MPL with step 2 in batches against ``claimed_epsilon``.

    Step 1 is :func:`auditlib.mpl.mpl`'s (DPL on every pair, ``n`` draws per input, same draws in
    the same order); then fresh draws at (x_max, x′_max) in the batches of :func:`look_schedule`.
    At each look :func:`~auditlib.mpl.mpl.confidence_bound` on all fresh draws so far at level
    α/J gives ``lower`` = LB (eq. (26)) and ``upper`` = ℓ̂*(t̂) + Φ⁻¹(1 − α/J) σ̂/c_N. With
    ``batch = max_n`` (one look) ``lower`` equals ``mpl(..., n_confidence=max_n).lb`` for the same
    ``rng``. Errors as in the module doc (asymptotic per look, as LB is; the union bound over the
    looks is exact).
    """
    n = check_sample_size("n", n)
    schedule = look_schedule(batch, max_n)
    a = check_alpha(alpha)
    tau = check_tau(tau)
    tol = check_tolerance(tolerance)
    check_rng(rng)
    eps0 = float(claimed_epsilon)
    if not (math.isfinite(eps0) and eps0 >= 0.0):
        raise InvalidParameterError(
            f"Invalid claimed_epsilon: {claimed_epsilon!r}; a finite value >= 0."
        )
    pair_list = tuple((p[0], p[1]) for p in pairs)
    if not pair_list:
        raise InvalidParameterError("Invalid pairs: empty; MPL needs at least one pair (x, x').")
    if mechanism.kind == "continuous":
        beta, gamma = check_smoothing(beta, gamma)
        big = schedule[-1]
        if big > n:  # condition (C4) at the largest N, as mpl() checks it
            nu = math.log(big) / math.log(n) - 1.0 if n > 1 else math.inf
            if not gamma > nu / (6.0 * (1.0 + nu)):
                raise InvalidParameterError(
                    f"Invalid gamma: {gamma!r}; condition (C4) needs gamma > nu/(6(1+nu)) = "
                    f"{nu / (6.0 * (1.0 + nu)):.4f} for N = n^(1+nu), n = {n}, N = {big}."
                )
    reg = as_region(region, mechanism.kind, mechanism.dim, grid_size=grid_size)
    results = []
    for xa, xb in pair_list:  # step 1 of mpl(): the same draws in the same order
        sx = mechanism.sample(xa, n, rng)
        sy = mechanism.sample(xb, n, rng)
        results.append(dpl_from_samples(sx, sy, reg, kind=mechanism.kind, tau=tau))
    best = int(np.argmax([r.eps_hat for r in results]))
    t_hat = results[best].t_hat
    x, x_prime = pair_list[best]
    risk = a / len(schedule)
    z = float(ndtri(1.0 - risk))
    xs: list[npt.NDArray[Any]] = []
    ys: list[npt.NDArray[Any]] = []
    have = 0
    history: list[tuple[int, float, float]] = []
    decision: Decision = "undecided"
    lo = hi = math.nan
    for big_n in schedule:
        xs.append(mechanism.sample(x, big_n - have, rng))
        ys.append(mechanism.sample(x_prime, big_n - have, rng))
        have = big_n
        c = confidence_bound(
            np.concatenate(xs),
            np.concatenate(ys),
            t_hat,
            kind=mechanism.kind,
            alpha=risk,
            tau=tau,
            beta=beta,
            gamma=gamma,
        )
        lo, hi = c.lb, c.loss + z * c.sigma_hat / c.c_n
        history.append((big_n, lo, hi))
        decision = _decide(lo, hi, eps0, tol)
        if decision != "undecided":
            break
    return SequentialResult(
        decision=decision,
        claim=eps0,
        tolerance=tol,
        n=have,
        draws=2 * (len(pair_list) * n + have),
        looks=len(history),
        planned_looks=len(schedule),
        lower=lo,
        upper=hi,
        conf=1.0 - a,
        risk_per_look=risk,
        history=history,
    )
