"""Certified privacy profile of a composition of mixed mechanisms (sensitivity 1 each).

Components are :mod:`auditlib.accounting.losses` objects: discrete Gaussian, two-sided geometric,
Laplace and Gaussian releases, each with a ``count``. The loss of the composition is the sum of the
independent component losses and ``delta(eps) = E_P[(1 - e^(eps - L))_+]``, as for
:class:`~auditlib.accounting.discrete_gaussian_pld.DiscreteGaussianComposition`, whose engine
(direct convolution on integer lattices, error budget, hockey-stick sums, inversion) is reused:

``exact-lattice``
    Every component's loss is exactly ``c_j + g_j t`` with an integer ``t`` (discrete Gaussians, whose
    ``g_j = 1/sigma_j^2``, and geometrics, ``g_j = 2 eps0_j``) and the ``g_j`` are commensurate within
    the budgets: ``L = sum_j c_j + g T`` on the lattice of ``g = gcd_j g_j``.
``bracket-grid``
    Otherwise every component's loss is rounded up (and, separately, down) to the grid ``h``: lattice
    laws by exact integer rounding; Laplace per release, from the exact masses of the grid cells;
    Gaussian components once (they compose exactly to ``N(mu^2/2, mu^2)``), from exact normal-CDF cell
    masses. Rounding up is a coupling with ``L_up >= L`` and the integrand is non-decreasing in ``L``,
    so the rounded-up composition bounds ``delta`` from above and the rounded-down one from below; the
    eps bracket is at most ``W h`` wider than the exact one, ``W`` the number of roundings (one per
    component, ``count`` for a Laplace component).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from auditlib.accounting._lattice import LatticeMeasure, add_sparse, trim
from auditlib.accounting._profile import HockeyStick
from auditlib.accounting._queries import ProfileQueries, check_grid_budget, finest_feasible_grid
from auditlib.accounting._validation import check_budgets, to_positive_fraction
from auditlib.accounting.discrete_gaussian_pld import (
    _SUBGAUSS_HALF_WIDTH,
    EPSILON_WIDTH_TARGET,
    TAIL_MASS,
    Mode,
    _gcd_fractions,
)
from auditlib.accounting.losses import (
    DiscreteGaussianLoss,
    GaussianLoss,
    GeometricLoss,
    GridLaw,
    LaplaceLoss,
    LossComponent,
)
from auditlib.exceptions import AccountingError, InvalidParameterError

_COMPONENT_TYPES = (DiscreteGaussianLoss, GeometricLoss, LaplaceLoss, GaussianLoss)


def _merge(components: Iterable[Any]) -> tuple[LossComponent, ...]:
    """Validated components, equal mechanisms merged (counts added), in a canonical order."""
    if isinstance(components, str | bytes) or not isinstance(components, Iterable):
        raise InvalidParameterError(
            f"components must be a sequence of loss components, got {components!r}"
        )
    counts: dict[tuple[str, Fraction], int] = {}
    protos: dict[tuple[str, Fraction], LossComponent] = {}
    for i, comp in enumerate(components):
        if not isinstance(comp, _COMPONENT_TYPES):
            raise InvalidParameterError(
                f"components[{i}] must be a DiscreteGaussianLoss, GeometricLoss, LaplaceLoss or"
                f" GaussianLoss, got {comp!r}"
            )
        counts[comp.key] = counts.get(comp.key, 0) + comp.count
        protos[comp.key] = comp
    if not counts:
        raise InvalidParameterError("components must hold at least one component, got []")
    return tuple(protos[k].with_count(counts[k]) for k in sorted(counts))


def _rounding_weight(comp: LossComponent) -> int:
    """How many roundings to the grid the component's loss goes through."""
    return comp.count if isinstance(comp, LaplaceLoss) else 1


def _plan(spans: Sequence[float], variances: Sequence[float], nnz: Sequence[float], step: float):
    """Estimated final lattice length and multiply-adds for accumulating the components in order
    (lengths bounded by the sub-Gaussian width of the trimmed sum, as in the DG accountant)."""
    variance = span_sum = work = 0.0
    length = 1.0
    for k, (span, var, n) in enumerate(zip(spans, variances, nnz, strict=True), start=1):
        work += length * n
        variance += var
        span_sum += span
        length = min(span_sum, 2 * _SUBGAUSS_HALF_WIDTH * math.sqrt(variance)) / step + k + 2
    return length, work


def _grid_order(comps: Sequence[LossComponent], h: float) -> list[LossComponent]:
    """Accumulation order on the grid ``h``: largest support first (each later, smaller or sparser
    component then costs its support size times the accumulated length)."""
    return sorted(comps, key=lambda c: -c.support_size(h))


def _grid_cost(comps: Sequence[LossComponent], h: float) -> tuple[float, float]:
    """Estimated lattice length and work (both passes) on the grid ``h``."""
    comps = _grid_order(comps, h)
    spans = [c.span() for c in comps]
    nnz = [c.support_size(h) for c in comps]
    extra = 0.0
    for c in comps:
        if isinstance(c, LaplaceLoss):  # the count-fold power of an n-point measure
            n = 2.0 / float(c.scale) / h + 2
            extra += n * n * c.count * (c.count - 1) / 2
    length, work = _plan(spans, [c.proxy_variance() for c in comps], nnz, h)
    return max(length, max(nnz)), 2.0 * (work + extra)


def _accumulate(parts: Sequence[GridLaw]) -> LatticeMeasure:
    """Direct convolution of measures given at integer positions (trimmed after each step)."""
    acc = LatticeMeasure(0, np.ones(1), 0.0, 0.0)
    for part in parts:
        acc = add_sparse(acc, part.positions, part.values, part.radius, part.dropped)
        acc = trim(acc, TAIL_MASS)
    return acc


class PrivacyLossComposition(ProfileQueries):
    """Certified ``delta(eps)`` and ``eps(delta)`` of a composition of mixed mechanisms.

    Parameters
    ----------
    components
        :class:`~auditlib.accounting.losses.DiscreteGaussianLoss`,
        :class:`~auditlib.accounting.losses.GeometricLoss`,
        :class:`~auditlib.accounting.losses.LaplaceLoss` and
        :class:`~auditlib.accounting.losses.GaussianLoss` objects, in any order (equal mechanisms are
        merged).
    grid
        Bracket-mode grid step in loss units. ``None``: the coarsest of ``0.9e-6 / W`` (``W`` the
        number of roundings, see the module docstring) and the finest grid within the budgets.
    max_lattice, max_work, mode
        As for :class:`~auditlib.accounting.discrete_gaussian_pld.DiscreteGaussianComposition`.

    Attributes
    ----------
    method : str
        ``"exact-lattice"`` or ``"bracket-grid"``.
    grid : float
        The lattice step in loss units.
    truncated_mass : float
        Upper bound on the probability mass dropped (inside every upper bound).
    rounding_width : float
        ``W h``: the most the bracket-grid mode can widen the eps bracket (0 in the exact mode).
    """

    def __init__(
        self,
        components: Iterable[LossComponent],
        *,
        grid: float | None = None,
        max_lattice: int = 5_000_000,
        mode: Mode = "auto",
        max_work: float = 2e9,
    ) -> None:
        self.components = _merge(components)
        if mode not in ("auto", "exact-lattice", "bracket-grid"):
            raise InvalidParameterError(
                f"mode must be 'auto', 'exact-lattice' or 'bracket-grid', got {mode!r}"
            )
        max_lattice, max_work = check_budgets(max_lattice, max_work)
        h_user = None if grid is None else to_positive_fraction(grid, "grid")
        comps = self.components
        self.weight = sum(_rounding_weight(c) for c in comps)

        lattices = None
        exact_ok = False
        reason = "a Laplace or Gaussian component has a continuous loss"
        if all(isinstance(c, DiscreteGaussianLoss | GeometricLoss) for c in comps):
            lattices = [
                c.lattice() for c in comps if isinstance(c, DiscreteGaussianLoss | GeometricLoss)
            ]
            step = _gcd_fractions([g for _, g, _ in lattices])
            order = sorted(range(len(lattices)), key=lambda i: lattices[i][2].size * lattices[i][1])
            spans = [float((lattices[i][2].size - 1) * lattices[i][1]) for i in order]
            var = [comps[i].proxy_variance() for i in order]
            length, work = _plan(spans, var, [lattices[i][2].size for i in order], float(step))
            exact_ok = length <= max_lattice and work <= max_work
            reason = (
                f"the common lattice step is {float(step):.3g}, giving about {length:.3g} points"
                f" (max_lattice={max_lattice}) and {work:.3g} multiply-adds"
                f" (max_work={max_work:.3g})"
            )
        if mode == "exact-lattice" and not exact_ok:
            raise AccountingError(f"no exact lattice within budget: {reason}; use the bracket mode")
        if lattices is not None and (mode == "exact-lattice" or (mode == "auto" and exact_ok)):
            self.method = "exact-lattice"
            self.grid = float(step)
            self.rounding_width = 0.0
            parts = []
            for i in order:
                _, g, m = lattices[i]
                n = g / step
                assert n.denominator == 1
                positions = int(n) * (m.offset + np.arange(m.size, dtype=np.int64))
                parts.append(GridLaw(positions, m.values, m.radius, m.dropped))
            c0 = sum((c for c, _, _ in lattices), Fraction(0))
            self._upper = self._lower = HockeyStick(c0, step, _accumulate(parts))
        else:
            self.method = "bracket-grid"
            h = h_user if h_user is not None else self._default_grid(comps, max_lattice, max_work)
            length, work = _grid_cost(comps, float(h))
            check_grid_budget(float(h), length, work, max_lattice, max_work)
            self.grid = float(h)
            self.rounding_width = self.weight * self.grid
            ups, downs = [], []
            for comp in _grid_order(comps, float(h)):
                up, down = comp.rounded(h)
                ups.append(up)
                downs.append(down)
            self._upper = HockeyStick(Fraction(0), h, _accumulate(ups))
            self._lower = HockeyStick(Fraction(0), h, _accumulate(downs))
        self.truncated_mass = max(self._upper.dropped, self._lower.dropped)
        self.lattice_size = int(self._upper.values.size)
        self.relative_error = max(self._upper.radius, self._lower.radius)

    def _default_grid(
        self, comps: Sequence[LossComponent], max_lattice: int, max_work: float
    ) -> Fraction:
        """Coarsest of the target grid (eps bracket <= 1e-6) and the finest feasible one."""

        def feasible(h: float) -> bool:
            length, work = _grid_cost(comps, h)
            return length <= max_lattice and work <= max_work

        return finest_feasible_grid(
            0.9 * EPSILON_WIDTH_TARGET / self.weight,
            feasible,
            f"max_lattice={max_lattice} and max_work={max_work:.3g}",
        )

    def __repr__(self) -> str:
        return (
            f"PrivacyLossComposition(components={len(self.components)}, method={self.method!r},"
            f" grid={self.grid:.3g}, lattice_size={self.lattice_size})"
        )
