"""MPL density estimators and the mechanism-under-test protocol, against independent references.

TDDE against a brute-force count (Algorithm 2 of Askin, Kutta & Dette as written); TKDE against
``scipy.stats.gaussian_kde`` (same bandwidth); the bandwidth rule against R's ``bw.nrd0`` formula.
"""

from __future__ import annotations

import doctest
import importlib
import math

import numpy as np
import pytest
from scipy import integrate
from scipy.stats import gaussian_kde

from auditlib.exceptions import InvalidParameterError
from auditlib.mpl import MechanismUnderTest, check_samples, silverman_bandwidth, tdde, tkde
from auditlib.mpl.density import (
    bandwidth_scale,
    gaussian_kde_exact,
    kernel_square_integral,
    tkde_binned,
    undersmoothed_bandwidth,
)


@pytest.mark.parametrize("module", ["protocol", "density", "dpl", "mpl", "catalogue"])
def test_doctests(module: str) -> None:
    # the package re-exports functions named like two of its modules: import the modules by name
    res = doctest.testmod(importlib.import_module(f"auditlib.mpl.{module}"))
    assert res.failed == 0


# -- TDDE ---------------------------------------------------------------------------------------


def test_tdde_equals_brute_force() -> None:
    rng = np.random.default_rng(3)
    x = rng.integers(-4, 5, size=257)
    pts = np.arange(-7, 8)
    f, c = tdde(x, pts, tau=0.01)
    for t, fi, ci in zip(pts, f, c, strict=True):
        out = sum(1 for xi in x if xi == t) / x.size  # Algorithm 2, lines 2-9
        assert ci == sum(1 for xi in x if xi == t)
        assert fi == max(out, 0.01)


def test_tdde_floor_and_errors() -> None:
    f, c = tdde(np.array([5, 5]), np.array([5, 6]), tau=0.0)
    assert f.tolist() == [1.0, 0.0] and c.tolist() == [2, 0]
    with pytest.raises(InvalidParameterError, match="tau"):
        tdde([1], [1], tau=1.0)
    with pytest.raises(InvalidParameterError, match="samples"):
        tdde(np.array([], dtype=np.int64), [1], tau=0.1)


# -- TKDE ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("h", [0.05, 0.3])
def test_tkde_equals_scipy(h: float) -> None:
    rng = np.random.default_rng(7)
    x = rng.laplace(0.3, 1.2, size=3000)
    t = np.linspace(-2.0, 2.0, 41)
    ref = gaussian_kde(x, bw_method=h / np.std(x, ddof=1))(t)
    np.testing.assert_allclose(gaussian_kde_exact(x, t, h), ref, rtol=1e-12)
    # binned: ≈ Δ²/(8h²) ≈ 1.2e-4 relative to the kernel scale (module docstring)
    np.testing.assert_allclose(tkde_binned(x, t, h), ref, rtol=5e-4, atol=1e-6)


def test_tkde_binned_on_a_region_far_wider_than_h() -> None:
    """Points 10¹² bandwidths apart would need a 10¹⁴-cell lattice: the estimate falls back to the
    exact sums (still scipy's KDE) instead of asking for exabytes."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=500)
    h = 1e-3
    t = np.array([-1e9, -0.5, 0.0, 0.7, 1e9])
    ref = gaussian_kde(x, bw_method=h / x.std(ddof=1))(t)
    np.testing.assert_allclose(tkde_binned(x, t, h), ref, rtol=1e-10, atol=1e-300)


def test_tkde_multivariate_equals_scipy() -> None:
    rng = np.random.default_rng(8)
    x = rng.normal(size=(800, 2)) * [1.0, 1.0]
    t = rng.uniform(-1, 1, size=(15, 2))
    h = 0.4
    ref = gaussian_kde(x.T, bw_method=1.0)
    ref.set_bandwidth(bw_method=1.0)
    # scipy uses the sample covariance; compare with the spherical kernel directly instead
    diff = (t[:, None, :] - x[None, :, :]) / h
    brute = np.exp(-0.5 * (diff**2).sum(-1)).mean(1) / (2 * math.pi * h * h)
    np.testing.assert_allclose(gaussian_kde_exact(x, t, h), brute, rtol=1e-12)


def test_tkde_floor() -> None:
    f, raw = tkde(np.array([0.0, 0.1]), np.array([0.0, 50.0]), 0.1, 1e-3)
    assert raw[1] == 0.0 and f[1] == 1e-3 and f[0] == raw[0] > 1e-3
    with pytest.raises(InvalidParameterError, match="method"):
        tkde([0.0], [0.0], 1.0, 0.0, method="fft")
    with pytest.raises(InvalidParameterError, match="bandwidth"):
        tkde([0.0], [0.0], -1.0, 0.0)


def test_bandwidths() -> None:
    rng = np.random.default_rng(11)
    x = rng.normal(2.0, 3.0, size=5000)
    sd = np.std(x, ddof=1)
    q75, q25 = np.percentile(x, [75, 25])
    nrd0 = 0.9 * min(sd, (q75 - q25) / 1.34) * x.size ** (-0.2)  # R: bw.nrd0
    assert silverman_bandwidth(x) == pytest.approx(nrd0, rel=1e-14)
    h_ci = undersmoothed_bandwidth(x, beta=1.0, gamma=0.05)
    assert h_ci == pytest.approx(bandwidth_scale(x) * 5000 ** (-1 / 3 - 0.05), rel=1e-14)
    assert h_ci < silverman_bandwidth(x)
    with pytest.raises(InvalidParameterError, match="beta"):
        undersmoothed_bandwidth(x, beta=2.5)
    with pytest.raises(InvalidParameterError, match="gamma"):
        undersmoothed_bandwidth(x, gamma=0.0)
    assert bandwidth_scale(np.zeros(10)) == 0.9  # degenerate spread falls back to 1 (bw.nrd0)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_kernel_square_integral(d: int) -> None:
    one, _ = integrate.quad(lambda u: math.exp(-(u**2)) / (2 * math.pi), -30, 30)
    assert kernel_square_integral(d) == pytest.approx(one**d, rel=1e-12)


# -- protocol -----------------------------------------------------------------------------------


def test_protocol_checks_the_sampler() -> None:
    rng = np.random.default_rng(0)
    ok = MechanismUnderTest("c", lambda c, n, r: c + r.integers(0, 2, n), "discrete")
    assert ok.sample(3, 5, rng).dtype == np.int64
    short = MechanismUnderTest("short", lambda c, n, r: np.zeros(n - 1, dtype=int), "discrete")
    with pytest.raises(InvalidParameterError, match="4 draws returned where n = 5"):
        short.sample(0, 5, rng)
    floats = MechanismUnderTest("floats", lambda c, n, r: np.zeros(n), "discrete")
    with pytest.raises(InvalidParameterError, match="dtype float64 for a discrete"):
        floats.sample(0, 5, rng)
    ints = MechanismUnderTest("ints", lambda c, n, r: np.zeros(n, dtype=int), "continuous")
    with pytest.raises(InvalidParameterError, match="dtype int64 for a continuous"):
        ints.sample(0, 5, rng)
    wide = MechanismUnderTest("wide", lambda c, n, r: np.zeros((n, 2)), "continuous")
    with pytest.raises(InvalidParameterError, match=r"shape \(5, 2\)"):
        wide.sample(0, 5, rng)
    nan = MechanismUnderTest("nan", lambda c, n, r: np.full(n, np.nan), "continuous")
    with pytest.raises(InvalidParameterError, match="nan"):
        nan.sample(0, 5, rng)
    two = MechanismUnderTest("two", lambda c, n, r: r.normal(size=(n, 2)), "continuous", dim=2)
    assert two.sample(0, 4, rng).shape == (4, 2)
    with pytest.raises(InvalidParameterError, match="Invalid n"):
        ok.sample(0, 0, rng)
    with pytest.raises(InvalidParameterError, match="rng"):
        ok.sample(0, 3, 42)  # type: ignore[arg-type]


def test_protocol_rejects_bad_declarations() -> None:
    with pytest.raises(InvalidParameterError, match="kind"):
        MechanismUnderTest("x", lambda c, n, r: c, "mixed")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="dim"):
        MechanismUnderTest("x", lambda c, n, r: c, "discrete", dim=2)
    with pytest.raises(InvalidParameterError, match="dim"):
        MechanismUnderTest("x", lambda c, n, r: c, "continuous", dim=0)
    with pytest.raises(InvalidParameterError, match="sampler"):
        MechanismUnderTest("x", 3, "continuous")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="empty"):
        check_samples(np.array([]), kind="continuous")
