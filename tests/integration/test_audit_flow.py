"""The real audit flow on a tiny spec: Prefect test harness + a 2-worker Dask LocalCluster + Zarr."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from flows.spec import parse_spec
from storage import schema as S
from storage import store
from tests.integration._residuals import padded

pytestmark = pytest.mark.integration

TINY = {
    "audit": {"replicates": 3, "seed": 7},
    "population": {
        "states": 2,
        "fanout": {
            "County": 2,
            "Prim": 1,
            "Tract_Subset_Group": 1,
            "Tract_Subset": 2,
            "Block_Group": 2,
            "Block": 4,
        },
    },
    "simulation": {"max_cells_per_query": 4},
    "accounting": {"deltas": [1e-5, 1e-10], "eps_grid_points": 40},
}

# Su, Su & Wang setting, add/remove (REFERENCE.md, accounting table): exact and Bureau eps
EXACT = {("State", 1e-5): 6.571647, ("State", 1e-10): 9.600900, ("Block", 1e-10): 0.863346}
BUREAU = {("State", 1e-5): 7.787, ("State", 1e-10): 10.598, ("US", 1e-10): 2.666}


def run_flow(tmp_path: Path, name: str, address: str) -> str:
    from prefect_dask import DaskTaskRunner

    from flows.audit.flow import audit_flow, run_id_for

    spec = parse_spec(TINY)
    url = str(tmp_path / name)
    flow = audit_flow.with_options(task_runner=DaskTaskRunner(address=address))
    summary = flow(spec, url, run_id_for(spec))
    assert summary["blocks"] == 1 + 2 * 7  # the nation + 7 levels in each of 2 states
    store.finalize(url)
    return url


@pytest.mark.slow  # the allocation kind's end-to-end run in the fast tier: test_cli_run.py
def test_audit_flow_end_to_end(prefect_harness: None, dask_address: str, tmp_path: Path) -> None:
    url = run_flow(tmp_path, "a.zarr", dask_address)

    res = padded(url)
    assert list(res.state.values) == ["US", "ST01", "ST02"]
    assert list(res.geolevel.values)[:2] == ["US", "State"] and res.sizes[S.REPLICATE] == 3
    n = res.n_items.values
    assert n[0, 0] == 10 * 4 and (n[0, 1:] == 0).all() and (n[1:, 0] == 0).all()
    assert n[1, -1] == 2 * 2 * 2 * 4 * 10 * 4  # blocks per state x queries x cells
    # values consistent with the mechanism: pooled residual variance ~ the level's sigma^2
    for gi, g in enumerate(res.geolevel.values):
        vals = np.concatenate(
            [res.residual.values[s, gi, :, : n[s, gi]].ravel() for s in range(3) if n[s, gi]]
        )
        assert np.isfinite(vals).all() and np.array_equal(vals, np.round(vals))
        s2 = float(np.nanmax(res.sigma2.values[gi]))
        m = vals.size
        # the sample variance of m draws has sd ~ s2 * sqrt(2/m); allow 5 sd
        assert abs(vals.var() - s2) < 5 * s2 * np.sqrt(2 / m), (g, vals.var(), s2)
        assert (res.truth.values[:, gi] >= 0).all()

    epl = store.open_group(url, S.EPL)
    assert epl.epl_pooled.dims == (S.GEOLEVEL, S.QUERY)
    ok = epl.epl_status.values == "ok"
    assert ok.sum() > 0 and np.isfinite(epl.epl_pooled.values[ok]).all()
    assert (epl.epl_pooled.values[ok] > 0).all()
    # the bias-aware estimate comes with an interval and a matched floor
    lo, hi = epl.epl_ci_low.values[ok], epl.epl_ci_high.values[ok]
    assert np.isfinite(lo).all() and (lo <= hi).all()
    assert np.isfinite(epl.epl_null_upper.values[ok]).all()
    # with the most residuals (Block level), the slope estimate of 1/sigma^2 is in the right range
    blk = epl.sel(geolevel="Block")
    ratio = blk.inv_sigma2_hat.values * blk.sigma2.values
    assert 0.3 < float(np.nanmedian(ratio)) < 3.0
    # EPL(x) surfaces per (state, geolevel, query) with a pointwise band around the curve
    sx, sy = epl.surface_x.values, epl.surface.values
    assert sx.shape[:3] == (3, len(res.geolevel), len(epl["query"])) and sx.shape[3] <= 102
    have = np.isfinite(sy)
    assert have.any() and (np.isfinite(sx) == have).all()
    lo_b, hi_b = epl.surface_low.values[have], epl.surface_high.values[have]
    assert (lo_b <= hi_b).all() and np.mean((lo_b <= sy[have]) & (sy[have] <= hi_b)) > 0.5
    assert not have[1:, 0].any()  # states hold no US-level residuals
    # composed over every (geolevel, query) one person touches: independent noise, so the sum
    ba = epl.epl_bias_aware.values[ok]
    assert float(epl.epl_composed) == pytest.approx(float(ba[np.isfinite(ba)].sum()))
    assert float(epl.epl_composed_ci_low) <= float(epl.epl_composed_ci_high)
    assert np.isnan(epl.level_correlation.values).all()  # not estimated for allocation releases

    acc = store.open_group(url, S.ACCOUNTING)
    for (g, d), e in EXACT.items():
        row = acc.sel(geolevel=g, delta=d)
        assert float(row.eps_exact_lower) <= e + 1e-5 and float(row.eps_exact_upper) >= e - 1e-5
        assert float(row.eps_exact_upper) == pytest.approx(e, abs=1e-4)
    for (g, d), e in BUREAU.items():
        assert float(acc.sel(geolevel=g, delta=d).eps_bureau) == pytest.approx(e, abs=5e-4)
    # f-DP, REFERENCE.md: State beta(alpha = 0.05) = 0.591 exact vs 0.031 implied by the Bureau's zCDP
    st = acc.sel(geolevel="State", alpha=0.05)
    assert float(st.tradeoff_exact_lower) == pytest.approx(0.591, abs=1e-3)
    assert float(st.tradeoff_bureau) == pytest.approx(0.031, abs=1e-3)
    # all 8 levels composed, REFERENCE.md: exact eps(1e-10) = 20.3246897508
    assert float(acc.composed_eps_exact_upper.sel(delta=1e-10)) == pytest.approx(20.32469, abs=1e-4)

    attrs = store.root_attrs(url)
    assert attrs["allocation_id"] == "dhcp_20220825_paper" and attrs[S.COMPLETE_ATTR] is True
    assert "[audit]" in attrs["spec_toml"]

    from flows.report.render import render_report

    html = render_report(url, tmp_path / "report.html").read_text()
    assert html.lstrip().lower().startswith("<!doctype html")
    assert len(re.findall(r'<img [^>]*src="data:image/png;base64,', html)) >= 3

    # determinism: the same spec gives identical arrays on one worker (other placement and order)
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None
    ) as one:
        url2 = run_flow(tmp_path, "b.zarr", one.scheduler_address)
    res2 = padded(url2)
    for name in ("residual", "truth", "query_index", "unit_index", "cell_index", "n_items"):
        np.testing.assert_array_equal(res[name].values, res2[name].values)
    acc2 = store.open_group(url2, S.ACCOUNTING)
    np.testing.assert_array_equal(acc.eps_exact_upper.values, acc2.eps_exact_upper.values)
    epl2 = store.open_group(url2, S.EPL)
    np.testing.assert_array_equal(epl.epl_pooled.values, epl2.epl_pooled.values)
    np.testing.assert_array_equal(epl.surface_high.values, epl2.surface_high.values)
