"""Counts of a real table too large for the int32 truths of a result store (or not counts at all)
are refused on reading, naming the file, column, row and the largest allowed value."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from auditlib.exceptions import InvalidParameterError, SpecError
from auditlib.geography.tabular import MAX_TABLE_TOTAL, TabularPopulation, read_counts
from auditlib.simulate.hierarchical import residual_block
from flows.spec import parse_spec

INT32_MAX = int(np.iinfo(np.int32).max)


def write(tmp_path: Path, a1: str, b2: str = "50") -> Path:
    p = tmp_path / "counties.csv"
    p.write_text(f"state,county,total\nB,b1,300\nA,a1,{a1}\nB,b2,{b2}\n")
    return p


def read(path: Path) -> TabularPopulation:
    return read_counts(path, ["total"], levels=["state"], unit="county")


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("1e30", "1e+30"),  # a float column
        ("100000000000000000000", "100000000000000000000"),  # past uint64: Python ints
        ("10000000000000000000", "10000000000000000000"),  # a uint64 column
        ("9223372036854775807", "9223372036854775807"),  # int64's largest
        (str(INT32_MAX + 1), str(INT32_MAX + 1)),  # one past the bound
    ],
)
def test_a_count_past_the_bound_is_refused(tmp_path: Path, value: str, shown: str) -> None:
    path = write(tmp_path, value)
    with pytest.raises(InvalidParameterError) as e:
        read(path)
    msg = str(e.value)
    assert f"Invalid count {shown} in column 'total', row 1 of {str(path)!r}" in msg
    assert str(INT32_MAX) in msg


def test_a_total_past_the_bound_names_where_the_sum_crosses_it(tmp_path: Path) -> None:
    # every count fits; the running sum 300 + (2**31 - 300) + 50 crosses at row 2
    path = write(tmp_path, str(INT32_MAX - 300), "50")
    with pytest.raises(InvalidParameterError) as e:
        read(path)
    msg = str(e.value)
    assert f"Invalid table {str(path)!r}: its counts sum to {INT32_MAX + 50}" in msg
    assert f"largest allowed total {INT32_MAX}" in msg
    assert "column 'total', row 2" in msg


def test_a_total_at_the_bound_is_read_and_released(tmp_path: Path) -> None:
    """The largest allowed table goes through RDPC and into a store block (int32 truths)."""
    assert MAX_TABLE_TOTAL == INT32_MAX
    path = write(tmp_path, str(INT32_MAX - 350), "50")
    pop = read(path)
    tree = pop.count_tree()
    assert int(tree.counts[0][0]) == INT32_MAX
    np.testing.assert_array_equal(tree.counts[1], [INT32_MAX - 350, 350])  # A, B
    block = residual_block(tree, "rdpc", 1.0, level=0, seed=3, replicates=2)
    assert block.truth.dtype == np.int32
    assert int(block.truth[0]) == INT32_MAX
    assert np.isfinite(block.residual).all()


@pytest.mark.parametrize(
    ("value", "pattern"),
    [
        ("inf", r"Invalid count inf in column 'total', row 1 of '.*counties\.csv'.*whole"),
        ("-inf", r"Invalid count -inf in column 'total', row 1 of '.*counties\.csv'.*whole"),
        ("2.5", r"Invalid count 2\.5 in column 'total', row 1 of '.*counties\.csv'.*whole"),
        ("-1", r"Invalid count -1 in column 'total', row 1 of '.*counties\.csv'.*>= 0"),
        ("", r"column 'total', row 1: missing in '.*counties\.csv'"),
        ("NaN", r"column 'total', row 1: missing in '.*counties\.csv'"),
        ("many", r"column 'total': dtype .* in '.*counties\.csv'.*numbers"),
    ],
)
def test_other_bad_counts_name_the_file(tmp_path: Path, value: str, pattern: str) -> None:
    with pytest.raises(InvalidParameterError, match=pattern):
        read(write(tmp_path, value))


def test_a_spec_with_such_a_table_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "1e30")
    spec = {
        "population": {
            "kind": "table",
            "path": str(path),
            "counts": ["total"],
            "levels": ["state"],
            "unit": "county",
        },
        "release": {"kind": "rdpc", "epsilon": 0.5},
    }
    with pytest.raises(
        SpecError, match=re.escape(f"1e+30 in column 'total', row 1 of {str(path)!r}")
    ):
        parse_spec(spec)
