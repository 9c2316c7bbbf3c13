"""Direct estimates built from an audit spec: D is exactly the population the audit simulates."""

from __future__ import annotations

from typing import Any

import numpy as np

from auditlib.simulate.neighbours_hist import HistogramDatabase
from flows.plan import make_plan, state_population, topdown_state
from flows.spec import parse_spec

FANOUT = {"County": 2, "Tract": 2, "Block_Group": 2, "Block": 3}


def topdown_spec(attributes: str, **population: Any) -> dict[str, Any]:
    return {
        "audit": {"allocation": "pl94_2021_production", "replicates": 1, "seed": 11},
        "population": {"states": 2, "fanout": FANOUT, "attributes": attributes, **population},
        "release": {"kind": "topdown"},
    }


def test_synthetic_pl94_database_is_the_audits_population() -> None:
    plan = make_plan(parse_spec(topdown_spec("pl94")))
    assert plan.topdown is not None
    for key in (1, 2):
        db = HistogramDatabase.from_synthetic(plan.hierarchy, plan.population, key, "pl94")
        _, hist = state_population(plan, key)
        np.testing.assert_array_equal(db.histograms, hist)
        # the audit's own TopDown run of that state: its true counts at every level and query
        # (the store's `truth`) are those of D
        block = next(b for b in plan.blocks if b.state_key == key and b.geolevel == 1)
        residuals, _, state_truth = topdown_state(plan, block)
        np.testing.assert_array_equal(state_truth, db.level_histograms()[0][0])
        for gi, res in residuals.items():
            level = db.level_index(plan.geolevels[gi])
            for qi in np.unique(res.query_index):
                m = res.query_index == qi
                counts = db.query_counts(level, plan.queries[qi])
                np.testing.assert_array_equal(
                    res.truth[m], counts[res.unit_index[m], res.cell_index[m]]
                )
    # the two states differ (the stream is keyed by the state)
    a = state_population(plan, 1)[1]
    b = state_population(plan, 2)[1]
    assert a.shape == b.shape and not np.array_equal(a, b)


def test_synthetic_total_database_is_the_audits_population() -> None:
    plan = make_plan(parse_spec(topdown_spec("total")))
    db = HistogramDatabase.from_synthetic(plan.hierarchy, plan.population, 2, "total")
    hier, hist = state_population(plan, 2)
    np.testing.assert_array_equal(db.histograms, hist)
    assert db.levels == hier.levels
