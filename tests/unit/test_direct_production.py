"""The direct route over the production schemas (``population.attributes = "pl94_production"``,
``"dhc_production"``): neighbouring histograms respecting the production constraints, every query of
the production allocation measured, the moved counts checked against brute force and the
accounting's closed form, and what the route cannot hold refused before any store."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from auditlib.allocations import load_allocation
from auditlib.exceptions import DPAuditError, InvalidParameterError
from auditlib.geography.schema import schema
from auditlib.simulate.neighbours_hist import (
    HistogramDatabase,
    accounting_components,
    add_person,
    move_person,
    remove_person,
)
from flows.spec.sources import topdown_measured

PL94_LEVELS = ("State", "County", "Block")
DHC_LEVELS = ("State", "Block")


def _database(name: str, levels: tuple[str, ...], seed: int) -> HistogramDatabase:
    """A small state: 1 county over 3 blocks (PL94) or 2 blocks (DHC); a few people per block in
    cells drawn at random, none a minor in group quarters (no production constraint breaks)."""
    sch = schema(name)
    rng = np.random.default_rng(seed)
    n_blocks = 3 if len(levels) == 3 else 2
    hist = np.zeros((n_blocks, sch.n_cells), dtype=np.int64)
    for b in range(n_blocks):
        for c in rng.integers(0, sch.n_cells, size=40):
            at = np.unravel_index(int(c), sch.shape)
            gq = at[0] >= 18 if name == "dhc_production" else at[0] >= 1
            minor = at[2] < 18 if name == "dhc_production" else at[1] == 0
            if not (gq and minor):
                hist[b, c] += 1
    parents: tuple[Any, ...] = (np.zeros(n_blocks, dtype=np.int64),)
    if len(levels) == 3:
        parents = (np.zeros(1, dtype=np.int64), *parents)
    return HistogramDatabase(sch, levels, parents, hist, 1)


def _measured(
    allocation: str, name: str, geolevels: tuple[str, ...], levels: tuple[str, ...]
) -> Any:
    m = topdown_measured(allocation, geolevels, name, "add_remove", "persons", "US")
    return [m[geolevels.index(g)] for g in levels]


def _brute_force(pair: Any, level: int, query: str) -> dict[tuple[int, int], int]:
    diff = pair.d_prime.query_counts(level, query) - pair.d.query_counts(level, query)
    return {(int(u), int(c)): int(diff[u, c]) for u, c in zip(*np.nonzero(diff), strict=True)}


PL94_GEO = ("US", "State", "County", "Tract", "Block_Group", "Block")
DHC_GEO = (
    "US",
    "State",
    "County",
    "Prim",
    "Tract_Subset_Group",
    "Tract_Subset",
    "Block_Group",
    "Block",
)


@pytest.mark.parametrize(
    ("name", "allocation", "geolevels", "levels", "n_queries"),
    [
        ("pl94_production", "pl94_2021_production", PL94_GEO, PL94_LEVELS, 11),
        ("dhc_production", "dhc_2023_production", DHC_GEO, DHC_LEVELS, 10),
    ],
)
def test_every_production_query_measured_and_moved_counts_match_brute_force(
    name: str, allocation: str, geolevels: tuple[str, ...], levels: tuple[str, ...], n_queries: int
) -> None:
    measured = _measured(allocation, name, geolevels, levels)
    alloc = load_allocation(allocation)
    # every query of the allocation at each level, none dropped (recodes such as hhinstlevels too)
    for lv, m in zip(levels, measured, strict=True):
        assert len(m) == len(alloc.select("persons", "US", lv)) == n_queries
    db = _database(name, levels, seed=3)
    sch = db.schema
    src = int(np.flatnonzero(db.histograms[0])[0])
    # a person added, removed, moved to another block, and moved between unit types in a block
    other = int(
        np.ravel_multi_index(
            (0 if name == "dhc_production" else 5, *np.unravel_index(src, sch.shape)[1:]), sch.shape
        )
    )
    pairs = {
        "add": add_person(db, 1, src),
        "remove": remove_person(db, 0, src),
        "move": move_person(db, 0, src, 1),
        "move_type": move_person(db, 0, src, 0, other) if other != src else None,
    }
    for kind, pair in pairs.items():
        if pair is None or (name == "dhc_production" and kind in ("remove", "move")):
            continue  # the DHC's dense brute force is slow: one addition and one type change
        for i, lv in enumerate(measured):
            for q, _ in lv:
                assert pair.count_difference(i, q) == _brute_force(pair, i, q), (kind, i, q)
    # the closed form of one person added: every measured query moves one cell by one at every
    # level, so the components' zCDP sum_k count_k / (2 sigma2_k) is the allocation's rho over the
    # levels (its own file: rho_q per query, sigma2_q = 1 / (2 rho_q) under add/remove)
    comps = accounting_components(pairs["add"], measured)
    rho = sum(Fraction(c) / (2 * Fraction(s2)) for s2, c in comps)
    want = sum(q.rho for lv in levels for q in alloc.select("persons", "US", lv))
    assert float(rho) == pytest.approx(float(want), rel=1e-9)
    assert sum(c for _, c in comps) == sum(len(m) for m in measured)


@pytest.mark.parametrize(
    ("name", "label", "constraint"),
    [
        ("pl94_production", "nursing/under18/not_hispanic/white", "nurse_nva_0"),
        # Constraints_DHCP.py: relgq27_lt20 (nursing facilities), relgq33_lt16_gt65 (college housing)
        ("dhc_production", "gq301_nursing/female/17/hispanic/black", "relgq27_lt20"),
        ("dhc_production", "gq501_college_housing/male/14/not_hispanic/asian", "relgq33_lt16_gt65"),
    ],
)
def test_a_person_is_never_put_into_a_cell_the_production_constraints_hold_at_zero(
    name: str, label: str, constraint: str
) -> None:
    db = _database(name, PL94_LEVELS if name == "pl94_production" else DHC_LEVELS, seed=5)
    src = int(np.flatnonzero(db.histograms[0])[0])
    for change in (lambda: add_person(db, 0, label), lambda: move_person(db, 0, src, 1, label)):
        with pytest.raises(InvalidParameterError, match=constraint) as err:
            change()
        assert label in str(err.value) and "choose another cell" in str(err.value)
    # the same person at the constraint's first allowed age (or in a household) may be added
    ok = label.replace("under18", "18plus").replace("/17/", "/20/").replace("/14/", "/18/")
    assert add_person(db, 0, ok).d_prime.histograms.sum() == db.histograms.sum() + 1


def _spec(name: str, kind: str, *, check: bool = True, **population: Any) -> str:
    """The TOML of a small spec (validated; ``check=False``: as written, for refusals)."""
    from flows.spec import parse_spec
    from tests.integration._specs import to_toml

    dhc = name == "dhc_production"
    fanout = {g: 1 for g in DHC_GEO[2:]} if dhc else {g: 1 for g in PL94_GEO[2:]}
    fanout["Block"] = 2
    data = {
        "audit": {"allocation": "dhc_2023_production" if dhc else "pl94_2021_production", "seed": 9},
        "population": {"states": 1, "fanout": fanout, "attributes": name,
                       "mean_block_population": 20.0, "empty_block_share": 0.0, **population},
        "release": {"kind": kind},
    }  # fmt: skip
    return parse_spec(data).to_toml() if check else to_toml(data)


@pytest.mark.parametrize(
    ("name", "label", "query", "geolevel"),
    [
        ("dhc_production", "householder_alone/male/30/not_hispanic/white", "detailed", "Block"),
        (
            "dhc_production",
            "householder_alone/male/30/not_hispanic/white",
            "sex * hispanic",
            "County",
        ),
        ("pl94_production", "college_housing/18plus/hispanic/asian", "hhinstlevels", "Block"),
    ],
)
def test_direct_allocation_release_of_a_production_schema(
    name: str, label: str, query: str, geolevel: str
) -> None:
    """D is the audit's population of the state over the production schema, D′ one person more in
    the labelled cell; the released cell's truth is the brute-force sum of D's block histograms and
    its noise the allocation's sigma2 of that query there (its file's rho)."""
    from auditlib.simulate.direct import release_range
    from flows.experiments.direct_runs import SpecDirectParams, check_spec_params

    sch = schema(name)
    cell = int(np.ravel_multi_index(
        tuple(a.levels.index(v) for a, v in zip(sch.attributes, label.split("/"), strict=True)),
        sch.shape,
    ))  # fmt: skip
    row = int(sch.cells_query_index(query, np.array([cell]))[0])
    p = SpecDirectParams(
        spec=_spec(name, "allocation"), change="add", to_block=1, to_cell=label,
        geolevel=geolevel, query=query, cell=str(row), replicates=4000, stream_chunk=2000,
    )  # fmt: skip
    e = check_spec_params(p)
    d = e.pair.d
    assert d.schema.name == name and d.n_blocks == 2
    in_row = sch.cells_query_index(query, np.arange(sch.n_cells)) == row
    truth = (
        int(d.histograms[:, in_row].sum())
        if geolevel != "Block"
        else int(d.histograms[0, in_row].sum())
    )
    # block 0 is the released block at Block; the whole county (both blocks) above it
    assert e.truth() == (truth, truth + (1 if geolevel != "Block" else 0))
    rho = next(q.rho for q in load_allocation(p_alloc(name)).select("persons", "US", geolevel)
               if sch.canonical_query(q.query) == sch.canonical_query(query))  # fmt: skip
    assert e.release.sigma2 == pytest.approx(1 / (2 * float(rho)), rel=1e-12)
    dp, dpp = release_range(
        e.pair, e.release, level=e.level, unit=e.unit, query=e.query, cell=e.cell,
        start=0, stop=4000, replicates=4000, seed=1, chunk=2000,
    )  # fmt: skip
    s2 = e.release.sigma2
    for values, t in ((dp, e.truth()[0]), (dpp, e.truth()[1])):
        assert abs(values.mean() - t) < 5 * np.sqrt(s2 / 4000)
        assert values.var() == pytest.approx(s2, rel=0.1)


def p_alloc(name: str) -> str:
    return "dhc_2023_production" if name == "dhc_production" else "pl94_2021_production"


def test_what_the_direct_route_cannot_hold_is_refused_before_any_store(tmp_path: Any) -> None:
    """DHC TopDown (dense query matrices) and a DHC state too large for dense histograms: one
    DPAuditError naming the value and the fix, exit 2 with one line, no store written."""
    from typer.testing import CliRunner

    from flows.cli.app import app
    from flows.experiments.direct_runs import SpecDirectParams, check_spec_params

    topdown = SpecDirectParams(
        spec=_spec("dhc_production", "topdown", check=False), change="add", to_block=0
    )
    with pytest.raises(DPAuditError, match=r"release.kind = 'topdown' with population.attributes = 'dhc_production'.*set release.kind = 'allocation'"):  # fmt: skip
        check_spec_params(topdown)
    big = _spec("dhc_production", "allocation", fanout={"County": 3, "Block": 40})
    with pytest.raises(DPAuditError, match=r"'dhc_production' \(1,227,744 cells\) over the .* GiB .*lower population.fanout"):  # fmt: skip
        check_spec_params(SpecDirectParams(spec=big, change="add", to_block=0, query="detailed"))
    spec = tmp_path / "dhc.toml"
    spec.write_text(_spec("dhc_production", "topdown", check=False))
    store = tmp_path / "direct.zarr"
    res = CliRunner().invoke(
        app,
        [
            "direct",
            "--spec",
            str(spec),
            "--change",
            "add",
            "--to-block",
            "0",
            "--store",
            str(store),
        ],
    )
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert lines[0].startswith("dpaudit: error:") and "dhc_production" in res.output
    assert not store.exists()
