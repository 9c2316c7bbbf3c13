"""Fixtures shared by the unit tests' modules."""

from __future__ import annotations

import pandas as pd
import pytest
import xarray as xr

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


@pytest.fixture(scope="session")
def real_mpl_group() -> xr.Dataset:
    """An audit's mpl group from the real per-geolevel MPL runs at State and County (small n);
    read only."""
    from auditlib.mpl.audit import mpl_geolevel
    from flows.experiments.mpl_coverage import mpl_dataset, mpl_task_settings
    from flows.spec import parse_spec

    spec = parse_spec(
        {
            "mpl": {
                "enabled": True,
                "geolevels": ["State", "County"],
                "n": 2000,
                "n_confidence": 4000,
            }
        }
    )
    s = mpl_task_settings(spec)
    return mpl_dataset(
        [mpl_geolevel(g, i + 1, **s) for i, g in enumerate(spec.mpl_geolevels)], spec
    )


@pytest.fixture(scope="session")
def real_coverage_group() -> xr.Dataset:
    """The group ``dpaudit mpl-coverage`` writes, from real coverage chunks: laplace and
    gdpc_count at ε₀ 0.7 and 1.5, six repetitions each (small n); read only."""
    from auditlib.mpl.coverage import coverage_chunk
    from flows.experiments.mpl_coverage import coverage_dataset

    settings = {"n": 1_000, "n_confidence": 2_500, "alpha": 0.05, "seed": 3}
    mechs, eps = ["laplace", "gdpc_count"], [0.7, 1.5]
    results = {
        (mi, ei, 0): coverage_chunk(m, e, 0, 6, cell=(mi, ei), **settings)
        for mi, m in enumerate(mechs)
        for ei, e in enumerate(eps)
    }
    return coverage_dataset(results, mechs, eps, 6, settings)
