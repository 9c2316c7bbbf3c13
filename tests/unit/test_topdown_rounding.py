"""TopDown rounding with the totals controlled: every cell and every unit's total within one of the
real-valued solution, children summing to their parent in every cell; the unit totals of a release
no noisier than their own measurement."""

from __future__ import annotations

import numpy as np
import pytest

from auditlib import seeds
from auditlib.exceptions import InvalidParameterError
from auditlib.geography import PopulationParams, SyntheticHierarchy
from auditlib.simulate import rounding
from auditlib.simulate.postprocess import project_simplex
from auditlib.simulate.rounding import round_controlled
from auditlib.simulate.topdown import TOPDOWN_NOISE, synthetic_state, topdown
from tests.unit.test_topdown_exact import pl94_production

LEVELS = ("State", "County", "Tract", "Block_Group", "Block")


def _check_controlled(x, parent, up, y):
    n_par, n_cells = up.shape
    assert y.dtype == np.int64 and (y >= 0).all()
    assert (np.abs(y - x) < 1).all()
    integral = x == np.round(x)
    np.testing.assert_array_equal(y[integral], x[integral])  # integers (empty cells) kept
    for k in range(n_cells):
        np.testing.assert_array_equal(
            np.bincount(parent, weights=y[:, k], minlength=n_par), up[:, k]
        )
    total, got = x.sum(axis=1), y.sum(axis=1)
    assert ((got >= np.floor(total + 1e-9)) & (got <= np.ceil(total - 1e-9))).all()


def _feasible_children(rng, n_par, n_cells, max_children, zero_share):
    """Real-valued children summing, cell by cell, to integer parents (a projection)."""
    sizes = rng.integers(1, max_children + 1, n_par)
    parent = np.repeat(np.arange(n_par), sizes)
    up = rng.integers(0, 9, (n_par, n_cells))
    y = rng.random((parent.size, n_cells)) * 4 * (rng.random((parent.size, n_cells)) > zero_share)
    seg = parent[:, None] * n_cells + np.arange(n_cells)
    x = project_simplex(y.ravel(), seg.ravel(), up.ravel()).reshape(parent.size, n_cells)
    return x, parent, up


@pytest.mark.parametrize("seed", range(4))
def test_controlled_rounding_bounds_cells_and_totals(seed):
    rng = np.random.default_rng(seed)
    x, parent, up = _feasible_children(rng, 300, 6, 9, 0.4)
    _check_controlled(x, parent, up, round_controlled(x, parent, up))


def test_controlled_rounding_totals_beat_independent_rounding():
    """Per (parent, cell) rounding lets totals drift by the sum of their cells' errors."""
    from auditlib.simulate.postprocess import round_preserving

    x, parent, up = _feasible_children(np.random.default_rng(9), 2000, 28, 8, 0.7)
    y = round_controlled(x, parent, up)
    _check_controlled(x, parent, up, y)
    seg = parent[:, None] * 28 + np.arange(28)
    z = round_preserving(x, seg, up.ravel()).reshape(x.shape)
    err_y, err_z = y.sum(axis=1) - x.sum(axis=1), z.sum(axis=1) - x.sum(axis=1)
    assert np.abs(err_z).max() > 1.5  # independent rounding: some totals off by 2 or more
    assert np.mean(err_y**2) < 0.25 < 0.5 < np.mean(err_z**2)


def test_controlled_rounding_repairs_what_the_greedy_pass_misses(monkeypatch):
    """Cell by cell, the greedy pass gives cell 0 to units 0 and 3 and cell 1 to unit 0; cell 2
    must then round up unit 0 (total 1.75 -> 3) or unit 3 (1.0 -> 2). The flow repair finds a
    choice within bounds."""
    x = np.array([[0.75, 0.25, 0.75], [0.5, 0.25, 0.0], [0.0, 0.5, 0.0], [0.75, 0.0, 0.25]])
    x += np.array([[2, 0, 1], [0, 3, 0], [1, 1, 1], [0, 0, 4]])
    parent = np.zeros(4, dtype=np.int64)
    up = np.rint(x.sum(axis=0))[None, :].astype(np.int64)
    calls = []
    real = rounding._flow_repair
    monkeypatch.setattr(rounding, "_flow_repair", lambda *a: calls.append(a[0].shape) or real(*a))
    y = round_controlled(x, parent, up)
    assert calls == [(4, 3)]
    _check_controlled(x, parent, up, y)
    # the same instance among other parents: repaired alone, the others untouched
    x2 = np.vstack([x, x + 1])
    p2 = np.repeat([0, 1], 4)
    up2 = np.vstack([up, up + 4])
    calls.clear()
    _check_controlled(x2, p2, up2, round_controlled(x2, p2, up2))
    assert calls == [(8, 3)]


def test_controlled_rounding_rejects_bad_input():
    x = np.array([[0.5, 1.0], [0.5, 0.0]])
    with pytest.raises(InvalidParameterError, match="sum to 1 in cell 1, not the parent's 2"):
        round_controlled(x, np.zeros(2, dtype=np.int64), np.array([[1, 2]]))
    with pytest.raises(InvalidParameterError, match="grouped by parent"):
        round_controlled(x, np.array([1, 0]), np.array([[1, 0], [0, 1]]))
    with pytest.raises(InvalidParameterError, match="Invalid rounding: 'nearest'"):
        topdown(*_state((2, 2, 2, 2)), {}, [], [], rounding="nearest")  # type: ignore[arg-type]


def _state(fanouts):
    return synthetic_state(
        SyntheticHierarchy(LEVELS, fanouts, 1), PopulationParams(seed=11), 1, "pl94"
    )


def test_unit_totals_no_noisier_than_their_measurement():
    """A synthetic pl94 state under the PL94-171 production allocation (add/remove σ²): the
    residual variance of County, Tract and Block_Group totals stays below the variance of the
    total's own measurement (the fit pools several measurements; about 0.6–0.75 × before
    rounding). Rounding 28 cells independently per (parent, cell) added about 1.2 people² per
    total (1.1–1.4 × σ²)."""
    h, hist = _state((3, 6, 3, 8))
    q, measured = pl94_production(LEVELS, "add_remove")
    sigma2 = [dict(level)["total"] for level in measured]
    sq = np.zeros(len(LEVELS))
    n = np.zeros(len(LEVELS))
    for r in range(60):
        rel = topdown(
            h, hist, q, measured, [seeds.rng(5, TOPDOWN_NOISE, 1, i, r) for i in range(5)]
        )
        for i in range(1, 4):
            d = rel.dp[i].sum(axis=1) - rel.truth[i].sum(axis=1)
            sq[i] += (d.astype(float) ** 2).sum()
            n[i] += d.size
    ratio = sq[1:4] / n[1:4] / np.array(sigma2[1:4])
    assert (ratio < 0.95).all(), dict(zip(LEVELS[1:4], ratio.round(3), strict=True))
