"""Exact MSE/MAE of discrete-Gaussian noise on counts, with and without clipping at 0 (Su, Su & Wang §3.4).

References, all independent of ``auditlib.accuracy``: the Poisson-summation closed form of the
variance of N_Z(0, σ²) (Canonne, Kamath & Steinke 2020, Fact 18 and its proof), σ√(2/π) for
large σ², the symmetry MSE_clip(0) = MSE/2, a brute-force sum over the integers in plain Python,
and Monte Carlo with Canonne–Kamath–Steinke's exact rejection sampler (their Algorithm 3).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from auditlib.accuracy import count_accuracy, dg_error_moments
from auditlib.exceptions import InvalidParameterError


def _var_poisson(s2: float) -> float:
    """Var N_Z(0, s2) = s2 − 4π² s2² Σ m² e^{−2π² s2 m²} / Σ e^{−2π² s2 m²} (dual series)."""
    m = np.arange(-50, 51, dtype=float)
    w = np.exp(-2.0 * math.pi**2 * s2 * m**2)
    return s2 - 4.0 * math.pi**2 * s2**2 * float(np.sum(m**2 * w) / np.sum(w))


def _brute(s2: float, n: int | None) -> tuple[float, float]:
    """E[e²], E|e| with e = max(−n, Z) (or Z), summing exp(−k²/2σ²) over |k| ≤ 60σ in Python."""
    r = math.ceil(60 * math.sqrt(s2)) + 5
    ks = range(-r, r + 1)
    w = [math.exp(-k * k / (2 * s2)) for k in ks]
    z = math.fsum(w)
    err = [k if n is None else max(-n, k) for k in ks]
    return (
        math.fsum(wi * e * e for wi, e in zip(w, err, strict=True)) / z,
        math.fsum(wi * abs(e) for wi, e in zip(w, err, strict=True)) / z,
    )


def _cks_sample(s2: float, size: int, rng: np.random.Generator) -> np.ndarray:
    """Canonne–Kamath–Steinke (2020) Algorithm 3: discrete Laplace proposal, exact acceptance."""
    sigma = math.sqrt(s2)
    t = math.floor(sigma) + 1
    out: list[np.ndarray] = []
    got = 0
    while got < size:
        m = 2 * (size - got) + 64
        p = 1.0 - math.exp(-1.0 / t)
        y = rng.geometric(p, m) - rng.geometric(p, m)  # two-sided geometric, scale t
        acc = rng.random(m) < np.exp(-((np.abs(y) - s2 / t) ** 2) / (2.0 * s2))
        out.append(y[acc])
        got += int(acc.sum())
    return np.concatenate(out)[:size]


@pytest.mark.parametrize("s2", [0.3, 1.0, 4.2164, 53.129, 456.62])
def test_mse_without_post_processing_is_the_dg_variance(s2: float) -> None:
    mse, _ = dg_error_moments(s2)
    assert mse == pytest.approx(_var_poisson(s2), rel=1e-12, abs=1e-15)
    assert mse <= s2 * (1 + 1e-14)  # Var < σ² (up to rounding)


def test_mse_tends_to_sigma2_and_mae_to_the_gaussian_one() -> None:
    for s2 in (10.0, 68.49, 456.62):
        mse, mae = dg_error_moments(s2)
        assert mse == pytest.approx(s2, rel=1e-12)  # Var = σ² up to e^{-2π²σ²}
        # E|Z| by Euler–Maclaurin on k φ(k): σ√(2/π) − 1/(6√(2π) σ) + O(σ⁻³)
        sigma = math.sqrt(s2)
        em = sigma * math.sqrt(2 / math.pi) - 1 / (6 * math.sqrt(2 * math.pi) * sigma)
        assert mae == pytest.approx(em, rel=1e-4)
        assert mae != pytest.approx(sigma * math.sqrt(2 / math.pi), rel=1e-9)
    # small σ²: far from the continuous values, as the closed form says
    mse, _ = dg_error_moments(0.3)
    assert mse < 0.95 * 0.3


@pytest.mark.parametrize("s2", [0.7, 5.0, 16.12])
def test_clipped_errors_match_brute_force(s2: float) -> None:
    counts = [0, 1, 2, 3, 5, 10, 40, 200]
    acc = count_accuracy(s2, counts)
    for j, n in enumerate(counts):
        mse, mae = _brute(s2, n)
        assert acc.mse_clipped[j] == pytest.approx(mse, rel=1e-10, abs=1e-14)
        assert acc.mae_clipped[j] == pytest.approx(mae, rel=1e-10, abs=1e-14)
    mse, mae = _brute(s2, None)
    assert acc.mse == pytest.approx(mse, rel=1e-12)
    assert acc.mae == pytest.approx(mae, rel=1e-12)


def test_clipping_at_zero_halves_the_errors_and_vanishes_for_large_counts() -> None:
    acc = count_accuracy(20.0, np.arange(0, 400))
    assert acc.mse_clipped[0] == pytest.approx(acc.mse / 2, rel=1e-12)
    assert acc.mae_clipped[0] == pytest.approx(acc.mae / 2, rel=1e-12)
    assert np.all(np.diff(acc.mse_clipped) >= -1e-12)  # more room below: closer to no clipping
    assert np.all(acc.mse_clipped <= acc.mse) and np.all(acc.mae_clipped <= acc.mae)
    assert acc.mse_clipped[-1] == acc.mse and acc.mae_clipped[-1] == acc.mae


def test_exact_values_agree_with_monte_carlo_and_a_wrong_sigma2_is_detected() -> None:
    rng = np.random.default_rng(np.random.SeedSequence(2024, spawn_key=(8,)))
    s2, n_mc = 9.5, 400_000
    z = _cks_sample(s2, n_mc, rng)
    counts = np.array([0, 2, 6, 100])
    acc = count_accuracy(s2, counts)
    wrong = count_accuracy(1.1 * s2, counts)  # power: a 10 % error in σ² must fail
    for j, n in enumerate(counts):
        e = np.maximum(-n, z).astype(float)
        for exact, bad, sample in (
            (acc.mse_clipped[j], wrong.mse_clipped[j], e**2),
            (acc.mae_clipped[j], wrong.mae_clipped[j], np.abs(e)),
        ):
            se = sample.std() / math.sqrt(n_mc)
            assert abs(sample.mean() - exact) < 4.5 * se
            assert abs(sample.mean() - bad) > 4.5 * se


@pytest.mark.parametrize(
    ("s2", "counts", "match"),
    [
        (0.0, [1], "sigma2"),
        (float("nan"), [1], "sigma2"),
        ("x", [1], "sigma2"),
        (2.0, [-1], "non-negative"),
        (2.0, [1.5], "whole numbers"),
        (2.0, [], "non-empty"),
    ],
)
def test_bad_input_names_the_value(s2: object, counts: list[float], match: str) -> None:
    with pytest.raises(InvalidParameterError, match=match):
        count_accuracy(s2, counts)  # type: ignore[arg-type]
