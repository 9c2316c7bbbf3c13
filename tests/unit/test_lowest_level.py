"""``release.lowest_level``: a TopDown release on the spine stopped at a geolevel releases the
levels it keeps exactly as the whole release does (a level's fit depends only on the levels above
it and on its own truth, the sums of its blocks), so the nation and the states of the whole US
can be audited without the levels below; the spec refuses it where it means nothing."""

from __future__ import annotations

import pytest

from auditlib.exceptions import SpecError
from flows.audit.flow import run_id_for
from flows.audit.production import production_runs
from flows.spec import parse_spec
from flows.spec.plan import make_plan
from tests.unit.test_production_states import _same

LABEL = "ST13"  # the smallest state of the seed-7 spine (246,980 people)


def _spec(lowest: str, attributes: str = "pl94_production", seed: int = 11) -> dict:
    allocation = "dhc_2023_production" if attributes == "dhc_production" else "pl94_2021_production"
    return {
        "audit": {"allocation": allocation, "replicates": 1, "seed": seed},
        "population": {
            "kind": "spine", "seed": 7, "spine_states": [LABEL], "attributes": attributes,
        },
        "release": {"kind": "topdown", "lowest_level": lowest},
    }  # fmt: skip


def _release(lowest: str, attributes: str = "pl94_production", seed: int = 11) -> list:
    plan = make_plan(parse_spec(_spec(lowest, attributes, seed)))
    block = next(b for b in plan.blocks if plan.geolevels[b.level] == "State")
    dps, _ = production_runs(plan, block)
    return dps[0]


def test_the_levels_kept_are_released_as_in_the_whole_release() -> None:
    whole = _release("")
    assert len(whole) == 5  # State, County, Tract, Block_Group, Block
    for lowest, n in (("State", 1), ("County", 2), ("Block_Group", 4)):
        top = _release(lowest)
        assert len(top) == n and _same(top, whole[:n]), lowest
    # power: another audit seed releases other counts at the levels kept
    assert not _same(_release("County", seed=12), whole[:2])


@pytest.mark.slow
def test_the_dhc_levels_kept_are_released_as_in_the_whole_release() -> None:
    # the DHC's hierarchy (Prim and Tract_Subset_Group between County and Tract): stopped at Prim,
    # its Tract_Subset_Groups and tracts are skipped on the way from the blocks
    whole = _release("", "dhc_production")
    assert len(whole) == 7
    top = _release("Prim", "dhc_production")
    assert len(top) == 3 and _same(top, whole[:3])


def test_the_plan_keeps_the_levels_down_to_the_lowest() -> None:
    plan = make_plan(parse_spec(_spec("County")))
    assert plan.geolevels == ("US", "State", "County")
    assert {plan.geolevels[b.level] for b in plan.blocks} == {"US", "State", "County"}
    dhc = make_plan(parse_spec(_spec("Tract_Subset_Group", "dhc_production")))
    assert dhc.geolevels == ("US", "State", "County", "Prim", "Tract_Subset_Group")


def test_the_run_id_of_a_spec_without_it_is_unchanged() -> None:
    # specs written before the setting resume into the stores they started
    plain = _spec("")
    plain["release"].pop("lowest_level")
    assert run_id_for(parse_spec(plain)) == run_id_for(parse_spec(_spec("")))
    assert run_id_for(parse_spec(_spec("County"))) != run_id_for(parse_spec(plain))


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"release": {"lowest_level": "Tract_Subset"}},
         "unknown geolevel 'Tract_Subset'; allowed: State, County, Tract, Block_Group, Block"),
        ({"release": {"lowest_level": "US"}}, "unknown geolevel 'US'"),
        ({"population": {"kind": "synthetic", "states": 2}, "release": {"lowest_level": "County"}},
         "stops a TopDown release on the spine"),
        ({"population": {"kind": "synthetic", "states": 2},
          "release": {"kind": "allocation", "lowest_level": "County"}},
         "stops a TopDown release on the spine"),
    ],
)  # fmt: skip
def test_a_lowest_level_that_means_nothing_is_refused(change: dict, words: str) -> None:
    spec = _spec("")
    for section, keys in change.items():
        spec[section] = {**spec[section], **keys}
    if spec["population"]["kind"] == "synthetic":
        spec["population"] = {"kind": "synthetic", "states": 2}
    with pytest.raises(SpecError, match=r"release\.lowest_level") as exc:
        parse_spec(spec)
    assert words in str(exc.value)


def test_the_reports_release_line_says_where_the_release_stops() -> None:
    from flows.report.release import release_line

    line = release_line({"spec_toml": parse_spec(_spec("County")).to_toml()})
    assert line is not None
    assert "down to County (Tract, Block_Group, Block not simulated)" in line
    whole = release_line({"spec_toml": parse_spec(_spec("")).to_toml()})
    assert whole is not None and "down to" not in whole
