"""Real counts from a CSV through the audit flow on Dask: Flaxman's GDPC of the rows' totals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

from auditlib.mechanisms import TwoSidedGeometric
from flows.spec import load_spec
from storage import schema as S
from storage import store
from tests.integration._residuals import padded

pytestmark = pytest.mark.integration


def write_table(tmp_path: Path) -> Path:
    """60 counties in 3 states; the county totals are written here, so the truth is known."""
    rows = ["state,county,persons"]
    rows += [f"S{i // 20},C{i:02d},{100 + 7 * i}" for i in range(60)]
    (tmp_path / "counties.csv").write_text("\n".join(rows) + "\n")
    spec = tmp_path / "audit.toml"
    spec.write_text(
        '[audit]\nreplicates = 40\nseed = 5\n[population]\nkind = "table"\npath = "counties.csv"\n'
        'counts = ["persons"]\nlevels = ["state"]\nunit = "county"\n'
        '[release]\nkind = "gdpc"\nepsilon = 0.5\n[epl]\nbandwidth_factor = 0.3\n'
    )
    return spec


def test_gdpc_of_a_csv_through_the_flow(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    from prefect_dask import DaskTaskRunner

    from flows.audit.flow import audit_flow, run_id_for

    s = load_spec(write_table(tmp_path))  # the relative path: next to the spec file
    url = str(tmp_path / "t.zarr")
    audit_flow.with_options(task_runner=DaskTaskRunner(address=dask_address))(s, url, run_id_for(s))
    store.finalize(url)
    assert S.ACCOUNTING not in store.groups(url)  # pure eps-DP: no DG accounting
    res = padded(url)
    assert list(res.geolevel.values) == ["All", "state", "county"]
    n = res.n_items.values[0]
    assert list(n) == [0, 0, 60]  # GDPC releases the rows only
    # the stored truth is the CSV's counts, every county once
    assert np.sort(res.truth.values[0, 2, : n[2]]).tolist() == [100 + 7 * i for i in range(60)]
    r = res.residual.values[0, 2, :, : n[2]].ravel()
    # GDPC residuals are G(eps): variance 2 a / (1 - a)^2 with a = e^-eps (a wrong eps fails)
    assert r.var() == pytest.approx(float(TwoSidedGeometric(0.5).var()), rel=0.1)
    assert r.var() != pytest.approx(float(TwoSidedGeometric(0.25).var()), rel=0.1)
    epl = store.open_group(url, S.EPL)
    assert 0.3 < float(epl.epl_pooled.sel(geolevel="county", query="total")) < 0.8


def test_bad_table_spec_exits_2_without_a_store(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from flows.cli.app import app

    spec = write_table(tmp_path)
    target = tmp_path / "bad.zarr"
    good = spec.read_text()
    for body, word in (
        (good.replace('"counties.csv"', '"missing.csv"'), "missing.csv"),
        (good.replace('["persons"]', '["people"]'), "Missing columns ['people']"),
        (good.replace('unit = "county"', 'unit = "tract"'), "Missing columns ['tract']"),
    ):
        spec.write_text(body)
        res = CliRunner().invoke(app, ["run", str(spec), "--store", str(target), "--no-report"])
        assert res.exit_code == 2, res.output
        assert word in res.output
        assert not target.exists()


def _stratified_audit(
    tmp_path: Path, dask_address: str, release: dict[str, Any], seed: int
) -> tuple[xr.Dataset, np.ndarray, np.ndarray]:
    """The audit of 40 tracts in 4 counties (ten each, rows written county by county, counts a and
    b) under ``release``, 30 replicates: each tract's total and its two counts are stored, the
    released total is the sum of the strata, and the pooled EPL of both queries is finite. The
    padded residuals, the tract level's query index and its totals' residuals."""
    from prefect_dask import DaskTaskRunner

    from flows.audit.flow import audit_flow, run_id_for
    from flows.spec import parse_spec

    rows = ["county,tract,a,b"] + [f"C{i // 10},T{i:02d},{20 + i},{3 * i}" for i in range(40)]
    (tmp_path / "tracts.csv").write_text("\n".join(rows) + "\n")
    s = parse_spec(
        {
            "audit": {"replicates": 30, "seed": seed},
            "population": {
                "kind": "table",
                "path": str(tmp_path / "tracts.csv"),
                "counts": ["a", "b"],
                "levels": ["county"],
                "unit": "tract",
            },
            "release": release,
            "epl": {"bandwidth_factor": 0.3},
        }
    )
    url = str(tmp_path / f"{release['kind']}.zarr")
    audit_flow.with_options(task_runner=DaskTaskRunner(address=dask_address))(s, url, run_id_for(s))
    store.finalize(url)
    res = padded(url)
    n = res.n_items.values[0]
    assert list(n) == [0, 0, 40 * 3]  # each tract's total, then its two counts
    r = res.residual.values[0, 2, :, : n[2]]
    q = res.query_index.values[0, 2, : n[2]]
    tot, strata = r[:, q == 0], r[:, q == 1].reshape(30, 40, 2)
    assert (tot == strata.sum(axis=2)).all()  # the released total is the sum of the strata
    epl = store.open_group(url, S.EPL)
    assert list(epl["query"].values) == ["total", "strata"]
    assert np.isfinite(epl.epl_pooled.sel(geolevel="tract").values).all()
    return res, q, tot


def test_sa3_of_a_csv_through_the_flow(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    release = {"kind": "sa3", "epsilon": 0.5, "epsilon_strata": 0.5}
    _stratified_audit(tmp_path, dask_address, release, seed=2)


def test_sa4_of_a_csv_through_the_flow(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    res, q, tot = _stratified_audit(tmp_path, dask_address, {"kind": "sa4", "epsilon": 0.5}, seed=4)
    # the rows were written county by county, ten tracts each: every county's total is invariant
    truth = res.truth.values[0, 2, : q.size][q == 0]
    assert sorted(truth.reshape(4, 10).sum(axis=1).tolist()) == [
        sum(20 + i + 3 * i for i in range(10 * c, 10 * c + 10)) for c in range(4)
    ]
    assert (tot.reshape(30, 4, 10).sum(axis=2) == 0).all()
    assert (tot != 0).any()  # but the tracts' own totals move
