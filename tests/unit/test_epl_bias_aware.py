"""The bias-aware EPL estimate: its bias against Flaxman & Petti, the bootstrap interval's coverage
and power, the matched discrete-Gaussian floor, the slope as an estimate of 1/σ², statuses, knobs
and bad inputs. True losses are exact: ε for the two-sided geometric, (2x+1)/2σ² from the
discrete-Gaussian pmf.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator

import numpy as np
import pytest
from scipy.stats import gaussian_kde

from auditlib.epl import epl
from auditlib.epl.bandwidth import resolve_bandwidth
from auditlib.epl.bias_aware import EPLEstimate, estimate_epl
from auditlib.epl.settings import BIAS_AWARE_FACTOR
from auditlib.epl.slope import inverse_sigma2, least_squares_slope
from auditlib.exceptions import InvalidParameterError, UnknownNameError
from auditlib.mechanisms import DiscreteGaussian, Laplace, TwoSidedGeometric

C_WA_1940 = 2663  # enumeration districts of Washington State, 1940 (Flaxman & Petti's appendix)


def _geometric_draws(eps: float, seed: int, sets: int, n: int) -> Iterator[np.ndarray]:
    """``sets`` data sets of ``n`` two-sided geometric residuals at ``eps`` (true loss exactly
    ``eps``), one after the other from one generator seeded ``seed``."""
    rng = np.random.default_rng(seed)
    noise = TwoSidedGeometric(eps)
    for _ in range(sets):
        yield noise.rvs(n, rng)


# -- bias ---------------------------------------------------------------------------------------


def test_bias_aware_beats_flaxman_petti_at_2663() -> None:
    """Geometric noise with ε = 0.25 (true loss exactly 0.25), 200 paired replicates."""
    eps = 0.25
    ba = np.empty(200)
    fp = np.empty(200)
    for i, r in enumerate(_geometric_draws(eps, 2663, ba.size, C_WA_1940)):
        ba[i] = epl(r, method="bias_aware").epl
        fp[i] = epl(r).epl
    # Flaxman & Petti's setting errs far upward (≈1.6×), the bias-aware one much less (≈1.1×)
    assert fp.mean() / eps > 1.4
    assert 0.95 < ba.mean() / eps < 1.25
    # paired: |error| smaller in mean by many standard errors
    d = np.abs(fp - eps) - np.abs(ba - eps)
    assert d.mean() / (d.std(ddof=1) / math.sqrt(d.size)) > 10.0
    assert np.mean((fp - eps) ** 2) > 4.0 * np.mean((ba - eps) ** 2)


def test_epl_method_bias_aware_is_the_point_estimate() -> None:
    r = DiscreteGaussian(20.0).rvs(5000, np.random.default_rng(1))
    a = epl(r, method="bias_aware")
    b = estimate_epl(r, n_boot=None, n_null=None)
    assert a.epl == b.epl and a.bandwidth == b.bandwidth and a.window == b.window
    np.testing.assert_array_equal(a.epl_x, b.epl_x)
    assert a.bandwidth_factor == BIAS_AWARE_FACTOR == 0.3
    assert b.bandwidth == pytest.approx(0.3 * np.std(r, ddof=1), rel=1e-12)
    # the historical default is untouched
    old = epl(r)
    assert old.method == "flaxman_petti" and old.bandwidth_factor == 0.1
    assert epl(r, bandwidth_factor=0.1).epl == old.epl
    # percentile_window at factor 0.3 is the same curve
    pw = epl(r, method="percentile_window", bandwidth_factor=0.3)
    np.testing.assert_allclose(pw.epl_x, a.epl_x, rtol=1e-13)


# -- bootstrap ----------------------------------------------------------------------------------


def test_bootstrap_interval_covers_and_has_power() -> None:
    """90 % basic interval, geometric ε = 0.5, n = 20,000, 80 data sets of B = 200."""
    eps = 0.5
    lo = np.empty(80)
    hi = np.empty(80)
    for i, r in enumerate(_geometric_draws(eps, 90, lo.size, 20_000)):
        e = estimate_epl(r, n_boot=200, n_null=None, seed=i)
        lo[i], hi[i] = e.ci_low, e.ci_high  # (a basic interval need not contain e.epl)
    cover = np.mean((lo <= eps) & (eps <= hi))
    assert cover >= 0.65  # ≈0.85 observed; binomial sd ≈ 0.04
    for wrong in (0.8 * eps, 1.25 * eps):
        assert np.mean((lo <= wrong) & (wrong <= hi)) <= 0.05


def test_percentile_interval_is_biased_like_the_max() -> None:
    r = TwoSidedGeometric(0.25).rvs(C_WA_1940, np.random.default_rng(3))
    basic = estimate_epl(r, seed=7, n_null=None)
    perc = estimate_epl(r, seed=7, n_null=None, ci_kind="percentile")
    assert basic.boot_mean == perc.boot_mean > basic.epl  # resampling adds noise, the max grows
    assert perc.ci_low + perc.ci_high == pytest.approx(
        4 * basic.epl - basic.ci_low - basic.ci_high, rel=1e-12
    )
    assert basic.epl_debiased == pytest.approx(2 * basic.epl - basic.boot_mean)
    assert basic.epl_debiased < basic.epl


def test_seed_reproducible_and_draws_independent() -> None:
    r = TwoSidedGeometric(0.1).rvs(3000, np.random.default_rng(4))
    a = estimate_epl(r, seed=11)
    b = estimate_epl(r, seed=11)
    c = estimate_epl(r, seed=12)
    assert a.to_dict() == b.to_dict()
    assert a.ci_low != c.ci_low and a.null_mean != c.null_mean
    assert a.epl == c.epl
    gen = estimate_epl(r, seed=np.random.default_rng(5))
    assert math.isfinite(gen.ci_low) and gen.seed is None


# -- matched reference floor --------------------------------------------------------------------


def test_null_floor_is_calibrated_on_gaussian_data() -> None:
    """Data drawn from the reference itself: EPL exceeds the floor's 95 % point ≈5 % of the time."""
    s2 = 30.0
    rng = np.random.default_rng(6)
    above = 0
    for i in range(60):
        r = DiscreteGaussian(s2).rvs(C_WA_1940, rng)
        e = estimate_epl(r, n_boot=None, n_null=200, seed=i)
        # the reference's exact loss over the window, from the formula and from the pmf
        dg = DiscreteGaussian(e.null_sigma2)
        exact = np.abs(dg.logpmf(e.x) - dg.logpmf(e.x + 1.0))
        assert e.null_true == pytest.approx(float(exact.max()), rel=1e-9)
        assert e.null_sigma2 == pytest.approx(np.var(r, ddof=1), rel=1e-12)
        assert e.null_mean < e.null_upper
        above += e.epl > e.null_upper
    assert above <= 9  # expected 3 of 60


def test_null_floor_shows_small_sample_noise_and_smoothing() -> None:
    """The floor reports what the estimator does to a smooth reference of the data's n and sd."""
    floor = {}
    for n in (1000, 100_000):
        r = DiscreteGaussian(100.0).rvs(n, np.random.default_rng(n))
        for f in (0.1, 0.3):
            e = estimate_epl(r, bandwidth=f, n_boot=None, n_null=100, seed=1)
            floor[n, f] = (e.null_mean / e.null_true, (e.null_upper - e.null_mean) / e.null_true)
    # narrow kernel, small n: the max of the noisy curve errs far upward
    assert floor[1000, 0.1][0] > 1.4
    # large n: only the kernel's smoothing is left, a factor ≈ 1/(1 + f²) for Gaussian noise
    assert floor[100_000, 0.3][0] == pytest.approx(1.0 / 1.09, rel=0.02)
    # the floor's spread shrinks with n
    assert floor[1000, 0.3][1] > 5 * floor[100_000, 0.3][1]


# -- slope --------------------------------------------------------------------------------------


@pytest.mark.parametrize("sigma2", [25.0, 456.62])
def test_slope_recovers_inverse_sigma2(sigma2: float) -> None:
    """10⁶ discrete-Gaussian residuals: 1/σ̂² within 3 %; σ² off by 30 % is rejected."""
    r = DiscreteGaussian(sigma2).rvs(1_000_000, np.random.default_rng(int(sigma2)))
    e = estimate_epl(r, n_null=None, seed=2)
    truth = 1.0 / sigma2
    assert e.inv_sigma2_hat == pytest.approx(truth, rel=0.03)
    assert e.rho_hat == pytest.approx(0.5 * truth, rel=0.03)
    # the raw slope is the KDE's 1/(σ² + h²), before the kernel's variance is removed
    assert e.slope == pytest.approx(1.0 / (sigma2 + e.bandwidth**2), rel=0.03)
    # bootstrap se of the slope is small, so both wrong values are many se away
    se = e.slope_se / e.slope * e.inv_sigma2_hat  # relative se carried over
    for wrong in (1.0 / (1.3 * sigma2), 1.0 / (0.7 * sigma2)):
        assert abs(e.inv_sigma2_hat - wrong) > 0.2 * wrong
        assert abs(e.inv_sigma2_hat - wrong) > 10 * se
    # the Gaussian-model loss over the window matches the exact one there
    dg = DiscreteGaussian(sigma2)
    exact = float(np.max(np.abs(dg.logpmf(e.x) - dg.logpmf(e.x + 1.0))))
    assert e.epl_gaussian == pytest.approx(exact, rel=0.03)


def test_slope_with_shift_two() -> None:
    s2 = 25.0
    r = DiscreteGaussian(s2).rvs(1_000_000, np.random.default_rng(8))
    e = estimate_epl(r, shift=2.0, n_boot=None, n_null=None)
    assert e.inv_sigma2_hat == pytest.approx(1.0 / s2, rel=0.03)
    assert e.rho_hat == pytest.approx(4.0 / (2.0 * s2), rel=0.03)
    assert float(e.x.max()) + 2.0 <= e.window[1]


def test_slope_helpers() -> None:
    x = np.arange(5.0)
    y = np.vstack([2.0 * x + 1.0, -x])
    np.testing.assert_allclose(least_squares_slope(x, y), [2.0, -1.0])
    assert math.isnan(float(least_squares_slope(np.array([1.0]), np.array([3.0]))))
    assert inverse_sigma2(0.5, 1.0) == pytest.approx(1.0)  # 1/(1/0.5 − 1)
    assert math.isnan(inverse_sigma2(-0.1, 1.0))
    assert math.isnan(inverse_sigma2(2.0, 1.0))  # 1/2 − 1 < 0


# -- knobs and statuses -------------------------------------------------------------------------


def test_bandwidth_kinds_match_scipy() -> None:
    r = TwoSidedGeometric(0.3).rvs(4000, np.random.default_rng(9))
    sd = float(np.std(r, ddof=1))
    for kind in ("scott", "silverman"):
        e = estimate_epl(r, bandwidth_kind=kind, n_boot=None, n_null=None)
        assert e.bandwidth == pytest.approx(sd * gaussian_kde(r, bw_method=kind).factor, rel=1e-12)
        assert e.bandwidth == resolve_bandwidth(kind, None, sd, r.size)
    e = estimate_epl(r, bandwidth=2.5, bandwidth_kind="absolute", n_boot=None, n_null=None)
    assert e.bandwidth == 2.5
    e = estimate_epl(r, bandwidth=0.5, n_boot=None, n_null=None)
    assert e.bandwidth == pytest.approx(0.5 * sd, rel=1e-12)


def test_window_percentiles_and_multiplier() -> None:
    r = TwoSidedGeometric(0.3).rvs(4000, np.random.default_rng(10))
    e = estimate_epl(r, percentiles=(10, 90), range_multiplier=1.5, n_boot=None, n_null=None)
    p10, p90 = np.percentile(r, [10, 90])
    assert e.window == pytest.approx((1.5 * p10, 1.5 * p90))
    assert e.x[0] == math.ceil(1.5 * p10) and e.x[-1] == math.floor(1.5 * p90 - 1)
    assert e.epl == float(np.max(np.abs(e.epl_x)))
    assert e.argmax in e.x


def test_statuses() -> None:
    inv = estimate_epl(np.full(100, 3))
    assert inv.status == "invariant" and inv.epl == math.inf and inv.window == (3.0, 3.0)
    few = estimate_epl(np.arange(10))
    assert few.status == "too_few" and math.isnan(few.epl) and few.n == 10
    r = np.r_[np.zeros(500, dtype=int), np.arange(-3, 4)]
    empty = estimate_epl(r)
    assert empty.status == "empty_window" and math.isnan(empty.epl) and empty.x.size == 0
    ok = estimate_epl(TwoSidedGeometric(0.2).rvs(1000, np.random.default_rng(0)), seed=0)
    assert ok.status == "ok"
    for res in (inv, few, empty, ok):
        d = res.to_dict()
        json.dumps(d)
        assert {"epl", "status", "n", "bandwidth", "ci_low", "null_upper", "slope"} <= set(d)
        assert "x" not in d and "epl_x" not in d
    assert isinstance(ok, EPLEstimate)
    with pytest.raises(AttributeError):
        ok.epl = 0.0  # type: ignore[misc]


def test_non_integer_residuals_exact_and_binned() -> None:
    rng = np.random.default_rng(12)
    for n in (3000, 30_000):  # the second exceeds the distinct-value limit: binned bootstrap
        r = Laplace(1.0 / 0.4).rvs(n, rng)
        e = estimate_epl(r, seed=1, n_null=20)
        assert e.status == "ok"
        assert all(math.isfinite(v) for v in (e.epl, e.ci_low, e.ci_high, e.null_mean))
        assert e.ci_low <= e.epl <= e.ci_high


# -- bad inputs ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("residuals", "match"),
    [
        ([], "empty"),
        ([1.0, math.nan, 2.0], "non-finite"),
        ([1.0, math.inf], "non-finite"),
        (np.zeros((10, 10)), "1-D"),
        ("abc", "numeric"),
    ],
)
def test_bad_residuals(residuals: object, match: str) -> None:
    with pytest.raises(InvalidParameterError, match=match):
        estimate_epl(residuals)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_boot": 0}, "n_boot"),
        ({"n_boot": -5}, "n_boot"),
        ({"n_boot": 2.5}, "n_boot"),
        ({"n_boot": True}, "n_boot"),
        ({"n_null": 0}, "n_null"),
        ({"bandwidth": 0.0}, "bandwidth"),
        ({"bandwidth": math.nan}, "bandwidth"),
        ({"bandwidth": 1.0, "bandwidth_kind": "scott"}, "bandwidth"),
        ({"bandwidth_kind": "absolute"}, "bandwidth"),
        ({"percentiles": (5,)}, "percentiles"),
        ({"percentiles": (95, 5)}, "percentiles"),
        ({"range_multiplier": 0.0}, "range_multiplier"),
        ({"shift": -1.0}, "shift"),
        ({"confidence": 1.0}, "confidence"),
        ({"null_quantile": 0.0}, "null_quantile"),
    ],
)
def test_bad_parameters(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(InvalidParameterError, match=match):
        estimate_epl(np.arange(100), **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"bandwidth_kind": "isj"}, "scott"), ({"ci_kind": "bca"}, "basic")],
)
def test_unknown_names(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(UnknownNameError, match=match):
        estimate_epl(np.arange(100), **kwargs)  # type: ignore[arg-type]
