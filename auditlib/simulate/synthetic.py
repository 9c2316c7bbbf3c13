"""One (state, geolevel) block of a simulated release on the synthetic population.

Deterministic: every draw comes from a stream keyed by (stream, state, geolevel, query or replicate)
(see :mod:`auditlib.seeds`), so a block is the same whichever worker computes it and when.
State key 0 is the nation (the ``US`` geolevel); states are 1..n.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from auditlib import seeds
from auditlib.geography import (
    NATIONAL,
    PopulationParams,
    SyntheticHierarchy,
    national_population,
    state_level_populations,
)
from auditlib.simulate.release import (
    Postprocess,
    QueryPlan,
    ResidualBlock,
    cell_shares,
    simulate_block,
    true_cell_counts,
)


def unit_populations(
    hierarchy: SyntheticHierarchy, params: PopulationParams, state: int, geolevel: str
) -> np.ndarray:
    if geolevel == NATIONAL:
        return national_population(hierarchy, params)
    return state_level_populations(hierarchy, params, state)[geolevel]


def simulate_synthetic_block(
    *,
    hierarchy: SyntheticHierarchy,
    params: PopulationParams,
    state: int,
    geolevel: str,
    geolevel_index: int,
    queries: Sequence[tuple[int, QueryPlan]],
    replicates: int,
    noise_seed: int,
    postprocess: Postprocess = "none",
) -> ResidualBlock:
    """Truth and ``replicates`` noisy releases of every query measured at one (state, geolevel)."""
    pops = unit_populations(hierarchy, params, state, geolevel)
    truths = []
    for qid, q in queries:
        shares = cell_shares(
            q.n_cells,
            q.n_sim,
            params.cell_concentration,
            seeds.rng(params.seed, seeds.CELL_SHARES, qid),
        )
        g = seeds.rng(params.seed, seeds.TRUTH, state, geolevel_index, qid)
        truths.append(true_cell_counts(pops, shares, g))
    rngs = [seeds.rng(noise_seed, seeds.NOISE, state, geolevel_index, r) for r in range(replicates)]
    return simulate_block(
        truths, [q for _, q in queries], [qid for qid, _ in queries], rngs, postprocess
    )
