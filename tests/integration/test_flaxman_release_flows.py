"""Flaxman's geometric releases through the audit flow: residuals, EPL per level, no DG accounting."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from auditlib.mechanisms import TwoSidedGeometric
from flows.spec import parse_spec
from storage import schema as S
from storage import store
from tests.integration._residuals import padded

pytestmark = pytest.mark.integration


def spec(kind: str, eps: float) -> dict:
    return {
        "audit": {"replicates": 60, "seed": 3},
        "population": {"kind": "flaxman", "people": 40_000, "levels": 2, "mean_per_location": 40.0},
        "release": {"kind": kind, "epsilon": eps},
        "epl": {"bandwidth_factor": 0.3},
    }


def run(tmp_path: Path, name: str, data: dict, address: str) -> str:
    from prefect_dask import DaskTaskRunner

    from flows.audit.flow import audit_flow, run_id_for

    s = parse_spec(data)
    url = str(tmp_path / name)
    audit_flow.with_options(task_runner=DaskTaskRunner(address=address))(s, url, run_id_for(s))
    store.finalize(url)
    return url


def test_gdpc_and_rdpc_audits(prefect_harness: None, dask_address: str, tmp_path: Path) -> None:
    eps = 0.5
    g = run(tmp_path, "g.zarr", spec("gdpc", eps), dask_address)
    assert S.ACCOUNTING not in store.groups(g)
    res = padded(g)
    assert list(res.geolevel.values) == ["L0", "L1", "L2"]
    n = res.n_items.values[0]
    assert list(n) == [0, 0, 31 * 31]  # C = floor(sqrt(40000 / 40)) = 31; GDPC releases leaves
    r = res.residual.values[0, 2, :, : n[2]].ravel()
    # GDPC residuals are G(eps): variance 2 a / (1 - a)^2 with a = e^-eps
    assert r.var() == pytest.approx(float(TwoSidedGeometric(eps).var()), rel=0.06)
    epl = store.open_group(g, S.EPL)
    gd = float(epl.epl_pooled.sel(geolevel="L2", query="total"))
    assert 0.7 * eps < gd < 1.5 * eps  # the loss of G(eps) is eps

    rd = run(tmp_path, "r.zarr", spec("rdpc", eps), dask_address)
    rres = padded(rd)
    assert (rres.n_items.values[0] == [1, 31, 31 * 31]).all()  # RDPC releases every level
    repl = store.open_group(rd, S.EPL)
    leaf = float(repl.epl_pooled.sel(geolevel="L2", query="total"))
    # Flaxman 2019 Fig. 1: raking with J = 2 spends eps/3 per level; the leaf EPL is far below eps
    assert leaf < 0.6 * gd
    assert np.isfinite(repl.epl_pooled.values).all()
    # ... but a person is counted at every level: composed over L0..L2 it is about eps again
    per_level = repl.epl_bias_aware.sel(query="total").values
    composed = float(repl.epl_composed)
    assert composed == pytest.approx(float(per_level.sum()))
    assert 0.8 * eps < composed < 1.6 * eps  # L0: 60 residuals, biased up
    assert float(repl.epl_composed_ci_low) <= composed <= float(repl.epl_composed_ci_high)
    corr = repl.level_correlation.values
    assert corr.shape == (3, 3) and np.allclose(np.diag(corr), 1.0)
    assert np.abs(corr[~np.eye(3, dtype=bool)]).max() < 0.3  # nearly uncorrelated levels
    # surfaces per (state, geolevel, query): the leaves' curve with its band
    leaf_curve = repl.surface.sel(state="all", geolevel="L2", query="total").values
    assert np.isfinite(leaf_curve).sum() >= 3
    # GDPC releases one level: composed = that level, no cross-level correlation
    gepl = store.open_group(g, S.EPL)
    assert float(gepl.epl_composed) == pytest.approx(
        float(gepl.epl_bias_aware.sel(geolevel="L2", query="total"))
    )
    assert np.isnan(gepl.level_correlation.values).sum() == 8


def test_adpc_audit(prefect_harness: None, dask_address: str, tmp_path: Path) -> None:
    eps, p = 0.5, 4
    data = spec("adpc", eps)
    data["release"]["n_runs"] = p
    a = run(tmp_path, "a.zarr", data, dask_address)
    assert S.ACCOUNTING not in store.groups(a)
    res = padded(a)
    n = res.n_items.values[0]
    assert list(n) == [0, 0, 31 * 31]  # ADPC releases the leaves, as GDPC does
    r = res.residual.values[0, 2, :, : n[2]].ravel().astype(np.float64)
    np.testing.assert_array_equal(r * p, np.round(r * p))  # the mean of P integer releases
    assert (r * p % p != 0).any()  # ... and not always a whole number
    # the mean of P draws of G(eps / P): variance Var G(eps / P) / P
    assert r.var() == pytest.approx(float(TwoSidedGeometric(eps / p).var()) / p, rel=0.06)
    epl = store.open_group(a, S.EPL)
    assert np.isfinite(float(epl.epl_pooled.sel(geolevel="L2", query="total")))
