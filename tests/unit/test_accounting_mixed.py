"""Mixed compositions (geometric, Laplace, Gaussian, discrete Gaussian) against closed forms.

References, each independent of the library:

* Two-sided geometric ``P(k) ~ e^(-e0 |k|)``, neighbours 0 and 1: the loss ``e0 (|x - 1| - |x|)`` is
  ``+e0`` for ``x <= 0`` (probability ``p = 1/(1 + e^(-e0))``) and ``-e0`` for ``x >= 1``, so ``k``
  releases have ``L = (2J - k) e0`` with ``J ~ Binomial(k, p)`` and
  ``delta(eps) = sum_j C(k, j) p^j (1 - p)^(k - j) (1 - e^(eps - (2j - k) e0))_+``; pure ``k e0``-DP
  gives ``delta(k e0) = 0``. (Ghosh, Roughgarden & Sundararajan 2012 for the mechanism; the loss
  law is derived in ``docs/accounting.md``.)
* Laplace ``Lap(b)``, sensitivity 1: ``delta(eps) = 1 - e^((eps - 1/b)/2)`` for ``0 <= eps <= 1/b``
  (integrate the loss law of ``docs/accounting.md``; it is the Laplace privacy profile of Balle,
  Barthe & Gaboardi 2018, Thm. 3 / Balle & Wang 2018 for ``Delta = 1``), so
  ``eps(delta) = 1/b + 2 ln(1 - delta)``.
* Gaussian ``N(0, sigma^2)``: the analytic Gaussian mechanism (Balle & Wang 2018, Thm. 8)
  ``delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` with ``mu = 1/sigma``; ``k``
  releases are the mechanism with ``mu sqrt(k)`` (Dong, Roth & Su 2019, GDP composition).

The closed forms are evaluated with ``math``/``scipy`` in double precision; the slack allowed for
their own rounding is stated at each use.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.special import ndtr

from auditlib.accounting import (
    DiscreteGaussianComposition,
    DiscreteGaussianLoss,
    GaussianLoss,
    GeometricLoss,
    LaplaceLoss,
    PrivacyLossComposition,
)
from auditlib.accounting.losses import NDTR_RELATIVE
from auditlib.exceptions import AccountingError, InvalidParameterError


def geometric_delta(eps: float, e0: float, k: int) -> float:
    p = 1.0 / (1.0 + math.exp(-e0))
    return sum(
        math.comb(k, j) * p**j * (1 - p) ** (k - j) * max(0.0, -math.expm1(eps - (2 * j - k) * e0))
        for j in range(k + 1)
    )


def laplace_delta(eps: float, b: float) -> float:
    return max(0.0, -math.expm1((eps - 1.0 / b) / 2.0))


def gaussian_delta(eps: float, mu: float) -> float:
    return float(ndtr(-eps / mu + mu / 2) - math.exp(eps) * ndtr(-eps / mu - mu / 2))


def gaussian_epsilon(delta: float, mu: float) -> float:
    return brentq(lambda e: gaussian_delta(e, mu) - delta, 0.0, 50.0, xtol=1e-14, rtol=1e-15)


# -- two-sided geometric: exact lattice -------------------------------------------------------------


@pytest.mark.parametrize(("e0", "k"), [(0.5, 10), (0.1, 25), (Fraction(3, 4), 1)])
def test_geometric_matches_binomial_closed_form(e0: float, k: int) -> None:
    comp = PrivacyLossComposition([GeometricLoss(e0, k)])
    assert comp.method == "exact-lattice"
    e0f = float(e0)
    for eps in (0.0, 0.3 * e0f, e0f, 2.5 * e0f, (k - 1) * e0f):
        ref = geometric_delta(eps, e0f, k)
        got = comp.delta(eps)
        slack = 1e-14 * max(ref, 1e-300) * k  # the reference's own rounding
        assert got.lower - slack <= ref <= got.upper + slack
        assert got.width <= 1e-12 * ref + 1e-14
    for delta in (1e-2, 1e-6):
        fn = lambda e, d=delta: geometric_delta(e, e0f, k) - d  # noqa: E731
        if fn(0.0) <= 0:
            continue
        ref_eps = brentq(fn, 0.0, k * e0f, xtol=1e-14)
        got = comp.epsilon(delta)
        assert got.lower - 1e-10 <= ref_eps <= got.upper + 1e-10
        assert got.width < 1e-9


def test_geometric_is_pure_dp() -> None:
    k, e0 = 10, 0.5
    comp = PrivacyLossComposition([GeometricLoss(e0, k)])
    at = comp.delta(k * e0)
    assert at.lower == 0.0 and at.upper < 1e-15
    assert comp.delta(k * e0 + 1e-6).upper <= comp.truncated_mass + 1e-299
    for delta in (1e-3, 1e-9, 1e-20):
        assert comp.epsilon(delta).upper <= k * e0 + 1e-9
    # one release: delta(0) is the total variation tanh(e0/2)
    one = PrivacyLossComposition([GeometricLoss(e0)])
    assert one.delta(0.0).contains(math.tanh(e0 / 2))


def test_geometric_bracket_mode_contains_exact() -> None:
    exact = PrivacyLossComposition([GeometricLoss(0.5, 10)])
    grid = PrivacyLossComposition([GeometricLoss(0.5, 10)], mode="bracket-grid", grid=0.003)
    assert grid.method == "bracket-grid" and grid.rounding_width == pytest.approx(0.003)
    for delta in (1e-2, 1e-6):
        e, g = exact.epsilon(delta), grid.epsilon(delta)
        assert g.lower <= e.lower and e.upper <= g.upper
        assert g.width <= grid.rounding_width + 1e-9


# -- Laplace --------------------------------------------------------------------------------------


@pytest.mark.parametrize("b", [1.0, 0.5, 2.0, 0.3])
def test_laplace_one_release_closed_form(b: float) -> None:
    comp = PrivacyLossComposition([LaplaceLoss(b)], grid=1e-4)
    assert comp.method == "bracket-grid"
    for eps in np.linspace(0.0, 1.0 / b, 7):
        ref = laplace_delta(float(eps), b)
        assert comp.delta(float(eps)).contains(ref)
    for delta in (0.1, 1e-3, 1e-8):
        ref_eps = 1.0 / b + 2.0 * math.log1p(-delta)
        got = comp.epsilon(delta)
        assert got.lower - 1e-12 <= ref_eps <= got.upper + 1e-12
        assert got.width <= 1e-4 + 1e-9
    assert comp.delta(1.0 / b + 1e-4).upper < 1e-12  # pure (1/b)-DP, up to one grid step


def test_laplace_brackets_narrow_with_the_grid() -> None:
    widths = []
    for h in (1e-2, 1e-3, 1e-4):
        comp = PrivacyLossComposition([LaplaceLoss(1.0)], grid=h)
        got = comp.delta(0.4)
        assert got.contains(laplace_delta(0.4, 1.0))
        widths.append(got.width)
    assert widths[0] > 5 * widths[1] > 25 * widths[2]


def test_laplace_composition_is_nested_and_pure() -> None:
    coarse = PrivacyLossComposition([LaplaceLoss(1.0, 3)], grid=2e-3)
    fine = PrivacyLossComposition([LaplaceLoss(1.0, 3)], grid=5e-4)
    for eps in (0.5, 1.5, 2.5):
        c, f = coarse.delta(eps), fine.delta(eps)
        assert c.lower <= f.upper and f.lower <= c.upper
        assert f.width < c.width
    assert fine.epsilon(1e-6).upper <= 3.0 + 1e-9  # k Laplace releases are pure (k/b)-DP
    # delta(0) is the total variation: for 3 releases strictly between one release's and 1
    assert laplace_delta(0.0, 1.0) < fine.delta(0.0).lower <= fine.delta(0.0).upper < 1.0


# -- Gaussian -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("sigma", "k"), [(1.0, 1), (1.0, 4), (2.0, 3), (Fraction(1, 2), 1)])
def test_gaussian_analytic_mechanism(sigma: float, k: int) -> None:
    mu = math.sqrt(k) / float(sigma)
    comp = PrivacyLossComposition([GaussianLoss(sigma, k)], grid=1e-3)
    for eps in (0.0, 0.5, 1.0, 3.0):
        ref = gaussian_delta(eps, mu)
        slack = 1e-13 * max(ref, 1e-30)  # the closed form's cancellation, evaluated in floats
        got = comp.delta(eps)
        assert got.lower - slack <= ref <= got.upper + slack
    for delta in (1e-3, 1e-10):
        ref_eps = gaussian_epsilon(delta, mu)
        got = comp.epsilon(delta)
        assert got.lower - 1e-10 <= ref_eps <= got.upper + 1e-10
        assert got.width <= 1e-3 + 1e-9


def test_gaussian_brackets_narrow_with_the_grid() -> None:
    mu = 2.0
    widths = []
    for h in (1e-2, 1e-3, 1e-4):
        got = PrivacyLossComposition([GaussianLoss(1.0, 4)], grid=h).epsilon(1e-6)
        assert got.contains(gaussian_epsilon(1e-6, mu))
        widths.append(got.width)
    assert widths[0] > 5 * widths[1] > 25 * widths[2]
    assert widths[2] <= 1e-4 + 1e-9


def test_ndtr_error_model() -> None:
    """``scipy.special.ndtr`` on the lower tail against ``math.erfc`` (libm, ~1 ulp): the assumed
    relative error ``NDTR_RELATIVE`` holds with a wide margin."""
    z = np.linspace(-37.0, 0.0, 20_001)
    ref = np.array([0.5 * math.erfc(-x / math.sqrt(2.0)) for x in z])
    rel = np.abs(ndtr(z) / ref - 1.0)
    # math.erfc's argument carries one rounding (x / sqrt 2): |d log erfc| <= (x^2 + 1) 2U
    allowed = NDTR_RELATIVE / 4 + (z * z + 1.0) * 2.0**-51
    assert np.all(rel <= allowed)


# -- mixed ----------------------------------------------------------------------------------------


def test_discrete_gaussian_with_large_variance_is_close_to_gaussian() -> None:
    mixed = PrivacyLossComposition([DiscreteGaussianLoss(400, 3), GaussianLoss(20, 2)], grid=1e-3)
    gauss = PrivacyLossComposition([GaussianLoss(20, 5)], grid=1e-3)
    assert mixed.method == "bracket-grid"
    ref = gaussian_epsilon(1e-6, math.sqrt(5) / 20)
    for comp in (mixed, gauss):
        got = comp.epsilon(1e-6)
        assert got.contains(ref)
        assert got.width <= comp.rounding_width + 1e-9
    assert abs(mixed.epsilon(1e-6).midpoint - gauss.epsilon(1e-6).midpoint) < 2e-3


def test_order_of_components_is_irrelevant() -> None:
    parts = [
        LaplaceLoss(2.0, 2),
        GeometricLoss(0.3, 4),
        DiscreteGaussianLoss(5, 2),
        GaussianLoss(3),
    ]
    a = PrivacyLossComposition(parts, grid=2e-3)
    b = PrivacyLossComposition(parts[::-1], grid=2e-3)
    c = PrivacyLossComposition([parts[2], parts[0], parts[3], parts[1]], grid=2e-3)
    assert a.method == "bracket-grid"
    for other in (b, c):
        x, y = a.delta([0.5, 1.0]), other.delta([0.5, 1.0])
        assert np.array_equal(x.lower, y.lower) and np.array_equal(x.upper, y.upper)
        assert a.epsilon(1e-6) == other.epsilon(1e-6)


def test_split_counts_merge() -> None:
    one = PrivacyLossComposition([GeometricLoss(0.5, 4), DiscreteGaussianLoss(4, 2)])
    many = PrivacyLossComposition(
        [
            GeometricLoss(0.5, 1),
            DiscreteGaussianLoss(4),
            GeometricLoss(0.5, 3),
            DiscreteGaussianLoss(4),
        ]
    )
    gen = PrivacyLossComposition(c for c in [GeometricLoss(0.5, 4), DiscreteGaussianLoss(4, 2)])
    assert one.method == many.method == gen.method == "exact-lattice"
    assert one.delta(1.0) == gen.delta(1.0)
    assert one.delta(1.0) == many.delta(1.0)


def test_discrete_gaussians_agree_with_the_dg_accountant() -> None:
    pairs = [(Fraction(5), 3), (Fraction(1612, 100), 2)]
    dg = DiscreteGaussianComposition(pairs)
    mixed = PrivacyLossComposition([DiscreteGaussianLoss(s, m) for s, m in pairs])
    assert dg.method == mixed.method == "exact-lattice"
    for delta in (1e-3, 1e-10):
        a, b = dg.epsilon(delta), mixed.epsilon(delta)
        assert abs(a.lower - b.lower) < 1e-11 and abs(a.upper - b.upper) < 1e-11


def test_geometric_and_discrete_gaussian_share_a_lattice() -> None:
    comp = PrivacyLossComposition([GeometricLoss(0.5, 3), DiscreteGaussianLoss(4, 2)])
    assert comp.method == "exact-lattice" and comp.grid == 0.25
    forced = PrivacyLossComposition(
        [GeometricLoss(0.5, 3), DiscreteGaussianLoss(4, 2)], mode="bracket-grid", grid=1e-3
    )
    for delta in (1e-2, 1e-8):
        e, g = comp.epsilon(delta), forced.epsilon(delta)
        assert g.lower <= e.lower and e.upper <= g.upper
    with pytest.raises(AccountingError, match="continuous"):
        PrivacyLossComposition([GaussianLoss(1.0), GeometricLoss(0.5)], mode="exact-lattice")


# -- validation -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "text"),
    [
        (lambda: LaplaceLoss(0.0), "scale must be positive and finite, got 0.0"),
        (lambda: LaplaceLoss(-1.5), "scale must be positive and finite, got -1.5"),
        (lambda: GeometricLoss(0), "epsilon must be positive and finite, got 0"),
        (lambda: GeometricLoss(-0.25), "epsilon must be positive and finite, got -0.25"),
        (lambda: GaussianLoss(float("inf")), "sigma must be positive and finite, got inf"),
        (lambda: DiscreteGaussianLoss(-4), "sigma2 must be positive and finite, got -4"),
        (lambda: GaussianLoss(1.0, 0), "count must be an integer >= 1, got 0"),
        (lambda: LaplaceLoss(1.0, 2.5), "count must be an integer >= 1, got 2.5"),
        (lambda: GeometricLoss("1"), "epsilon must be a real number, got '1'"),
        (lambda: PrivacyLossComposition([]), r"got \[\]"),
        (lambda: PrivacyLossComposition("laplace"), "got 'laplace'"),  # type: ignore[arg-type]
        (lambda: PrivacyLossComposition([(4, 1)]), r"components\[0\] must be .*got \(4, 1\)"),
        (lambda: PrivacyLossComposition([GaussianLoss(1)], grid=0.01).epsilon(0.0), "got 0.0"),
        (lambda: PrivacyLossComposition([GaussianLoss(1)], grid=0.01).epsilon(1.0), "got 1.0"),
        (lambda: PrivacyLossComposition([GaussianLoss(1)], grid=0.01).epsilon(-0.5), "got -0.5"),
        (lambda: PrivacyLossComposition([GaussianLoss(1)], grid=0.01).delta(-1.0), "got -1.0"),
        (lambda: PrivacyLossComposition([GaussianLoss(1)], grid=-1e-3), "got -0.001"),
        (lambda: PrivacyLossComposition([GaussianLoss(1)], mode="fft"), "got 'fft'"),  # type: ignore[arg-type]
    ],
)
def test_bad_inputs_name_the_value(make: Callable[[], object], text: str) -> None:
    with pytest.raises(InvalidParameterError, match=text):
        make()


def test_too_fine_grid_is_refused() -> None:
    with pytest.raises(AccountingError, match="too fine"):
        PrivacyLossComposition([LaplaceLoss(1.0, 50)], grid=1e-6)


# -- genuinely mixed compositions against conditioning on one component ----------------------------
#
# delta of L1 + L2 is E_{L1}[delta_2(eps - L1)], with delta_2 extended to negative arguments. For one
# Laplace release delta_1(x) = 1 - e^x when x < -1/b (all of the law lies above x and E_P[e^-L] = 1),
# the closed form above on [-1/b, 1/b], and 0 beyond; the analytic Gaussian formula holds for every
# real x.


def laplace_delta_any(x: float, b: float) -> float:
    if x < -1.0 / b:
        return -math.expm1(x)
    return laplace_delta(x, b)


def test_geometric_plus_gaussian_closed_form() -> None:
    e0, mu = 0.4, 1.0
    p = 1.0 / (1.0 + math.exp(-e0))
    comp = PrivacyLossComposition([GaussianLoss(1.0), GeometricLoss(e0)], grid=1e-4)
    widths = []
    for eps in (0.0, 0.5, 1.5, 3.0):
        ref = p * gaussian_delta(eps - e0, mu) + (1 - p) * gaussian_delta(eps + e0, mu)
        got = comp.delta(eps)
        assert got.lower - 1e-13 <= ref <= got.upper + 1e-13
        widths.append(got.width / ref)
    assert max(widths) < 1e-3


def test_two_laplace_and_laplace_plus_gaussian_by_quadrature() -> None:
    from scipy.integrate import quad

    b, mu = 1.0, 1.0

    def expect_over_laplace(fn: Callable[[float], float], eps: float) -> float:
        top = 0.5 * fn(eps - 1.0 / b)
        bottom = 0.5 * math.exp(-1.0 / b) * fn(eps + 1.0 / b)
        dens = lambda y: 0.25 * math.exp((y - 1.0 / b) / 2.0) * fn(eps - y)  # noqa: E731
        kinks = [x for x in (eps - 1.0 / b, eps + 1.0 / b) if -1.0 / b < x < 1.0 / b]
        inner, err = quad(dens, -1.0 / b, 1.0 / b, points=kinks or None, limit=200)
        assert err < 1e-11
        return top + bottom + inner

    two = PrivacyLossComposition([LaplaceLoss(b, 2)], grid=5e-4)
    mixed = PrivacyLossComposition([LaplaceLoss(b), GaussianLoss(1.0 / mu)], grid=5e-4)
    for eps in (0.0, 0.7, 1.4):
        ref2 = expect_over_laplace(lambda x: laplace_delta_any(x, b), eps)
        assert two.delta(eps).lower - 1e-10 <= ref2 <= two.delta(eps).upper + 1e-10
        refm = expect_over_laplace(lambda x: gaussian_delta(x, mu), eps)
        assert mixed.delta(eps).lower - 1e-10 <= refm <= mixed.delta(eps).upper + 1e-10
        assert mixed.delta(eps).width < 2e-3 * refm
