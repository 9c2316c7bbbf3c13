"""Su, Su & Wang's bound on delta(eps) -- certified.

Su, Su and Wang (Su, Su & Wang, Appendix A.6 / Section 3.3) drop the ``-e^eps Q[...]`` term of
``delta(eps)``, i.e. use ``delta(eps) <= P[L > eps]`` (a valid but loose upper bound on ``delta``):

* :func:`tail_probability` -- a certified bracket on ``P[L > eps]`` of a discrete Gaussian
  composition, from the lattices whose losses err low and high;
* :func:`paper_bound_epsilon` -- a certified bracket on the ``eps`` at which that bound meets
  ``delta``.

``calibrate_factor(..., method="paper-bound")`` (:mod:`auditlib.accounting.calibrate`) calibrates
against :func:`tail_probability`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from auditlib.accounting._floats import ABSOLUTE_SLACK, U_LOG, blocked_sum, widen
from auditlib.accounting._profile import HockeyStick
from auditlib.accounting._validation import check_delta
from auditlib.accounting.bracket import Bracket
from auditlib.accounting.discrete_gaussian_pld import DiscreteGaussianComposition
from auditlib.exceptions import AccountingError


def tail_probability(composition: DiscreteGaussianComposition, epsilon: float) -> Bracket:
    """Certified bracket on ``P[L > eps]``: Su, Su & Wang's upper bound on ``delta(eps)``.

    The lower end uses the lattice whose losses err low and keeps only atoms certainly above
    ``eps``; the upper end the lattice whose losses err high, every atom possibly above ``eps`` and
    the dropped mass. Rounding radii widen both.
    """

    def kept(hs: HockeyStick, eps_eff: float) -> tuple[float, float]:
        start = int(np.searchsorted(hs.loss, eps_eff, side="right"))
        if start >= hs.loss.size:
            return 0.0, 0.0
        total, r_sum = blocked_sum(hs.values[start:])
        return total, hs.radius + r_sum + U_LOG

    eps = float(epsilon)
    hs_up: HockeyStick = composition._upper
    hs_dn: HockeyStick = composition._lower
    e_up = hs_up.loss_error + 4.0 * 2.0**-53 * (abs(eps) + hs_up.loss_abs_max) + 1e-300
    e_dn = hs_dn.loss_error + 4.0 * 2.0**-53 * (abs(eps) + hs_dn.loss_abs_max) + 1e-300
    total_up, r_up = kept(hs_up, float(np.nextafter(eps - e_up, -np.inf)))
    total_dn, r_dn = kept(hs_dn, float(np.nextafter(eps + e_dn, np.inf)))
    upper = min(1.0, widen(total_up, r_up)[1] + hs_up.dropped + ABSOLUTE_SLACK)
    lower = max(0.0, widen(total_dn, r_dn)[0] - ABSOLUTE_SLACK)
    lower = min(lower, upper)
    return Bracket(
        lower, upper, composition.method, "delta", composition.truncated_mass, composition.grid
    )


def paper_bound_epsilon(
    composition: DiscreteGaussianComposition, delta: float, tol: float = 1e-12
) -> Bracket:
    """Bracket on ``inf{eps >= 0 : P[L > eps] <= delta}`` (Su, Su & Wang's eps for the bound that drops
    the negative term). ``P[L > eps]`` is a step function; the ends are verified like
    :meth:`DiscreteGaussianComposition.epsilon`'s: ``P_upper(eps_upper) <= delta`` and
    ``P_lower(eps_lower) > delta``."""
    d = float(check_delta(delta))

    def upper_fn(e: float) -> float:
        return float(tail_probability(composition, e).upper)

    def lower_fn(e: float) -> float:
        return float(tail_probability(composition, e).lower)

    if upper_fn(0.0) <= d:
        return Bracket(0.0, 0.0, composition.method, "epsilon", composition.truncated_mass)
    lo, hi = 0.0, composition._upper.loss_max + 1.0
    if upper_fn(hi) > d:
        raise AccountingError(f"delta={d!r} is below what the truncated lattice can certify")
    eps_upper = _bisect(lambda e: upper_fn(e) > d, lo, hi, tol)[1]
    if lower_fn(0.0) <= d:
        eps_lower = 0.0
    else:
        eps_lower = _bisect(lambda e: lower_fn(e) > d, 0.0, eps_upper, tol)[0]
    return Bracket(
        eps_lower,
        eps_upper,
        composition.method,
        "epsilon",
        composition.truncated_mass,
        composition.grid,
    )


def _bisect(
    above: Callable[[float], bool], lo: float, hi: float, tol: float
) -> tuple[float, float]:
    """``[lo, hi]`` halved until narrower than ``tol``, keeping ``above(lo)`` and not ``above(hi)``."""
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if above(mid):
            lo = mid
        else:
            hi = mid
    return lo, hi
