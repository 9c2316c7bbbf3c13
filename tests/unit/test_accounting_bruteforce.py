"""Small compositions against brute-force enumeration of every output tuple in a box.

Reference (independent of the library): for queries ``j`` with noise ``N_Z(0, s_j)`` the mechanism
on neighbours releases ``x ~ P = prod_j p_j(x_j)`` or ``x ~ Q = prod_j p_j(x_j - 1)`` (each count
moves by one), and ``delta(eps) = sum_x max(P(x) - e^eps Q(x), 0)``. We enumerate the box
``|x_j| <= B_j``; the mass outside (under P) is bounded by ``sum_j P[|X_j| > B_j]``, which we compute
and which is below ``1e-18``. So the truth lies in ``[box_sum, box_sum + outside]``; floating-point
error of the box sum (products of 3-4 floats summed by numpy) is below ``1e-12`` relative.
Tolerance: the library's bracket must meet that interval, widened by ``1e-12`` relative.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from auditlib.accounting import DiscreteGaussianComposition


def _pmf(sigma2: float, bound: int) -> tuple[np.ndarray, float]:
    """Normalised pmf on ``-bound..bound`` and the mass outside it (normaliser over +-60 sigma)."""
    wide = int(60 * math.sqrt(sigma2)) + 60
    xs = np.arange(-wide, wide + 1)
    w = np.exp(-(xs.astype(float) ** 2) / (2 * sigma2))
    w /= w.sum()
    inside = np.abs(xs) <= bound
    return w[inside], float(w[~inside].sum())


def brute_force_delta(sigma2s: list[float], eps: float) -> tuple[float, float]:
    """``(box_sum, outside_mass)`` for the composition of one query per entry of ``sigma2s``."""
    bounds = [int(14 * math.sqrt(s)) + 3 for s in sigma2s]
    log_p = np.zeros(1)
    log_q = np.zeros(1)
    outside = 0.0
    for s, b in zip(sigma2s, bounds, strict=True):
        pmf, out = _pmf(s, b)
        outside += out
        # Q's j-th marginal at x_j is p_j(x_j - 1): shift by one (the point -b - 1 is outside)
        shifted = np.r_[0.0, pmf[:-1]]
        with np.errstate(divide="ignore"):
            log_p = np.add.outer(log_p, np.log(pmf)).ravel()
            log_q = np.add.outer(log_q, np.log(shifted)).ravel()
    p = np.exp(log_p)
    diff = p - np.exp(eps + log_q)
    return float(diff[diff > 0].sum()), outside


def _assert_meets(bracket_lo: float, bracket_hi: float, bf: float, outside: float) -> None:
    assert outside < 1e-17
    assert bracket_lo <= (bf + outside) * (1 + 1e-12), (bracket_lo, bf)
    assert bf * (1 - 1e-12) <= bracket_hi, (bf, bracket_hi)


EXACT_CASES = [
    # 1/sigma2 = 2, 4/3, 4/3, 1/2: common step 1/6
    [Fraction(1, 2), Fraction(3, 4), Fraction(3, 4), Fraction(2)],
    [Fraction(5, 3), Fraction(5, 2), Fraction(5)],
    [Fraction(1), Fraction(1), Fraction(1)],
]
EPSILONS = [0.0, 0.4, 1.5, 3.0]


@pytest.mark.parametrize("sigma2s", EXACT_CASES)
def test_exact_lattice_contains_brute_force(sigma2s: list[Fraction]) -> None:
    counts: dict[Fraction, int] = {}
    for s in sigma2s:
        counts[s] = counts.get(s, 0) + 1
    acc = DiscreteGaussianComposition(list(counts.items()))
    assert acc.method == "exact-lattice"
    bracket = acc.delta(EPSILONS)
    for i, eps in enumerate(EPSILONS):
        bf, outside = brute_force_delta([float(s) for s in sigma2s], eps)
        _assert_meets(bracket.lower[i], bracket.upper[i], bf, outside)
        assert bracket.upper[i] - bracket.lower[i] <= 1e-11 * bf + 1e-27


NON_COMMENSURATE = [0.7, math.sqrt(2.0), 1.3]  # floats: exact binary values, no common step


def test_bracket_mode_contains_brute_force() -> None:
    acc = DiscreteGaussianComposition([(s, 1) for s in NON_COMMENSURATE])
    assert acc.method == "bracket-grid"
    bracket = acc.delta(EPSILONS)
    for i, eps in enumerate(EPSILONS):
        bf, outside = brute_force_delta(NON_COMMENSURATE, eps)
        _assert_meets(bracket.lower[i], bracket.upper[i], bf, outside)
        # not vacuous: the grid bracket is narrow in delta as well
        assert bracket.upper[i] - bracket.lower[i] <= 1e-4 * bf


def test_bracket_mode_epsilon_verified_by_brute_force() -> None:
    acc = DiscreteGaussianComposition([(s, 1) for s in NON_COMMENSURATE], grid=1e-4)
    for delta in (1e-2, 1e-6):
        b = acc.epsilon(delta)
        assert b.method == "bracket-grid"
        assert b.upper - b.lower <= len(NON_COMMENSURATE) * 1e-4 + 1e-10
        bf_hi, _ = brute_force_delta(NON_COMMENSURATE, b.upper)
        bf_lo, outside = brute_force_delta(NON_COMMENSURATE, b.lower)
        assert bf_hi <= delta * (1 + 1e-12)
        assert bf_lo + outside >= delta * (1 - 1e-12)


def test_forced_bracket_mode_on_commensurate_case() -> None:
    """The grid bracket of a commensurate composition meets its (much narrower) exact bracket."""
    comps = [(Fraction(5, 3), 2), (Fraction(5, 2), 1), (Fraction(5), 3)]
    exact = DiscreteGaussianComposition(comps)
    grid = DiscreteGaussianComposition(comps, mode="bracket-grid", grid=1e-3)
    assert (exact.method, grid.method) == ("exact-lattice", "bracket-grid")
    for delta in (1e-3, 1e-9):
        e, g = exact.epsilon(delta), grid.epsilon(delta)
        # both contain the truth, so they meet; the exact one is ~1e-12 wide
        assert g.lower <= e.upper and e.lower <= g.upper
        assert g.upper - g.lower <= 3 * 1e-3 + 1e-10


def test_bracket_mode_contains_nearby_commensurate_case() -> None:
    """sigma2 = sqrt(21) as a float has no common step with 5; its best rational approximations
    with denominators <= 300 and <= 1000 (within 7e-6 and 1e-6 of it) are commensurate. eps moves
    by a few 1e-6 between them, so continuity puts the non-commensurate truth within ~1e-5 of the
    exact answer, far inside a rounded grid bracket whose ends are ~1e-3 away, and within ~1e-5 of
    the (second-order, default) split bracket."""
    x = math.sqrt(21.0)
    grid = DiscreteGaussianComposition([(5, 10), (x, 10)], grid=1e-3, refine=False)
    assert grid.method == "bracket-grid"
    g = grid.epsilon([1e-3, 1e-9])
    nearby = [
        DiscreteGaussianComposition([(5, 10), (Fraction(x).limit_denominator(lim), 10)])
        for lim in (300, 1000)
    ]
    assert all(n.method == "exact-lattice" for n in nearby)
    e300, e1000 = (n.epsilon([1e-3, 1e-9]) for n in nearby)
    assert np.all(np.abs(e1000.midpoint - e300.midpoint) < 1e-5)
    assert np.all(g.lower < e1000.lower - 1e-4) and np.all(e1000.upper + 1e-4 < g.upper)
    assert np.all(g.upper - g.lower <= 2 * 1e-3 + 1e-10)
    refined = DiscreteGaussianComposition([(5, 10), (x, 10)], grid=1e-3).epsilon([1e-3, 1e-9])
    assert np.all(refined.lower >= g.lower) and np.all(refined.upper <= g.upper)
    assert np.all(refined.upper - refined.lower <= 1e-6)
    assert np.all(np.abs(refined.midpoint - e1000.midpoint) < 1e-5)


def test_brute_force_has_power() -> None:
    """A variance off by 2 % on one query moves delta out of the bracket (the check can fail)."""
    sigma2s = EXACT_CASES[1]
    acc = DiscreteGaussianComposition([(s, 1) for s in sigma2s])
    bracket = acc.delta(1.5)
    wrong = [float(sigma2s[0]) * 1.02, *[float(s) for s in sigma2s[1:]]]
    bf, outside = brute_force_delta(wrong, 1.5)
    assert not (bracket.lower <= bf + outside and bf <= bracket.upper)
