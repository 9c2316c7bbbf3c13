"""Streaming EPL: the lattice histogram accumulated over Zarr chunks gives the in-memory numbers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr

from auditlib.epl import LatticeHistogram, epl_surface, estimate_epl, histogram_of_zarr
from auditlib.exceptions import InvalidParameterError
from auditlib.mechanisms import TwoSidedGeometric


def test_histogram_over_zarr_chunks_equals_the_in_memory_estimate(tmp_path: Path) -> None:
    r = TwoSidedGeometric(0.2).rvs((40, 5_000), np.random.default_rng(1)).astype(np.float32)
    r[-1, 4_000:] = np.nan  # the store's padding
    arr = zarr.create_array(
        str(tmp_path / "r.zarr"), shape=r.shape, chunks=(7, 5_000), dtype="float32"
    )
    arr[:] = r
    hist = histogram_of_zarr(arr)
    flat = r[np.isfinite(r)]
    assert hist.n == flat.size == 40 * 5_000 - 1_000
    pts, cnt = np.unique(flat, return_counts=True)
    np.testing.assert_array_equal(hist.points, pts)
    np.testing.assert_array_equal(hist.counts, cnt)
    a = estimate_epl(hist, seed=3)
    b = estimate_epl(flat, seed=3)
    for name in ("epl", "ci_low", "ci_high", "null_upper", "inv_sigma2_hat", "bandwidth"):
        assert getattr(a, name) == pytest.approx(getattr(b, name), rel=1e-12), name
    np.testing.assert_allclose(epl_surface(hist, seed=4).high, epl_surface(flat, seed=4).high)


def test_chunks_in_any_order_and_range_give_one_histogram() -> None:
    h = LatticeHistogram().add(np.array([5, 6, 6])).add(np.array([-3.0, 6.0])).add([])
    np.testing.assert_array_equal(h.points, [-3, 5, 6])
    np.testing.assert_array_equal(h.counts, [1, 1, 3])
    assert h.n == 5
    inv = estimate_epl(LatticeHistogram().add(np.full(50, 4)))
    assert inv.status == "invariant" and inv.epl == np.inf


def test_bad_chunks_are_refused() -> None:
    with pytest.raises(InvalidParameterError, match="NaN"):
        LatticeHistogram().add(np.array([1.0, np.nan]))
    with pytest.raises(InvalidParameterError, match="non-integer"):
        LatticeHistogram().add(np.array([0.5]))
    with pytest.raises(InvalidParameterError, match="empty histogram"):
        estimate_epl(LatticeHistogram())
