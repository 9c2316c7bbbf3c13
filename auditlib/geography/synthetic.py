"""A synthetic geographic hierarchy and its population, shaped like a TopDown run.

Levels come from the allocation, top to bottom: an optional national level ``US`` (one unit), ``State``
(one unit per state) and then every lower level with a fan-out (children per parent), so that a
geounit's parent at the level above is ``index // fanout``. Block populations are zero-inflated,
overdispersed counts (negative binomial); every higher level is the exact sum of its children, so
totals are consistent at every level.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from auditlib import seeds
from auditlib.exceptions import InvalidParameterError

NATIONAL = "US"
STATE = "State"


@dataclass(frozen=True)
class SyntheticHierarchy:
    geolevels: tuple[str, ...]
    fanouts: tuple[int, ...]  # one per geolevel below State, in order
    n_states: int

    def __post_init__(self) -> None:
        if STATE not in self.geolevels:
            raise InvalidParameterError(f"Invalid geolevels {self.geolevels}: no 'State' level")
        if len(self.fanouts) != len(self.below_state):
            raise InvalidParameterError(
                f"Invalid fanouts {self.fanouts}: need one per level below State {self.below_state}"
            )
        if any(f < 1 for f in self.fanouts):
            raise InvalidParameterError(f"Invalid fanouts {self.fanouts}: each must be >= 1")
        if self.n_states < 1:
            raise InvalidParameterError(f"Invalid n_states: {self.n_states}; must be >= 1")

    @property
    def below_state(self) -> tuple[str, ...]:
        i = self.geolevels.index(STATE)
        return self.geolevels[i + 1 :]

    def units_per_state(self, geolevel: str) -> int:
        """Number of geounits of a level inside one state (the national level: 1, for the nation)."""
        if geolevel in (NATIONAL, STATE):
            return 1
        n = 1
        for g, f in zip(self.below_state, self.fanouts, strict=True):
            n *= f
            if g == geolevel:
                return n
        raise InvalidParameterError(
            f"Unknown geolevel: {geolevel!r}; allowed: {', '.join(self.geolevels)}"
        )

    def level_populations(self, block_pops: np.ndarray) -> dict[str, np.ndarray]:
        """Populations of every level of one state from its block populations (exact sums)."""
        levels = self.below_state
        n_blocks = self.units_per_state(levels[-1]) if levels else 1
        if block_pops.shape != (n_blocks,):
            raise InvalidParameterError(
                f"Invalid block_pops shape {block_pops.shape}; expected ({n_blocks},)"
            )
        out: dict[str, np.ndarray] = {}
        cur = np.asarray(block_pops, dtype=np.int64)
        for g, f in zip(reversed(levels), reversed(self.fanouts), strict=True):
            out[g] = cur
            cur = cur.reshape(-1, f).sum(axis=1)
        out[STATE] = cur.reshape(1)
        return {g: out[g] for g in (STATE, *levels)}


def block_populations(
    hierarchy: SyntheticHierarchy,
    state: int,
    *,
    seed: int,
    mean_block_population: float,
    empty_block_share: float,
    dispersion: float = 1.5,
) -> np.ndarray:
    """Block populations of one state (index from 1): zero-inflated negative binomial counts.

    A non-empty block has mean ``mean_block_population`` and variance mean + mean²/dispersion.
    """
    if not 0 <= empty_block_share < 1:
        raise InvalidParameterError(f"Invalid empty_block_share: {empty_block_share}; need [0, 1)")
    if not mean_block_population > 0:
        raise InvalidParameterError(
            f"Invalid mean_block_population: {mean_block_population}; must be > 0"
        )
    levels = hierarchy.below_state
    n = hierarchy.units_per_state(levels[-1]) if levels else 1
    g = seeds.rng(seed, seeds.POPULATION, state)
    p = dispersion / (dispersion + mean_block_population)
    pops = g.negative_binomial(dispersion, p, size=n).astype(np.int64)
    empty = g.random(n) < empty_block_share
    pops[empty] = 0
    return pops


@dataclass(frozen=True)
class PopulationParams:
    """Parameters of the synthetic population (see :func:`block_populations`)."""

    seed: int
    mean_block_population: float = 30.0
    empty_block_share: float = 0.2
    cell_concentration: float = 0.5


def state_level_populations(
    hierarchy: SyntheticHierarchy, params: PopulationParams, state: int
) -> dict[str, np.ndarray]:
    """Populations of every level (State and below) of state ``state`` (1-based)."""
    if not 1 <= state <= hierarchy.n_states:
        raise InvalidParameterError(f"Invalid state: {state}; allowed 1..{hierarchy.n_states}")
    blocks = block_populations(
        hierarchy,
        state,
        seed=params.seed,
        mean_block_population=params.mean_block_population,
        empty_block_share=params.empty_block_share,
    )
    return hierarchy.level_populations(blocks)


def national_population(hierarchy: SyntheticHierarchy, params: PopulationParams) -> np.ndarray:
    """The national total (one unit): the exact sum of every state's blocks."""
    total = sum(
        int(state_level_populations(hierarchy, params, s)[STATE][0])
        for s in range(1, hierarchy.n_states + 1)
    )
    return np.array([total], dtype=np.int64)
