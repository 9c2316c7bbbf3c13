"""Calibration: how much less noise keeps a target eps(delta*) -- certified.

Every variance of a composition is multiplied by a common factor ``c`` (one level: its reduced
``sigma^2 = c sigma0^2``). We look for the ``c`` at which the composition's exact ``eps(delta*)``
equals a target (default: the Bureau's ``rho + 2 sqrt(rho ln 1/delta*)`` of the unscaled
composition), and return a certified interval ``[c_lower, c_upper]``:

* at ``c_lower`` the certified *lower* bound on ``delta(target)`` exceeds ``delta*``: there the true
  ``eps(delta*) > target`` (``delta`` is strictly decreasing where positive);
* at ``c_upper`` the certified *upper* bound on ``delta(target)`` is below ``delta*``: there the true
  ``eps(delta*) < target``.

``eps(delta*)`` is continuous in ``c``, so a solution lies in ``[c_lower, c_upper]`` (intermediate
values). It is decreasing in ``c`` in every case computed here (more noise, less loss), so the
solution is unique in practice; for the discrete Gaussian this is observed, not proven.
The search takes bracketed secant (Illinois) steps on ``log c`` with bisection safeguards; each step
only keeps a point whose side is certified, and it stops when the interval is ``rtol`` narrow or
the accountant's own bracket straddles ``delta*`` (then ``c`` is pinned as tightly as the
accounting allows).

Why the lattice stays exact. Scaling every ``sigma_j^2`` by the same rational ``c`` (a float is
converted exactly, ``Fraction(c)``) scales every ``1/sigma_j^2`` by ``1/c``: their ratios, hence the
integers ``n_j`` of the lattice ``L = rho/c + (g/c) T``, do not change. A composition that is exact
at ``c = 1`` is exact, on a lattice of the same shape, at every ``c``; one that needs the bracket
mode stays in it and is certified through the bracket ends. So no rational rounding of ``c`` is
needed.

``method="paper-bound"`` reproduces Su, Su & Wang (Su, Su, Wang), Appendix A.6 / Section 3.3: it drops
the ``-e^eps Q[...]`` term of ``delta(eps)``, i.e. uses ``delta(eps) <= P[L > eps]`` (a valid but
loose upper bound on ``delta``; :mod:`auditlib.accounting.paper_bound`). The calibrated ``c`` is
then certified for *that* bound.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal, NamedTuple

import numpy as np

from auditlib.accounting._ladder import (
    RUNGS,
    Point,
    ladder_search,
    model_root,
    model_slope,
    rung_settings,
)
from auditlib.accounting._validation import check_delta, parse_components
from auditlib.accounting.bracket import Bracket
from auditlib.accounting.composition import PrivacyLossComposition
from auditlib.accounting.discrete_gaussian_pld import (
    DiscreteGaussianComposition,
    composition,
    planned_method,
    split_work,
)
from auditlib.accounting.losses import (
    DiscreteGaussianLoss,
    GaussianLoss,
    GeometricLoss,
    LaplaceLoss,
)
from auditlib.accounting.paper_bound import tail_probability
from auditlib.accounting.zcdp import bureau_epsilon
from auditlib.exceptions import AccountingError, InvalidParameterError

CalibrationMethod = Literal["exact", "paper-bound"]
CALIBRATION_METHODS: tuple[str, ...] = ("exact", "paper-bound")

LADDER_RTOL = 1e-5
"""Bracket mode: the relative width of the factor interval below which the coarse-to-fine search
climbs to a finer accountant only when that one is cheap (:data:`LADDER_WORK`)."""

LADDER_WORK = 3e8
"""Bracket mode: estimated multiply-adds of a split pass up to which a finer accountant is used to
narrow a factor interval already :data:`LADDER_RTOL` narrow (about 0.2 s on one core)."""


@dataclass(frozen=True)
class Calibration:
    """Result of a calibration: the certified factor interval and what it was calibrated to.

    ``factor`` brackets ``c`` (every ``sigma^2`` times ``c``); ``variance_cut`` is ``1 - c`` (its
    ``lower`` is ``1 - c_upper``). ``target_epsilon`` is the eps matched at ``delta``; ``method`` is
    ``"exact"`` or ``"paper-bound"``; ``accounting`` the accountant's mode at the ends
    (``exact-lattice`` or ``bracket-grid``); ``evaluations`` how many compositions were built.
    """

    factor: Bracket
    target_epsilon: float
    delta: float
    method: str
    accounting: str
    evaluations: int
    components: tuple[tuple[Fraction, int], ...] = field(repr=False)

    @property
    def variance_cut(self) -> Bracket:
        f = self.factor
        return Bracket(
            1.0 - float(f.upper), 1.0 - float(f.lower), f.method, "variance_cut", f.truncated_mass
        )

    def sigma2(self, sigma2: Fraction | float) -> Bracket:
        """The reduced ``c * sigma2`` as a bracket (rounded outward by one float)."""
        s = float(sigma2)
        lo = float(np.nextafter(float(self.factor.lower) * s, -np.inf))
        hi = float(np.nextafter(float(self.factor.upper) * s, np.inf))
        return Bracket(lo, hi, self.factor.method, "sigma2", self.factor.truncated_mass)

    def as_dict(self) -> dict[str, Any]:
        return {
            "factor_lower": float(self.factor.lower),
            "factor_upper": float(self.factor.upper),
            "variance_cut_lower": float(self.variance_cut.lower),
            "variance_cut_upper": float(self.variance_cut.upper),
            "target_epsilon": self.target_epsilon,
            "delta": self.delta,
            "method": self.method,
            "accounting": self.accounting,
            "evaluations": self.evaluations,
        }


class _Goal(NamedTuple):
    """What a search is after: ``eps(delta) = target`` by ``method``, to the relative width
    ``rtol``, in at most ``max_evaluations`` accountants."""

    delta: float
    target: float
    method: str
    rtol: float
    max_evaluations: int


def _scaled(components: Sequence[tuple[Fraction, int]], c: float) -> list[tuple[Fraction, int]]:
    fc = Fraction(c)
    return [(s * fc, m) for s, m in components]


def calibrate_factor(
    components: Sequence[tuple[Fraction | float, int]],
    delta: float,
    target_epsilon: float | None = None,
    *,
    method: CalibrationMethod = "exact",
    rtol: float = 1e-9,
    max_evaluations: int = 80,
    ladder: bool = True,
    **composition_kwargs: Any,
) -> Calibration:
    """Certified common variance factor ``c`` with ``eps(delta) = target_epsilon`` after scaling.

    ``target_epsilon=None`` takes the Bureau's eps of the unscaled composition at ``delta``.
    ``composition_kwargs`` go to :class:`DiscreteGaussianComposition` (``mode``, ``grid``, budgets).
    ``rtol``: the relative width at which the search stops; the accounting may pin ``c`` less
    tightly. ``ladder``: in the bracket mode, decide the steps with coarser certified accountants
    first (:mod:`auditlib.accounting._ladder`; ``method="exact"`` only, and not when ``grid``,
    ``split_grid`` or ``refine`` are given): the interval then narrows below :data:`LADDER_RTOL` only with accountants of at most
    :data:`LADDER_WORK` multiply-adds. See the module docstring for what is certified.
    """
    comps = parse_components(components, composition_kwargs.pop("limit_denominator", None))
    d = float(check_delta(delta))
    if method not in CALIBRATION_METHODS:
        raise InvalidParameterError(
            f"method must be one of {', '.join(CALIBRATION_METHODS)}, got {method!r}"
        )
    rho = float(sum((Fraction(m) / (2 * s) for s, m in comps), Fraction(0)))
    if target_epsilon is None:
        target = float(bureau_epsilon(rho, d))
    else:
        target = _check_target(target_epsilon)
    _check_rtol(rtol)
    settings = dict(composition_kwargs)
    goal = _Goal(d, target, method, rtol, max_evaluations)
    if ladder and method == "exact" and not ({"grid", "split_grid", "refine"} & settings.keys()):
        return _calibrate_ladder(comps, settings, rho, goal)
    return _calibrate(_scaled_composition(comps, settings), comps, goal)


def _scaled_composition(
    comps: tuple[tuple[Fraction, int], ...], settings: dict[str, Any]
) -> Callable[[float], Any]:
    """``c ->`` the accountant (:func:`composition`, keywords ``settings``) of ``comps`` with
    every variance times ``c``."""
    return lambda c: composition(_scaled(comps, c), **settings)


def _calibrate_ladder(
    comps: tuple[tuple[Fraction, int], ...],
    settings: dict[str, Any],
    rho: float,
    goal: _Goal,
) -> Calibration:
    """The coarse-to-fine search (:mod:`auditlib.accounting._ladder`) of a bracket-mode
    composition (``method="exact"``); an exact-lattice one (judged at ``c = 1``) takes the
    single-accountant search."""
    d, target, method, rtol, max_evaluations = goal
    rungs = len(RUNGS) + 1
    evaluations = 0
    modes: set[str] = set()

    def build(c: float, rung: int) -> Any:
        if rung == rungs - 1:
            return composition(_scaled(comps, c), **settings)
        return DiscreteGaussianComposition(
            _scaled(comps, c), **rung_settings(rung, rungs, settings)
        )

    def side(c: float, rung: int) -> Point:
        nonlocal evaluations
        evaluations += 1
        comp = build(c, rung)
        modes.add(comp.method)
        b = comp.delta(target)
        lo, hi = float(b.lower), float(b.upper)
        gl = math.log(lo / d) if lo > 0.0 else -math.inf
        gh = math.log(max(hi, 1e-320) / d)
        return Point(math.log(c), rung, -1 if lo > d else 1 if hi < d else 0, gl, gh)

    plan = {k: settings[k] for k in ("mode", "max_lattice", "max_work") if k in settings}
    if planned_method(comps, **plan) == "exact-lattice":
        return _calibrate(_scaled_composition(comps, settings), comps, goal)

    def affordable(rung: int, c: float) -> bool:
        split = RUNGS[rung]["split_grid"] if rung < rungs - 1 else settings.get("split_grid")
        return split_work(_scaled(comps, c), split, **settings) <= LADDER_WORK

    start = side(1.0, 0)
    a, b = ladder_search(
        side,
        rungs,
        start,
        model_root(rho, target, d, 1.0, start.mid),
        lambda c: model_slope(rho, target, c),
        rtol,
        lambda: evaluations < max_evaluations,
        affordable,
        LADDER_RTOL,
    )
    return _result(comps, a, b, target, d, method, modes, evaluations)


def scale_components(components: Sequence[Any], factor: float) -> list[Any]:
    """Mixed components with every noise *variance* times ``factor``: discrete Gaussian
    ``sigma2 * factor`` (exact for a rational factor), Gaussian ``sigma`` and Laplace ``scale``
    times ``sqrt(factor)``, geometric ``epsilon / sqrt(factor)`` (its scale ``1/eps0`` times
    ``sqrt(factor)``: the variance grows by ``factor`` only in the continuous limit)."""
    root = math.sqrt(factor)
    out: list[Any] = []
    for comp in components:
        if isinstance(comp, DiscreteGaussianLoss):
            out.append(DiscreteGaussianLoss(comp.sigma2 * Fraction(factor), comp.count))
        elif isinstance(comp, GaussianLoss):
            out.append(GaussianLoss(float(comp.sigma) * root, comp.count))
        elif isinstance(comp, LaplaceLoss):
            out.append(LaplaceLoss(float(comp.scale) * root, comp.count))
        elif isinstance(comp, GeometricLoss):
            out.append(GeometricLoss(float(comp.epsilon) / root, comp.count))
        else:
            raise InvalidParameterError(f"Invalid component: {comp!r}; not a loss component")
    return out


def calibrate_mixed(
    components: Sequence[Any],
    delta: float,
    target_epsilon: float,
    *,
    rtol: float = 1e-9,
    max_evaluations: int = 80,
    **composition_kwargs: Any,
) -> Calibration:
    """Certified common variance factor of a mixed composition (:class:`PrivacyLossComposition`
    components, scaled by :func:`scale_components`) at which ``eps(delta) = target_epsilon``.

    Same search and certificate as :func:`calibrate_factor`; there is no Bureau default target (a
    mixed composition has no single rho), so ``target_epsilon`` is required.
    """
    comps = list(components)
    scale_components(comps, 1.0)  # rejects foreign objects early
    d = float(check_delta(delta))
    target = _check_target(target_epsilon)
    _check_rtol(rtol)
    return _calibrate(
        lambda c: PrivacyLossComposition(scale_components(comps, c), **composition_kwargs),
        (),
        _Goal(d, target, "exact", rtol, max_evaluations),
    )


def _check_target(target_epsilon: float) -> float:
    """``target_epsilon`` as a float, or an error unless it is positive and finite."""
    target = float(target_epsilon)
    if not (math.isfinite(target) and target > 0):
        raise InvalidParameterError(
            f"target epsilon must be positive and finite, got {target_epsilon!r}"
        )
    return target


def _check_rtol(rtol: float) -> None:
    if not (isinstance(rtol, float | int) and 0 < rtol < 1):
        raise InvalidParameterError(f"rtol must lie in (0, 1), got {rtol!r}")


def _calibrate(
    build: Callable[[float], Any],
    comps: tuple[tuple[Fraction, int], ...],
    goal: _Goal,
) -> Calibration:
    """The certified search on ``c`` (module docstring); ``build(c)`` is the scaled accountant."""
    d, target, method, rtol, max_evaluations = goal
    evaluations = 0
    modes: set[str] = set()

    def side(c: float) -> tuple[int, float]:
        """-1: certainly eps > target at c (c too small); +1: certainly eps < target; 0: undecided.
        Also log(delta_mid / delta) for the secant step."""
        nonlocal evaluations
        evaluations += 1
        comp = build(c)
        modes.add(comp.method)
        if method == "exact":
            b = comp.delta(target)
        else:
            b = tail_probability(comp, target)
        lo, hi = float(b.lower), float(b.upper)
        g = math.log(max(0.5 * (lo + hi), 1e-320) / d)
        if lo > d:
            return -1, g
        if hi < d:
            return 1, g
        return 0, g

    # a certified bracket [a, b] on c: side(a) = -1, side(b) = +1, expanding geometrically from 1
    s1, g1 = side(1.0)
    a, _, ga = _expand(side, 1.0, s1, g1, -1, target)
    b, _, gb = _expand(side, 1.0, s1, g1, +1, target)
    # invariant: side(a) = -1, side(b) = +1, a < b
    last = 0
    widths = [b - a]
    while b - a > rtol * b and evaluations < max_evaluations:
        la, lb = math.log(a), math.log(b)
        x = math.sqrt(a * b)
        stalled = len(widths) >= 4 and (b - a) > 0.5 * widths[-4]
        if not stalled and math.isfinite(ga) and math.isfinite(gb) and ga != gb:
            cand = math.exp(lb - gb * (lb - la) / (gb - ga))
            if a < cand < b:
                x = cand
        s, gx = side(x)
        if s < 0:
            a, ga = x, gx
            if last == -1:
                gb *= 0.5
            last = -1
        elif s > 0:
            b, gb = x, gx
            if last == 1:
                ga *= 0.5
            last = 1
        else:
            # the accountant cannot tell: shrink towards x from both sides by bisection
            lo_ok = _narrow(side, a, x, -1)
            hi_ok = _narrow(side, x, b, 1)
            a, b = lo_ok, hi_ok
            break
        widths.append(b - a)
    return _result(comps, a, b, target, d, method, modes, evaluations)


def _expand(
    side: Any, c: float, s: int, g: float, want: int, target: float
) -> tuple[float, int, float]:
    """From ``c`` (with side ``s``), step away until a point with side ``want`` is certified:
    downwards for ``want=-1`` (less noise), upwards for ``want=+1``."""
    if s == want:
        return c, s, g
    step = 1e-9 if s == 0 else 1.0
    for _ in range(80):
        x = c * (1.0 + step) if want > 0 else c / (1.0 + step)
        s, g = side(x)
        if s == want:
            return x, s, g
        step *= 2.0
    raise AccountingError(
        f"no variance factor {'above' if want > 0 else 'below'} 1 certifies eps"
        f" {'<' if want > 0 else '>'} {target:g}"
    )


def _narrow(side: Any, a: float, b: float, want: int) -> float:
    """Move the certified end (``a`` if ``want=-1``, else ``b``) towards the undecided point."""
    for _ in range(6):
        mid = 0.5 * (a + b)
        s, _ = side(mid)
        if s == want:
            if want < 0:
                a = mid
            else:
                b = mid
        elif want < 0:
            b = mid
        else:
            a = mid
    return a if want < 0 else b


def _result(
    comps: tuple[tuple[Fraction, int], ...],
    a: float,
    b: float,
    target: float,
    delta: float,
    method: str,
    modes: set[str],
    evaluations: int,
) -> Calibration:
    accounting = "bracket-grid" if "bracket-grid" in modes else "exact-lattice"
    factor = Bracket(a, b, accounting, "factor")
    return Calibration(factor, target, delta, method, accounting, evaluations, comps)


def calibrate_sigma2(
    sigma2: Fraction | float,
    count: int,
    delta: float,
    target_epsilon: float | None = None,
    **kwargs: Any,
) -> Calibration:
    """One level of ``count`` i.i.d. queries: the certified reduced ``sigma2`` is
    ``result.sigma2(sigma2)`` (see :func:`calibrate_factor`)."""
    return calibrate_factor([(sigma2, count)], delta, target_epsilon, **kwargs)
