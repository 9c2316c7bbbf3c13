"""The production schemas (PL94-171 2,016 cells, DHC 1,227,744 cells): every query of the shipped
production allocations is expressed, with the number of cells the allocation files give, and recode
queries sum the right cells (checked by enumerating cells and groups)."""

from __future__ import annotations

import numpy as np
import pytest

from auditlib.allocations import load_allocation
from auditlib.exceptions import InvalidParameterError, UnknownNameError
from auditlib.geography.attributes import Attribute, Recode
from auditlib.geography.schema import AttributeSchema, schema
from auditlib.simulate.measured import allocation_measured, unexpressible_queries

#: every persons query of pl94_2021_production -> the pl94_production marginal that answers it
PL94_QUERIES = {
    "total": "total",
    "cenrace": "cenrace",
    "hispanic": "hispanic",
    "votingage": "votingage",
    "hhinstlevels": "hhinstlevels",
    "hhgq": "hhgq",
    "hispanic * cenrace": "hispanic * cenrace",
    "votingage * cenrace": "votingage * cenrace",
    "votingage * hispanic": "votingage * hispanic",
    "votingage * hispanic * cenrace": "votingage * hispanic * cenrace",
    "detailed": "detailed",
}
#: every persons query of the DHC allocations -> the dhc_production marginal that answers it
DHC_QUERIES = {
    "age_18_64_116 * relgq_4_groups": "relgq_4_groups * age_18_64_116",
    "age_18_64_116 * sex": "sex * age_18_64_116",
    "age_38_groups * sex": "sex * age_38_groups",
    "hispanic * sex": "sex * hispanic",
    "sex * relgq_4_groups": "relgq_4_groups * sex",
    "gq_constr_groups * age_10_groups": "gq_constr_groups * age_10_groups",
    "popSehsdTargetsRelship": "popSehsdTargetsRelship",
    "hispanic * sex * age_40_groups * relship_and_eight_level_GQ * cenrace": (
        "relship_and_eight_level_GQ * sex * age_40_groups * hispanic * cenrace"
    ),
    "relgq * age_40_groups * hispanic * cenrace * sex": (
        "relgq * sex * age_40_groups * hispanic * cenrace"
    ),
    "detailed": "detailed",
}
ALLOCATIONS = (
    ("pl94_2021_production", "pl94_production", PL94_QUERIES),
    ("dhc_2023_production", "dhc_production", DHC_QUERIES),
    ("dhcp_20220825_exp21_1", "dhc_production", DHC_QUERIES),
    ("dhcp_20220825_paper", "dhc_production", DHC_QUERIES),
)


def test_the_bureaus_histograms() -> None:
    pl94 = schema("pl94_production")
    assert pl94.attribute_names == ("hhgq", "votingage", "hispanic", "cenrace")
    assert pl94.shape == (8, 2, 2, 63)
    assert pl94.n_cells == 2016
    race = pl94.attribute("cenrace").levels
    # the DAS's CenraceAttr order: single races, then pairs, ... all six last
    assert race[:6] == ("white", "black", "aian", "asian", "nhopi", "sor")
    assert race[6] == "white-black" and race[20] == "nhopi-sor"
    assert race[21] == "white-black-aian" and race[41] == "white-black-aian-asian"
    assert race[62] == "white-black-aian-asian-nhopi-sor"
    assert pl94.attribute("hhgq").levels[0] == "household"
    assert pl94.attribute("hhgq").levels[3] == "nursing"

    dhc = schema("dhc_production")
    assert dhc.attribute_names == ("relgq", "sex", "age", "hispanic", "cenrace")
    assert dhc.shape == (42, 2, 116, 2, 63)
    assert dhc.n_cells == 1_227_744
    relgq = dhc.attribute("relgq").levels
    assert relgq[17] == "other_nonrelative" and relgq[18] == "gq101_federal_detention"
    assert relgq[27] == "gq301_nursing" and relgq[41] == "gq997_other_noninstitutional"


@pytest.mark.parametrize(("allocation_id", "schema_name", "expected"), ALLOCATIONS)
def test_every_production_query_is_expressed(
    allocation_id: str, schema_name: str, expected: dict[str, str]
) -> None:
    """Each query of the allocation (every region and level) maps to the listed marginal, whose cell
    count is the one the allocation file gives; allocation_measured keeps every one, no skip."""
    alloc = load_allocation(allocation_id)
    sch = schema(schema_name)
    seen = set()
    for region in alloc.regions("persons"):
        levels = alloc.geolevels("persons", region)
        for level in levels:
            for b in alloc.select("persons", region, level):
                seen.add(b.query)
                assert sch.canonical_query(b.query) == expected[b.query]
                assert sch.n_query_cells(b.query) == b.n_cells, b.query
        assert (
            unexpressible_queries(alloc, levels, sch.query_names, "persons", region, schema=sch)
            == ()
        )
        measured = allocation_measured(
            alloc, levels, sch.query_names, "bounded", "persons", region, schema=sch
        )
        for level, got in zip(levels, measured, strict=True):
            budgets = alloc.select("persons", region, level)
            assert [q for q, _ in got] == [expected[b.query] for b in budgets]
    assert seen == set(expected)


def test_without_the_schema_the_recode_queries_are_named_unexpressible() -> None:
    alloc = load_allocation("pl94_2021_production")
    sch = schema("pl94_production")
    assert unexpressible_queries(alloc, ["State"], sch.query_names) == ("hhinstlevels",)
    with pytest.raises(UnknownNameError, match="hhinstlevels"):
        allocation_measured(alloc, ["State"], sch.query_names, "bounded")


def _brute_force(sch: AttributeSchema, query: str, cells: np.ndarray) -> np.ndarray:
    """The query row of each cell by unravelling it and looking its levels up in the groups."""
    parts = [p.strip() for p in query.split("*")]
    levels = np.unravel_index(cells, sch.shape)
    kept = []
    for i, a in enumerate(sch.attributes):
        for p in parts:
            if p == a.name:
                kept.append((levels[i], a.n_levels, None))
            elif p in [r.name for r in a.recodes]:
                kept.append((levels[i], len(a.recode(p).groups), a.recode(p).groups))
    rows = np.zeros(cells.size, dtype=np.int64)
    for lv, n, groups in kept:
        if groups is None:
            g = lv
        else:
            g = np.array([next(k for k, grp in enumerate(groups) if x in grp) for x in lv])
        rows = rows * n + g
    return rows


@pytest.mark.parametrize("query", [q for q in DHC_QUERIES if q != "detailed"])
def test_dhc_recode_queries_sum_the_right_cells(query: str) -> None:
    sch = schema("dhc_production")
    rng = np.random.default_rng(20)
    cells = rng.integers(0, sch.n_cells, size=3000)
    counts = rng.integers(1, 6, size=cells.size)
    rows = _brute_force(sch, query, cells)
    np.testing.assert_array_equal(sch.cells_query_index(query, cells), rows)
    want = np.bincount(rows, weights=counts, minlength=sch.n_query_cells(query)).astype(np.int64)
    np.testing.assert_array_equal(sch.answer_sparse(cells, counts, query), want)
    dense = np.bincount(cells, weights=counts, minlength=sch.n_cells).astype(np.int64)
    np.testing.assert_array_equal(sch.answer(dense, query), want)


def test_pl94_hhinstlevels_by_matrix_and_by_answer() -> None:
    sch = schema("pl94_production")
    m = sch.query_matrix("hhinstlevels")
    assert m.shape == (3, 2016)
    assert m.sum(axis=0).tolist() == [1] * 2016
    hhgq = np.unravel_index(np.arange(2016), sch.shape)[0]
    np.testing.assert_array_equal(m[0], hhgq == 0)
    np.testing.assert_array_equal(m[1], (hhgq >= 1) & (hhgq <= 4))  # institutional GQ
    np.testing.assert_array_equal(m[2], hhgq >= 5)  # non-institutional GQ
    h = np.random.default_rng(1).integers(0, 4, size=(5, 2016))
    np.testing.assert_array_equal(sch.answer(h, "hhinstlevels"), h @ m.T.astype(np.int64))
    assert sch.cell_labels("hhinstlevels") == ("household", "institutional", "noninstitutional")


def test_recode_groups_are_the_das_groups() -> None:
    dhc = schema("dhc_production")
    labels = dhc.cell_labels("relgq_4_groups")
    rows = dhc.cells_query_index(
        "relgq_4_groups",
        np.ravel_multi_index(
            ([0, 2, 17, 18, 27, 32, 33, 41], [0] * 8, [0] * 8, [0] * 8, [0] * 8), dhc.shape
        ),
    )
    assert [labels[r] for r in rows] == [
        "householder",
        "non_householder",
        "non_householder",
        "institutional",
        "institutional",
        "institutional",
        "noninstitutional",
        "noninstitutional",
    ]
    assert dhc.cell_labels("age_38_groups")[15:17] == ("15to17", "18to19")
    assert dhc.cell_labels("age_40_groups")[17:19] == ("17", "18to19")
    assert dhc.cell_labels("age_10_groups") == (
        "0to2",
        "3to14",
        "15",
        "16",
        "17",
        "18to19",
        "20to24",
        "25to29",
        "30to34",
        "35to115",
    )
    assert dhc.cell_labels("age_18_64_116") == ("0to17", "18to64", "65to115")


def test_large_schemas_refuse_dense_matrices_and_bad_names() -> None:
    dhc = schema("dhc_production")
    assert dhc.query_matrix("total").shape == (1, dhc.n_cells)
    with pytest.raises(InvalidParameterError, match="cells_query_index"):
        dhc.query_matrix("age")
    with pytest.raises(UnknownNameError, match="age_10_groups"):
        dhc.canonical_query("age * age_10_groups")  # one attribute twice
    with pytest.raises(UnknownNameError, match="recodes"):
        dhc.canonical_query("age_11_groups")
    with pytest.raises(InvalidParameterError, match=r"0\.\.1227743"):
        dhc.cells_query_index("sex", [dhc.n_cells])


def test_a_recode_must_partition_its_levels() -> None:
    with pytest.raises(InvalidParameterError, match="partition"):
        Attribute("x", ("a", "b", "c"), recodes=(Recode("xr", ((0,), (1,)), ("p", "q")),))
    with pytest.raises(InvalidParameterError, match="one label per group"):
        Recode("xr", ((0,), (1, 2)), ("p",))
    r = Recode("xr", ((0, 2), (1,)), ("p", "q"))
    with pytest.raises(InvalidParameterError, match="unique"):
        AttributeSchema(
            "s", (Attribute("x", ("a", "b", "c"), recodes=(r,)), Attribute("xr", ("u",)))
        )
