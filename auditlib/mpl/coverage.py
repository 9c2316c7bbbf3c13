"""Coverage experiments: repeat MPL on catalogue mechanisms with known ε*_C (Askin, Kutta & Dette §V).

A chunk of repetitions ``start..stop−1`` of one (mechanism, ε₀) cell is a pure function of
(seed, cell, repetition): every repetition draws from its own keyed stream, so the experiment is
identical however it is split into chunks or spread over workers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from auditlib import seeds
from auditlib.exceptions import InvalidParameterError, UnknownNameError
from auditlib.mpl.catalogue import (
    KnownMechanism,
    continuous_noisy_max,
    exponential_mechanism,
    geometric_count,
    laplace_mechanism,
    report_noisy_max,
)
from auditlib.mpl.census import allocation_count, gdpc_count
from auditlib.mpl.census_hist import adpc_count
from auditlib.mpl.mpl import mpl_known
from auditlib.mpl.protocol import check_sample_size
from auditlib.mpl.randomized_response import randomized_response, rr_keep_probability
from auditlib.mpl.svt import svt2, svt4, svt5, svt6

MPL_COVERAGE = 20  # stream id of coverage repetitions

#: Most repetitions of one (mechanism, ε₀) cell: a repetition is one MPL run (0.05-1 s at the
#: default sizes), so the bound is a day of one core per cell at most; the results take 10 bytes
#: a repetition. :func:`coverage_chunk` refuses repetition indices at or past it.
MAX_REPETITIONS = 100_000


def check_coverage_sizes(
    repetitions: object, n: object, n_confidence: object
) -> tuple[int, int, int]:
    """The sizes of a coverage experiment: ``repetitions`` in ``1..MAX_REPETITIONS``, ``n`` and
    ``n_confidence`` in ``10..MAX_SAMPLE_SIZE``; raise naming the first bad one. Nothing is
    allocated, so callers can check before planning any work."""
    if (
        isinstance(repetitions, bool)
        or not isinstance(repetitions, int | np.integer)
        or not 1 <= repetitions <= MAX_REPETITIONS
    ):
        raise InvalidParameterError(
            f"Invalid repetitions: {repetitions!r}; allowed 1..{MAX_REPETITIONS} (MAX_REPETITIONS)"
        )
    sizes = []
    for name, v in (("n", n), ("n_confidence", n_confidence)):
        size = check_sample_size(name, v)
        if size < 10:
            raise InvalidParameterError(f"Invalid {name}: {v!r}; need >= 10 draws")
        sizes.append(size)
    return int(repetitions), sizes[0], sizes[1]


def _broken_laplace(eps: float) -> KnownMechanism:
    """Claims ε₀ but adds Lap(1/(2ε₀)): truly 2ε₀-DP — a bound above ε₀ is a detection."""
    return laplace_mechanism(eps, scale=1.0 / (2.0 * eps))


def _rr_k4(eps: float) -> KnownMechanism:
    """4-ary randomized response, exactly ε-DP (γ = (e^ε − 1)/(e^ε + 3))."""
    return randomized_response(eps, k=4)


def _broken_rr(eps: float) -> KnownMechanism:
    """4-ary RR with the *binary* keep probability (e^ε − 1)/(e^ε + 1): claims ε, truly
    ln(1 + 2(e^ε − 1))-DP (1.108 at ε = 0.7) — a bound above ε₀ is a detection."""
    return randomized_response(
        eps, k=4, keep=rr_keep_probability(eps, 2), name="randomized_response_broken"
    )


def _census_dg_count(eps: float) -> KnownMechanism:
    """A census block count (3 people in D; D′ adds, removes or moves one person) + N_Z(0, σ²)
    with σ = 1/ε₀: ε₀ is read as μ of μ-GDP (ρ = ε₀²/2 zCDP), the discrete Gaussian's analogue of
    ε. Not pure DP (``epsilon`` = ∞); coverage is against ε*_C on C = count ± ⌈2σ⌉."""
    return allocation_count(1.0 / eps**2, name="census_dg_count")


#: name -> factory(ε₀) of a mechanism with exactly known ε*_C
CATALOGUE: dict[str, Callable[[float], KnownMechanism]] = {
    "laplace": laplace_mechanism,
    "laplace_broken": _broken_laplace,
    "report_noisy_max": report_noisy_max,
    "exponential": exponential_mechanism,
    "continuous_noisy_max": continuous_noisy_max,
    "geometric_count": geometric_count,
    "gdpc_count": gdpc_count,
    "adpc_count": adpc_count,
    "census_dg_count": _census_dg_count,
    "randomized_response": randomized_response,
    "randomized_response_k4": _rr_k4,
    "randomized_response_broken": _broken_rr,
    "svt2": svt2,
    "svt4": svt4,
    "svt5": svt5,
    "svt6": svt6,
}


def known_mechanism(name: str, epsilon: float) -> KnownMechanism:
    if name not in CATALOGUE:
        raise UnknownNameError(f"Unknown mechanism: {name!r}; allowed: {', '.join(CATALOGUE)}")
    return CATALOGUE[name](epsilon)


def coverage_chunk(
    name: str,
    epsilon: float,
    start: int,
    stop: int,
    *,
    n: int,
    n_confidence: int,
    alpha: float = 0.05,
    seed: int,
    cell: tuple[int, int] = (0, 0),
) -> dict[str, Any]:
    """LB of repetitions ``start..stop−1`` of MPL on ``name`` claiming ``epsilon``.

    ``cell`` (mechanism index, ε₀ index) keys the random streams with the repetition index.
    Returns the bounds, their flags and the exact targets: ``epsilon_c`` (what LB bounds from below),
    ``epsilon`` (the mechanism's true ε) and ``claimed_epsilon``.
    """
    if not 0 <= start < stop:
        raise InvalidParameterError(f"Invalid repetitions {start}..{stop}; need 0 <= start < stop")
    if stop > MAX_REPETITIONS:
        raise InvalidParameterError(
            f"Invalid repetitions {start}..{stop}; the largest allowed stop is {MAX_REPETITIONS} "
            "(MAX_REPETITIONS)"
        )
    e = known_mechanism(name, epsilon)
    lb = np.empty(stop - start)
    floor = np.zeros(stop - start, dtype=bool)
    edge = np.zeros(stop - start, dtype=bool)
    for i, r in enumerate(range(start, stop)):
        g = seeds.rng(seed, MPL_COVERAGE, cell[0], cell[1], r)
        res = mpl_known(e, n, n_confidence, g, alpha=alpha)
        lb[i], floor[i], edge[i] = res.lb, res.floor_driven, res.edge
    return {
        "lb": lb,
        "floor_driven": floor,
        "edge": edge,
        "epsilon_c": e.epsilon_c,
        "epsilon": e.epsilon,
        "claimed_epsilon": e.claimed_epsilon,
    }
