"""Attribute schemas: cells, marginal query matrices and labels, checked by enumerating cells."""

from __future__ import annotations

from itertools import product

import numpy as np
import pytest

from auditlib.exceptions import InvalidParameterError, UnknownNameError
from auditlib.geography.schema import Attribute, AttributeSchema, custom_schema, schema

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
    with pytest.raises(InvalidParameterError, match="must hold its 28 detailed cells"):
        schema("pl94").answer(np.zeros((3, 27)), "total")


def test_custom_schema() -> None:
    s = custom_schema("race", [("race", ["white", "black", "other"])])
    assert s.n_cells == 3
    assert s.query_names == ("total", "detailed")
    np.testing.assert_array_equal(s.query_matrix("race"), np.eye(3, dtype=np.int8))
    assert isinstance(s, AttributeSchema)
