"""Su, Su & Wang's reduced noise as the audit stores it: per-level calibration and the accuracy it buys."""

from __future__ import annotations

import numpy as np
import pytest

from auditlib.allocations import load_allocation
from auditlib.summaries import ACCURACY_COUNTS, accuracy_by_query, calibrate

# Su, Su & Wang Table 1 (δ* = 1e-11): reduced σ² and variance cut, as printed (REFERENCE.md)
TABLE1 = {"US": (54.19, 0.2088), "State": (4.25, 0.1508), "Block": (343.27, 0.2482)}


@pytest.mark.parametrize("level", sorted(TABLE1))
def test_calibration_reproduces_su_su_wang_table1(level: str) -> None:
    comps = load_allocation("dhcp_20220825_paper").components("add_remove", "persons", "US", level)
    out = calibrate(comps, 1e-11)
    reduced, cut = TABLE1[level]
    assert out["variance_cut_lower"] <= out["variance_cut_upper"]
    assert out["variance_cut_lower"] == pytest.approx(cut, abs=5e-5)
    assert out["reduced_sigma2_max"] == pytest.approx(reduced, abs=5e-3)
    assert out["calibration_factor_upper"] == pytest.approx(1 - out["variance_cut_lower"])


def test_accuracy_by_query_follows_the_variance_cut() -> None:
    sigma2 = np.array([[5.0, np.nan], [456.62, 456.62]])
    factor = np.array([0.8492, 0.7518])
    acc = accuracy_by_query(sigma2, factor)
    assert acc["sigma2"].shape == (2, 2, 2)
    assert np.isnan(acc["mse"][0, 1]).all() and np.isnan(acc["mse_clipped"][0, 1]).all()
    # MSE = Var of the discrete Gaussian ≈ σ² here, so the MSE falls by the variance cut
    ratio = acc["mse"][:, 0, 1] / acc["mse"][:, 0, 0]
    np.testing.assert_allclose(ratio, factor, rtol=1e-6)
    # MAE scales with σ: by √factor
    np.testing.assert_allclose(
        acc["mae"][1, 0, 1] / acc["mae"][1, 0, 0], np.sqrt(factor[1]), rtol=1e-4
    )
    assert acc["mse_clipped"].shape == (2, 2, 2, len(ACCURACY_COUNTS))
    assert np.all(acc["mse_clipped"][1, 0] < acc["mse"][1, 0, :, None])
