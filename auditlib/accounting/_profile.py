"""Certified hockey-stick divergence on a loss lattice, and its inversion by bisection.

The privacy loss takes the values ``L_t = c + g t`` (``c``, ``g > 0`` exact rationals) with
sub-probability ``mu(t)`` (:class:`~auditlib.accounting._lattice.LatticeMeasure`). Then

    delta(eps) = sum_t p(t) * (1 - exp(eps - L_t))_+ ,

a sum of non-negative terms, each ``1 - exp(x)`` computed as ``-expm1(x)``. As ``mu <= p`` and the
integrand lies in ``[0, 1]``, ``sum_t mu(t) f_t <= delta(eps) <= sum_t mu(t) f_t + dropped``.

Floating point: ``L_t`` is computed as ``fl(c) + fl(g) * t`` with absolute error at most
``E_L = 4U (|c| + g max|t|)``; the argument ``x = eps - L_t`` then errs by at most
``E_x = E_L + 4U (|eps| + max|L|)``. The *upper* bound evaluates ``-expm1`` at ``x - E_x`` (a larger
integrand, since ``-expm1`` decreases) and the *lower* bound at ``x + E_x``; both are then widened
by the log-radius of ``mu``, of ``expm1``, of the product and of the summation
(:func:`~auditlib.accounting._floats.blocked_sum`), plus the absolute underflow slack.
``extra_loss_error`` adds a known bound on how far the lattice's losses may sit from the true ones
(the grid splits of :mod:`auditlib.accounting._split`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from auditlib.accounting._floats import (
    ABSOLUTE_SLACK,
    LIBM_LOG,
    U_LOG,
    U,
    blocked_square,
    sum_blocked,
    widen,
)
from auditlib.accounting._lattice import LatticeMeasure
from auditlib.exceptions import AccountingError


class HockeyStick:
    """``delta(eps)`` bounds for a loss lattice ``L_t = c + g t`` carrying a certified measure."""

    def __init__(
        self, c: Fraction, g: Fraction, measure: LatticeMeasure, extra_loss_error: float = 0.0
    ) -> None:
        if g <= 0:
            raise ValueError("lattice step must be positive")
        t = measure.offset + np.arange(measure.size, dtype=np.int64)
        t_max = max(abs(int(t[0])), abs(int(t[-1])))
        if t_max >= 2**52:
            raise AccountingError(f"lattice index {t_max} is beyond exact float64 integers")
        c_f, g_f = float(c), float(g)
        self.loss = c_f + g_f * t.astype(np.float64)  # non-decreasing, as fl is monotone
        self.values = measure.values
        self.radius = measure.radius
        self.dropped = measure.dropped
        self.loss_error = 4.0 * U * (abs(c_f) + g_f * t_max) * (1.0 + 1e-9) + extra_loss_error
        self.loss_abs_max = float(np.max(np.abs(self.loss)))
        self.loss_max = float(self.loss[-1])

    def _arg_error(self, eps: float) -> float:
        return self.loss_error + 4.0 * U * (abs(eps) + self.loss_abs_max) + 1e-300

    def _sum(self, eps_eff: float) -> tuple[float, float]:
        """Computed ``sum mu(t) * -expm1(eps_eff - L_t)`` over ``L_t > eps_eff``, and its radius."""
        start = int(np.searchsorted(self.loss, eps_eff, side="right"))
        if start >= self.loss.size:
            return 0.0, 0.0
        # blocked_sum(values * -expm1(eps_eff - loss)), the terms written in place into its
        # buffer (no temporaries) and negated after summing: rounding to nearest commutes with
        # negation, so these are the same bits
        n = self.loss.size - start
        square = blocked_square(n)
        terms = square[:n]
        np.subtract(eps_eff, self.loss[start:], out=terms)
        np.expm1(terms, out=terms)
        np.multiply(self.values[start:], terms, out=terms)
        total, r_sum = sum_blocked(square, n)
        return -total + 0.0, self.radius + LIBM_LOG + 2 * U_LOG + r_sum

    def upper(self, eps: float) -> float:
        """Certified upper bound on ``delta(eps)`` (errs high)."""
        if math.isinf(eps):
            return min(1.0, self.dropped + ABSOLUTE_SLACK)
        eps_eff = float(np.nextafter(eps - self._arg_error(eps), -np.inf))
        total, radius = self._sum(eps_eff)
        _, hi = widen(total, radius)
        return min(1.0, hi + self.dropped + ABSOLUTE_SLACK)

    def lower(self, eps: float) -> float:
        """Certified lower bound on ``delta(eps)`` (errs low)."""
        if math.isinf(eps):
            return 0.0
        eps_eff = float(np.nextafter(eps + self._arg_error(eps), np.inf))
        total, radius = self._sum(eps_eff)
        lo, _ = widen(total, radius)
        return max(0.0, lo - ABSOLUTE_SLACK)


def _shrink(
    fn: Callable[[float], float],
    on_left: Callable[[float], bool],
    delta: float,
    a: float,
    b: float,
    tol: float,
) -> tuple[float, float]:
    """Shrink ``[a, b]`` to width ``<= tol`` keeping ``on_left(fn(a))`` and ``not on_left(fn(b))``.

    Steps are Illinois (modified regula falsi) on ``log(fn / delta)``, with a bisection step whenever
    three steps failed to halve the interval. Only the verified invariant matters for the result;
    the step rule only decides how many evaluations it takes.
    """

    def g(v: float) -> float:
        return math.log(v / delta) if v > 0.0 else -math.inf

    ga, gb = g(fn(a)), g(fn(b))
    last_side = 0
    history = [b - a]
    while b - a > max(tol, 4 * math.ulp(b)):
        x = 0.5 * (a + b)
        stalled = len(history) >= 4 and (b - a) > 0.5 * history[-4]
        if not stalled and math.isfinite(ga) and math.isfinite(gb) and ga != gb:
            cand = b - gb * (b - a) / (gb - ga)
            if a < cand < b:
                x = cand
        v = fn(x)
        if on_left(v):
            a, ga = x, g(v)
            if last_side == -1:
                gb *= 0.5  # Illinois: the right end is stuck, pull the secant towards it
            last_side = -1
        else:
            b, gb = x, g(v)
            if last_side == 1:
                ga *= 0.5
            last_side = 1
        history.append(b - a)
    return a, b


def epsilon_bracket(
    delta: float,
    lower_fn: Callable[[float], float],
    upper_fn: Callable[[float], float],
    eps_max: float,
    tol: float = 1e-12,
) -> tuple[float, float]:
    """Certified ``[eps_lower, eps_upper]`` around ``eps(delta) = inf{eps >= 0 : delta(eps) <= delta}``.

    ``eps_upper`` is a point, within ``tol`` of the crossing, where ``upper_fn(eps_upper) <= delta``
    has been verified (so the true ``delta(eps_upper) <= delta``: errs high). ``eps_lower`` is a
    point, within ``tol`` of its crossing, with ``lower_fn(eps_lower) >= delta`` verified (the true
    ``delta`` is strictly decreasing where positive, so ``eps(delta) >= eps_lower``: errs low), or 0.
    ``eps_max`` must satisfy ``upper_fn(eps_max) <= delta`` (callers check that the truncated mass
    allows it).
    """
    if upper_fn(0.0) <= delta:
        hi_eps = 0.0
    else:
        _, hi_eps = _shrink(upper_fn, lambda v: v > delta, delta, 0.0, eps_max, tol)
    if lower_fn(0.0) < delta:
        return 0.0, hi_eps
    # the lower end is usually within a hair of the upper one: try a narrow bracket first
    a = 0.0
    for width in (1e-9, 1e-6, 1e-3):
        cand = hi_eps - width
        if cand > 0.0 and lower_fn(cand) >= delta:
            a = cand
            break
    lo_eps, _ = _shrink(lower_fn, lambda v: v >= delta, delta, a, hi_eps, tol)
    return lo_eps, hi_eps
