"""Streaming EPL: the lattice histogram accumulated over Zarr chunks gives the in-memory numbers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr

from auditlib.epl import (
    LatticeHistogram,
    epl,
    epl_surface,
    estimate_epl,
    flaxman_petti_reference,
    histogram_of_zarr,
    histograms_by_query,
    lattice_kde_logpdf,
    lattice_spacing,
)
from auditlib.epl.kde import mixture_logpdf, weighted_percentiles
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


def test_histograms_add_like_their_data() -> None:
    rng = np.random.default_rng(7)
    a, b = rng.integers(-40, 5, 3_000), rng.integers(-3, 90, 2_000)
    merged = LatticeHistogram().add(a).merge(LatticeHistogram().add(b))
    whole = LatticeHistogram().add(np.concatenate([a, b]))
    np.testing.assert_array_equal(merged.points, whole.points)
    np.testing.assert_array_equal(merged.counts, whole.counts)
    assert (merged.low, merged.high, merged.n) == (whole.low, whole.high, 5_000)
    with pytest.raises(InvalidParameterError, match=r"spacing 0\.5"):
        LatticeHistogram().merge(LatticeHistogram(0.5).add([0.5]))
    with pytest.raises(InvalidParameterError, match="spacing"):
        LatticeHistogram(0.0)


def test_flaxman_petti_of_a_histogram_is_the_authors_number() -> None:
    """epl(histogram) against the scipy transcription of the authors' code (Flaxman & Petti's appendix)."""
    r = TwoSidedGeometric(0.5).rvs(3_000, np.random.default_rng(2)).astype(np.float64)
    hist = LatticeHistogram().add(r[:1_000]).add(r[1_000:])
    ref, x_ref, e_ref = flaxman_petti_reference(r, bandwidth_factor=0.1)
    got = epl(hist, method="flaxman_petti", bandwidth_factor=0.1)
    assert got.epl == pytest.approx(ref, rel=1e-10)
    np.testing.assert_allclose(got.x, x_ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(got.epl_x, e_ref, rtol=1e-9)
    inv = epl(LatticeHistogram(0.25).add(np.full(40, 1.5)))
    assert inv.status == "invariant" and inv.epl == np.inf


def test_dyadic_residuals_are_exact_on_a_dyadic_lattice() -> None:
    """ADPC-like means of 4 geometric draws are k/4: a lattice of spacing 1/4 counts them exactly."""
    g = TwoSidedGeometric(0.3).rvs((4, 4_000), np.random.default_rng(5))
    r = g.mean(axis=0)
    assert lattice_spacing(r, 0.1) <= 0.25
    hist = LatticeHistogram(0.25).add(r[:1_500]).add(r[1_500:])
    assert not hist.binned and hist.kde_error(1.0) == 0.0
    pts, cnt = np.unique(r, return_counts=True)
    np.testing.assert_array_equal(hist.points, pts)
    np.testing.assert_array_equal(hist.counts, cnt)
    for method in ("flaxman_petti", "bias_aware"):
        a, b = epl(hist, method=method), epl(r, method=method)
        assert a.epl == pytest.approx(b.epl, rel=1e-12), method
    assert lattice_spacing(np.arange(10.0)) == 1.0
    assert lattice_spacing(np.full(10, 0.5)) == 2.0**-8  # no spread: a fixed fine lattice


def test_binned_histogram_is_within_its_stated_error() -> None:
    """Off-lattice residuals: the binned KDE against the exact KDE of the raw values, within
    kde_error (binning_error_bound); total and mean preserved exactly by linear binning."""
    r = np.random.default_rng(9).normal(0.0, 3.0, 4_000)
    h = 0.1 * float(np.std(r, ddof=1))
    s = lattice_spacing(r, 0.1)
    assert s <= h / 200 < 2 * s
    hist = LatticeHistogram(s).add(r[:2_500]).add(r[2_500:])
    assert hist.binned and hist.n == r.size
    assert float(np.dot(hist.points, hist.counts)) / r.size == pytest.approx(r.mean(), abs=1e-9)
    x = np.linspace(-6.0, 6.0, 61)
    exact = lattice_kde_logpdf(r, h, x)
    binned = mixture_logpdf(hist.points, hist.counts, h, x)
    err = np.max(np.abs(np.expm1(binned - exact)))
    assert err <= hist.kde_error(h) < 1e-3
    # power: linear binning errs to second order in s/h, rounding each value to its nearest
    # lattice point to first order; an implementation that rounded would fail here
    near = LatticeHistogram(s).add(np.round(r / s) * s)
    assert not near.binned
    err_near = np.max(np.abs(np.expm1(mixture_logpdf(near.points, near.counts, h, x) - exact)))
    assert err_near > 100 * err
    p = weighted_percentiles(hist.points, hist.counts, [5.0, 95.0])
    np.testing.assert_allclose(p, np.percentile(r, [5.0, 95.0]), atol=2 * s)


def test_histograms_by_query_in_row_steps() -> None:
    rng = np.random.default_rng(4)
    res = rng.integers(-9, 9, (7, 30)).astype(np.float32)
    qi = rng.integers(0, 3, 30)
    qi[qi == 1] = 0  # query 1 unmeasured
    hists = histograms_by_query(res, qi, 4, step_elements=40)  # 1 row at a time
    assert hists[1] is None and hists[3] is None
    for q in (0, 2):
        h = hists[q]
        assert h is not None
        pts, cnt = np.unique(res[:, qi == q], return_counts=True)
        np.testing.assert_array_equal(h.points, pts)
        np.testing.assert_array_equal(h.counts, cnt)
    with pytest.raises(InvalidParameterError, match="query indices"):
        histograms_by_query(res, qi[:-1], 4)
