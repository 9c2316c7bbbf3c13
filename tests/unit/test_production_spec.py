"""A spec of TopDown on a production schema: every query of the allocation measured at every spine
level (hhinstlevels and the DHC's queries included), and a plan whose blocks are planned at
their capacity with the units their left-out cells are counted from."""

from __future__ import annotations

from typing import Any

import numpy as np

from auditlib.allocations import load_allocation
from auditlib.geography.schema import schema
from flows.spec import parse_spec
from flows.spec.plan import make_plan
from flows.spec.sources import load_spine, spine_geolevels, topdown_measured


def test_every_query_of_the_allocation_is_measured() -> None:
    for alloc, name in (
        ("pl94_2021_production", "pl94_production"),
        ("dhc_2023_production", "dhc_production"),
    ):
        a = load_allocation(alloc)
        levels = spine_geolevels(a.geolevels("persons", "US"))
        measured = topdown_measured(
            alloc, a.geolevels("persons", "US"), name, "add_remove", "persons", "US", on_spine=True
        )
        sch = schema(name)
        for g, level in zip(levels, measured, strict=True):
            # the allocation's own queries at that level, each once, as the schema names them
            want = sorted({sch.canonical_query(q.query) for q in a.select("persons", "US", g)})
            assert sorted({q for q, _ in level}) == want, (alloc, g)
    assert "hhinstlevels" in {q for q, _ in measured[1]} or name == "dhc_production"


def spine_production(replicates: int) -> dict[str, Any]:
    """The spec mapping of TopDown of the PL94-171 production schema and allocation on the
    spine's state ST13 (spine seed 7)."""
    return {
        "audit": {"allocation": "pl94_2021_production", "replicates": replicates},
        "population": {
            "kind": "spine",
            "seed": 7,
            "spine_states": ["ST13"],
            "attributes": "pl94_production",
        },
        "release": {"kind": "topdown"},
    }


def test_plan_blocks_at_capacity_with_their_units() -> None:
    spec = parse_spec(spine_production(replicates=3))
    plan = make_plan(spec)
    assert plan.production is not None and plan.production.schema == "pl94_production"
    spine = load_spine(7, "US")
    people = int(spine.populations()["State"][12])
    sch = schema("pl94_production")
    for b in plan.blocks:
        units = plan.production.units[b.state][b.level]
        level = plan.geolevels[b.level]
        want = 1 if level == "US" else int(spine.units_per_state(level)[12])
        assert units == want
        cells = [sch.n_query_cells(q.name) for _, q in plan.level_queries[b.level]]
        assert b.n_items == sum(min(units * c, 4 * people) for c in cells)
    assert plan.blocks[-1].n_items < np.prod([6714, sch.n_cells])  # not the dense count


def test_the_full_us_production_spec_is_accepted() -> None:
    """The full-US PL94 production spec at one replicate loads and plans: its largest Block
    block's capacity would take more than 2 GiB to write padded to it (refused at load when a
    block was written as its capacity); a capacity only reserves room on the item axis now."""
    spec = parse_spec(
        {
            "audit": {"allocation": "pl94_2021_production", "replicates": 1},
            "population": {"kind": "spine", "attributes": "pl94_production"},
            "release": {"kind": "topdown"},
        }
    )
    plan = make_plan(spec)
    assert len(plan.states) == 52  # the nation and every spine state
    largest = max(plan.blocks, key=lambda b: b.n_items)
    assert plan.geolevels[largest.level] == "Block"
    assert largest.n_items * (4 * plan.replicates + 14) > 2 << 30
