"""One discrete Gaussian query against a closed form evaluated in 50-digit decimal arithmetic.

Reference (derived here, independently of the library): the mechanism releases ``x = c + Z`` with
``Z ~ N_Z(0, s)``, ``s = sigma^2``; neighbours have counts 0 and 1, so ``P(x) = p(x)`` and
``Q(x) = p(x - 1)`` with ``p(x) = exp(-x^2 / 2s) / Z_s``. The loss ``ln P/Q = (1 - 2x) / (2s)``
exceeds ``eps`` iff ``x <= k`` with ``k = ceil(1/2 - eps s) - 1``, hence

    delta(eps) = P[X <= k] - e^eps P[X <= k - 1] = P[X >= k1] - e^eps P[X >= k2],
    k1 = -k, k2 = 1 - k   (symmetry of p).

``p`` is summed over ``|x| <= 40 sigma + 60`` (the rest is below ``e^-800``). Tolerance: the
library's bracket must contain the reference; the only slack is the reference's conversion to float
(relative ``1e-15``). The bracket must also be narrow (relative width ``< 1e-11``), so containment is
not vacuous.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import pytest

from auditlib.accounting import DiscreteGaussianComposition


def _dg_tail_sums(sigma2: Fraction) -> tuple[dict[int, Decimal], Decimal]:
    """Unnormalised weights and their total, in 50-digit decimal."""
    with localcontext() as ctx:
        ctx.prec = 50
        s = Decimal(sigma2.numerator) / Decimal(sigma2.denominator)
        bound = int(40 * math.sqrt(float(sigma2))) + 60
        w = {x: (-(Decimal(x * x)) / (2 * s)).exp() for x in range(-bound, bound + 1)}
        return w, sum(w.values(), Decimal(0))


def reference_delta(sigma2: Fraction, eps: float) -> Decimal:
    """delta(eps) of one N_Z(0, sigma2) count query from the closed form above."""
    w, total = _dg_tail_sums(sigma2)
    k = math.ceil(Fraction(1, 2) - Fraction(eps) * sigma2) - 1
    k1, k2 = -k, 1 - k
    with localcontext() as ctx:
        ctx.prec = 50
        tail1 = sum((v for x, v in w.items() if x >= k1), Decimal(0)) / total
        tail2 = sum((v for x, v in w.items() if x >= k2), Decimal(0)) / total
        return tail1 - Decimal(eps).exp() * tail2


def reference_delta_direct(sigma2: Fraction, eps: float) -> Decimal:
    """The same quantity from the definition sum_x max(P(x) - e^eps Q(x), 0)."""
    w, total = _dg_tail_sums(sigma2)
    with localcontext() as ctx:
        ctx.prec = 50
        e = Decimal(eps).exp()
        terms = (w[x] - e * w.get(x - 1, Decimal(0)) for x in w)
        return sum((t for t in terms if t > 0), Decimal(0)) / total


CASES = [
    (Fraction(1, 2), [0.0, 0.5, 1.0, 3.0]),
    (Fraction(4999, 1000), [0.0, 0.3, 2.0, 6.0]),
    (Fraction(10, 1) / (2 * Fraction(274, 1000) * Fraction(73, 20)), [1.0, 2.5, 4.0]),  # State
    (Fraction(456621, 1000), [0.01, 0.1, 0.2]),  # Block-like
    (Fraction(3, 7), [0.2, 1.1, 2.9]),
]


def test_closed_form_matches_definition() -> None:
    """The two independent references agree (guards the threshold algebra above)."""
    for sigma2, eps in [(Fraction(1, 2), 0.7), (Fraction(4999, 1000), 2.0), (Fraction(3, 7), 1.1)]:
        a, b = reference_delta(sigma2, eps), reference_delta_direct(sigma2, eps)
        assert abs(a - b) <= Decimal("1e-40") * max(a, Decimal("1e-300"))


@pytest.mark.parametrize(("sigma2", "epsilons"), CASES)
def test_delta_brackets_closed_form(sigma2: Fraction, epsilons: list[float]) -> None:
    acc = DiscreteGaussianComposition([(sigma2, 1)])
    assert acc.method == "exact-lattice"
    bracket = acc.delta(epsilons)
    for i, eps in enumerate(epsilons):
        ref = float(reference_delta(sigma2, eps))
        lo, hi = float(bracket.lower[i]), float(bracket.upper[i])
        assert lo * (1 - 1e-15) <= ref <= hi * (1 + 1e-15), (sigma2, eps, lo, ref, hi)
        assert hi - lo <= 1e-11 * ref + 1e-28


@pytest.mark.parametrize("sigma2", [Fraction(1, 2), Fraction(4999, 1000), Fraction(456621, 1000)])
@pytest.mark.parametrize("delta", [1e-3, 1e-10, 1e-20])
def test_epsilon_bracket_verified_by_reference(sigma2: Fraction, delta: float) -> None:
    """The true delta at the bracket's ends straddles the target (definition of eps(delta))."""
    b = DiscreteGaussianComposition([(sigma2, 1)]).epsilon(delta)
    assert b.quantity == "epsilon"
    assert 0 <= b.upper - b.lower <= 1e-11
    assert float(reference_delta(sigma2, b.upper)) <= delta * (1 + 1e-15)
    assert float(reference_delta(sigma2, b.lower)) >= delta * (1 - 1e-15)


def test_wrong_variance_is_not_contained() -> None:
    """Power: a variance off by 1 % gives a delta outside the bracket (the check can fail)."""
    sigma2 = Fraction(4999, 1000)
    bracket = DiscreteGaussianComposition([(sigma2 * Fraction(101, 100), 1)]).delta(2.0)
    assert not bracket.contains(float(reference_delta(sigma2, 2.0)))


def test_zero_epsilon_is_total_variation() -> None:
    """delta(0) = TV(P, Q) = P[X = 0] for one query with sensitivity 1 (k = 0, k1 = 0, k2 = 1)."""
    sigma2 = Fraction(5, 2)
    w, total = _dg_tail_sums(sigma2)
    tv = float(w[0] / total)
    b = DiscreteGaussianComposition([(sigma2, 1)]).delta(0.0)
    assert b.lower <= tv * (1 + 1e-15) and tv * (1 - 1e-15) <= b.upper
