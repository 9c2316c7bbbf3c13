"""One verdict per level on the declared claim: ``consistent``, ``refuted`` or ``undecided``.

The claim is the declared allocation's exact ε at the headline δ. How it is judged depends on who
drew the noise:

* **Simulated** (dpaudit drew the noise from the declared allocation): the claim holds by
  construction, and post-processing (TopDown's non-negativity and consistency) cannot add privacy
  loss. Nothing is tested; an EPL above the exact ε measures bias or the estimator, not loss
  (:func:`by_construction`).
* **Published** (the noise was drawn by someone else): the level's residuals are tested against
  the declared noise by the scale and fit tests of :mod:`auditlib.claims.residual_tests`, each at
  α/m, m the number of tests over all levels (Bonferroni: a true claim is refuted at some level
  with probability at most α) (:func:`judge_published`). The decision rule is :data:`RULE`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from auditlib.claims.numbers import format_count, format_number
from auditlib.claims.residual_tests import FitTest, ScaleTest
from auditlib.claims.tradeoff_test import TradeoffTest
from auditlib.exceptions import InvalidParameterError

VERDICTS: tuple[str, ...] = ("consistent", "refuted", "undecided")
#: a published level is undecided while its residuals cannot exclude an ε this many times the claim
RESOLVE_RATIO = 1.25
#: the tests each published level with residuals gets
TESTS_PER_LEVEL = 3

RULE = (
    "A published level with residuals gets three tests, each at level α/m (m: the tests over all "
    "levels; Bonferroni, so a true claim is refuted at any level with probability at most α): "
    "the trade-off test (points certified above the residuals' own trade-off curve between a "
    "count and the count plus one; no noise family assumed), the fit test (χ² of the residuals' "
    "probability integral transforms under each declared law at its estimated scale) and the "
    "scale test (one-sided: the residuals' second moment against the declared noise's). "
    "Refuted: a certified trade-off point lies below the declared noise's curve, or the fit test "
    "accepts, the scale test rejects (the noise is smaller than declared) and the 1 − α/m lower "
    "confidence bound on ε(δ) lies above the declared ε. Undecided: the fit test rejects (the "
    "declared law does not describe the residuals, so their scale says nothing sure about ε), or "
    f"the 1 − α/m upper confidence bound on ε(δ) exceeds {RESOLVE_RATIO:g} × the declared ε "
    f"(too few residuals to tell the claim from a weaker one), or the "
    "level's counts were not published on their own. Consistent: otherwise. Assumed: additive "
    "noise independent of the true counts, i.i.d. per query. A release whose noise dpaudit drew "
    "is consistent by construction: nothing is tested."
)

ASSUMPTIONS = (
    "additive noise independent of the true counts, i.i.d. draws of each query's declared law"
)


@dataclass(frozen=True)
class Verdict:
    """A level's verdict, the one ``sentence`` every face prints, and its ``evidence`` (a small
    JSON-able dict: which test decided, its statistic, p-value and threshold, the ε interval)."""

    geolevel: str
    verdict: str
    sentence: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise InvalidParameterError(
                f"Invalid verdict: {self.verdict!r}; allowed: {', '.join(VERDICTS)}"
            )

    def evidence_json(self) -> str:
        """``evidence`` as compact JSON (non-finite numbers as null)."""
        return json.dumps(_clean(self.evidence), separators=(",", ":"), allow_nan=False)


def _clean(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_clean(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def by_construction(geolevel: str, declared_eps: float, delta: float, release: str) -> Verdict:
    """A simulated level: the claim holds by construction (see the module docstring)."""
    what = "TopDown's post-processing" if release == "topdown" else "the release's estimator"
    return Verdict(
        geolevel,
        "consistent",
        f"consistent by construction: dpaudit drew this level's noise from the declared "
        f"allocation (ε = {format_number(declared_eps)} at δ = {delta:g}); post-processing cannot add "
        f"privacy loss, so an EPL above it measures {what}, not loss",
        {
            "test": "by_construction",
            "declared_eps": declared_eps,
            "delta": delta,
            "assumptions": "the noise is the declared allocation's (drawn by dpaudit)",
        },
    )


def not_published(
    geolevel: str, declared_eps: float, delta: float, *, post_processed: bool = False
) -> Verdict:
    """A declared level whose counts the published table does not hold on their own (of a
    release declared ``post_processed``: a level the declaration maps onto none of the table's)."""
    why = (
        "the declaration measures this level at none of the table's levels (release.levels "
        'maps it to ""), so no published count shows its noise'
        if post_processed
        else "the published table holds no counts measured at this level on their own (its "
        "levels above the rows are sums of them; if the rows are this level's counts, map it to "
        "them with release.levels)"
    )
    return Verdict(
        geolevel,
        "undecided",
        f"undecided: {why}",
        {"test": "none", "declared_eps": declared_eps, "delta": delta},
    )


#: a discrete Gaussian's ε(δ) is not monotone in σ² (a lattice effect: over σ² 4.25–4.35 it
#: rises by 0.7 % at δ = 1e-10, and near PL94's σ² = 5.8 by 0.4 %; gone by σ² ≈ 13), so the ε
#: interval of a level with discrete Gaussian noise takes its least (most) value over factors down
#: to (up to) this relative distance beyond the interval's ends, at WIGGLE_POINTS factors
WIGGLE = 0.1
WIGGLE_POINTS = 21


def epsilon_interval(
    components: Sequence[Any], delta: float, k_low: float, k_high: float
) -> tuple[float, float]:
    """The ε(δ) interval of the noise factors [``k_low``, ``k_high``]: the certified
    accountant's lower end at the largest plausible noise, its upper end at the smallest
    (``components`` as :meth:`auditlib.allocations.Allocation.accounting_components` gives them).
    With discrete Gaussian noise, whose ε is not monotone in σ², the least lower end over
    [(1 − :data:`WIGGLE`)·k_high, k_high] and the most upper end over [k_low, (1 +
    :data:`WIGGLE`)·k_low] (sampled: the wiggles seen span ~2 % of σ²)."""
    from auditlib.accounting import DiscreteGaussianLoss, PrivacyLossComposition
    from auditlib.accounting.calibrate import scale_components

    losses = [
        DiscreteGaussianLoss(Fraction(c[0]), int(c[1])) if isinstance(c, tuple) else c
        for c in components
    ]

    def eps(k: float, end: str) -> float:
        if k <= 0.0:
            return math.inf
        if not math.isfinite(k):
            return 0.0
        # a factor exact in binary keeps the discrete Gaussian's σ² on a coarse lattice
        kf = float(Fraction(k).limit_denominator(1 << 20)) or k
        b = PrivacyLossComposition(scale_components(losses, kf)).epsilon(delta)
        return float(getattr(b, end))

    if not any(isinstance(c, DiscreteGaussianLoss) for c in losses):
        return eps(k_high, "lower"), eps(k_low, "upper")
    lows = [k_high] if not math.isfinite(k_high) else _span(k_high * (1 - WIGGLE), k_high)
    lo = min(eps(k, "lower") for k in lows)
    hi = max(eps(k, "upper") for k in _span(k_low, k_low * (1 + WIGGLE)))
    return min(lo, hi), hi


def declared_epsilon(components: Sequence[Any], delta: float) -> float:
    """The declared noise's ε(δ): the certified accountant's upper end at exactly the declared
    scale (the accounting table's exact ε)."""
    from auditlib.accounting import DiscreteGaussianLoss, PrivacyLossComposition

    losses = [
        DiscreteGaussianLoss(Fraction(c[0]), int(c[1])) if isinstance(c, tuple) else c
        for c in components
    ]
    return float(PrivacyLossComposition(losses).epsilon(delta).upper)


def _span(a: float, b: float) -> list[float]:
    return [a + (b - a) * i / (WIGGLE_POINTS - 1) for i in range(WIGGLE_POINTS)]


def judge_published(
    geolevel: str,
    *,
    scale: ScaleTest,
    fit: FitTest,
    eps_interval: tuple[float, float],
    declared_eps: float,
    delta: float,
    threshold: float,
    measured_at: str,
    laws: Sequence[str] = (),
    tradeoff: TradeoffTest | None = None,
) -> Verdict:
    """The verdict of a published level from its three tests (each at ``threshold`` = α/m: the
    ``tradeoff`` test, the ``fit`` test, the ``scale`` test) and the ε interval the scale bounds
    give (:func:`epsilon_interval` at ``scale``'s bounds); see :data:`RULE`."""
    lo, hi = eps_interval
    ev: dict[str, Any] = {
        "measured_at": measured_at,
        "n": scale.n,
        "threshold": threshold,
        "declared_eps": declared_eps,
        "delta": delta,
        "eps_interval": [lo, hi],
        "variance_ratio": scale.variance_ratio,
        "scale_factor": scale.k_hat,
        "scale_factor_interval": [scale.k_low, scale.k_high],
        "scale_z": scale.z,
        "scale_p": scale.p_value,
        "fit_chi2": fit.statistic,
        "fit_dof": fit.dof,
        "fit_p": fit.p_value,
        "declared_noise": list(laws),
        "assumptions": ASSUMPTIONS,
    }
    if tradeoff is not None:
        ev.update(
            tradeoff_point=[tradeoff.alpha, tradeoff.beta],
            tradeoff_declared_beta=tradeoff.declared_beta,
            tradeoff_eps_lower=tradeoff.eps_lower,
            tradeoff_n=tradeoff.n,
        )
    conf = f"{100 * (1 - threshold):.4g} %"
    where = f"{format_count(scale.n)} residuals at {measured_at}"
    interval = f"ε(δ = {delta:g}) in [{format_number(lo)}, {format_number(hi)}] ({conf} each side)"
    if tradeoff is not None and tradeoff.below:
        ev.update(test="tradeoff", statistic=tradeoff.beta - tradeoff.declared_beta)
        ev.update(p_value=None)
        return Verdict(
            geolevel,
            "refuted",
            f"refuted: a count is less private than its declared noise ({tradeoff.law}) allows — "
            f"{format_count(tradeoff.n)} residuals at {measured_at} certify a test of one person's presence "
            f"with errors α ≤ {tradeoff.alpha:.3f}, β ≤ {tradeoff.beta:.3f}, where the declared "
            f"noise allows β ≥ {tradeoff.declared_beta:.3f} ({conf}; no noise family assumed)",
            ev,
        )
    if fit.p_value < threshold:
        ev.update(test="fit", statistic=fit.statistic, p_value=fit.p_value)
        return Verdict(
            geolevel,
            "undecided",
            f"undecided: the residuals do not follow the declared noise (fit χ² = "
            f"{format_number(fit.statistic)}, p = {format_number(fit.p_value, 2)} < {format_number(threshold, 2)}), so "
            "their scale says nothing sure about ε"
            + (
                f" (their variance is {format_number(scale.variance_ratio, 3)} × the declared one, p = "
                f"{format_number(scale.p_value, 2)})"
                if scale.p_value < threshold
                else ""
            )
            + "; check what was declared",
            ev,
        )
    if scale.p_value < threshold and lo > declared_eps:
        ev.update(test="scale", statistic=scale.z, p_value=scale.p_value)
        return Verdict(
            geolevel,
            "refuted",
            f"refuted: the noise is smaller than declared — {where} put its variance at "
            f"{format_number(scale.variance_ratio, 3)} × the declared one (p = {format_number(scale.p_value, 2)} < "
            f"{format_number(threshold, 2)}), so {interval}, above the declared ε = {format_number(declared_eps)}",
            ev,
        )
    ev.update(test="scale", statistic=scale.z, p_value=scale.p_value)
    if lo > declared_eps or scale.p_value < threshold:  # smaller noise, ε not surely above
        return Verdict(
            geolevel,
            "undecided",
            f"undecided: {where} give {interval}; the noise's variance is "
            f"{format_number(scale.variance_ratio, 3)} × the declared one (scale p = "
            f"{format_number(scale.p_value, 2)}), but ε is not surely above the declared "
            f"ε = {format_number(declared_eps)} (a discrete Gaussian's ε is not monotone in σ²)",
            ev,
        )
    if not hi <= RESOLVE_RATIO * declared_eps:
        return Verdict(
            geolevel,
            "undecided",
            f"undecided: {where} give {interval}, which holds the declared "
            f"ε = {format_number(declared_eps)} but also {RESOLVE_RATIO:g} × it; more published runs "
            "would decide",
            ev,
        )
    holds = (
        f"which holds the declared ε = {format_number(declared_eps)}"
        if lo <= declared_eps <= hi
        else f"below the declared ε = {format_number(declared_eps)} (more noise than declared)"
    )
    return Verdict(
        geolevel,
        "consistent",
        f"consistent: {where} give {interval}, {holds}; the residuals follow the declared "
        f"noise (fit p = {format_number(fit.p_value, 2)})",
        ev,
    )
