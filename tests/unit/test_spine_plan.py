"""The audit plan on the US spine (population.kind = "spine"): levels, blocks per state, bad input.

Unit counts are checked against the 2020 National Geographic Tallies (50 states + DC: 3,143
counties, 84,414 tracts, 239,780 block groups, 8,132,968 blocks; Puerto Rico: 78, 981, 2,555,
41,987), which the spine reproduces level by level.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from auditlib.exceptions import SpecError
from auditlib.geography.spine import PRIM_LEVELS, Spine, generate_spine
from flows.audit.blocks import topdown_state
from flows.spec import parse_spec
from flows.spec.plan import make_plan

SEED = 5  # population.seed: the spine's seed

TALLIES = {
    "US": {"County": 3_143, "Tract": 84_414, "Block_Group": 239_780, "Block": 8_132_968},
    "PR": {"County": 78, "Tract": 981, "Block_Group": 2_555, "Block": 41_987},
}


def spine_spec(
    states: Any = "all", allocation: str = "pl94_2021_production", **more: Any
) -> dict[str, Any]:
    region = more.pop("region", "US")
    return {
        "audit": {"allocation": allocation, "region": region, "replicates": 2, "seed": 3},
        "population": {"kind": "spine", "seed": SEED, "spine_states": states, **more},
        "release": {"kind": "topdown"},
    }


@pytest.fixture(scope="module")
def spine() -> Spine:
    return generate_spine(SEED)  # built here, independently of the plan's cached spine


def test_all_states_hold_the_2020_unit_counts() -> None:
    plan = make_plan(parse_spec(spine_spec()))
    assert plan.states == ("US", *(f"ST{i:02d}" for i in range(1, 52)))
    assert plan.geolevels == ("US", "State", "County", "Tract", "Block_Group", "Block")
    assert plan.spine is not None and plan.spine.seed == SEED
    for level, total in TALLIES["US"].items():
        gi = plan.geolevels.index(level)
        assert sum(b.n_items for b in plan.blocks_at(gi)) == total, level  # total: one cell
    # one region per (state, level): the nation only at US, every state at every other level
    assert {(b.state, b.level) for b in plan.blocks} | set(plan.empty) == {
        (s, g) for s in range(52) for g in range(6)
    }
    assert [b.label for b in plan.blocks_at(0)] == ["US/US"]
    assert [b.state_key for b in plan.blocks_at(1)] == list(range(1, 52))


def test_chosen_states_and_their_blocks(spine: Spine) -> None:
    plan = make_plan(parse_spec(spine_spec(["ST07", "ST02"])))
    assert plan.states == ("US", "ST02", "ST07")  # in spine order
    blocks = {b.label: b.n_items for b in plan.blocks}
    for name, index in (("ST02", 1), ("ST07", 6)):
        assert blocks[f"{name}/Block"] == int(np.sum(spine.state_of("Block") == index))
        assert blocks[f"{name}/County"] == int(np.sum(spine.state_of("County") == index))
    assert make_plan(parse_spec(spine_spec(2))).states == ("US", "ST01", "ST02")


def test_puerto_rico_is_its_own_run() -> None:
    plan = make_plan(parse_spec(spine_spec(region="PR")))
    assert plan.states == ("PR",)
    assert plan.geolevels == ("State", "County", "Tract", "Block_Group", "Block")
    for level, total in TALLIES["PR"].items():
        assert plan.blocks_at(plan.geolevels.index(level))[0].n_items == total


def test_dhc_levels_are_mapped_onto_the_spine(spine: Spine) -> None:
    """Prim and Tract_Subset_Group stand on the spine's drawn ones, Tract_Subset on its tracts."""
    plan = make_plan(parse_spec(spine_spec(["ST03"], allocation="dhc_2023_production")))
    assert plan.geolevels == (
        "US", "State", "County", "Prim", "Tract_Subset_Group", "Tract_Subset", "Block_Group",
        "Block",
    )  # fmt: skip
    for g, level in (("Tract_Subset", "Tract"), ("Prim", "Prim"), ("Tract_Subset_Group",) * 2):
        gi = plan.geolevels.index(g)
        assert plan.blocks_at(gi)[0].n_items == int(np.sum(spine.state_of(level) == 2)), g
    res, _, _ = topdown_state(plan, plan.blocks_at(1)[0])  # the release runs on those levels
    spine_levels = PRIM_LEVELS
    for g, level in zip(plan.geolevels[1:], spine_levels, strict=True):
        r = res[plan.geolevels.index(g)].residual
        assert r.shape == (2, int(np.sum(spine.state_of(level) == 2))), g
        np.testing.assert_array_equal(r.sum(axis=1), 0)  # consistent with the invariant total


def test_state_release_is_consistent_and_keeps_the_state_total(spine: Spine) -> None:
    plan = make_plan(parse_spec(spine_spec(["ST04"])))
    block = plan.blocks_at(plan.geolevels.index("State"))[0]
    res, state_dp, state_truth = topdown_state(plan, block)
    truth = int(spine.block_population[spine.state_of("Block") == 3].sum())
    assert state_truth.tolist() == [truth]
    np.testing.assert_array_equal(state_dp[:, 0], truth)  # invariant in every replicate
    blocks = res[plan.geolevels.index("Block")]
    assert blocks.residual.shape == (2, int(np.sum(spine.state_of("Block") == 3)))
    assert (blocks.residual != 0).any()  # the blocks are noisy
    np.testing.assert_array_equal(blocks.residual.sum(axis=1), 0)  # and sum to the invariant


@pytest.mark.parametrize(
    ("data", "pattern"),
    [
        (spine_spec(["ST52"]), r"unknown state 'ST52' for region 'US'; allowed: ST01\.\.ST51"),
        (spine_spec(["PR"]), r"unknown state 'PR'.*audit\.region = \"PR\""),
        (spine_spec(["ST01", "ST01"]), r"repeats 'ST01'"),
        (spine_spec([]), r"spine_states = \[\]: name at least one state"),
        (spine_spec(52), r"spine_states = 52: region 'US' has 51 state\(s\); use 1\.\.51"),
        (spine_spec(0), r"spine_states = 0: need a count >= 1"),
        (spine_spec("ST01"), r"spine_states = 'ST01': use \"all\", a count of states, or a list"),
        (spine_spec(2, region="PR"), r"region 'PR' has 1 state\(s\); use 1\.\.1"),
        (spine_spec(states=1, fanout={"Tract": 2}), r"population\.fanout is a setting of the "),
        (
            {**spine_spec(), "release": {"kind": "allocation"}},
            r"release\.kind = 'allocation' needs population\.kind = 'synthetic' \(got 'spine'\); "
            r"valid combinations .*spine: topdown",
        ),
        (
            {**spine_spec(), "release": {"kind": "gdpc"}},
            r"needs population\.kind = 'flaxman' or 'table' \(got 'spine'\)",
        ),
        (spine_spec(attributes="dhc"), r"population\.attributes = 'dhc': not allowed"),
        (
            spine_spec(allocation="dhc_2023_production", attributes="pl94", region="US", states=1),
            None,
        ),
    ],
)
def test_bad_spine_specs_name_the_value(data: dict[str, Any], pattern: str | None) -> None:
    if pattern is None:  # the control: a valid spine spec parses
        assert parse_spec(data).population.kind == "spine"
        return
    with pytest.raises(SpecError, match=pattern):
        parse_spec(data)


def test_spine_states_need_the_spine() -> None:
    with pytest.raises(
        SpecError, match=r"spine_states = \['ST01'\] needs population\.kind = \"spine\""
    ):
        parse_spec({"population": {"spine_states": ["ST01"]}})


def test_a_count_or_list_refuses_synthetic_states() -> None:
    with pytest.raises(SpecError, match=r"population\.states is a setting of the synthetic"):
        parse_spec({**spine_spec(), "population": {"kind": "spine", "states": 2}})


@pytest.mark.parametrize("name", ["pl94_production_us", "dhc_production_us"])
def test_the_full_us_production_specs_are_accepted_at_1_10_and_100_replicates(
    name: str, tmp_path: Any
) -> None:
    """The shipped full-US specs load, plan and get their store's template at 100 replicates:
    every state's blocks planned, the residual array (replicates × items) reserved, no block data
    written (the capacity of a spine block is not bounded at load: it is written in pieces)."""
    import tomllib
    from pathlib import Path

    from storage.result_store import ResultStore

    path = Path(__file__).parents[2] / "benchmarks" / "specs" / f"{name}.toml"
    data = tomllib.loads(path.read_text())
    levels = 8 if name.startswith("dhc") else 6  # US State County Tract BG Block (+ the DHC's 2)
    items = []
    for replicates in (1, 10, 100):
        data["audit"]["replicates"] = replicates
        s = parse_spec(data, path.name)
        plan = make_plan(s)
        assert plan.replicates == replicates and len(plan.blocks) == 51 * (levels - 1) + 1
        items.append(plan.block_items().sum())
    assert items[0] < items[1] < items[2]  # more replicates release more distinct cells
    url = str(tmp_path / "r100.zarr")
    store = ResultStore.at(url)
    store.create_residual_template(
        **plan.template_layout(), replicate_chunk=s.cluster.replicates_per_task, attrs={}
    )
    assert store.template_complete()
    residual = store.residual_array("residual")
    assert residual.shape[0] == 100 and residual.shape[1] >= items[2]
    written = sum(f.stat().st_size for f in tmp_path.rglob("*") if f.is_file())
    assert written < 1 << 20, written  # metadata only
