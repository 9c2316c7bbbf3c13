"""Coverage of the empirical f-DP points by repetition on mechanisms with exact trade-off curves.

A repetition is covered when *every* certified point lies on or above the true curve (the
simultaneous statement of :mod:`~auditlib.mpl.tradeoff_lower`). Each repetition draws from its
own keyed stream (seed, :data:`TRADEOFF_COVERAGE`, cell, repetition), so results do not depend on
how repetitions are split. The plug-in points (α̂, β̂) are checked on the same draws: they sit on
either side of the curve, so their coverage is far below the nominal level — evidence that the
check can fail.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from auditlib import seeds
from auditlib.exceptions import InvalidParameterError, UnknownNameError
from auditlib.mpl.randomized_response import rr_keep_probability
from auditlib.mpl.rates import Band, check_band
from auditlib.mpl.tradeoff_catalogue import (
    KnownTradeoff,
    dg_count,
    gaussian_shift,
    laplace_shift,
    randomized_response_pair,
)
from auditlib.mpl.tradeoff_lower import DEFAULT_TESTS, check_conf, tradeoff_lower

TRADEOFF_COVERAGE = 40  # stream id of the coverage repetitions
#: Most repetitions of one cell (a repetition takes 5-60 ms at 10⁵ fresh draws).
MAX_TRADEOFF_REPETITIONS = 100_000
BROKEN_FACTOR = 1.5  # a broken entry's true parameter is this multiple of the claim


def _dg(mu: float) -> KnownTradeoff:
    """The count + N_Z(0, σ²) with σ = 1/μ (μ read as the GDP parameter it is close to)."""
    return dg_count(1.0 / mu**2)


def _dg_broken(mu: float) -> KnownTradeoff:
    return dg_count(1.0 / (BROKEN_FACTOR * mu) ** 2, claimed_sigma2=1.0 / mu**2)


#: name -> factory(parameter) of a mechanism with an exactly known curve; parameter: μ for the
#: Gaussian and DG entries, ε for Laplace and randomized response. ``*_broken``: claims the
#: parameter, truly has 1.5 times it (randomized response: the binary keep probability on 4 values).
TRADEOFF_CATALOGUE: dict[str, Callable[[float], KnownTradeoff]] = {
    "gaussian": gaussian_shift,
    "gaussian_broken": lambda mu: gaussian_shift(mu, sigma=1.0 / (BROKEN_FACTOR * mu)),
    "laplace": laplace_shift,
    "laplace_broken": lambda eps: laplace_shift(eps, scale=1.0 / (BROKEN_FACTOR * eps)),
    "randomized_response": randomized_response_pair,
    "randomized_response_k4": lambda eps: randomized_response_pair(eps, k=4),
    "randomized_response_broken": lambda eps: randomized_response_pair(
        eps, k=4, keep=rr_keep_probability(eps, 2)
    ),
    "dg_count": _dg,
    "dg_count_broken": _dg_broken,
}


def known_tradeoff(name: str, parameter: float) -> KnownTradeoff:
    """The catalogue entry ``name`` at ``parameter``; raise naming the allowed names."""
    if name not in TRADEOFF_CATALOGUE:
        raise UnknownNameError(
            f"Unknown mechanism: {name!r}; allowed: {', '.join(TRADEOFF_CATALOGUE)}"
        )
    return TRADEOFF_CATALOGUE[name](parameter)


def tradeoff_coverage(
    known: KnownTradeoff,
    start: int,
    stop: int,
    *,
    n_select: int,
    n: int,
    seed: int,
    conf: float = 0.95,
    bands: tuple[Band, ...] = ("clopper-pearson", "dkw"),
    tests: int = DEFAULT_TESTS,
    cell: tuple[int, ...] = (0,),
) -> dict[str, Any]:
    """Repetitions ``start..stop−1`` of :func:`tradeoff_lower` on ``known``, per band (paired:
    every band certifies the same draws, as the stream is re-keyed per repetition).

    Returns per band the boolean ``covered`` (every point on or above the true curve), the
    ``mu_lower`` and ``epsilon_lower`` (δ = 0) per repetition, and ``plugin_covered`` (the plug-in
    points' coverage on the same draws).
    """
    if not 0 <= start < stop <= MAX_TRADEOFF_REPETITIONS:
        raise InvalidParameterError(
            f"Invalid repetitions {start}..{stop}; need 0 <= start < stop <= "
            f"{MAX_TRADEOFF_REPETITIONS} (MAX_TRADEOFF_REPETITIONS)"
        )
    check_conf(conf)
    for b in bands:
        check_band(b)
    out: dict[str, Any] = {}
    for band in bands:
        cov = np.zeros(stop - start, dtype=bool)
        plug = np.zeros(stop - start, dtype=bool)
        mu = np.empty(stop - start)
        eps = np.empty(stop - start)
        for i, r in enumerate(range(start, stop)):
            g = seeds.rng(seed, TRADEOFF_COVERAGE, *cell, r)
            pts = tradeoff_lower(
                known.mechanism,
                known.x,
                known.x_prime,
                n_select=n_select,
                n=n,
                rng=g,
                conf=conf,
                band=band,
                tests=tests,
            )
            cov[i] = pts.covers(known.curve)
            plug[i] = bool(np.all(pts.beta_hat >= known.curve(pts.alpha_hat)))
            mu[i], eps[i] = pts.mu_lower(), pts.epsilon_lower()
        out[band] = {"covered": cov, "plugin_covered": plug, "mu_lower": mu, "epsilon_lower": eps}
    out["mu"] = known.mu
    out["epsilon"] = known.epsilon
    out["claimed_mu"] = known.claimed_mu
    out["claimed_epsilon"] = known.claimed_epsilon
    return out


def refutes(known: KnownTradeoff, mu_lower: float, epsilon_lower: float) -> bool:
    """Whether the bounds exceed what the entry claims (a detection for a broken entry)."""
    return bool(
        (math.isfinite(known.claimed_mu) and mu_lower > known.claimed_mu)
        or (math.isfinite(known.claimed_epsilon) and epsilon_lower > known.claimed_epsilon)
    )
