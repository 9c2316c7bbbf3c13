"""Contract suite over every noise distribution (after scipy's test_discrete_basic), plus power.

Statistical tests are seeded, so each outcome is fixed; the thresholds say what they would mean
unseeded: the true law must pass a chi-square goodness of fit at p > 1e-3 and a parameter off by
±30 % must fail it at p < 1e-6 (tumult-core's convention).
"""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
from scipy import integrate, stats
from scipy.special import logsumexp

from auditlib.exceptions import InvalidParameterError
from auditlib.mechanisms import (
    TRUNCATION_MASS,
    ContinuousNoise,
    DiscreteGaussian,
    DiscreteNoise,
    Gaussian,
    Laplace,
    TwoSidedGeometric,
    sample_discrete_gaussian,
)

# Census-like parameters: State σ² ≈ 5, County 16.12, Block 456.62 (Su, Su & Wang); a small σ² where
# the lattice matters; geometric ε of Flaxman 2019 and Flaxman & Petti's p = ε/2 at ε = 0.05.
DISCRETE = [
    DiscreteGaussian(0.5),
    DiscreteGaussian(4.9995),
    DiscreteGaussian(16.12),
    DiscreteGaussian(456.62),
    TwoSidedGeometric(0.1),
    TwoSidedGeometric(1.0),
    TwoSidedGeometric.from_success_probability(0.025),
]
CONTINUOUS = [Laplace(0.5), Laplace(20.0), Gaussian(1.0), Gaussian(21.4)]


def _id(m: object) -> str:
    return repr(m)


def _scaled(m: DiscreteNoise, factor: float) -> DiscreteNoise:
    """The same family with its noise parameter off by ``factor`` (σ² × f, or ε / f)."""
    if isinstance(m, DiscreteGaussian):
        return DiscreteGaussian(m.sigma2 * factor)
    assert isinstance(m, TwoSidedGeometric)
    return TwoSidedGeometric(m.epsilon / factor)


def _span(m: DiscreteNoise) -> np.ndarray:
    """Integers covering all but ~1e-18 of the mass."""
    lo = int(m.ppf(1e-18))
    return np.arange(lo - 2, -lo + 3)


def _chi2_pvalue(m: DiscreteNoise, x: np.ndarray, min_expected: float = 20.0) -> float:
    """Chi-square goodness of fit of integer samples ``x`` to ``m`` on bins with tails merged."""
    n = x.size
    lo = int(m.ppf(0.5 * min_expected / n))
    hi = -lo
    ks = np.arange(lo, hi + 1)
    obs = np.bincount(np.clip(x, lo, hi) - lo, minlength=ks.size).astype(float)
    exp = m.pmf(ks) * n
    exp[0] = m.cdf(lo) * n
    exp[-1] = m.sf(hi - 1) * n
    exp *= obs.sum() / exp.sum()  # remove float dust so scipy accepts the totals
    return float(stats.chisquare(obs, exp).pvalue)


@pytest.mark.parametrize("m", DISCRETE, ids=_id)
class TestDiscreteContract:
    def test_protocol(self, m: DiscreteNoise) -> None:
        assert isinstance(m, DiscreteNoise)

    def test_pmf_sums_to_one(self, m: DiscreteNoise) -> None:
        ks = _span(m)
        total = math.fsum(m.pmf(ks))
        left_out = float(m.cdf(ks[0] - 1) + m.sf(ks[-1]))
        assert left_out < 1e-17
        assert total == pytest.approx(1.0, abs=1e-14)

    def test_cdf_is_cumsum_of_pmf(self, m: DiscreteNoise) -> None:
        ks = _span(m)
        c = m.cdf(ks[0] - 1) + np.cumsum(m.pmf(ks))
        np.testing.assert_allclose(m.cdf(ks), c, rtol=0, atol=1e-14)

    def test_sf_is_one_minus_cdf(self, m: DiscreteNoise) -> None:
        ks = _span(m)
        np.testing.assert_allclose(m.sf(ks), 1.0 - m.cdf(ks), rtol=0, atol=1e-15)

    def test_logpmf_is_log_pmf(self, m: DiscreteNoise) -> None:
        ks = _span(m)
        np.testing.assert_allclose(m.logpmf(ks), np.log(m.pmf(ks)), rtol=1e-13)

    def test_symmetry(self, m: DiscreteNoise) -> None:
        ks = _span(m)
        np.testing.assert_array_equal(m.pmf(ks), m.pmf(-ks))
        # tails: P(X ≤ −k−1) = P(X > k), with full relative precision in both
        np.testing.assert_allclose(m.cdf(-ks - 1), m.sf(ks), rtol=1e-13)

    def test_off_lattice(self, m: DiscreteNoise) -> None:
        assert m.pmf(0.5) == 0.0
        assert m.logpmf(-1.5) == -np.inf
        assert m.cdf(0.5) == m.cdf(0)
        assert m.sf(-0.5) == m.sf(-1)
        assert np.isnan(m.pmf(np.nan))

    def test_infinite_arguments(self, m: DiscreteNoise) -> None:
        np.testing.assert_array_equal(m.cdf([-np.inf, np.inf]), [0.0, 1.0])
        np.testing.assert_array_equal(m.sf([-np.inf, np.inf]), [1.0, 0.0])

    def test_ppf_inverts_cdf(self, m: DiscreteNoise) -> None:
        ks = _span(m)
        c = m.cdf(ks)
        keep = (c > 0) & (c < 1.0 - 1e-12)
        np.testing.assert_array_equal(m.ppf(c[keep]), ks[keep])
        np.testing.assert_array_equal(m.ppf([0.0, 1.0]), [-np.inf, np.inf])
        with pytest.raises(InvalidParameterError, match="q"):
            m.ppf(1.5)

    def test_variance_by_summation(self, m: DiscreteNoise) -> None:
        ks = _span(m).astype(float)
        assert math.fsum(ks * ks * m.pmf(ks)) == pytest.approx(m.var(), rel=1e-12)
        assert m.mean() == 0.0

    def test_rvs_dtype_shape(self, m: DiscreteNoise) -> None:
        rng = np.random.default_rng(0)
        x = m.rvs((3, 4), rng)
        assert x.shape == (3, 4) and x.dtype == np.int64
        assert np.asarray(m.rvs(None, rng)).shape == ()

    def test_reproducible(self, m: DiscreteNoise) -> None:
        a = m.rvs(1000, np.random.default_rng(42))
        b = m.rvs(1000, np.random.default_rng(42))
        c = m.rvs(1000, np.random.default_rng(43))
        np.testing.assert_array_equal(a, b)
        assert not np.array_equal(a, c)

    def test_pickle(self, m: DiscreteNoise) -> None:
        m2 = pickle.loads(pickle.dumps(m))
        assert m2 == m and hash(m2) == hash(m)
        np.testing.assert_array_equal(
            m2.rvs(100, np.random.default_rng(7)), m.rvs(100, np.random.default_rng(7))
        )
        np.testing.assert_array_equal(m2.pmf([0, 1, 5]), m.pmf([0, 1, 5]))

    def test_rng_must_be_a_generator(self, m: DiscreteNoise) -> None:
        with pytest.raises(InvalidParameterError, match="rng"):
            m.rvs(10, 123)  # type: ignore[arg-type]

    def test_goodness_of_fit_and_power(self, m: DiscreteNoise) -> None:
        x = m.rvs(200_000, np.random.default_rng(20200325))
        assert _chi2_pvalue(m, x) > 1e-3
        assert x.var() == pytest.approx(m.var(), rel=0.02)
        for factor in (0.7, 1.3):
            assert _chi2_pvalue(_scaled(m, factor), x) < 1e-6, factor


# -- discrete Gaussian specifics ---------------------------------------------------------------


@pytest.mark.parametrize("sigma2", [0.01, 0.5, 4.9995, 456.62, 1e6])
def test_dg_truncation_bound(sigma2: float) -> None:
    dg = DiscreteGaussian(sigma2)
    k = dg.support_radius
    assert dg.truncated_mass < TRUNCATION_MASS
    # the bound is an upper bound on the exact two-sided tail, and K is not much too large
    assert 2.0 * float(dg.sf(k)) <= dg.truncated_mass
    if k > 0:
        assert 2.0 * float(dg.sf(k - 1)) > 1e-3 * TRUNCATION_MASS


def test_dg_normalizer_matches_direct_sum() -> None:
    dg = DiscreteGaussian(16.12)
    j = np.arange(-400, 401, dtype=float)
    assert dg.log_normalizer == pytest.approx(float(logsumexp(-(j * j) / (2 * 16.12))), rel=1e-15)


def test_dg_far_tail_relative_precision() -> None:
    dg = DiscreteGaussian(5.0)
    k = dg.support_radius + 10  # beyond the table: tail ≈ 1e-40
    j = np.arange(k + 1, k + 200, dtype=float)
    direct = math.exp(float(logsumexp(-(j * j) / 10.0)) - dg.log_normalizer)
    assert float(dg.sf(k)) == pytest.approx(direct, rel=1e-13)
    assert float(dg.cdf(-k - 1)) == pytest.approx(direct, rel=1e-13)


def test_dg_variance_close_to_sigma2() -> None:
    """Su, Su & Wang: the variance of N_Z(0, σ²) is σ² up to a negligible (downward) error."""
    for s2 in (4.9995, 16.12, 456.62):
        assert DiscreteGaussian(s2).var() == pytest.approx(s2, rel=1e-13)
    small = DiscreteGaussian(0.5)
    assert small.var() < 0.5  # visibly below σ² for small σ²
    assert small.var() == pytest.approx(0.49897913, rel=1e-7)


def test_dg_sampler_tv_bound() -> None:
    for s2 in (4.9995, 456.62):
        assert DiscreteGaussian(s2).sampler_tv_bound < 2e-12
    # at σ² → 0 the law is a point mass and so is the sampler
    tiny = DiscreteGaussian(1e-4)
    assert np.all(tiny.rvs(1000, np.random.default_rng(0)) == 0)


def test_dg_sampler_reaches_the_tails() -> None:
    """Sampling |k| with a separate sign bit keeps both tails at full resolution."""
    dg = DiscreteGaussian(4.9995)
    x = dg.rvs(2_000_000, np.random.default_rng(5))
    for k in (8, 9):  # P(X ≥ 9) ≈ 2e-5
        assert np.count_nonzero(x >= k) == pytest.approx(2e6 * float(dg.sf(k - 1)), rel=0.2)
        assert np.count_nonzero(x <= -k) == pytest.approx(2e6 * float(dg.cdf(-k)), rel=0.2)


def test_sample_discrete_gaussian() -> None:
    a = sample_discrete_gaussian(10.46, 500, np.random.default_rng(3))
    b = DiscreteGaussian(10.46).rvs(500, np.random.default_rng(3))
    np.testing.assert_array_equal(a, b)


# -- geometric specifics -----------------------------------------------------------------------


def test_geometric_parameterization() -> None:
    """Flaxman 2019: P(G(z) = k) = (1 − e^{−z}) e^{−z|k|} / (1 + e^{−z}); log-ratios are ±z."""
    g = TwoSidedGeometric(0.25)
    a = math.exp(-0.25)
    assert float(g.pmf(3)) == pytest.approx((1 - a) * a**3 / (1 + a), rel=1e-14)
    ks = np.arange(0, 30)
    np.testing.assert_allclose(g.logpmf(ks) - g.logpmf(ks + 1), 0.25, rtol=1e-12)


@pytest.mark.parametrize("eps", [0.05, 0.25, 1.0, 3.0])
def test_geometric_matches_scipy_dlaplace(eps: float) -> None:
    """An established reference: scipy.stats.dlaplace(a) has pmf tanh(a/2)·e^{−a|k|}, i.e. G(a)."""
    g, ref = TwoSidedGeometric(eps), stats.dlaplace(eps)
    k = np.arange(-60, 61)
    np.testing.assert_allclose(g.pmf(k), ref.pmf(k), rtol=1e-12)
    np.testing.assert_allclose(g.logpmf(k), ref.logpmf(k), rtol=1e-12, atol=1e-12)
    # scipy forms one tail as 1 − the other, so it has absolute (not relative) precision there
    np.testing.assert_allclose(g.cdf(k), ref.cdf(k), rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(g.sf(k), ref.sf(k), rtol=1e-10, atol=1e-15)
    assert g.var() == pytest.approx(ref.var(), rel=1e-12)


def test_geometric_from_success_probability_is_numpy_difference() -> None:
    """The law of ``geometric(p) − geometric(p)`` (Flaxman & Petti's simulation)."""
    p = 0.25
    g = TwoSidedGeometric.from_success_probability(p)
    assert g.epsilon == pytest.approx(-math.log(1 - p), rel=1e-15)
    assert g.success_probability == pytest.approx(p, rel=1e-14)
    rng = np.random.default_rng(11)
    x = rng.geometric(p, 200_000) - rng.geometric(p, 200_000)
    assert _chi2_pvalue(g, x) > 1e-3
    with pytest.raises(InvalidParameterError, match="p"):
        TwoSidedGeometric.from_success_probability(1.0)


def test_geometric_tiny_epsilon() -> None:
    g = TwoSidedGeometric(1e-9)
    assert g.success_probability == pytest.approx(1e-9, rel=1e-8)
    assert g.var() == pytest.approx(2e18, rel=1e-6)
    assert g.rvs(10, np.random.default_rng(0)).dtype == np.int64


# -- continuous --------------------------------------------------------------------------------


@pytest.mark.parametrize("m", CONTINUOUS, ids=_id)
class TestContinuousContract:
    def _ref(self, m: ContinuousNoise) -> stats.rv_continuous:
        if isinstance(m, Laplace):
            return stats.laplace(scale=m.scale)
        assert isinstance(m, Gaussian)
        return stats.norm(scale=m.sigma)

    def test_protocol(self, m: ContinuousNoise) -> None:
        assert isinstance(m, ContinuousNoise)

    def test_pdf_integrates_to_one(self, m: ContinuousNoise) -> None:
        total, _ = integrate.quad(lambda t: float(m.pdf(t)), -np.inf, np.inf)
        assert total == pytest.approx(1.0, abs=1e-8)

    def test_matches_scipy(self, m: ContinuousNoise) -> None:
        ref = self._ref(m)
        x = np.linspace(-8, 8, 41) * math.sqrt(m.var())
        np.testing.assert_allclose(m.pdf(x), ref.pdf(x), rtol=1e-13)
        np.testing.assert_allclose(m.logpdf(x), ref.logpdf(x), rtol=1e-13)
        np.testing.assert_allclose(m.cdf(x), ref.cdf(x), rtol=1e-12)
        np.testing.assert_allclose(m.sf(x), ref.sf(x), rtol=1e-12)
        assert m.var() == pytest.approx(ref.var(), rel=1e-14)

    def test_goodness_of_fit_and_power(self, m: ContinuousNoise) -> None:
        x = m.rvs(100_000, np.random.default_rng(1940))
        assert x.dtype == np.float64
        assert stats.kstest(x, m.cdf).pvalue > 1e-3
        for factor in (0.7, 1.3):
            wrong = type(m)(factor * (m.scale if isinstance(m, Laplace) else m.sigma))  # type: ignore[union-attr]
            assert stats.kstest(x, wrong.cdf).pvalue < 1e-6

    def test_pickle_and_reproducible(self, m: ContinuousNoise) -> None:
        m2 = pickle.loads(pickle.dumps(m))
        assert m2 == m
        np.testing.assert_array_equal(
            m2.rvs(5, np.random.default_rng(1)), m.rvs(5, np.random.default_rng(1))
        )


def test_gaussian_logsf_far_tail() -> None:
    assert float(Gaussian(1.0).logsf(40.0)) == pytest.approx(float(stats.norm.logsf(40.0)))


# -- validation --------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf, "x", None])
def test_invalid_sigma2(bad: object) -> None:
    with pytest.raises(InvalidParameterError, match="sigma2") as err:
        DiscreteGaussian(bad)  # type: ignore[arg-type]
    assert repr(bad) in str(err.value)


def test_sigma2_too_large() -> None:
    with pytest.raises(InvalidParameterError, match="sigma2"):
        DiscreteGaussian(1e13)


@pytest.mark.parametrize("bad", [0.0, -0.5, math.nan, math.inf])
def test_invalid_epsilon(bad: float) -> None:
    with pytest.raises(InvalidParameterError, match="epsilon") as err:
        TwoSidedGeometric(bad)
    assert repr(bad) in str(err.value)


@pytest.mark.parametrize(("cls", "name"), [(Laplace, "scale"), (Gaussian, "sigma")])
def test_invalid_continuous(cls: type, name: str) -> None:
    with pytest.raises(InvalidParameterError, match=name):
        cls(-1.0)
    with pytest.raises(InvalidParameterError, match=name):
        cls(math.nan)
