"""The MPL estimate of a mechanism with known pairs and region, as the tests run it: its pairs
and region, the two sample sizes and one seed; and the same over independent repetitions."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from auditlib.mpl import MPLResult, mpl


class Audited(Protocol):
    """What an MPL run of a catalogue or census mechanism reads from it."""

    mechanism: Any
    pairs: Any
    region: Any


def mpl_of(
    e: Audited, n: int, n_confidence: int, seed: int | np.random.SeedSequence, **options: Any
) -> MPLResult:
    """``mpl`` of ``e``'s mechanism on all its pairs over its region, the generator seeded by
    ``seed``; ``options`` are ``mpl``'s other keywords."""
    rng = np.random.default_rng(seed)
    return mpl(
        e.mechanism, e.pairs, n=n, n_confidence=n_confidence, region=e.region, rng=rng, **options
    )


def mpl_runs(
    e: Audited, reps: int, seed: int, n: int, n_confidence: int, **options: Any
) -> list[MPLResult]:
    """``reps`` independent runs of :func:`mpl_of`, seeded by the children of ``seed``."""
    children = np.random.SeedSequence(seed).spawn(reps)
    return [mpl_of(e, n, n_confidence, child, **options) for child in children]


def lower_bounds(e: Audited, reps: int, seed: int, n: int, n_confidence: int) -> np.ndarray:
    """The lower bounds of :func:`mpl_runs`."""
    return np.array([r.lb for r in mpl_runs(e, reps, seed, n, n_confidence)])
