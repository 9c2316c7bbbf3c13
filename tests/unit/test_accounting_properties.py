"""Hypothesis properties of the certified privacy profile (STYLE.md, habit 3).

Each property follows from the definition of the hockey-stick divergence, not from the code:
delta(eps) is non-increasing with values in [0, 1]; eps(.) inverts delta(.); composition is
commutative; a certified lower bound never exceeds the matching upper bound; and rho-zCDP
conversions bound the exact profile from above (the discrete Gaussian with sensitivity 1 is
exactly 1/(2 sigma^2)-zCDP, Canonne-Kamath-Steinke 2020, Prop. 5).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from auditlib.accounting import DiscreteGaussianComposition, bureau_epsilon, cks_epsilon

# sigma2 = 60 / n, n = 1..180 (sigma2 in [1/3, 60]): commensurate, lattice step >= 1/60, so each
# example builds in milliseconds; the bracket mode gets its own property below.
sigma2s = st.integers(min_value=1, max_value=180).map(lambda n: Fraction(60, n))
component = st.tuples(sigma2s, st.integers(min_value=1, max_value=4))
compositions = st.lists(component, min_size=1, max_size=3)
SETTINGS = settings(max_examples=25, deadline=None)


@SETTINGS
@given(compositions, st.lists(st.floats(0.0, 12.0), min_size=2, max_size=6))
def test_delta_is_monotone_and_bounded(comps, epsilons) -> None:  # type: ignore[no-untyped-def]
    acc = DiscreteGaussianComposition(comps)
    eps = np.sort(np.asarray(epsilons))
    b = acc.delta(eps)
    assert np.all(b.lower >= 0) and np.all(b.upper <= 1)
    assert np.all(b.lower <= b.upper)
    # the truth is non-increasing, so a lower bound at a larger eps cannot beat an upper bound at a
    # smaller one
    assert np.all(b.lower[1:] <= b.upper[:-1])


@SETTINGS
@given(compositions, st.floats(0.05, 8.0))
def test_epsilon_inverts_delta(comps, eps) -> None:  # type: ignore[no-untyped-def]
    acc = DiscreteGaussianComposition(comps)
    d = acc.delta(eps)
    assume(1e-15 < d.lower < 0.5)
    for target in (d.lower, d.upper):
        e = acc.epsilon(target)
        assert e.lower <= e.upper
        assert abs(e.midpoint - eps) < 1e-6
    # eps(delta_upper(eps)) <= eps <= eps(delta_lower(eps)), up to the bisection step
    assert acc.epsilon(d.upper).lower <= eps + 1e-11
    assert acc.epsilon(d.lower).upper >= eps - 1e-11


@SETTINGS
@given(compositions, st.randoms(use_true_random=False))
def test_composition_commutes(comps, rnd) -> None:  # type: ignore[no-untyped-def]
    shuffled = list(comps)
    rnd.shuffle(shuffled)
    # splitting a component into two with the same variance is the same composition
    split = [(s, 1) for s, m in comps for _ in range(m)]
    a = DiscreteGaussianComposition(comps).delta([0.5, 2.0])
    b = DiscreteGaussianComposition(shuffled).delta([0.5, 2.0])
    c = DiscreteGaussianComposition(split).delta([0.5, 2.0])
    assert np.array_equal(a.lower, b.lower) and np.array_equal(a.upper, b.upper)
    assert np.array_equal(a.lower, c.lower) and np.array_equal(a.upper, c.upper)


@SETTINGS
@given(compositions, st.sampled_from([1e-3, 1e-8, 1e-12]))
def test_exact_below_zcdp_conversions(comps, delta) -> None:  # type: ignore[no-untyped-def]
    acc = DiscreteGaussianComposition(comps)
    exact = acc.epsilon(delta)
    assert exact.upper <= cks_epsilon(acc.rho, delta) + 1e-9
    assert cks_epsilon(acc.rho, delta) <= bureau_epsilon(acc.rho, delta)


@settings(max_examples=10, deadline=None)
@given(compositions, st.sampled_from([1e-2, 1e-6, 1e-10]))
def test_grid_bracket_contains_exact(comps, delta) -> None:  # type: ignore[no-untyped-def]
    exact = DiscreteGaussianComposition(comps)
    grid = DiscreteGaussianComposition(comps, mode="bracket-grid", grid=1e-3)
    assert exact.method == "exact-lattice" and grid.method == "bracket-grid"
    e, g = exact.epsilon(delta), grid.epsilon(delta)
    # both contain the truth, so they meet; the exact one is ~1e-12 wide
    assert g.lower <= e.upper and e.lower <= g.upper
    n_groups = len({s for s, _ in comps})
    assert g.upper - g.lower <= n_groups * 1e-3 + 1e-10
