"""Fixtures shared by the unit tests' modules."""

from __future__ import annotations

import pandas as pd
import pytest

from auditlib.geography.tabular import read_counts
from auditlib.simulate.neighbours_hist import HistogramDatabase


@pytest.fixture(scope="session")
def histograms() -> HistogramDatabase:
    """A small histogram database the simulation tests release (read only: the neighbours made
    from it are copies): states A (counties a1, a2) and B (b1), blocks x and y, two race cells."""
    frame = pd.DataFrame(
        {
            "state": ["A", "A", "A", "B", "B"],
            "county": ["a1", "a1", "a2", "b1", "b1"],
            "block": ["x", "y", "x", "x", "y"],
            "white": [50, 0, 20, 70, 10],
            "black": [10, 30, 0, 0, 40],
        }
    )
    return HistogramDatabase.from_table(
        read_counts(frame, ["white", "black"], levels=["state", "county"], unit="block")
    )
