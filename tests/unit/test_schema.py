"""Attribute schemas: cells, marginal query matrices and labels, checked by enumerating cells."""

from __future__ import annotations

from itertools import product

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auditlib.exceptions import InvalidParameterError, UnknownNameError
from auditlib.geography.attributes import Attribute
from auditlib.geography.schema import AttributeSchema, custom_schema, schema

PL94_QUERIES = (
    "total",
    "votingage",
    "hispanic",
    "race",
    "votingage * hispanic",
    "votingage * race",
    "hispanic * race",
    "detailed",
)


def test_shipped_schemas() -> None:
    total = schema("total")
    assert total.n_cells == 1
    assert total.query_names == ("total",)
    np.testing.assert_array_equal(total.query_matrix("total"), [[1]])
    np.testing.assert_array_equal(total.query_matrix("detailed"), [[1]])
    assert total.cell_labels("total") == ("total",)

    pl94 = schema("pl94")
    assert pl94.n_cells == 28
    assert [a.name for a in pl94.attributes] == ["votingage", "hispanic", "race"]
    assert [len(a.levels) for a in pl94.attributes] == [2, 2, 7]
    assert pl94.query_names == PL94_QUERIES
    assert pl94.cell_labels("votingage") == ("under18", "18plus")
    assert pl94.cell_labels("race")[-1] == "two_or_more"
    assert pl94.cell_labels("detailed")[0] == "under18/not_hispanic/white"
    assert pl94.cell_labels("detailed")[7] == "under18/hispanic/white"  # race varies fastest
    assert pl94.cell_labels("detailed")[14] == "18plus/not_hispanic/white"


@pytest.mark.parametrize("query", PL94_QUERIES)
def test_query_matrix_matches_enumeration(query: str) -> None:
    """Row r of a query sums exactly the detailed cells whose kept levels spell label r."""
    s = schema("pl94")
    m = s.query_matrix(query)
    labels = s.cell_labels(query)
    assert m.dtype == np.int8
    assert m.shape == (len(labels), 28)
    assert set(np.unique(m)) <= {0, 1}
    np.testing.assert_array_equal(m.sum(axis=0), np.ones(28))  # each cell in exactly one row
    kept = s.query_attributes(query)
    # enumerate detailed cells in C order, independently of the implementation
    detailed = list(product(*(a.levels for a in s.attributes)))
    for c, levels in enumerate(detailed):
        by_name = dict(zip(s.attribute_names, levels, strict=True))
        label = "/".join(by_name[a] for a in kept) if kept else "total"
        assert m[labels.index(label), c] == 1
    assert len(set(labels)) == len(labels)


def test_queries_aggregate_histograms() -> None:
    s = schema("pl94")
    rng = np.random.default_rng(3)
    h = rng.integers(0, 50, size=(5, 28))
    cube = h.reshape(5, 2, 2, 7)
    expected = {
        "total": cube.sum(axis=(1, 2, 3))[:, None],
        "votingage": cube.sum(axis=(2, 3)),
        "race": cube.sum(axis=(1, 2)),
        "votingage * race": cube.sum(axis=2).reshape(5, 14),
        "hispanic * race": cube.sum(axis=1).reshape(5, 14),
        "detailed": h,
    }
    for q, want in expected.items():
        np.testing.assert_array_equal(h @ s.query_matrix(q).T, want)
        np.testing.assert_array_equal(s.answer(h, q), want)
    # the 18+ Hispanic count, by hand: cells 21..27
    assert s.answer(h, "votingage * hispanic")[0, 3] == h[0, 21:28].sum()


def test_query_name_aliases() -> None:
    s = schema("pl94")
    np.testing.assert_array_equal(
        s.query_matrix("race * votingage"), s.query_matrix("votingage * race")
    )
    np.testing.assert_array_equal(
        s.query_matrix("votingage * hispanic * race"), s.query_matrix("detailed")
    )
    assert s.query_attributes("total") == ()
    # the Bureau's PL94 query names (cenrace: our 7-level race stands in for its 63 levels)
    bureau = {
        "cenrace": "race",
        "hispanic * cenrace": "hispanic * race",
        "votingage * cenrace": "votingage * race",
        "votingage * hispanic": "votingage * hispanic",
        "votingage * hispanic * cenrace": "detailed",
        "total": "total",
    }
    for name, ours in bureau.items():
        assert s.has_query(name)
        assert s.canonical_query(name) == ours
        np.testing.assert_array_equal(s.query_matrix(name), s.query_matrix(ours))
    assert not s.has_query("hhgq")
    assert not s.has_query("race * cenrace")
    assert schema("total").canonical_query("detailed") == "total"


def test_unknown_names_say_the_choices() -> None:
    with pytest.raises(UnknownNameError, match=r"'pl95'.*'total', 'pl94'"):
        schema("pl95")
    s = schema("pl94")
    with pytest.raises(UnknownNameError, match=r"'age'.*'votingage', 'hispanic', 'race'"):
        s.attribute("age")
    with pytest.raises(UnknownNameError, match=r"'sex \* race'.*'votingage \* hispanic'"):
        s.query_matrix("sex * race")
    with pytest.raises(UnknownNameError, match=r"'race \* race'"):
        s.cell_labels("race * race")


def test_bad_schemas_are_refused() -> None:
    with pytest.raises(InvalidParameterError, match=r"'sex'.*\['f'\] repeated"):
        Attribute("sex", ("f", "f"))
    with pytest.raises(InvalidParameterError, match="at least one level"):
        Attribute("sex", ())
    with pytest.raises(InvalidParameterError, match="'total' and 'detailed' name queries"):
        Attribute("total", ("a",))
    with pytest.raises(InvalidParameterError, match=r"\['sex'\] repeated"):
        custom_schema("x", [("sex", ["f", "m"]), ("sex", ["a"])])
    with pytest.raises(InvalidParameterError, match=r"\['sex'\] repeated"):
        AttributeSchema("x", (Attribute("sex", ("f",)), Attribute("gender", ("a",), ("sex",))))
    with pytest.raises(InvalidParameterError, match="must hold its 28 detailed cells"):
        schema("pl94").answer(np.zeros((3, 27)), "total")


def test_custom_schema() -> None:
    s = custom_schema("race", [("race", ["white", "black", "other"])])
    assert s.n_cells == 3
    assert s.query_names == ("total", "detailed")
    np.testing.assert_array_equal(s.query_matrix("race"), np.eye(3, dtype=np.int8))
    assert isinstance(s, AttributeSchema)


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 4), min_size=0, max_size=4),
    data=st.data(),
)
def test_any_schema_partitions_its_cells(sizes: list[int], data: st.DataObject) -> None:
    """For random schemas, every query's rows partition the detailed cells, ``answer`` equals the
    matrix product, and the query's cells are the product of the kept attributes' levels."""
    s = custom_schema("h", [(f"a{i}", [f"l{j}" for j in range(n)]) for i, n in enumerate(sizes)])
    assert s.n_cells == int(np.prod(sizes, dtype=np.int64))
    assert len(s.query_names) == max(2 ** len(sizes), 1)
    h = np.arange(2 * s.n_cells).reshape(2, s.n_cells) % 7
    for q in s.query_names:
        m = s.query_matrix(q)
        np.testing.assert_array_equal(m.sum(axis=0), np.ones(s.n_cells))
        np.testing.assert_array_equal(s.answer(h, q), h @ m.T)
        kept = s.query_attributes(q)
        assert m.shape[0] == int(np.prod([sizes[int(a[1:])] for a in kept], dtype=np.int64))
        assert len(s.cell_labels(q)) == m.shape[0]
    if sizes:
        order = data.draw(st.permutations(list(s.attribute_names)))
        np.testing.assert_array_equal(s.query_matrix(" * ".join(order)), s.query_matrix("detailed"))
