"""Real counts from CSV/Parquet: hierarchy, histograms and every kind of bad table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from auditlib.exceptions import InvalidParameterError
from auditlib.geography.schema import custom_schema
from auditlib.geography.tabular import read_counts
from auditlib.simulate.hierarchical import release

CSV = """state,county,poptotal,white,black,other
IL,ADAMS,10,6,3,1
WI,ADAMS,7,7,0,0
IL,BOND,5,1,1,3
OH,ADAMS,0,0,0,0
WI,BROWN,12,2,4,6
"""
RACES = ["white", "black", "other"]


@pytest.fixture
def table(tmp_path: Path) -> Path:
    p = tmp_path / "counties.csv"
    p.write_text(CSV)
    return p


def test_reads_a_state_county_hierarchy(table: Path) -> None:
    pop = read_counts(table, RACES, levels=["state"], unit="county", total="poptotal")
    assert pop.levels == ("state", "county")
    assert pop.labels["state"] == ("IL", "OH", "WI")
    assert pop.labels["county"] == ("ADAMS", "BOND", "ADAMS", "ADAMS", "BROWN")
    np.testing.assert_array_equal(pop.parents["county"], [0, 0, 1, 2, 2])
    np.testing.assert_array_equal(pop.rows, [0, 2, 3, 1, 4])
    assert pop.path("county", 3) == ("WI", "ADAMS")
    np.testing.assert_array_equal(pop.histograms[0], [6, 3, 1])  # IL ADAMS
    np.testing.assert_array_equal(pop.histograms[3], [7, 0, 0])  # WI ADAMS
    # state totals by hand from the CSV
    np.testing.assert_array_equal(pop.level_histograms("state"), [[7, 4, 4], [0, 0, 0], [9, 4, 6]])
    assert pop.schema.cell_labels("detailed") == ("white", "black", "other")
    tree = pop.count_tree("total")
    np.testing.assert_array_equal(tree.counts[0], [34])
    np.testing.assert_array_equal(tree.counts[1], [15, 0, 19])
    np.testing.assert_array_equal(tree.counts[2], [10, 5, 0, 7, 12])
    rel = release(tree, "gdpc", 1.0, np.random.default_rng(0))
    assert rel.dp[2].shape == (5,)
    black = pop.count_tree("detailed", cell=1)
    np.testing.assert_array_equal(black.counts[1], [4, 0, 4])


def test_dataframe_and_parquet_give_the_same(table: Path, tmp_path: Path) -> None:
    frame = pd.read_csv(table)
    a = read_counts(frame, RACES, levels=["state", "county"])
    assert a.levels == ("state", "county", "unit")
    pq = tmp_path / "counties.parquet"
    frame.to_parquet(pq)
    b = read_counts(pq, RACES, levels=["state", "county"])
    np.testing.assert_array_equal(a.histograms, b.histograms)
    assert a.labels == b.labels


def test_schema_columns_in_c_order(table: Path) -> None:
    s = custom_schema("x", [("race", ["white", "black", "other"])])
    pop = read_counts(table, RACES, levels=["state"], unit="county", schema=s)
    assert pop.schema is s
    two = custom_schema("y", [("a", ["p", "q"])])
    with pytest.raises(InvalidParameterError, match="3 columns for schema 'y' with 2 cells"):
        read_counts(table, RACES, schema=two)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda f: f.drop(columns="black"), r"Missing columns \['black'\]"),
        (lambda f: f.assign(black=f.black.astype(float).where(f.index != 2)), "row 2: missing"),
        (lambda f: f.assign(black=[3, 0, 1.5, 0, 4]), r"1\.5 in column 'black', row 2.*whole"),
        (lambda f: f.assign(white=[6, 7, 1, -2, 2]), r"-2 in column 'white', row 3.*>= 0"),
        (lambda f: f.assign(white=list("abcde")), "column 'white': dtype"),
        (lambda f: f.assign(poptotal=[10, 7, 6, 0, 12]), r"row 2: 'poptotal' = 6.*sum to 5"),
        (lambda f: f.assign(state=["IL", "WI", None, "OH", "WI"]), "row 2 has no 'state'"),
        (
            lambda f: f.assign(county=["ADAMS", "ADAMS", "ADAMS", "ADAMS", "ADAMS"]).iloc[[0, 2]],
            r"rows 0 and 1 are the same unit \('IL', 'ADAMS'\)",
        ),
        (lambda f: f.iloc[:0], "no rows"),
    ],
)
def test_bad_tables_are_refused(table: Path, edit, message: str) -> None:  # type: ignore[no-untyped-def]
    frame = edit(pd.read_csv(table))
    with pytest.raises(InvalidParameterError, match=message):
        read_counts(frame, RACES, levels=["state"], unit="county", total="poptotal")


def test_unique_labels_detect_a_unit_under_two_parents(table: Path) -> None:
    frame = pd.read_csv(table)
    frame["fips"] = ["17001", "55001", "17005", "39001", "55009"]
    frame["tract"] = ["t1", "t2", "t3", "t4", "t5"]
    ok = read_counts(frame, RACES, levels=["state", "fips"], unit="tract", unique_labels=True)
    assert ok.n_units("fips") == 5
    frame.loc[4, "fips"] = "17001"  # a WI tract claims an IL county code
    with pytest.raises(InvalidParameterError, match=r"fips '17001' lies in state \['IL', 'WI'\]"):
        read_counts(frame, RACES, levels=["state", "fips"], unit="tract", unique_labels=True)


def test_bad_paths(tmp_path: Path) -> None:
    with pytest.raises(InvalidParameterError, match="no such file"):
        read_counts(tmp_path / "nope.csv", RACES)
    p = tmp_path / "t.xlsx"
    p.write_text("x")
    with pytest.raises(InvalidParameterError, match=r"unknown suffix '\.xlsx'"):
        read_counts(p, RACES)
