"""The table sampler of the discrete Gaussian: its law against the exact pmf (χ² with the tails
pooled, and the power to see σ² off by 2 %), its thresholds, truncated mass and TV bound against an
independent 60-digit computation, and its draws' independence of the chunking."""

from __future__ import annotations

import sys
from pathlib import Path

import mpmath
import numpy as np
import pytest
from scipy import stats

from auditlib.exceptions import InvalidParameterError
from auditlib.mechanisms import (
    DiscreteGaussian,
    DiscreteGaussianTable,
    discrete_gaussian_sampler,
)
from auditlib.mechanisms.dg_table import MAX_TABLE_SIGMA2

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from bench_dg_sampler import exact_pmf  # P(X = k) in 60-digit arithmetic

#: σ² of the pl94_2021_production allocation (State total, Block group total, Block detailed,
#: Tract total, Block hispanic * cenrace, Block total), a tiny and a large one
SIGMA2 = (0.05, 1.209192398, 1.972493896, 10.09284849, 5.808005026, 1896.013681, 7963.257459, 1e4)


def n_draws(sigma2: float) -> int:
    """2·10⁶ draws, 10⁷ at tiny σ² (where |X| ≥ 1 has probability ≈ 1e-4); the benchmark
    ``bench_dg_sampler.py`` runs the same test at 10⁸."""
    return 10**7 if sigma2 < 0.5 else 2 * 10**6


ALPHA = 1e-4  # the GOF test's level (fixed seeds: deterministic)


def gof_pvalue(draws: np.ndarray, sigma2: float) -> float:
    """χ² goodness of fit against the exact pmf, over the bins with ≥ 20 expected draws and the
    two tails pooled (each tail bin holds every k beyond the last kept bin: the tails are tested)."""
    n = draws.size
    half = int(np.ceil(12 * np.sqrt(sigma2))) + 2
    ks = np.arange(-half, half + 1)
    expected = exact_pmf(sigma2, ks) * n
    keep = np.flatnonzero(expected >= 20)
    lo, hi = ks[keep[0]], ks[keep[-1]]
    inner = np.arange(lo + 1, hi)
    counts = np.bincount(np.clip(draws, lo, hi) - lo, minlength=hi - lo + 1)
    exp_inner = expected[(ks > lo) & (ks < hi)]
    exp_lo = expected[ks <= lo].sum()  # the mass beyond ±half is < 1e-30: negligible
    exp_hi = expected[ks >= hi].sum()
    obs = np.concatenate([[counts[0]], counts[1:-1], [counts[-1]]])
    exp = np.concatenate([[exp_lo], exp_inner, [exp_hi]])
    assert obs.size == inner.size + 2 and obs.sum() == n
    chi2 = float(np.sum((obs - exp) ** 2 / exp))
    return float(stats.chi2.sf(chi2, obs.size - 1))


@pytest.mark.parametrize("sigma2", SIGMA2)
def test_draws_fit_the_exact_pmf_tails_pooled(sigma2: float) -> None:
    draws = DiscreteGaussianTable(sigma2).rvs(n_draws(sigma2), np.random.default_rng(20260325))
    assert gof_pvalue(draws, sigma2) > ALPHA


@pytest.mark.parametrize("sigma2", (0.05, 10.09284849, 7963.257459))
def test_the_reference_sampler_passes_the_same_fit(sigma2: float) -> None:
    draws = DiscreteGaussian(sigma2).rvs(n_draws(sigma2), np.random.default_rng(20260325))
    assert gof_pvalue(draws, sigma2) > ALPHA


@pytest.mark.parametrize("sigma2", SIGMA2)
def test_the_fit_sees_sigma2_off_by_two_percent(sigma2: float) -> None:
    g = np.random.default_rng(20260325)
    draws = DiscreteGaussianTable(sigma2 * 1.02).rvs(n_draws(sigma2), g)
    assert gof_pvalue(draws, sigma2) < 1e-6


@pytest.mark.parametrize("sigma2", (0.05, 1.209192398, 10.09284849, 1896.013681, 1e4))
def test_thresholds_truncation_and_tv_against_60_digits(sigma2: float) -> None:
    dg = DiscreteGaussianTable(sigma2)
    t = [int(x) for x in dg.survival_thresholds()]
    a_max = dg.levels
    with mpmath.workdps(60):
        s2 = mpmath.mpf(sigma2)
        far = int(40 * mpmath.sqrt(s2)) + 40
        w = [mpmath.exp(-mpmath.mpf(k * k) / (2 * s2)) for k in range(far)]
        z = w[0] + 2 * mpmath.fsum(w[1:])
        surv = [mpmath.mpf(1)]  # P(|X| ≥ a), a = 0..far−1
        tail = mpmath.fsum(w[1:])
        for a in range(1, far):
            surv.append(2 * tail / z)
            tail -= w[a]
        two63 = mpmath.mpf(2) ** 63
        # every threshold is 2⁶³·P(|X| ≥ a) rounded to the nearest integer
        for a in range(1, a_max + 1):
            assert abs(t[a - 1] - two63 * surv[a]) <= 0.5
        # the mass never drawn: below 2⁻⁶⁴, and the stated bound holds it (and is tight)
        truncated = surv[a_max + 1]
        assert truncated * two63 < 0.5
        assert truncated <= dg.truncated_mass <= truncated * (1 + 1e-12) + 1e-40
        # the sampler's law P(|X| ≥ a) = T_a/2⁶³: its TV distance to the exact law is bounded
        t_all = [two63] + [mpmath.mpf(x) for x in t] + [mpmath.mpf(0)] * (far - a_max)
        tv = (
            mpmath.fsum(
                abs((t_all[m] - t_all[m + 1]) / two63 - (surv[m] - surv[m + 1]))
                for m in range(far - 1)
            )
            / 2
            + surv[far - 1] / 2
        )
        assert tv <= dg.tv_bound <= tv * (1 + 1e-9) + 1e-40
    assert dg.tv_bound < 1e-15 and dg.truncated_mass < 1e-15


def test_tv_bound_stays_below_1e_15_at_the_cap() -> None:
    assert DiscreteGaussianTable(MAX_TABLE_SIGMA2).tv_bound < 1e-15


@pytest.mark.parametrize("sigma2", (1.209192398, 7963.257459))
def test_guide_table_draws_are_the_inverse_cdf_of_the_word(sigma2: float) -> None:
    """Guide-table hits and searched draws alike: |X| = #{a : V < T_a}, sign from bit 63."""
    dg = DiscreteGaussianTable(sigma2)
    draws = dg.rvs(10**6, np.random.default_rng(7))
    words = np.random.default_rng(7).bit_generator.random_raw(10**6)
    t = dg.survival_thresholds()[::-1]
    mag = t.size - np.searchsorted(t, words & np.uint64(2**63 - 1), side="right")
    expected = np.where(words >> np.uint64(63) != 0, -mag, mag)
    np.testing.assert_array_equal(draws, expected)


def test_draws_do_not_depend_on_the_chunking() -> None:
    dg = DiscreteGaussianTable(7963.257459)
    whole = dg.rvs((300, 28), np.random.default_rng(3))
    g = np.random.default_rng(3)
    parts = [dg.rvs((n, 28), g) for n in (1, 99, 200)]
    np.testing.assert_array_equal(np.concatenate(parts), whole)
    assert whole.dtype == np.int64 and np.shape(dg.rvs(None, g)) == ()


def test_sampler_by_name() -> None:
    assert isinstance(discrete_gaussian_sampler(10.0), DiscreteGaussianTable)
    assert isinstance(discrete_gaussian_sampler(10.0, "reference"), DiscreteGaussian)
    with pytest.raises(InvalidParameterError, match=r"'fast'.*table, reference"):
        discrete_gaussian_sampler(10.0, "fast")


def test_sigma2_beyond_the_cap_names_the_reference() -> None:
    with pytest.raises(InvalidParameterError, match=r"100000000.0.*reference"):
        DiscreteGaussianTable(1e8)
    with pytest.raises(InvalidParameterError):
        DiscreteGaussianTable(-1.0)
