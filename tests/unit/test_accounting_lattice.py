"""The error budget's building blocks, each against an independent computation.

* the geometric-series tail bound of the discrete Gaussian against the tail summed in 50-digit
  decimal arithmetic (it must bound it, and by less than a factor 2 where truncation happens);
* the truncated pmf against 50-digit values: every computed value within its stated log-radius;
* the blocked sum against ``math.fsum`` (correctly rounded): within its stated radius;
* mass bookkeeping of convolution powers: kept mass + dropped mass >= 1 >= kept mass.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest

from auditlib.accounting._discrete_gaussian import discrete_gaussian_measure, tail_weight_bound
from auditlib.accounting._floats import LIBM_ULPS, blocked_sum, widen
from auditlib.accounting._lattice import power

SIGMA2S = [Fraction(1, 3), Fraction(4999, 1000), Fraction(456621, 1000), Fraction(10**4)]


def _decimal_weights(sigma2: Fraction, bound: int) -> dict[int, Decimal]:
    with localcontext() as ctx:
        ctx.prec = 50
        s = Decimal(sigma2.numerator) / Decimal(sigma2.denominator)
        return {k: (-(Decimal(k * k)) / (2 * s)).exp() for k in range(-bound, bound + 1)}


@pytest.mark.parametrize("sigma2", SIGMA2S)
def test_tail_bound_bounds_the_tail(sigma2: Fraction) -> None:
    bound = int(40 * math.sqrt(float(sigma2))) + 60
    w = _decimal_weights(sigma2, bound)
    sigma = math.sqrt(float(sigma2))
    for k_max in (0, int(3 * sigma), int(11 * sigma), int(12 * sigma)):
        tail = float(sum((v for k, v in w.items() if k > k_max), Decimal(0)))
        assert tail <= tail_weight_bound(sigma2, k_max)
        if k_max >= 11 * sigma - 1:  # where truncation happens, the bound is tight
            assert tail_weight_bound(sigma2, k_max) <= 2.0 * tail


@pytest.mark.parametrize("sigma2", SIGMA2S)
def test_truncated_pmf_within_radius(sigma2: Fraction) -> None:
    m = discrete_gaussian_measure(sigma2, 1e-30)
    bound = int(40 * math.sqrt(float(sigma2))) + 60
    w = _decimal_weights(sigma2, bound)
    with localcontext() as ctx:
        ctx.prec = 50
        total = sum(w.values(), Decimal(0))
        k_max = -m.offset
        exact = np.array([float(w[k] / total) for k in range(-k_max, k_max + 1)])
        dropped = float(sum((v for k, v in w.items() if abs(k) > k_max), Decimal(0)) / total)
    assert dropped <= m.dropped < 1e-30
    # the support is the smallest that meets the budget: one point fewer would not
    smaller = float(sum((v for k, v in w.items() if abs(k) >= k_max), Decimal(0)) / total)
    assert smaller >= 1e-30 * 0.5
    log_err = np.abs(np.log(m.values / exact))
    assert np.all(log_err <= m.radius)
    assert m.radius < 1e-11


def test_blocked_sum_within_radius() -> None:
    rng = np.random.default_rng(20260501)
    for n in (1, 2, 17, 1000, 123_457):
        terms = rng.random(n) * np.exp(rng.normal(0, 20, n))
        total, radius = blocked_sum(terms)
        exact = math.fsum(terms.tolist())
        assert abs(math.log(total / exact)) <= radius + 2.0**-52
        lo, hi = widen(total, radius)
        assert lo <= exact <= hi


@pytest.mark.parametrize(
    ("sigma2", "count"), [(Fraction(1, 2), 7), (Fraction(5), 10), (Fraction(300), 33)]
)
def test_power_keeps_mass_accounted(sigma2: Fraction, count: int) -> None:
    m = power(discrete_gaussian_measure(sigma2, 1e-30), count, 1e-30)
    kept = math.fsum(m.values.tolist())
    lo, hi = widen(kept, m.radius + 2.0**-40)
    assert lo <= 1.0 <= hi + m.dropped
    # each copy drops < 1e-30, each trim < 1e-30, and a trim before a squaring counts twice
    assert m.dropped < (2 * count + 8) * 1e-30
    # symmetric law, symmetric kept support
    assert m.offset == -(m.size - 1) // 2


@pytest.mark.parametrize("name", ["exp", "expm1"])
def test_libm_within_assumed_ulps(name: str) -> None:
    """The error model assumes exp/expm1 within LIBM_ULPS ulp; check this platform against
    50-digit decimal values over the arguments the accountant uses (x in [-80, 0])."""
    rng = np.random.default_rng(7)
    x = np.concatenate([-rng.random(2000) * 80.0, -rng.random(500) * 1e-6, [-0.0, -1e-300]])
    fn = getattr(np, name)
    computed = fn(x)
    with localcontext() as ctx:
        ctx.prec = 50
        exact = [Decimal(float(v)).exp() - (1 if name == "expm1" else 0) for v in x]
    errors = [
        abs(Decimal(float(c)) - e) / Decimal(math.ulp(float(e)))
        for c, e in zip(computed, exact, strict=True)
        if e != 0
    ]
    assert max(errors) <= LIBM_ULPS
