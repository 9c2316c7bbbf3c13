"""zCDP to (eps, delta) conversions.

References: the PL94-171 2021 persons certificate prints eps(1e-10) = 17.14 for
rho = 293764/114921, which is the Canonne-Kamath-Steinke bound (the simple Bun-Steinke formula gives
17.90) -- REFERENCE.md, "Production allocations". For rho = 3.65, REFERENCE.md gives Bureau
16.615 / 21.985 / 22.880 at 1e-5 / 1e-10 / 1e-11 and CKS 21.143 at 1e-10. The CKS infimum is also
checked against a dense grid over alpha computed here (the grid minimum is an upper bound on the
infimum and within 1e-6 of it at this resolution).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from auditlib.accounting import bureau_delta, bureau_epsilon, cks_delta, cks_epsilon
from auditlib.exceptions import InvalidParameterError

PL94_RHO = Fraction(293764, 114921)


def test_pl94_persons_certificate() -> None:
    assert round(cks_epsilon(PL94_RHO, 1e-10), 2) == 17.14
    assert round(bureau_epsilon(PL94_RHO, 1e-10), 2) == 17.90


def test_bureau_values_rho_365() -> None:
    eps = bureau_epsilon(3.65, [1e-5, 1e-10, 1e-11])
    assert np.round(eps, 3).tolist() == [16.615, 21.985, 22.880]
    assert round(cks_epsilon(3.65, 1e-10), 3) == 21.143


def _grid_cks_epsilon(rho: float, delta: float) -> float:
    alpha = 1.0 + np.logspace(-5, 4, 400_001)
    vals = rho * alpha + (
        math.log(1 / delta) + (alpha - 1) * np.log1p(-1 / alpha) - np.log(alpha)
    ) / (alpha - 1)
    return float(vals.min())


def _grid_cks_delta(rho: float, eps: float) -> float:
    alpha = 1.0 + np.logspace(-5, 4, 400_001)
    log_d = (alpha - 1) * (alpha * rho - eps) - np.log(alpha - 1) + alpha * np.log1p(-1 / alpha)
    return float(min(1.0, math.exp(log_d.min())))


@pytest.mark.parametrize("rho", [0.01, 0.5, 2.556, 30.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-10, 1e-20])
def test_cks_epsilon_is_the_infimum(rho: float, delta: float) -> None:
    grid = _grid_cks_epsilon(rho, delta)
    ours = cks_epsilon(rho, delta)
    assert ours <= grid + 1e-12
    assert ours >= grid - 1e-6 * grid
    assert ours < bureau_epsilon(rho, delta)


@pytest.mark.parametrize("rho", [0.05, 1.0, 3.65])
@pytest.mark.parametrize("eps", [0.5, 3.0, 12.0])
def test_cks_delta_is_the_infimum(rho: float, eps: float) -> None:
    grid = _grid_cks_delta(rho, eps)
    ours = cks_delta(rho, eps)
    assert ours <= grid * (1 + 1e-12)
    assert ours >= grid * (1 - 1e-5)
    assert ours <= bureau_delta(rho, eps)


def test_round_trips_and_vectorization() -> None:
    deltas = np.array([1e-2, 1e-6, 1e-10, 1e-15])
    np.testing.assert_allclose(bureau_delta(2.0, bureau_epsilon(2.0, deltas)), deltas, rtol=1e-10)
    np.testing.assert_allclose(cks_delta(2.0, cks_epsilon(2.0, deltas)), deltas, rtol=1e-6)
    assert cks_epsilon(2.0, deltas).shape == (4,)
    assert cks_epsilon([1.0, 2.0], 1e-6).shape == (2,)
    assert isinstance(cks_epsilon(2.0, 1e-6), float)


def test_bureau_delta_below_rho_is_one() -> None:
    assert bureau_delta(1.0, [0.0, 0.5, 1.0]).tolist() == [1.0, 1.0, 1.0]
    assert cks_delta(1.0, math.inf) == 0.0


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: bureau_epsilon(-1.0, 1e-5), r"rho must be positive and finite, got -1\.0"),
        (lambda: bureau_epsilon(1.0, 1.5), r"delta must lie strictly between 0 and 1, got 1\.5"),
        (lambda: cks_epsilon(1.0, 0.0), r"delta must lie strictly between 0 and 1, got 0\.0"),
        (lambda: cks_delta(1.0, -0.1), r"epsilon must be >= 0 \(and not NaN\), got -0\.1"),
        (lambda: bureau_delta(math.nan, 1.0), r"rho must be positive and finite, got nan"),
        (lambda: cks_delta(1.0, math.nan), r"epsilon must be >= 0 \(and not NaN\), got nan"),
    ],
)
def test_bad_inputs(call, match: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidParameterError, match=match):
        call()
