"""A production state's release does not depend on which other states the audit runs beside it
(``benchmarks/production_states.py`` runs a national audit in batches of states on that ground):
its people are drawn from the spine by the state's own index and its noise keyed by that index and
the audit's seed, so the state's released histograms at every level are the same alone, first or
last among others; and another audit seed gives another release (the comparison can fail)."""

from __future__ import annotations

import numpy as np

from flows.audit.production import production_runs
from flows.spec import parse_spec
from flows.spec.plan import make_plan

SEED = 7  # the spine's and the people's (population.seed)
LABEL = "ST13"  # the smallest state of the seed-7 spine (246,980 people)


def _spec(states: list[str], seed: int = 11) -> dict:
    return {
        "audit": {"allocation": "pl94_2021_production", "replicates": 1, "seed": seed},
        "population": {
            "kind": "spine",
            "seed": SEED,
            "spine_states": states,
            "attributes": "pl94_production",
        },
        "release": {"kind": "topdown"},
    }


def _release(states: list[str], seed: int = 11) -> list:
    plan = make_plan(parse_spec(_spec(states, seed)))
    block = next(
        b
        for b in plan.blocks
        if plan.states[b.state] == LABEL and plan.geolevels[b.level] == "State"
    )
    dps, _ = production_runs(plan, block)
    return dps[0]


def _same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(
        np.array_equal(x.indptr, y.indptr)
        and np.array_equal(x.cells, y.cells)
        and np.array_equal(x.counts, y.counts)
        for x, y in zip(a, b, strict=True)
    )


def test_a_states_release_is_the_same_alone_and_among_other_states() -> None:
    alone = _release([LABEL])
    assert len(alone) == 5  # State, County, Tract, Block_Group, Block
    assert _same(alone, _release(["ST08", LABEL, "ST45"]))
    assert _same(alone, _release([LABEL, "ST08"]))
    assert not _same(alone, _release([LABEL], seed=12))  # another audit seed: another release
