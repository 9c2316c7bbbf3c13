"""The queries every accountant answers from its two bounding hockey-stick sums, and its grid.

An accountant holds ``_lower`` and ``_upper`` (:class:`~auditlib.accounting._profile.HockeyStick`
objects bounding δ(ε) from below and above), its ``truncated_mass``, ``method`` and ``grid``; this
mixin turns them into certified brackets on δ(ε) and ε(δ).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from auditlib.accounting._floats import ABSOLUTE_SLACK
from auditlib.accounting._profile import epsilon_bracket
from auditlib.accounting._validation import check_delta, check_epsilon
from auditlib.accounting.bracket import Bracket
from auditlib.exceptions import AccountingError

CERTIFY_FACTOR = 1e3
"""``eps(delta)`` is refused when ``delta <= CERTIFY_FACTOR * truncated mass``: below that the
dropped mass, not the mechanism, would set the upper end of the bracket."""


class ProfileQueries:
    _lower: Any
    _upper: Any
    truncated_mass: float
    method: str
    grid: Any

    def _delta_upper(self, eps: float) -> float:
        """Certified upper bound on delta(eps) (errs high)."""
        return float(self._upper.upper(eps))

    def _delta_lower(self, eps: float) -> float:
        """Certified lower bound on delta(eps) (errs low)."""
        return float(self._lower.lower(eps))

    def delta(self, epsilon: ArrayLike) -> Bracket:
        """Certified bracket on ``delta(eps) = E_P[(1 - e^(eps - L))_+]`` (vectorized over eps)."""
        eps = check_epsilon(epsilon)
        lower = np.array([self._delta_lower(float(e)) for e in eps.ravel()]).reshape(eps.shape)
        upper = np.array([self._delta_upper(float(e)) for e in eps.ravel()]).reshape(eps.shape)
        return self._bracket(lower, upper, "delta")

    def delta_upper(self, epsilon: ArrayLike) -> np.ndarray:
        """The upper end of :meth:`delta` alone (the same numbers, half the work): a certified
        upper bound on ``delta(eps)``, for curves that report only that end."""
        eps = check_epsilon(epsilon)
        return np.array([self._delta_upper(float(e)) for e in eps.ravel()]).reshape(eps.shape)

    def epsilon(self, delta: ArrayLike) -> Bracket:
        """Certified bracket on ``eps(delta) = inf{eps >= 0 : delta(eps) <= delta}``.

        Raises :class:`AccountingError` if ``delta <= 1e3 * truncated_mass`` (the dropped tail mass,
        not the mechanisms, would decide the answer; about ``1e-25`` for discrete Gaussians).
        """
        d = check_delta(delta)
        floor = CERTIFY_FACTOR * (self.truncated_mass + ABSOLUTE_SLACK)
        if np.any(d <= floor):
            bad = float(d[d <= floor].flat[0])
            raise AccountingError(
                f"delta={bad!r} is below what this accountant can certify: its lattice dropped up to"
                f" {self.truncated_mass:.3g} of probability mass, so only delta > {floor:.3g} has a"
                " meaningful upper bound on eps"
            )
        eps_max = max(self._upper.loss_max, 0.0) + 1.0
        pairs = [
            epsilon_bracket(float(x), self._delta_lower, self._delta_upper, eps_max)
            for x in d.ravel()
        ]
        lower = np.array([p[0] for p in pairs]).reshape(d.shape)
        upper = np.array([p[1] for p in pairs]).reshape(d.shape)
        return self._bracket(lower, upper, "epsilon")

    def _bracket(self, lower: np.ndarray, upper: np.ndarray, quantity: str) -> Bracket:
        lo: np.ndarray | float = float(lower) if lower.ndim == 0 else lower
        hi: np.ndarray | float = float(upper) if upper.ndim == 0 else upper
        return Bracket(lo, hi, self.method, quantity, self.truncated_mass, self.grid)


def finest_feasible_grid(
    target: float, feasible: Callable[[float], bool], budgets: str
) -> Fraction:
    """``target`` if the grid it gives fits the budgets, else the finest grid that does.

    Doubles from ``target`` until a grid fits, bisects (geometrically) the last step, and rounds the
    result up to 3 significant digits. ``budgets`` names them in the error when nothing fits.
    """
    h = target
    if not feasible(h):
        lo, hi = h, h
        for _ in range(200):
            if feasible(hi):
                break
            lo, hi = hi, hi * 2.0
        else:
            raise AccountingError(f"no grid fits {budgets}; raise the budgets")
        for _ in range(40):
            mid = math.sqrt(lo * hi)
            lo, hi = (lo, mid) if feasible(mid) else (mid, hi)
        exponent = math.floor(math.log10(hi)) - 2  # 3 significant digits, rounded up
        h = math.ceil(hi / 10.0**exponent) * 10.0**exponent
    return Fraction(h)


def check_grid_budget(
    h: float, length: float, work: float, max_lattice: int, max_work: float
) -> None:
    """Refuse a grid whose direct convolution would exceed the budgets (FFT is never used)."""
    if length > max_lattice or work > max_work:
        raise AccountingError(
            f"grid {h:.3g} is too fine for direct convolution: about {length:.3g}"
            f" lattice points (max_lattice={max_lattice}) and {work:.3g} multiply-adds"
            f" (max_work={max_work:.3g}); FFT is not used because its round-off is not"
            " certified. Use a coarser grid or raise the budgets."
        )
