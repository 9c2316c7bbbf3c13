"""The audit flow with ``[mpl] enabled``: the tested count's empirical f-DP points beside the
certified curve, in the store's ``mpl`` group, the report's figure and the at-a-glance table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from flows.spec import parse_spec
from storage import schema as S
from storage import store
from tests.integration._browser import overflow_and_width, report_page
from tests.integration._stores import undisturbed_audit
from tests.integration.test_mpl_audit_flow import SPEC

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _step_below(grid: np.ndarray, curve: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """The certified curve at α, read at the next grid point ≥ α: a lower bound on the exact curve
    there (it is non-increasing), so a point above the true curve is above this."""
    out = np.empty_like(alpha)
    for k, a in enumerate(alpha):
        out[k] = curve[grid >= a][0]
    return out


def test_audit_stores_and_draws_the_empirical_tradeoff_points(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    from flows.report.render import render_report

    url = str(tmp_path / "a.zarr")
    undisturbed_audit(parse_spec(SPEC), url, dask_address)
    ds = store.open_group(url, S.MPL)
    acc = store.open_group(url, S.ACCOUNTING)
    assert ds.fdp_beta_upper.dims == (S.GEOLEVEL, S.FDP_POINT)
    grid = np.asarray(acc[S.ALPHA].values, dtype=float)
    for g in ("State", "Block"):
        row = ds.sel({S.GEOLEVEL: g})
        a_u = row.fdp_alpha_upper.values
        b_u = row.fdp_beta_upper.values
        ok = np.isfinite(a_u)
        assert ok.sum() >= 5 and np.array_equal(ok, np.isfinite(b_u))
        a_u, b_u = a_u[ok], b_u[ok]
        # the certified bounds are above the plug-in errors
        assert np.all(a_u >= row.fdp_alpha_hat.values[ok]) and np.all(
            b_u >= row.fdp_beta_hat.values[ok]
        )
        # the certified exact curve of the level, from the accounting group; a copy in the mpl group
        exact = acc.tradeoff_exact_lower.sel({S.GEOLEVEL: g}).values
        assert np.array_equal(row.fdp_exact_lower.values, exact)
        below = _step_below(grid, exact, a_u)
        assert np.all(b_u >= below), (g, (b_u - below).min())
        # the gap is the largest height above it; μ lower bound at least 0 and at most the
        # Gaussian limit 1/σ of one shift by 1 (the count's curve is a discrete Gaussian's)
        assert float(row.fdp_gap) == pytest.approx(float(np.max(b_u - below)), abs=1e-12)
        assert 0.0 <= float(row.fdp_gap) < 0.5
        assert 0.0 <= float(row.fdp_mu_lower) <= 1.0 / np.sqrt(float(row.sigma2)) + 0.05
    # State (σ² ≈ 5, μ ≈ 0.45) is certified informatively; Block (σ² ≈ 457) is not at these sizes
    assert float(ds.sel({S.GEOLEVEL: "State"}).fdp_mu_lower) > 0.2
    html_path = render_report(url, tmp_path / "report.html")
    html = html_path.read_text()
    assert 'id="fig-mpl-fdp"' in html and "Figure 5b." in html
    assert "f-DP gap" in html
    gap_state = float(ds.sel({S.GEOLEVEL: "State"}).fdp_gap)
    assert f'<td class="num">{gap_state:.3g}</td>' in html

    with report_page(html_path, width=1024) as page:
        overflow, width = overflow_and_width(page)
        img = page.evaluate(
            "() => { const i = document.querySelector('#fig-mpl-fdp img');"
            " return [i.naturalWidth, i.getBoundingClientRect().right]; }"
        )
    assert overflow == [] and width <= 1024
    assert img[0] > 300 and img[1] <= 1024  # the figure decoded and fits the window
