"""The mechanisms with known ε: closed forms, exact pmfs by enumeration, samplers against their laws.

References: Askin, Kutta & Dette §V (exponential mechanism ε in closed form, Laplace pairs and C), REFERENCE
"MPL (Askin, Kutta & Dette)": Report Noisy Max ε*_C ≈ 0.693 at ε = 0.7 on the standard patterns and
ε_x = 0.743 at ε = 1.5 for q = 0⁶ vs q′ = 011111 (3 decimals given, so tolerance 5e-4).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import integrate, stats

from auditlib.exceptions import InvalidParameterError
from auditlib.mechanisms import Laplace
from auditlib.mpl import (
    continuous_noisy_max,
    discrete_gaussian_count,
    exponential_epsilon,
    exponential_mechanism,
    geometric_count,
    laplace_mechanism,
    noisy_max_pmf,
    report_noisy_max,
    svt2,
    svt4,
    svt5,
    svt6,
)
from auditlib.mpl.catalogue import continuous_max_logpdf, exponential_lambda, exponential_logpdf
from auditlib.mpl.svt import svt_bits_pmf, svt_first_above_pmf, svt_no_query_noise_pmf


@pytest.mark.parametrize("eps", [0.2, 0.7, 1.5])
def test_laplace_known_epsilon(eps: float) -> None:
    e = laplace_mechanism(eps)
    assert e.epsilon == pytest.approx(eps, rel=1e-15)
    # ε_{0,s'} = s'·ε for s' ∈ (0, 1]; attained on C = [−1, 1]
    np.testing.assert_allclose(e.epsilon_c_pairs, eps * np.arange(1, 11) / 10, rtol=1e-12)
    broken = laplace_mechanism(eps, scale=1.0 / (2.0 * eps))
    assert broken.claimed_epsilon == eps and broken.epsilon_c == pytest.approx(2 * eps)


@pytest.mark.parametrize("eps", [0.2, 0.7, 1.5])
def test_exponential_mechanism_closed_form(eps: float) -> None:
    e = exponential_mechanism(eps)
    lam = exponential_lambda(eps)
    assert exponential_epsilon(lam) == pytest.approx(eps, abs=1e-13)
    assert e.epsilon_c == pytest.approx(eps, abs=1e-12)  # pair s = 1, s' = 2 on C = [0, 2]
    # the density integrates to one on [0, ∞)
    t = np.linspace(0.0, 2.0 + 60.0 / lam, 400_001)
    mass = np.trapezoid(np.exp(exponential_logpdf(1.3, t, lam)), t)
    assert mass == pytest.approx(1.0, abs=1e-6)
    assert exponential_logpdf(1.0, -0.1, lam) == -np.inf
    assert 2 * lam > eps  # "(at least) 2λ-DP" is loose


def test_exponential_sampler_matches_its_law() -> None:
    lam = exponential_lambda(0.7)
    e = exponential_mechanism(0.7)
    x = e.mechanism.sample(1.4, 20_000, np.random.default_rng(5))
    assert x.min() >= 0.0

    def cdf(t: np.ndarray) -> np.ndarray:
        grid = np.linspace(0.0, 60.0, 600_001)
        dens = np.exp(exponential_logpdf(1.4, grid, lam))
        cum = np.concatenate([[0.0], np.cumsum((dens[1:] + dens[:-1]) / 2 * np.diff(grid))])
        return np.interp(t, grid, cum)

    assert stats.kstest(x, cdf).pvalue > 0.01


def test_report_noisy_max_pmf_against_quad_and_monte_carlo() -> None:
    q = (0, 1, 1, 2, 0, 1)
    b = 2.0 / 0.7
    p = noisy_max_pmf(q, b)
    assert p.sum() == pytest.approx(1.0, abs=1e-13)
    qa = np.array(q, dtype=float)
    lap = Laplace(b)
    for i in range(6):
        ref, _ = integrate.quad(
            lambda t, i=i: float(lap.pdf(t - qa[i]) * np.prod(lap.cdf(t - np.delete(qa, i)))),
            -80 * b,
            80 * b,
            points=[0.0, 1.0, 2.0],
            limit=400,
            epsabs=1e-14,
        )
        assert p[i] == pytest.approx(ref, abs=1e-12)
    e = report_noisy_max(0.7)
    draws = e.mechanism.sample(q, 200_000, np.random.default_rng(9))
    freq = np.bincount(draws, minlength=6) / draws.size
    np.testing.assert_allclose(freq, p, atol=5 * math.sqrt(0.25 / draws.size))


def test_report_noisy_max_reference_values() -> None:
    e = report_noisy_max(0.7)
    assert e.epsilon_c == pytest.approx(0.693, abs=5e-4)
    e15 = report_noisy_max(1.5)
    zero = (0,) * 6
    exact = {
        qq: float(np.max(e15.loss(zero, qq, np.arange(6))))
        for qq in itertools.product((0, 1), repeat=6)
    }
    best = max(exact, key=exact.__getitem__)
    assert exact[best] == pytest.approx(0.743, abs=5e-4)
    assert sum(best) == 5  # one query stays at 0, the other five move up (q' = 011111 up to order)
    assert exact[(0, 1, 1, 1, 1, 1)] == pytest.approx(exact[best], abs=1e-9)


@pytest.mark.parametrize("eps", [0.2, 0.7, 1.5])
def test_geometric_count_exact_by_enumeration(eps: float) -> None:
    e = geometric_count(eps, radius=6)
    # enumeration over C of P(k - c) = (1−α)/(1+α) α^|k−c|, independent of the library pmf
    a = math.exp(-eps)
    for c, c2 in e.pairs:
        losses = [abs(math.log(a ** abs(k - c)) - math.log(a ** abs(k - c2))) for k in range(-6, 7)]
        assert max(losses) == pytest.approx(eps, rel=1e-12)
    assert e.epsilon_c == pytest.approx(eps, rel=1e-12)


@pytest.mark.parametrize(("sigma2", "radius"), [(5.0, 5), (20.0, 10)])
def test_discrete_gaussian_count_exact_by_enumeration(sigma2: float, radius: int) -> None:
    e = discrete_gaussian_count(sigma2, radius=radius)
    assert e.epsilon == math.inf
    # |(k−1)² − k²| / (2σ²) = |2k − 1| / (2σ²), largest at k = −radius
    assert e.epsilon_c == pytest.approx((2 * radius + 1) / (2 * sigma2), rel=1e-12)


def test_catalogue_rejects_bad_parameters() -> None:
    with pytest.raises(InvalidParameterError, match="epsilon"):
        laplace_mechanism(0.0)
    with pytest.raises(InvalidParameterError, match="scale"):
        laplace_mechanism(1.0, scale=-1.0)
    with pytest.raises(InvalidParameterError, match="radius"):
        geometric_count(1.0, radius=0)
    with pytest.raises(InvalidParameterError, match="sigma2"):
        discrete_gaussian_count(float("nan"))


# -- Sparse Vector Technique ----------------------------------------------------------------------


def test_svt_first_above_pmf_against_quad_and_monte_carlo() -> None:
    q = np.array((1,) * 5 + (0,) * 5, dtype=float)
    br, bn = 2 / 0.7, 4 / 0.7
    p = svt_first_above_pmf(q, br, bn)
    assert p.sum() == pytest.approx(1.0, abs=1e-13)
    rho, nu = Laplace(br), Laplace(bn)

    def integrand(r: float, i: int) -> float:
        z = 1.0 + r - q
        tail = float(nu.sf(z[i])) if i < 10 else 1.0
        return float(rho.pdf(r) * np.prod(nu.cdf(z[:i])) * tail)

    for i in (0, 4, 5, 10):
        ref, _ = integrate.quad(
            integrand, -300, 300, args=(i,), points=[-1.0, 0.0], limit=500, epsabs=1e-15
        )
        assert p[i] == pytest.approx(ref, abs=1e-12)
    draws = svt2(0.7).mechanism.sample(q.astype(int), 100_000, np.random.default_rng(12))
    freq = np.bincount(draws, minlength=11) / draws.size
    np.testing.assert_allclose(freq, p, atol=5 * math.sqrt(0.25 / draws.size))


def test_svt2_reference_value() -> None:
    assert svt2(0.7).epsilon_c == pytest.approx(
        0.632, abs=5e-4
    )  # REFERENCE, MPL (Askin, Kutta & Dette)


@pytest.mark.parametrize("eps", [0.7, 1.5])
def test_svt4_rescaled_is_eps_dp_on_the_patterns(eps: float) -> None:
    e = svt4(eps)
    assert e.epsilon == eps
    assert 0.95 * eps < e.epsilon_c <= eps + 1e-12


def test_svt5_exact_law_and_infinite_loss() -> None:
    e1 = 0.35  # ε/2 at ε = 0.7: ρ ~ Lap(1/ε₁)
    law = svt_no_query_noise_pmf((2,) + (1,) * 9, 1 / e1)
    # bits [q_i ≥ 1 + ρ]: all ⊤ for ρ ≤ 0, only query 0 for 0 < ρ ≤ 1, none beyond
    assert law == pytest.approx({1023: 0.5, 1: 0.5 * (1 - math.exp(-e1)), 0: 0.5 * math.exp(-e1)})
    e = svt5(0.7)
    assert e.epsilon == math.inf and e.epsilon_c == math.inf
    # all-above / all-below patterns only shift the threshold: finite, = ε₁ · 1 = 0.35
    assert e.epsilon_c_pairs[6] == pytest.approx(e1) and e.epsilon_c_pairs[7] == pytest.approx(e1)


# -- continuous Noisy Max ---------------------------------------------------------------------------


def test_continuous_noisy_max_law_and_epsilon() -> None:
    scale = 3 / 0.7
    v = (0.0, 0.5, 1.0)
    mass, _ = integrate.quad(
        lambda t: float(np.exp(continuous_max_logpdf(v, t, scale))),
        -300,
        300,
        points=list(v),
        limit=300,
    )
    assert mass == pytest.approx(1.0, abs=1e-9)
    # equal entries: f = k f₁ F₁^{k−1} (Example 1 of Askin, Kutta & Dette)
    t = np.linspace(-3, 3, 13)
    lap = Laplace(scale)
    np.testing.assert_allclose(
        np.exp(continuous_max_logpdf((0.2,) * 3, t, scale)),
        3 * lap.pdf(t - 0.2) * lap.cdf(t - 0.2) ** 2,
        rtol=1e-12,
    )
    e = continuous_noisy_max(0.7)
    np.testing.assert_allclose(e.epsilon_c_pairs, 0.7 * np.arange(1, 11) / 10, rtol=1e-9)
    x = e.mechanism.sample(v, 5000, np.random.default_rng(13))

    def cdf(s: np.ndarray) -> np.ndarray:
        return np.prod([lap.cdf(np.asarray(s) - vi) for vi in v], axis=0)

    assert stats.kstest(x, cdf).pvalue > 0.01


def test_svt6_exact_law() -> None:
    q = (1,) * 5 + (0,) * 5
    p = svt_bits_pmf(q, 2 / 0.7, 2 / 0.7)
    assert p.shape == (1024,) and p.sum() == pytest.approx(1.0, abs=1e-13) and p.min() > 0
    e = svt6(0.7)
    draws = e.mechanism.sample(q, 100_000, np.random.default_rng(14))
    freq = np.bincount(draws, minlength=1024) / draws.size
    assert np.max(np.abs(freq - p) / np.sqrt(p / draws.size)) < 5.0
    assert e.epsilon == math.inf
    # all above = a shift of the threshold by 1: at most ε/2 = 0.35, approached in the extremes
    assert 0.34 < e.epsilon_c_pairs[6] <= 0.35
    assert 3.0 < e.epsilon_c < 3.2  # finite on 10 queries; grows with the number of queries
