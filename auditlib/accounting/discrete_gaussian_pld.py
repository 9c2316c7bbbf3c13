"""Certified privacy profile of a composition of discrete Gaussian count queries.

A query ``N_Z(0, sigma^2)`` with sensitivity 1 under add/remove neighbours has privacy loss
``L = 1/(2 sigma^2) + Z / sigma^2`` with ``Z ~ N_Z(0, sigma^2)`` under ``P`` (the loss of the
reverse pair has the same law, by symmetry). Components ``(sigma_j^2, m_j)`` compose to

    L = sum_j (m_j / 2 + S_j) / sigma_j^2,    S_j = sum of m_j i.i.d. N_Z(0, sigma_j^2),

with ``S_j`` an exact integer-valued sum. The bounded (replace-one) relation of the DAS is the same
computation with two components per query (a record change moves two cells); callers pass those.

Two modes, both certified (see ``docs/accounting.md``):

``exact-lattice``
    All ``1 / sigma_j^2`` are integer multiples ``n_j`` of a common step ``g`` and the lattice fits
    ``max_lattice``: ``L = rho + g T`` with ``T = sum_j n_j S_j`` exactly, built by direct
    convolution. Only tail truncation (``< 1e-30`` per step) and rounding widen the brackets.
``bracket-grid``
    Otherwise each ``S_j``'s loss is rounded up (and, separately, down) to a grid ``h``. As the
    integrand ``(1 - e^(eps - L))_+`` is non-decreasing in ``L``, the rounded-up composition bounds
    ``delta`` from above and the rounded-down one from below; the eps bracket is at most
    ``(number of distinct sigma^2) * h`` wider than in the exact mode.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

import numpy as np

from auditlib.accounting._discrete_gaussian import check_sum_cost, discrete_gaussian_measure
from auditlib.accounting._lattice import LatticeMeasure, add_sparse, aggregate, power, trim
from auditlib.accounting._memo import memoized
from auditlib.accounting._profile import HockeyStick
from auditlib.accounting._queries import ProfileQueries, check_grid_budget, finest_feasible_grid
from auditlib.accounting._split import SplitLowerBound, dyadic_shift, split_to_grid
from auditlib.accounting._validation import (
    check_budgets,
    parse_components,
    to_positive_fraction,
)
from auditlib.exceptions import AccountingError, InvalidParameterError

TAIL_MASS = 1e-30
"""Two-sided probability mass each truncation may drop (each discrete Gaussian, each convolution)."""

EPSILON_WIDTH_TARGET = 1e-6
"""The default bracket-mode grid aims at an eps bracket no wider than this (when feasible)."""

_SUBGAUSS_HALF_WIDTH = 12.5
"""Half-width, in standard deviations of the loss's sub-Gaussian proxy, beyond which a trimmed
lattice holds no mass (``sqrt(2 ln(2 / 1e-30)) = 11.8``, rounded up): used for size estimates."""

ROUNDED_WIDTH_WITH_SPLIT = 1e-4
"""With ``refine``, the default rounded grid aims at this eps width only (the split sets the
bracket; the rounded lattices serve trade-off curves and tail probabilities)."""

ROUNDED_WORK_SHARE = 0.25
"""With ``refine``, the default rounded grid gets this share of ``max_work``; the split gets the
rest (its bracket shrinks with the square of the step, the rounded one only linearly)."""

SPLIT_WIDTH_GOAL = 1e-7
"""The split grid is the coarsest dyadic step whose predicted eps bracket ``8 G^1.5 h^2`` is below
this (``G`` distinct variances), or the finest the budgets allow."""

Mode = Literal["auto", "exact-lattice", "bracket-grid"]


@dataclass(frozen=True)
class _Group:
    """``count`` i.i.d. ``N_Z(0, sigma2)`` summed: an exact integer sum ``S`` (certified measure)."""

    sigma2: Fraction
    count: int
    measure: LatticeMeasure

    @property
    def inv(self) -> Fraction:
        return 1 / self.sigma2

    @property
    def loss_span(self) -> float:
        """Width of the loss values ``(count/2 + S) / sigma2`` over the kept support."""
        return (self.measure.size - 1) / float(self.sigma2)


def group_measure(sigma2: Fraction, count: int) -> LatticeMeasure:
    """Certified measure of ``count`` i.i.d. ``N_Z(0, sigma2)`` summed, built once per process
    for each exact ``(sigma2, count)`` (:mod:`auditlib.accounting._memo`); its arrays are
    read-only."""

    def base() -> LatticeMeasure:
        return _frozen(discrete_gaussian_measure(sigma2, TAIL_MASS))

    def build() -> LatticeMeasure:
        check_sum_cost(sigma2, count)
        return _frozen(power(memoized("measure", (sigma2, 1, TAIL_MASS), base), count, TAIL_MASS))

    return memoized("measure", (sigma2, count, TAIL_MASS), build)


def _frozen(m: LatticeMeasure) -> LatticeMeasure:
    m.values.flags.writeable = False
    return m


def composition(
    components: Sequence[tuple[Fraction | float, int]], **kwargs: Any
) -> DiscreteGaussianComposition:
    """``DiscreteGaussianComposition(components, **kwargs)``, reused within the process when the
    same exact components (in the same order) and settings were composed before."""
    comps = parse_components(components, kwargs.get("limit_denominator"))
    key = (comps, tuple(sorted(kwargs.items())))
    return memoized("composition", key, lambda: DiscreteGaussianComposition(comps, **kwargs))


def _gcd_fractions(values: Sequence[Fraction]) -> Fraction:
    num, den = 0, 1
    for v in values:
        den = math.lcm(den, v.denominator)
    for v in values:
        num = math.gcd(num, (v * den).numerator)
    return Fraction(num, den)


def _estimate(groups: Sequence[_Group], step: float, nnz: Sequence[int]) -> tuple[float, float]:
    """Estimated final lattice length and multiply-add count for accumulating ``groups`` (in order)
    on a lattice of ``step`` loss units; lengths use the sub-Gaussian bound on the trimmed width."""
    variance = 0.0
    span_sum = 0.0
    length = 1.0
    work = 0.0
    for k, (group, n) in enumerate(zip(groups, nnz, strict=True), start=1):
        work += length * n
        variance += group.count / float(group.sigma2)
        span_sum += group.loss_span
        width = min(span_sum, 2 * _SUBGAUSS_HALF_WIDTH * math.sqrt(variance))
        length = width / step + k + 2
    return length, work


def _groups(components: Sequence[tuple[Fraction, int]]) -> list[_Group]:
    """One group per distinct variance (counts added), in accumulation order (by loss span)."""
    counts: dict[Fraction, int] = {}
    for sigma2, count in components:
        counts[sigma2] = counts.get(sigma2, 0) + count
    groups = [_Group(s2, m, group_measure(s2, m)) for s2, m in sorted(counts.items())]
    groups.sort(key=lambda g: (g.loss_span, g.sigma2))
    return groups


def _exact_plan(groups: Sequence[_Group]) -> tuple[Fraction, float, float]:
    """The exact lattice's step and its estimated length and multiply-adds."""
    step = _gcd_fractions([g.inv for g in groups])
    length, work = _estimate(groups, float(step), [g.measure.size for g in groups])
    return step, length, work


def _default_split_shift(groups: Sequence[_Group], max_lattice: int, max_work: float) -> int:
    """``m`` of the default split grid ``2^-m``: the coarsest whose predicted bracket
    ``8 G^1.5 h^2`` meets :data:`SPLIT_WIDTH_GOAL`, coarsened until the budgets allow it."""
    shift = dyadic_shift(math.sqrt(SPLIT_WIDTH_GOAL / (8.0 * len(groups) ** 1.5)))
    while shift > 0:
        length, work = _estimate_grid(groups, math.ldexp(1.0, -shift))
        if length <= max_lattice and work <= max_work:  # one split pass ~ both rounded ones
            break
        shift -= 1
    return shift


def split_work(
    components: Sequence[tuple[Fraction | float, int]],
    split_grid: float | None = None,
    *,
    max_lattice: int = 5_000_000,
    max_work: float = 5e9,
    **_ignored: Any,
) -> float:
    """Estimated multiply-adds of a bracket-mode composition's split pass on ``split_grid``
    (``None``: the default split grid those budgets give), without composing."""
    max_lattice, max_work = check_budgets(max_lattice, max_work)
    groups = _groups(parse_components(components, None))
    if split_grid is None:
        h = math.ldexp(1.0, -_default_split_shift(groups, max_lattice, max_work))
    else:
        h = math.ldexp(1.0, -dyadic_shift(split_grid))
    return 0.5 * _estimate_grid(groups, h)[1]


def planned_method(
    components: Sequence[tuple[Fraction | float, int]],
    *,
    mode: Mode = "auto",
    max_lattice: int = 5_000_000,
    max_work: float = 5e9,
    limit_denominator: int | None = None,
) -> str:
    """The ``method`` a :class:`DiscreteGaussianComposition` with these settings would take, found
    without composing (only the per-variance measures are built, and kept for the composition)."""
    if mode != "auto":
        return str(mode)
    max_lattice, max_work = check_budgets(max_lattice, max_work)
    _, length, work = _exact_plan(_groups(parse_components(components, limit_denominator)))
    return "exact-lattice" if length <= max_lattice and work <= max_work else "bracket-grid"


def _estimate_grid(groups: Sequence[_Group], h: float) -> tuple[float, float]:
    """As :func:`_estimate` on the grid ``h``; the work counts both (rounded up and down) passes."""
    nnz = [min(g.measure.size, int(g.loss_span / h) + 2) for g in groups]
    length, work = _estimate(groups, h, nnz)
    return length, 2.0 * work


def _add_rounded(acc: LatticeMeasure, m: LatticeMeasure, index: list[int]) -> LatticeMeasure:
    """Convolve ``acc`` with ``m`` pushed to the grid points ``index`` (one per point of ``m``)."""
    pos, vals, r_add = aggregate(index, m)
    return trim(add_sparse(acc, pos, vals, m.radius + r_add, m.dropped), TAIL_MASS)


class DiscreteGaussianComposition(ProfileQueries):
    """Certified ``delta(eps)`` and ``eps(delta)`` of composed discrete Gaussian count queries.

    Parameters
    ----------
    components
        ``(sigma2, count)`` pairs: ``count`` queries with noise ``N_Z(0, sigma2)``, sensitivity 1.
        ``sigma2`` may be a ``Fraction``, ``int``, ``Decimal`` (exact) or float (converted exactly,
        ``Fraction(x)``, unless ``limit_denominator`` is given). Order does not matter.
    grid
        Bracket-mode grid step in loss units. ``None``: the coarsest of ``1e-6 / (number of distinct
        sigma2)`` and the finest grid within ``max_lattice`` and ``max_work``.
    max_lattice
        Largest lattice (number of points) the direct convolution may build; at most
        :data:`~auditlib.accounting._validation.MAX_LATTICE` (20 million, about 3 GB).
    mode
        ``"auto"`` (exact lattice when commensurate within the budgets, else bracket mode),
        ``"exact-lattice"`` (raise :class:`AccountingError` if impossible) or ``"bracket-grid"``.
    limit_denominator
        If given, float ``sigma2`` are replaced by ``Fraction(x).limit_denominator(...)``.
    max_work
        Largest number of multiply-adds the direct convolution may spend (0.5-2 s per ``1e9`` on one
        core); the bracket mode counts both of its passes. At most
        :data:`~auditlib.accounting._validation.MAX_WORK` (1e12).
    refine
        Bracket mode only: also build the second-order split composition (every variance class
        split onto a dyadic grid by mass-preserving splits; see :mod:`auditlib.accounting._split`)
        and answer ``delta``/``epsilon`` from the tighter of the two certified brackets. The
        rounded lattices still serve trade-off curves and tails.
    split_grid
        Step of the split grid (rounded down to a power of 2): the eps bracket shrinks as its
        square. ``None``: the coarsest step predicted to give a ``1e-7`` bracket, coarsened to fit
        ``max_lattice`` and ``max_work``; a given step that does not fit raises
        :class:`AccountingError`.

    Attributes
    ----------
    rho : float
        zCDP parameter ``sum count / (2 sigma2)`` (``rho_exact`` is the exact ``Fraction``).
    method : str
        ``"exact-lattice"`` or ``"bracket-grid"``.
    grid : float
        The lattice step in loss units (``g`` or ``h``).
    truncated_mass : float
        Upper bound on the probability mass the lattice dropped (inside every upper bound).
    split_classes : int
        Bracket mode with ``refine``: number of variance classes split onto the grid (else 0).
    split_grid : float
        Their dyadic grid step (0.0 when not refined).
    """

    def __init__(
        self,
        components: Sequence[tuple[Fraction | float, int]],
        *,
        grid: float | None = None,
        max_lattice: int = 5_000_000,
        mode: Mode = "auto",
        limit_denominator: int | None = None,
        max_work: float = 5e9,
        refine: bool = True,
        split_grid: float | None = None,
    ) -> None:
        self.components = parse_components(components, limit_denominator)
        if mode not in ("auto", "exact-lattice", "bracket-grid"):
            raise InvalidParameterError(
                f"mode must be 'auto', 'exact-lattice' or 'bracket-grid', got {mode!r}"
            )
        max_lattice, max_work = check_budgets(max_lattice, max_work)
        h_user = None if grid is None else to_positive_fraction(grid, "grid")

        groups = _groups(self.components)
        self.rho_exact: Fraction = sum(
            (Fraction(g.count) / (2 * g.sigma2) for g in groups), Fraction(0)
        )
        self.rho = float(self.rho_exact)
        step, exact_len, exact_work = _exact_plan(groups)
        exact_ok = exact_len <= max_lattice and exact_work <= max_work
        if mode == "exact-lattice" and not exact_ok:
            raise AccountingError(
                f"no exact lattice within budget: the common step of 1/sigma2 is {float(step):.3g},"
                f" giving about {exact_len:.3g} lattice points (max_lattice={max_lattice}) and"
                f" {exact_work:.3g} multiply-adds (max_work={max_work:.3g}); use the bracket mode"
            )
        if mode == "exact-lattice" or (mode == "auto" and exact_ok):
            self.method = "exact-lattice"
            self.grid = float(step)
            acc = self._accumulate(groups, step)
            self._upper = self._lower = HockeyStick(self.rho_exact, step, acc)
        else:
            self.method = "bracket-grid"
            share = ROUNDED_WORK_SHARE if refine else 1.0
            h = (
                h_user
                if h_user is not None
                else self._default_grid(
                    groups,
                    max_lattice,
                    share * max_work,
                    ROUNDED_WIDTH_WITH_SPLIT if refine else EPSILON_WIDTH_TARGET,
                )
            )
            length, work = _estimate_grid(groups, float(h))
            check_grid_budget(float(h), length, work, max_lattice, max_work)
            self.grid = float(h)
            up, down = self._accumulate_rounded(groups, h)
            self._upper = HockeyStick(Fraction(0), h, up)
            self._lower = HockeyStick(Fraction(0), h, down)
        self.split_classes = 0
        self.split_grid = 0.0
        self._split_upper: HockeyStick | None = None
        self._split_lower: SplitLowerBound | None = None
        if self.method == "bracket-grid" and refine:
            user = (
                None
                if split_grid is None
                else float(to_positive_fraction(split_grid, "split_grid"))
            )
            self._build_split(groups, max_lattice, max_work, user)
        self.truncated_mass = self._upper.dropped
        if self._split_upper is not None:
            self.truncated_mass = max(self.truncated_mass, self._split_upper.dropped)
        self.lattice_size = int(self._upper.values.size)
        self.relative_error = max(self._upper.radius, self._lower.radius)

    # -- queries: the tighter of the rounded and the split brackets -------------------------------

    def _delta_upper(self, eps: float) -> float:
        upper = float(self._upper.upper(eps))
        if self._split_upper is not None:
            upper = min(upper, float(self._split_upper.upper(eps)))
        return upper

    def _delta_lower(self, eps: float) -> float:
        lower = float(self._lower.lower(eps))
        if self._split_lower is not None:
            lower = max(lower, self._split_lower.lower(eps))
        return lower

    # -- construction ---------------------------------------------------------------------------

    def _build_split(
        self, groups: Sequence[_Group], max_lattice: int, max_work: float, user: float | None
    ) -> None:
        """Every variance class split onto a dyadic grid: the user's, or the coarsest whose
        predicted bracket ``8 G^1.5 h^2`` meets :data:`SPLIT_WIDTH_GOAL`, coarsened until the
        budgets allow it."""
        if user is not None:
            shift = dyadic_shift(user)
            length, work = _estimate_grid(groups, math.ldexp(1.0, -shift))
            check_grid_budget(math.ldexp(1.0, -shift), length, work, max_lattice, max_work)
        else:
            shift = _default_split_shift(groups, max_lattice, max_work)
        split = []
        loss_error = 0.0
        moved = 0
        for g in groups:
            m, err = split_to_grid(Fraction(g.count, 2) / g.sigma2, g.inv, g.measure, shift)
            split.append(m)
            loss_error += err
            moved += 1
        acc = LatticeMeasure(0, np.ones(1), 0.0, 0.0)
        for m in split:  # groups come sorted by loss span, as in the rounded passes
            nz = np.flatnonzero(m.values)
            acc = trim(add_sparse(acc, m.offset + nz, m.values[nz], m.radius, m.dropped), TAIL_MASS)
        h = math.ldexp(1.0, -shift)
        hs = HockeyStick(Fraction(0), Fraction(h), acc, extra_loss_error=loss_error)
        self._split_upper = hs
        self._split_lower = SplitLowerBound(hs, moved, h)
        self.split_classes = moved
        self.split_grid = h

    @staticmethod
    def _accumulate(groups: Sequence[_Group], step: Fraction) -> LatticeMeasure:
        """Exact composition: ``T = sum_j n_j S_j`` with ``n_j = (1 / sigma_j^2) / step``."""
        acc = LatticeMeasure(0, np.ones(1), 0.0, 0.0)
        for group in groups:
            ratio = group.inv / step
            assert ratio.denominator == 1
            n = int(ratio)
            m = group.measure
            positions = n * (m.offset + np.arange(m.size, dtype=np.int64))
            acc = trim(add_sparse(acc, positions, m.values, m.radius, m.dropped), TAIL_MASS)
        return acc

    @staticmethod
    def _accumulate_rounded(
        groups: Sequence[_Group], h: Fraction
    ) -> tuple[LatticeMeasure, LatticeMeasure]:
        """Compositions with every group's loss rounded up / down to multiples of ``h`` (exact
        integer arithmetic for the rounding)."""
        up = down = LatticeMeasure(0, np.ones(1), 0.0, 0.0)
        for group in groups:
            a = Fraction(1, 2) / (group.sigma2 * h)  # loss / h = (count + 2 s) * a
            m = group.measure
            nums = [(group.count + 2 * s) * a.numerator for s in range(m.offset, m.offset + m.size)]
            den = a.denominator
            up = _add_rounded(up, m, [-((-x) // den) for x in nums])  # ceil: loss rounded up
            down = _add_rounded(down, m, [x // den for x in nums])  # floor: loss rounded down
        return up, down

    @staticmethod
    def _default_grid(
        groups: Sequence[_Group], max_lattice: int, max_work: float, width: float
    ) -> Fraction:
        """Coarsest of the target grid (eps bracket <= ``width``) and the finest feasible one."""

        def feasible(h: float) -> bool:
            length, work = _estimate_grid(groups, h)
            return length <= max_lattice and work <= max_work

        return finest_feasible_grid(
            0.9 * width / len(groups),
            feasible,
            f"max_lattice={max_lattice} and max_work={max_work:.3g} for {len(groups)} distinct"
            " variances",
        )

    def __repr__(self) -> str:
        return (
            f"DiscreteGaussianComposition(rho={self.rho:.6g}, components={len(self.components)},"
            f" method={self.method!r}, grid={self.grid:.3g}, lattice_size={self.lattice_size})"
        )
