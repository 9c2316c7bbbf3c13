"""The TopDown library's entry points do what their names say: an allocation's queries the schema
cannot express are refused by name, a synthetic state is one call (the audit's population), the
plan's measurements are keyed by level name."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from auditlib.allocations import load_allocation
from auditlib.exceptions import InvalidParameterError, UnknownNameError
from auditlib.geography import PopulationParams, SyntheticHierarchy
from auditlib.geography.schema import schema
from auditlib.simulate.topdown import (
    allocation_measured,
    synthetic_state,
    unexpressible_queries,
)

LEVELS = ("State", "County", "Tract", "Block_Group", "Block")


def test_allocation_measured_names_the_queries_it_cannot_express():
    """Without the ``cenrace`` alias the race queries (and the detailed measurement spelt as the
    product of all attributes) used to be dropped silently: 5 measurements per level, not 9."""
    from auditlib.simulate.topdown import unexpressible_queries

    alloc = load_allocation("pl94_2021_production")
    pl94 = schema("pl94")
    races = [
        "cenrace",
        "hispanic * cenrace",
        "votingage * cenrace",
        "votingage * hispanic * cenrace",
    ]
    with pytest.raises(UnknownNameError) as err:
        allocation_measured(alloc, LEVELS, pl94.query_names, "bounded")
    for q in [*races, "hhgq", "hhinstlevels"]:
        assert repr(q) in str(err.value)
    assert "attribute_aliases" in str(err.value) and "skip=" in str(err.value)
    names = {"attribute_aliases": {"cenrace": "race"}, "detailed_as": "votingage * hispanic * race"}
    with pytest.raises(UnknownNameError, match=r"'hhgq', 'hhinstlevels', which") as err:
        allocation_measured(alloc, LEVELS, pl94.query_names, "bounded", **names)
    assert "cenrace" not in str(err.value).split("which")[0]
    skip = unexpressible_queries(alloc, LEVELS, pl94.query_names, **names)
    assert skip == ("hhgq", "hhinstlevels")
    measured = allocation_measured(alloc, LEVELS, pl94.query_names, "bounded", skip=skip, **names)
    assert [len(level) for level in measured] == [9, 9, 9, 9, 9]  # State..Block, total included
    # skipping a query on purpose is the caller's choice: the race queries left out
    fewer = allocation_measured(alloc, LEVELS, pl94.query_names, "bounded", skip=[*skip, *races])
    assert [len(level) for level in fewer] == [5, 5, 5, 5, 5]


def _pl94_spec(**population):
    from flows.spec import parse_spec

    fan = {"County": 2, "Tract": 3, "Block_Group": 2, "Block": 4}
    return parse_spec(
        {
            "audit": {"allocation": "pl94_2021_production", "seed": 3},
            "population": {"states": 2, "fanout": fan, "attributes": "pl94", **population},
            "release": {"kind": "topdown"},
        }
    )


def test_plan_measurements_are_keyed_by_level_name():
    from flows.spec.plan import make_plan

    plan = make_plan(_pl94_spec())
    assert plan.topdown is not None
    assert list(plan.topdown.measured) == list(plan.geolevels)  # US, State, ..., Block
    pl94 = schema("pl94")
    names = {"attribute_aliases": {"cenrace": "race"}, "detailed_as": "votingage * hispanic * race"}
    alloc = load_allocation("pl94_2021_production")
    skip = unexpressible_queries(alloc, ("County",), pl94.query_names, **names)
    county = allocation_measured(
        alloc, ("County",), pl94.query_names, "add_remove", skip=skip, **names
    )
    assert list(plan.topdown.measured["County"]) == county[0]
    assert "total" not in {q for q, _ in plan.topdown.measured["US"]}  # the US has no total query


def test_synthetic_state_is_the_audits_population():
    """One library call builds the state an audit of the same hierarchy runs TopDown on."""
    from flows.audit.blocks import state_population
    from flows.spec.plan import make_plan

    spec = _pl94_spec(mean_block_population=12.0, empty_block_share=0.3)
    plan = make_plan(spec)
    for key in (1, 2):
        h_flow, hist_flow = state_population(plan, key)
        h_lib, hist_lib = synthetic_state(plan.hierarchy, plan.population, key, "pl94")
        assert h_lib.levels == h_flow.levels == LEVELS
        for a, b in zip(h_lib.parents, h_flow.parents, strict=True):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(hist_lib, hist_flow)
    # the same call, written out without a spec
    h = SyntheticHierarchy(LEVELS, (2, 3, 2, 4), n_states=2)
    params = PopulationParams(
        seed=plan.population.seed, mean_block_population=12.0, empty_block_share=0.3
    )
    hierarchy, hist = synthetic_state(h, params, 2, "pl94")
    np.testing.assert_array_equal(hist, state_population(plan, 2)[1])
    assert hist.shape == (48, 28) and hierarchy.n_units(1) == 2
    _, total = synthetic_state(h, params, 2)  # the total schema: block populations
    np.testing.assert_array_equal(total[:, 0], hist.sum(axis=1))
    with pytest.raises(InvalidParameterError, match="Invalid state: 3"):
        synthetic_state(h, params, 3)


DOCS = Path(__file__).resolve().parents[2] / "docs" / "simulation.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S)


def test_the_topdown_snippet_of_the_docs_runs_as_written():
    block = next(b for b in _python_blocks() if "topdown(h, block_hist" in b)
    ns: dict[str, Any] = {}
    exec(compile(block, str(DOCS), "exec"), ns)
    rel = ns["rel"]
    assert ns["county"].shape == (3, 28) and ns["county"].dtype == np.int64
    assert rel.dp[0].sum() == rel.truth[0].sum()  # the invariant state total
    assert [len(level) for level in ns["measured"]] == [9] * 5
    assert ns["pops"].shape[1] == 1 and ns["spine_h"].levels[-1] == "Block"


def test_the_flaxman_snippets_of_the_docs_run_as_written():
    blocks = _python_blocks()
    ns: dict[str, Any] = {}
    for marker in ("generate_population(1_000_000", "simulate_residuals(pop"):
        exec(compile(next(b for b in blocks if marker in b), str(DOCS), "exec"), ns)
    assert ns["res"]["L3"].shape == (500, 9261) and ns["res"]["L3"].dtype == np.float32
