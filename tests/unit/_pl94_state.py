"""A small state of a scaled test spine with its PL94 production people and measured queries, as
the sparse TopDown unit tests run it."""

from __future__ import annotations

from typing import Any

import numpy as np

from auditlib.allocations import load_allocation
from auditlib.geography.schema import schema
from auditlib.geography.sparse_population import spine_state_sparse_population
from auditlib.geography.spine import generate_spine, tallies_2020
from auditlib.simulate.measured import allocation_measured
from auditlib.simulate.topdown import spine_state

SCH = schema("pl94_production")


def pl94_state(scale: float, people: int, counties: int = 1) -> tuple[int, Any, Any, Any]:
    """(state, hierarchy, sparse population, measured queries per level) of the smallest state
    with at least ``counties`` counties on the seed-4 spine of the 2020 tallies times ``scale``
    and ``people`` in all."""
    spine = generate_spine(
        4, totals={"US": tallies_2020()["US"].scaled(scale)}, population={"US": people}
    )
    for st in np.argsort(spine.populations()["State"]).tolist():
        hierarchy, _ = spine_state(spine, st)
        if hierarchy.parents[0].size >= counties:
            break
    pop = spine_state_sparse_population(spine, st, 3)
    measured = allocation_measured(
        load_allocation("pl94_2021_production"),
        list(hierarchy.levels),
        SCH.query_names,
        "bounded",
        schema=SCH,
    )
    return st, hierarchy, pop, measured


def pl94_release(state: tuple[int, Any, Any, Any], **kw: Any) -> Any:
    """One sparse TopDown release of ``pl94_state``'s state (noise seed 1; ``kw`` to
    ``sparse_topdown``)."""
    from auditlib.simulate.sparse_topdown import noise_rngs, sparse_topdown

    st, hierarchy, pop, measured = state
    return sparse_topdown(
        hierarchy.parents,
        hierarchy.levels,
        pop.pl94,
        pop.pl94_invariants,
        measured,
        noise_rngs(1, st, len(hierarchy.levels)),
        **kw,
    )
