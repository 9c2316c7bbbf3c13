"""The floating-point error model behind every certified bound of this package.

Model: IEEE 754 binary64, round to nearest. For ``+ - * /`` on normal numbers
``fl(a op b) = (a op b)(1 + e)`` with ``|e| <= U = 2**-53``. Errors of positive quantities are
tracked as *log-radii*: a computed ``x_hat > 0`` and the exact ``x`` satisfy
``|log(x_hat / x)| <= r``. One rounding adds at most ``U_LOG = -log1p(-U)`` (a hair above ``U``).
Radii add under products and quotients, and a sum of non-negative terms whose radii are ``<= r``,
computed in *any* order with at most ``k`` additions on the path of any term, has radius
``<= r + k * U_LOG``.

``exp`` and ``expm1`` (numpy/libm) are assumed accurate to ``LIBM_ULPS`` units in the last place;
the documented and measured errors of numpy's and glibc's implementations are below 4 ulp, so 16 is
a conservative assumption.

Underflow breaks the relative model: a product that lands in the subnormal range errs by at most
``2**-1075`` *absolutely*. Every computation here performs far fewer than ``1e15`` operations
on quantities at most 1 (a probability), so all such errors together are below ``1e-300``; that is
``ABSOLUTE_SLACK``, added to every upper bound and subtracted from every lower bound.
"""

from __future__ import annotations

import math

import numpy as np

U = 2.0**-53
"""Unit roundoff of binary64, round to nearest."""

U_LOG = -math.log1p(-U)
"""Log-radius added by one correctly rounded operation (slightly larger than ``U``)."""

LIBM_ULPS = 16
"""Assumed error bound of ``exp``/``expm1`` in ulps (conservative; see the module docstring)."""

LIBM_LOG = -math.log1p(-LIBM_ULPS * 2.0**-52)
"""Log-radius of one ``exp``/``expm1`` evaluation under the ``LIBM_ULPS`` assumption."""

ABSOLUTE_SLACK = 1e-300
"""Bound on the total absolute error that subnormal underflow can cause (module docstring)."""

_SAFETY = 1e-6
"""Relative padding applied to radii before they are turned into factors (covers the rounding of
``exp(r)`` itself and of the final multiplication, each far below ``1e-6 * r + 64 U``)."""


def widen(value: float, radius: float) -> tuple[float, float]:
    """Interval ``[lower, upper]`` certain to contain the exact ``x`` given ``value = x_hat``.

    ``lower`` errs low and ``upper`` errs high: the radius is padded and the results are moved one
    float outward, so the rounding of this very computation cannot cross the exact value.
    """
    if value == 0.0:
        return 0.0, 0.0
    r = radius * (1.0 + _SAFETY) + 64.0 * U
    lower = float(np.nextafter(value * math.exp(-r), -np.inf))
    upper = float(np.nextafter(value * math.exp(r), np.inf))
    return max(lower, 0.0), upper


def summation_radius(n_terms: int) -> float:
    """Log-radius added by summing ``n_terms`` non-negative floats in any order (``n - 1`` adds)."""
    return max(n_terms - 1, 0) * U_LOG


def blocked_sum(terms: np.ndarray) -> tuple[float, float]:
    """Sum non-negative ``terms`` with a short, known addition depth.

    The terms are laid out on a ``b x b`` square (``b = ceil(sqrt(n))``, zero padded, zeros add
    exactly) and summed column-wise, then the ``b`` partial sums are summed. Whatever order numpy
    uses inside each stage, no term meets more than ``2 (b - 1)`` additions. Returns the computed sum
    and the log-radius those additions add (an upper bound on the rounding error).
    """
    n = int(terms.size)
    if n == 0:
        return 0.0, 0.0
    square = blocked_square(n)
    square[:n] = terms
    return sum_blocked(square, n)


def blocked_square(n: int) -> np.ndarray:
    """An uninitialised buffer for :func:`sum_blocked` of ``n >= 1`` terms (the caller writes the
    terms into its first ``n`` entries, e.g. with ``out=``, saving a copy)."""
    b = math.isqrt(n - 1) + 1
    return np.empty(b * b)


def sum_blocked(square: np.ndarray, n: int) -> tuple[float, float]:
    """:func:`blocked_sum` of the ``n`` terms in the first entries of ``square``
    (:func:`blocked_square`): the same additions in the same order."""
    b = math.isqrt(square.size)
    square[n:] = 0.0
    partial = square.reshape(b, b).sum(axis=0)
    return float(partial.sum()), 2 * summation_radius(b)
