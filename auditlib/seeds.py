"""Deterministic random streams: every draw is keyed by what it is for, not by who draws it.

A run is determined by its spec and seed: each (stream, state, geolevel, replicate) gets its own
``numpy.random.SeedSequence(seed, spawn_key=key)``, so the numbers are identical whatever the number of
workers or the order in which they finish.
"""

from __future__ import annotations

import numpy as np

#: stream ids (first element of every spawn key)
POPULATION = 1
CELL_SHARES = 2
TRUTH = 3
NOISE = 4
EPL_BOOTSTRAP = 5
#: the fit test's randomized transform of a published level's residuals (auditlib.claims)
CLAIM_FIT = 6
#: the reference runs of a release declared post-processed: dpaudit's own simulation of the
#: declared release, its noise seed drawn from (noise seed, CLAIM_REFERENCE) (flows/audit/claims.py)
CLAIM_REFERENCE = 7


def seed_sequence(seed: int, *key: int) -> np.random.SeedSequence:
    if seed < 0:
        raise ValueError(f"Invalid seed: {seed}; must be >= 0")
    if any(k < 0 for k in key):
        raise ValueError(f"Invalid spawn key {key}: entries must be >= 0")
    return np.random.SeedSequence(seed, spawn_key=tuple(int(k) for k in key))


def rng(seed: int, *key: int) -> np.random.Generator:
    """A PCG64 generator for one keyed stream."""
    return np.random.Generator(np.random.PCG64(seed_sequence(seed, *key)))
