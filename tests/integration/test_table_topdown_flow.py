"""`dpaudit run` of a TopDown-style release on a table's own hierarchy (the shipped made-up country:
regions, districts, villages, pl94 cells): residuals stored per file level, every level's released
histograms non-negative integers summing to their parents', the country total invariant, the
accounting of each level that of the allocation geolevel mapped onto it, the report rendered."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from storage import schema as S
from storage import store
from tests._ceilings import PROCESS_CEILING_S
from tests.integration._residuals import padded

pytestmark = [pytest.mark.integration, pytest.mark.slow]

COUNTRY = Path(__file__).resolve().parents[2] / "examples" / "country"


def dpaudit() -> list[str]:
    exe = Path(sys.executable).with_name("dpaudit")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "flows.cli"]


@pytest.fixture
def api_env(prefect_harness: None, tmp_path: Path) -> dict[str, str]:
    """`dpaudit` reporting to the session's Prefect API (no embedded server to start)."""
    from prefect.settings import PREFECT_API_URL

    return {
        **os.environ,
        "PREFECT_API_URL": str(PREFECT_API_URL.value()),
        "DPAUDIT_LOG_DIR": str(tmp_path / "logs"),
    }


def test_dpaudit_run_of_a_countrys_own_levels(api_env: dict[str, str], tmp_path: Path) -> None:
    shutil.copy(COUNTRY / "country.csv", tmp_path)
    spec = (COUNTRY / "audit.toml").read_text().replace("replicates = 8", "replicates = 3")
    spec += "composed = false\neps_grid_points = 20\n"
    (tmp_path / "audit.toml").write_text(spec)
    cmd = [*dpaudit(), "run", "audit.toml", "--store", "a.zarr", "--report", "r.html"]
    done = subprocess.run(
        cmd, cwd=tmp_path, env=api_env, capture_output=True, text=True, timeout=PROCESS_CEILING_S
    )
    assert done.returncode == 0, done.stderr[-3000:]
    url = str(tmp_path / "a.zarr")
    res = padded(url)
    levels = ["All", "region", "district", "village"]
    assert list(res.geolevel.values) == levels
    assert list(res.state.values) == ["all"]

    rows = pd.read_csv(tmp_path / "country.csv")
    rows = rows.sort_values(["region", "district", "village"]).reset_index(drop=True)
    cells = [c for c in rows.columns if "/" in c]
    region, district = (pd.factorize(rows[c])[0] for c in ("region", "district"))
    parent = [
        np.zeros(region.max() + 1, dtype=int),
        pd.Series(region).groupby(district).first().to_numpy(),
        district,
    ]
    n_units = [1, region.max() + 1, district.max() + 1, len(rows)]
    detailed = list(res["query"].values).index("detailed")
    rel = []
    for gi in range(4):
        n = int(res.n_items.values[0, gi])
        q = res.query_index.values[0, gi, :n]
        cols = np.flatnonzero(q == detailed)
        assert cols.size == n_units[gi] * len(cells)  # every unit's every cell, stored per level
        unit = res.unit_index.values[0, gi, cols]
        cell = res.cell_index.values[0, gi, cols]
        truth = res.truth.values[0, gi, cols]
        out = np.full((3, n_units[gi], len(cells)), np.nan)
        out[:, unit, cell] = res.residual.values[0, gi, :, cols].T + truth
        assert not np.isnan(out).any() and (out >= 0).all() and (out == np.round(out)).all()
        rel.append(out)
    # the stored truth of the villages is the file's rows (truth: the last level's, unit-major)
    np.testing.assert_array_equal(truth.reshape(len(rows), len(cells)), rows[cells].to_numpy())
    for gi in range(3):  # children sum to their parents in every cell and replicate
        up = np.zeros_like(rel[gi])
        for r in range(3):
            np.add.at(up[r], parent[gi], rel[gi + 1][r])
        np.testing.assert_array_equal(up, rel[gi], err_msg=levels[gi])
    total = int(rows[cells].to_numpy().sum())
    np.testing.assert_array_equal(rel[0][:, 0].sum(axis=1), total)  # the root total invariant
    assert (rel[3] != rows[cells].to_numpy()).any()  # noisy villages

    acc = store.open_group(url, S.ACCOUNTING)
    assert list(acc.geolevel.values) == levels
    from auditlib.allocations import load_allocation

    alloc = load_allocation("pl94_2021_production")
    for level, geolevel in zip(levels, ("US", "State", "County", "Block"), strict=True):
        assert float(acc.rho.sel(geolevel=level)) == pytest.approx(
            float(alloc.rho("persons", "US", geolevel))
        )
    epl = store.open_group(url, S.EPL)
    assert list(epl.geolevel.values) == levels
    assert np.isfinite(epl.epl_pooled.sel(geolevel=["district", "village"], query="total")).all()
    html = (tmp_path / "r.html").read_text()
    assert "data:image/png;base64," in html and "district" in html and "village" in html
