"""Synthetic hierarchy: consistent totals at every level, determinism, bad inputs."""

from __future__ import annotations

import numpy as np
import pytest

from auditlib.exceptions import InvalidParameterError
from auditlib.geography import (
    PopulationParams,
    SyntheticHierarchy,
    block_populations,
    national_population,
    state_level_populations,
)

LEVELS = ("State", "County", "Tract", "Block_Group", "Block")


def hier(n_states: int = 3) -> SyntheticHierarchy:
    return SyntheticHierarchy(LEVELS, (3, 4, 2, 5), n_states)


def test_units_per_state_is_product_of_fanouts() -> None:
    h = hier()
    assert [h.units_per_state(g) for g in LEVELS] == [1, 3, 12, 24, 120]


def test_levels_sum_exactly_to_their_parents() -> None:
    h = hier()
    p = PopulationParams(seed=7, mean_block_population=25.0, empty_block_share=0.3)
    pops = state_level_populations(h, p, 2)
    for upper, lower, f in zip(LEVELS[:-1], LEVELS[1:], (3, 4, 2, 5), strict=True):
        np.testing.assert_array_equal(pops[upper], pops[lower].reshape(-1, f).sum(axis=1))
    total = national_population(h, p)[0]
    assert total == sum(int(state_level_populations(h, p, s)["State"][0]) for s in (1, 2, 3))


def test_block_populations_skewed_with_empty_blocks() -> None:
    h = SyntheticHierarchy(("State", "Block"), (20_000,), 1)
    b = block_populations(h, 1, seed=3, mean_block_population=30.0, empty_block_share=0.25)
    empty = (b == 0).mean()
    assert 0.25 <= empty <= 0.30  # 25 % forced empty + NB zeros
    nonempty_mean = b[b > 0].mean()
    assert 28 < nonempty_mean < 36
    assert b.var() > 3 * b.mean()  # overdispersed, not Poisson


def test_populations_are_deterministic_per_state() -> None:
    h = hier()
    p = PopulationParams(seed=11)
    a = state_level_populations(h, p, 1)["Block"]
    b = state_level_populations(h, p, 1)["Block"]
    c = state_level_populations(h, p, 2)["Block"]
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_bad_hierarchies_raise() -> None:
    with pytest.raises(InvalidParameterError, match="no 'State' level"):
        SyntheticHierarchy(("County", "Block"), (2,), 1)
    with pytest.raises(InvalidParameterError, match="need one per level"):
        SyntheticHierarchy(LEVELS, (3, 4), 1)
    with pytest.raises(InvalidParameterError, match="each must be >= 1"):
        SyntheticHierarchy(LEVELS, (3, 0, 2, 5), 1)
    with pytest.raises(InvalidParameterError, match="Unknown geolevel: 'Tract_Subset'"):
        hier().units_per_state("Tract_Subset")
    with pytest.raises(InvalidParameterError, match="Invalid state: 4"):
        state_level_populations(hier(), PopulationParams(seed=1), 4)
    with pytest.raises(InvalidParameterError, match="empty_block_share"):
        block_populations(hier(), 1, seed=1, mean_block_population=3, empty_block_share=1.0)
