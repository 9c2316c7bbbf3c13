"""Privacy-loss laws of single mechanisms (sensitivity 1), as certified lattice measures.

Each component is ``count`` independent releases of one mechanism on a count of sensitivity 1,
``P`` the output law on ``D`` and ``Q`` on the neighbour (the mechanism shifted by 1). The loss is
``L = ln P(X)/Q(X)`` with ``X ~ P``; for every mechanism here the reverse pair ``(Q, P)`` has the same
law (reflection ``x -> 1 - x``), so one law serves both directions.

* :class:`DiscreteGaussianLoss` ``N_Z(0, sigma2)``: ``L = (1/2 + Z)/sigma2``, ``Z ~ N_Z(0, sigma2)``.
* :class:`GeometricLoss` (two-sided geometric, ``P(k) ~ e^(-eps0 |k|)``): ``L = eps0 (|X - 1| - |X|)``
  is ``+eps0`` when ``X <= 0`` (probability ``p = 1/(1 + e^(-eps0))``) and ``-eps0`` when ``X >= 1``.
* :class:`LaplaceLoss` ``Lap(b)``: ``L = (|X - 1| - |X|)/b`` is ``+1/b`` when ``X <= 0`` (mass 1/2),
  ``-1/b`` when ``X >= 1`` (mass ``e^(-1/b)/2``) and ``(1 - 2X)/b`` in between, with
  ``P(L <= l) = e^((l - 1/b)/2)/2`` for ``-1/b <= l < 1/b``.
* :class:`GaussianLoss` ``N(0, sigma^2)``: ``L ~ N(mu^2/2, mu^2)`` with ``mu = 1/sigma``; ``count``
  of them compose exactly to ``mu^2 = count/sigma^2``.

Two representations are offered to :class:`~auditlib.accounting.composition.PrivacyLossComposition`:

``lattice()``
    ``(c, g, measure)`` with ``L = c + g t`` *exactly* (``c``, ``g`` rationals, ``t`` an integer of
    law ``measure``), for the discrete Gaussian and the geometric; ``None`` for the continuous laws.
``rounded(h)``
    Two measures on the grid ``h Z`` (index ``k`` stands for the loss ``k h``): the law of ``L``
    rounded **up** to the grid (``L_up >= L`` pointwise) and rounded **down**. For the continuous laws
    every grid cell carries its exact mass (closed-form CDF; the normal CDF through
    ``scipy.special.ndtr`` under the error model :data:`NDTR_RELATIVE`), with a certified log-radius;
    mass cut off in the tails goes to ``dropped``.

The invariants of :mod:`auditlib.accounting._lattice` hold for every returned measure.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any

import numpy as np
from scipy import special

from auditlib.accounting._discrete_gaussian import check_sum_cost, discrete_gaussian_measure
from auditlib.accounting._floats import LIBM_LOG, U_LOG, U, summation_radius
from auditlib.accounting._lattice import LatticeMeasure, aggregate, power, trim
from auditlib.accounting._validation import to_positive_fraction
from auditlib.exceptions import InvalidParameterError

TAIL_MASS = 1e-30
"""Two-sided mass each truncation may drop (as in the discrete-Gaussian accountant)."""

NDTR_RELATIVE = 1e-14
"""Assumed relative error of ``scipy.special.ndtr(x)`` for ``x <= 0`` (cephes ``erfc``, documented
peak error ~3e-16; a test checks it against ``math.erfc`` on a dense range). Conservative."""

_MAX_CELL_RADIUS = 1e-6
"""Grid cells whose computed mass may err by more than this (relative) are dropped (their upper
bounded mass goes to ``dropped``): only cells of negligible mass far in the tails are affected."""


@dataclass(frozen=True)
class GridLaw:
    """A certified measure on the grid ``h Z`` given at sorted, distinct integer ``positions`` (the
    loss ``k h`` at position ``k``), with the invariants of :class:`LatticeMeasure`."""

    positions: np.ndarray
    values: np.ndarray
    radius: float
    dropped: float

    @classmethod
    def from_dense(cls, m: LatticeMeasure) -> GridLaw:
        return cls(m.offset + np.arange(m.size, dtype=np.int64), m.values, m.radius, m.dropped)


def _check_count(count: Any) -> int:
    if isinstance(count, bool) or not isinstance(count, numbers.Integral) or count < 1:
        raise InvalidParameterError(f"count must be an integer >= 1, got {count!r}")
    return int(count)


def _ceil_div(num: int, den: int) -> int:
    return -((-num) // den)


def _round_lattice(
    c: Fraction, g: Fraction, m: LatticeMeasure, h: Fraction
) -> tuple[GridLaw, GridLaw]:
    """An exact lattice law ``L = c + g t`` pushed up / down onto ``h Z`` (exact integer rounding)."""
    a, b = c / h, g / h  # L / h = a + b t
    den = math.lcm(a.denominator, b.denominator)
    an, bn = a.numerator * (den // a.denominator), b.numerator * (den // b.denominator)
    nums = [an + bn * t for t in range(m.offset, m.offset + m.size)]
    pos_up, vals_up, r_up = aggregate([_ceil_div(x, den) for x in nums], m)
    pos_dn, vals_dn, r_dn = aggregate([x // den for x in nums], m)
    return (
        GridLaw(pos_up, vals_up, m.radius + r_up, m.dropped),
        GridLaw(pos_dn, vals_dn, m.radius + r_dn, m.dropped),
    )


def _cells_to_grid(
    j0: int,
    cells: np.ndarray,
    atoms: list[tuple[int, int, float]],
    radius: float,
    dropped: float,
) -> tuple[LatticeMeasure, LatticeMeasure]:
    """Up / down measures from interior cells ``(j h, (j+1) h)`` for ``j = j0, j0 + 1, ...`` (masses
    ``cells``) and atoms ``(up index, down index, mass)``; an interior cell goes up to ``j + 1`` and
    down to ``j``. An index receives at most one cell and two atoms (two additions)."""
    out = []
    for shift, up in ((1, True), (0, False)):
        idx = [j0 + shift, j0 + shift + cells.size - 1] + [a[0] if up else a[1] for a in atoms]
        lo, hi = min(idx), max(idx)
        v = np.zeros(hi - lo + 1)
        start = j0 + shift - lo
        v[start : start + cells.size] = cells
        for atom in atoms:
            v[(atom[0] if up else atom[1]) - lo] += atom[2]
        out.append(LatticeMeasure(lo, v, radius + 2 * U_LOG, dropped))
    return out[0], out[1]


@dataclass(frozen=True)
class DiscreteGaussianLoss:
    """``count`` releases with discrete Gaussian noise ``N_Z(0, sigma2)`` (``sigma2`` exact rational;
    a float is converted exactly)."""

    sigma2: Fraction | float
    count: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma2", to_positive_fraction(self.sigma2, "sigma2"))
        object.__setattr__(self, "count", _check_count(self.count))

    @property
    def key(self) -> tuple[str, Fraction]:
        return ("discrete-gaussian", Fraction(self.sigma2))

    def with_count(self, count: int) -> DiscreteGaussianLoss:
        return DiscreteGaussianLoss(self.sigma2, count)

    def lattice(self) -> tuple[Fraction, Fraction, LatticeMeasure]:
        return self._lattice

    @cached_property
    def _lattice(self) -> tuple[Fraction, Fraction, LatticeMeasure]:
        s2 = Fraction(self.sigma2)
        check_sum_cost(s2, self.count)
        m = power(discrete_gaussian_measure(s2, TAIL_MASS), self.count, TAIL_MASS)
        return Fraction(self.count, 2) / s2, 1 / s2, m

    def rounded(self, h: Fraction) -> tuple[GridLaw, GridLaw]:
        return _round_lattice(*self.lattice(), h)

    def support_size(self, h: float) -> float:
        """Number of grid points of :meth:`rounded` (at most), for cost estimates."""
        _, g, m = self.lattice()
        return min(float(m.size), m.size * float(g) / h + 2)

    def proxy_variance(self) -> float:
        return self.count / float(self.sigma2)

    def span(self) -> float:
        return 2 * 12.5 * math.sqrt(self.proxy_variance())


@dataclass(frozen=True)
class GeometricLoss:
    """``count`` releases with two-sided geometric noise ``P(k) ~ e^(-epsilon |k|)`` (pure
    ``epsilon``-DP each; ``epsilon`` exact rational, a float converted exactly)."""

    epsilon: Fraction | float
    count: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", to_positive_fraction(self.epsilon, "epsilon"))
        object.__setattr__(self, "count", _check_count(self.count))

    @property
    def key(self) -> tuple[str, Fraction]:
        return ("geometric", Fraction(self.epsilon))

    def with_count(self, count: int) -> GeometricLoss:
        return GeometricLoss(self.epsilon, count)

    def plus_probability(self) -> tuple[float, float, float]:
        """``p = P(L = +eps0) = 1/(1 + e^(-eps0))``, ``1 - p = e^(-eps0)/(1 + e^(-eps0))`` and their
        common log-radius: ``r = e^(-eps0)`` errs by ``eps0 U`` (argument) plus ``exp``'s error,
        ``1 + r`` by as much plus one rounding, and ``r / (1 + r)`` adds both and one rounding."""
        e0 = float(self.epsilon)
        r = math.exp(-e0)
        radius = 2.0 * (e0 * U * (1 + 1e-9) + LIBM_LOG) + 3 * U_LOG
        return 1.0 / (1.0 + r), r / (1.0 + r), radius

    def lattice(self) -> tuple[Fraction, Fraction, LatticeMeasure]:
        """``L = -count eps0 + 2 eps0 J`` with ``J ~ Binomial(count, p)``."""
        return self._lattice

    @cached_property
    def _lattice(self) -> tuple[Fraction, Fraction, LatticeMeasure]:
        p, q, radius = self.plus_probability()
        one = LatticeMeasure(0, np.array([q, p]), radius, 0.0)
        e0 = Fraction(self.epsilon)
        return -self.count * e0, 2 * e0, power(one, self.count, TAIL_MASS)

    def rounded(self, h: Fraction) -> tuple[GridLaw, GridLaw]:
        return _round_lattice(*self.lattice(), h)

    def support_size(self, h: float) -> float:
        """Number of grid points of :meth:`rounded` (at most), for cost estimates."""
        _, g, m = self.lattice()
        return min(float(m.size), m.size * float(g) / h + 2)

    def proxy_variance(self) -> float:
        return self.count * float(self.epsilon) ** 2

    def span(self) -> float:
        return min(2 * self.count * float(self.epsilon), 25 * math.sqrt(self.proxy_variance()))


@dataclass(frozen=True)
class LaplaceLoss:
    """``count`` releases with Laplace noise of scale ``scale`` (density ``e^(-|x|/b)/(2b)``)."""

    scale: Fraction | float
    count: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", to_positive_fraction(self.scale, "scale"))
        object.__setattr__(self, "count", _check_count(self.count))

    @property
    def key(self) -> tuple[str, Fraction]:
        return ("laplace", Fraction(self.scale))

    def with_count(self, count: int) -> LaplaceLoss:
        return LaplaceLoss(self.scale, count)

    def lattice(self) -> None:
        return None

    def rounded_one(self, h: Fraction) -> tuple[LatticeMeasure, LatticeMeasure]:
        """One release: cells ``(j h, (j+1) h)`` inside ``(-1/b, 1/b)`` carry
        ``e^((c - 1/b)/2) (1 - e^(-(c - a)/2)) / 2`` (``(a, c)`` the cell clipped to the support);
        the atoms ``1/2`` at ``1/b`` and ``e^(-1/b)/2`` at ``-1/b``."""
        eps = 1 / Fraction(self.scale)  # 1/b: the loss range
        j0 = math.floor(-eps / h)
        j1 = math.ceil(eps / h) - 1
        hf, ef = float(h), float(eps)
        j = np.arange(j0, j1 + 1, dtype=np.float64)
        c = np.minimum((j + 1.0) * hf, ef)
        width = np.full(j.size, hf)
        # the end cells are clipped to the support: their widths exactly, then rounded once
        width[0] = float(min((j0 + 1) * h, eps) - max(j0 * h, -eps))
        width[-1] = float(min((j1 + 1) * h, eps) - max(j1 * h, -eps))
        c[-1] = ef
        cells = 0.5 * np.exp(0.5 * (c - ef)) * -np.expm1(-0.5 * width)
        # |error of the exponent| <= 4U(|c| + 1/b) (+ the cap of c at the float 1/b); -expm1(-w/2)
        # has relative error <= U (the width's rounding; d log(1 - e^(-w/2)) / d log w <= 1) + libm
        arg_err = 4.0 * U * (2.0 * ef + hf) * (1 + 1e-9)
        radius = arg_err + 2 * LIBM_LOG + 4 * U_LOG
        top = (math.ceil(eps / h), math.floor(eps / h), 0.5)
        bottom = (math.ceil(-eps / h), math.floor(-eps / h), 0.5 * math.exp(-ef))
        radius = max(radius, ef * U * (1 + 1e-9) + LIBM_LOG + U_LOG)
        return _cells_to_grid(j0, cells, [top, bottom], radius, 0.0)

    def rounded(self, h: Fraction) -> tuple[GridLaw, GridLaw]:
        up, down = self.rounded_one(h)
        return (
            GridLaw.from_dense(power(up, self.count, TAIL_MASS)),
            GridLaw.from_dense(power(down, self.count, TAIL_MASS)),
        )

    def support_size(self, h: float) -> float:
        return self.span() / h + 2

    def proxy_variance(self) -> float:
        return self.count / float(self.scale) ** 2

    def span(self) -> float:
        return min(2 * self.count / float(self.scale), 25 * math.sqrt(self.proxy_variance()))


@dataclass(frozen=True)
class GaussianLoss:
    """``count`` releases with Gaussian noise ``N(0, sigma^2)`` (``sigma`` the standard deviation)."""

    sigma: Fraction | float
    count: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", to_positive_fraction(self.sigma, "sigma"))
        object.__setattr__(self, "count", _check_count(self.count))

    @property
    def key(self) -> tuple[str, Fraction]:
        return ("gaussian", Fraction(self.sigma))

    def with_count(self, count: int) -> GaussianLoss:
        return GaussianLoss(self.sigma, count)

    @property
    def mu(self) -> float:
        """``mu = sqrt(count) / sigma``: the composition is the Gaussian mechanism ``mu``-GDP."""
        return math.sqrt(float(self.count / Fraction(self.sigma) ** 2))

    def lattice(self) -> None:
        return None

    def rounded(self, h: Fraction) -> tuple[GridLaw, GridLaw]:
        """Cells ``(j h, (j+1) h)`` of ``L ~ N(mu^2/2, mu^2)`` with masses ``Phi(z_c) - Phi(z_a)``,
        ``z = l/mu - mu/2``, both evaluated on the side of the smaller tail; cells beyond
        ``|z| > Z`` (``Phi(-Z) < 2.5e-31``) are dropped with their certified tail mass."""
        mu = self.mu
        hf = float(h)
        z_cut = 11.6
        centre = mu * mu / 2.0
        j0 = math.floor((centre - z_cut * mu) / hf)
        j1 = math.ceil((centre + z_cut * mu) / hf)
        edges = np.arange(j0, j1 + 1, dtype=np.float64) * hf  # grid points j h
        z = edges / mu - 0.5 * mu
        # |error of z|: j h (one rounding), / mu (mu has 2 roundings beyond sqrt's), - mu/2
        z_err = 8.0 * U * (np.abs(edges) / mu + mu) * (1 + 1e-9)
        tail = special.ndtr(-np.abs(z))  # the smaller tail at each edge
        # relative error of each tail value: ndtr's own, plus the hazard (<= |z| + 1) times z_err
        rel = NDTR_RELATIVE + z_err * (np.abs(z) + z_err + 1.0) * (1 + 1e-9)
        upper_side = z[:-1] >= 0.0  # cell (a, c) with a >= centre: mass = tail(a) - tail(c)
        t_a, t_c = tail[:-1], tail[1:]
        mass = np.where(upper_side, t_a - t_c, t_c - t_a)
        mixed = (z[:-1] < 0.0) & (z[1:] > 0.0)  # the cell holding the centre
        mass = np.where(mixed, 1.0 - t_a - t_c, mass)
        err = rel[:-1] * t_a + rel[1:] * t_c + 2.0 * U * np.abs(mass) + 1e-300
        err = err + np.where(mixed, 4.0 * U, 0.0)  # 1 - t_a - t_c: two roundings of size <= U
        with np.errstate(divide="ignore", invalid="ignore"):
            cell_rel = np.where(mass > 0.0, err / mass, np.inf)
        bad = cell_rel > _MAX_CELL_RADIUS
        dropped = float(np.sum(np.where(bad, np.maximum(mass, 0.0) + err, 0.0)))
        mass = np.where(bad, 0.0, mass)
        kept_rel = float(np.max(cell_rel[~bad])) if np.any(~bad) else 0.0
        radius = -math.log1p(-kept_rel) * (1 + 1e-9)
        # the tails beyond the first and the last grid point (each a tail value, errs high)
        dropped += float(t_a[0] * (1 + rel[0]) + t_c[-1] * (1 + rel[-1]))
        dropped *= 1 + summation_radius(int(mass.size)) + 1e-12
        up, down = _cells_to_grid(j0, mass, [], radius, dropped)
        return (
            GridLaw.from_dense(trim(up, TAIL_MASS)),
            GridLaw.from_dense(trim(down, TAIL_MASS)),
        )

    def support_size(self, h: float) -> float:
        return self.span() / h + 2

    def proxy_variance(self) -> float:
        return self.mu**2

    def span(self) -> float:
        return 2 * 11.6 * self.mu


LossComponent = DiscreteGaussianLoss | GeometricLoss | LaplaceLoss | GaussianLoss
"""Any component :class:`~auditlib.accounting.composition.PrivacyLossComposition` accepts."""
