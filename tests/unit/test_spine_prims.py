"""The DHC's Prim and Tract_Subset_Group levels on the spine (``auditlib/geography/spine_prims.py``):
they nest (one parent each, children contiguous, each Prim inside one county), add up to the spine's
counties and tracts, are reproducible, leave every earlier draw of the spine bit for bit as it was,
and group tracts exactly by the DAS's rule — checked against its ``group_elements_orig``, copied
from ``das_decennial/programs/geographic_spines/optimize_spine.py`` L23–24 (DAS_2020_DHC_Production_
Code at 38ea5f2), with the cutoff of ``call_optimize_prim_spine`` (L712–809) and ``fanout_cutoff =
12`` (``programs/reader/table_reader.py`` L637–640)."""

from __future__ import annotations

import hashlib
from itertools import pairwise

import numpy as np
import pytest

from auditlib import seeds
from auditlib.exceptions import InvalidParameterError, UnknownNameError
from auditlib.geography import spine as spine_module
from auditlib.geography.spine import (
    LEVELS,
    PRIM_LEVELS,
    SPINE_PRIMS,
    Spine,
    generate_spine,
    tallies_2020,
)
from auditlib.geography.spine_prims import draw_prims, group_tracts, prim_parents, tsg_cutoff
from auditlib.simulate.topdown import spine_state

#: the benchmarks' spine seed (benchmarks/bench_sparse_topdown.py): its S41 holds a county of
#: 4,391 tracts
SEED = 20200325


def group_elements_orig(elements, cutoff):  # type: ignore[no-untyped-def]
    """The DAS's, verbatim (optimize_spine.py L23–24)."""
    return [
        elements[k * cutoff : (k + 1) * cutoff] for k in range(int(np.ceil(len(elements) / cutoff)))
    ]


def das_group_sizes(n: int, fanout_cutoff: int = 12) -> list[int]:
    """Tract subsets per group of a Prim of ``n``: ``call_optimize_prim_spine``'s cutoff."""
    cutoff = int(np.sqrt(n) + fanout_cutoff + 1)
    return [len(g) for g in group_elements_orig([f"{k:06d}" for k in range(n)], cutoff)]


def _digest(s: Spine) -> str:
    """sha256 of the spine's draws before the Prims (state names, parents, block populations)."""
    h = hashlib.sha256("\x00".join(s.state_names).encode())
    for level in LEVELS[1:]:
        h.update(level.encode())
        h.update(np.ascontiguousarray(s.parents[level]).tobytes())
    h.update(np.ascontiguousarray(s.block_population).tobytes())
    return h.hexdigest()[:16]


@pytest.fixture(scope="module")
def full() -> Spine:
    return generate_spine(SEED, puerto_rico=True)


def _small(seed: int, regions: tuple[str, ...] = ("US", "PR")) -> Spine:
    t = tallies_2020()
    return generate_spine(
        seed, regions=regions, totals={"US": t["US"].scaled(0.01), "PR": t["PR"].scaled(0.05)}
    )


def test_the_spine_drawn_before_the_prims_is_unchanged(full: Spine) -> None:
    # digests of the same spines computed before the Prim levels existed (main at 87d0a7e)
    assert _digest(_small(3)) == "8e835022ecbc7ce1"
    assert _digest(full) == "c4afc92b0c8b18c7"
    # and the base draw alone (no Prim stream) gives the same arrays
    t = tallies_2020()["US"]
    base, pops = spine_module._region(t, spine_module.SpineModel(), 331_449_281, SEED, 0)
    for level in LEVELS[1:]:
        np.testing.assert_array_equal(full.parents[level][: base[level].size], base[level])
    np.testing.assert_array_equal(full.block_population[: pops.size], pops)
    assert set(full.parents) == set(LEVELS[1:])  # the Prim links are kept apart


def test_the_levels_nest_and_add_up(full: Spine) -> None:
    links = full.parents_over(PRIM_LEVELS)
    for (up, lo), p in zip(pairwise(PRIM_LEVELS), links, strict=True):
        assert p.dtype == np.int32 and p.size == full.n_units(lo), lo
        assert (np.diff(p) >= 0).all(), lo  # children contiguous, in parent order
        kids = np.bincount(p, minlength=full.n_units(up))
        assert kids.size == full.n_units(up) and kids.min() >= 1, up  # every parent has a child
    county, prim, tsg, tract = links[0], links[1], links[2], links[3]
    # each Prim's tracts lie in one county, each group's in one Prim: composing gives the spine's
    np.testing.assert_array_equal(prim[tsg[tract]], full.parents["Tract"])
    np.testing.assert_array_equal(county[prim[tsg[tract]]], county[full.parents["Tract"]])
    tracts_per_county = np.bincount(full.parents["Tract"])
    prims_per_county = np.bincount(prim, minlength=full.n_units("County"))
    assert (prims_per_county >= 1).all() and (prims_per_county <= tracts_per_county).all()
    n_us = 51
    for level in ("Prim", "Tract_Subset_Group"):
        per_state = full.units_per_state(level)
        assert int(per_state.sum()) == full.n_units(level) and (per_state >= 1).all()
    # Puerto Rico's Prims are its counties (define_spines.py L15–17)
    pr = full.state_of("County") == n_us
    np.testing.assert_array_equal(prims_per_county[pr], 1)
    assert full.units_per_state("Prim")[n_us] == int(pr.sum())
    # the skew drawn: many Prims in the largest county, most counties a handful
    big = int(np.argmax(tracts_per_county))
    assert tracts_per_county[big] == 4391 and 100 < prims_per_county[big] <= 200
    assert 5 < full.n_units("Prim") / full.n_units("County") < 12


def test_prims_are_reproducible_and_each_region_draws_its_own() -> None:
    a, b, c = _small(3), _small(3), _small(4)
    for level in ("Prim", "Tract_Subset_Group", "Tract"):
        np.testing.assert_array_equal(a.prim_parents[level], b.prim_parents[level])
    assert not np.array_equal(a.prim_parents["Tract"], c.prim_parents["Tract"])
    us = _small(3, ("US",))
    n = us.n_units("Prim")
    np.testing.assert_array_equal(us.prim_parents["Prim"], a.prim_parents["Prim"][:n])
    pr = _small(3, ("PR",))
    np.testing.assert_array_equal(
        pr.prim_parents["Tract"],
        a.prim_parents["Tract"][us.n_units("Tract") :] - us.n_units("Tract_Subset_Group"),
    )
    # the stream is (SPINE_PRIMS, region): the library's functions on it give the spine's links
    county = us.parents["Tract"].astype(np.int64)
    got = prim_parents(county, us.n_units("County"), seeds.rng(3, SPINE_PRIMS, 0))
    for level, link in got.items():
        np.testing.assert_array_equal(link, us.prim_parents[level])


@pytest.mark.parametrize("n", [1, 17, 18, 100, 1000, 2500])
def test_groups_follow_the_das_rule(n: int) -> None:
    tsg_prim, tract_tsg = group_tracts(np.zeros(n, np.int64), 1)
    assert np.bincount(tract_tsg).tolist() == das_group_sizes(n)
    np.testing.assert_array_equal(tsg_prim, 0)
    assert int(tsg_cutoff(n)) == int(np.sqrt(n) + 13)


def test_groups_of_many_prims_at_once_follow_the_das_rule() -> None:
    sizes = [1, 17, 18, 100, 1000, 2500, 3, 64, 65]
    tsg_prim, tract_tsg = group_tracts(np.repeat(np.arange(len(sizes)), sizes), len(sizes))
    per_prim = np.split(np.bincount(tract_tsg), np.cumsum(np.bincount(tsg_prim))[:-1])
    assert [g.tolist() for g in per_prim] == [das_group_sizes(n) for n in sizes]
    assert (np.diff(tract_tsg) >= 0).all() and (np.diff(tsg_prim) >= 0).all()


def test_every_prim_of_the_us_spine_is_grouped_as_the_das_would(full: Spine) -> None:
    prim, tsg, tract = full.parents_over(("County", "Prim", "Tract_Subset_Group", "Tract"))
    n = np.bincount(tsg[tract], minlength=prim.size)  # tracts per Prim
    groups = np.bincount(tract)  # tracts per group, in Prim order
    per_prim = np.split(groups, np.cumsum(np.bincount(tsg, minlength=prim.size))[:-1])
    assert all(g.tolist() == das_group_sizes(int(k)) for g, k in zip(per_prim, n, strict=True))
    assert (groups <= np.sqrt(n[tsg]).astype(np.int64) + 13).all()  # the fan-out bound


def test_a_state_over_the_prim_levels(full: Spine) -> None:
    st = 12
    base, pops = spine_state(full, st)
    same, _ = spine_state(full, st, LEVELS)
    assert base.levels == same.levels == LEVELS
    for a, b in zip(base.parents, same.parents, strict=True):
        np.testing.assert_array_equal(a, b)
    h, pops7 = spine_state(full, st, PRIM_LEVELS)
    assert h.levels == PRIM_LEVELS
    np.testing.assert_array_equal(pops7, pops)
    # tracts re-parented under groups under Prims under the same counties
    county, prim, tsg, tract = h.parents[0], h.parents[1], h.parents[2], h.parents[3]
    np.testing.assert_array_equal(prim[tsg[tract]], base.parents[1])
    np.testing.assert_array_equal(county, base.parents[0])
    for level, p in zip(PRIM_LEVELS[1:], h.parents, strict=True):
        assert p.size == int(full.units_per_state(level)[st]), level
    # a chain skipping a level composes through it
    skip, _ = spine_state(full, st, ("State", "County", "Prim", "Tract", "Block_Group", "Block"))
    np.testing.assert_array_equal(skip.parents[2], tsg[tract])


def test_bad_input_is_refused(full: Spine) -> None:
    with pytest.raises(InvalidParameterError, match="sorted by county"):
        draw_prims(np.array([1, 0]), 2, np.random.default_rng(0))
    with pytest.raises(InvalidParameterError, match=r"every county 0\.\.2"):
        draw_prims(np.array([0, 0, 2]), 3, np.random.default_rng(0))
    with pytest.raises(InvalidParameterError, match="sorted by Prim"):
        group_tracts(np.array([0, 2]), 3)
    bare = Spine(full.state_names, full.parents, full.block_population)  # no Prims drawn
    assert bare.units_per_state("County").sum() == full.n_units("County")
    with pytest.raises(UnknownNameError, match="no 'Prim' level"):
        bare.units_per_state("Prim")
    with pytest.raises(UnknownNameError, match="in that order"):
        full.parents_over(("State", "Prim", "County"))
    with pytest.raises(InvalidParameterError, match="from State to Block"):
        spine_state(full, 0, ("County", "Block"))
