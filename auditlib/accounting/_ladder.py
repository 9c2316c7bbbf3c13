"""Coarse-to-fine certified search for the calibration factor (bracket-mode compositions).

Every step of the calibration asks one question of the scaled composition: is ``delta(target)``
certainly above or certainly below ``delta*``? Any certified accountant may answer it; a coarser one
(a coarser split and rounding grid) costs a fraction of the default one and answers it for every
``c`` outside a narrow band around the solution. The search therefore climbs a *ladder* of
accountants, coarsest first, and only climbs a rung when the current one cannot decide and the
certified interval is still wider than the tolerance:

* a side is kept only when the accountant that computed it certified it (as in the single-accountant
  search), so the interval ``[a, b]`` is certified whatever rung found its ends;
* the first point is the root of a Gaussian model of the composition (its loss is close to
  ``N(rho/c, 2 rho/c)``), shifted to agree with the coarsest accountant at ``c = 1``; the next are
  Newton steps on ``g(c) = log(delta_mid(target) / delta*)`` over ``log c``, with the slope of the
  last two points of the rung (else the model's), kept inside the certified interval (bisection
  when the steps stop halving it) and expanding geometrically while one end is unknown;
* a rung that cannot decide at ``x``, or whose Newton step from ``x`` stays within a few of its
  bands, has located ``c`` as well as it can: the next rung starts there;
* on the last rung needed, the rung's own bracket ``[delta_lo, delta_hi]`` at its last point tells
  where ``delta_lo`` and ``delta_hi`` cross ``delta*``; two points just outside (a quarter of the
  band's width further, doubled after each miss) are decided by the same rung and pin ``c`` to
  about 1.5 bands.

Only the choice of points and rungs differs from the single-accountant search, never what a kept
end certifies.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from auditlib.exceptions import AccountingError

RUNGS: tuple[dict[str, float], ...] = (
    {"split_grid": 2.0**-9, "grid": 2.0**-6},
    {"split_grid": 2.0**-11, "grid": 2.0**-8},
    {"split_grid": 2.0**-13, "grid": 2.0**-10},
)
"""Settings of the coarse rungs (split grid, rounded grid), coarsest first; the default accountant
is the last rung. Each split rung is 4 times finer than the one before: its bracket on ``delta`` is
about 16 times narrower, at 3-4 times the cost."""

PIN_FACTOR = 1.25
"""The pinning points lie ``PIN_FACTOR - 1`` band widths beyond where the rung's bounds cross
``delta*`` (the pinned interval: about ``2 PIN_FACTOR - 1`` bands)."""


def _phi_upper(x: float) -> float:
    """``P[N(0, 1) > x]``."""
    return 0.5 * math.erfc(x / math.sqrt(2.0))


def gaussian_log_delta(rho: float, c: float, epsilon: float) -> float:
    """``log delta(eps)`` of the Gaussian mechanism of zCDP ``rho / c`` (its loss ``N(m, 2m)``,
    ``m = rho / c``); ``-inf`` where it underflows. A model that places the search's first point,
    never a bound."""
    mu = math.sqrt(2.0 * rho / c)
    value = _phi_upper(epsilon / mu - mu / 2.0)
    value -= math.exp(epsilon) * _phi_upper(epsilon / mu + mu / 2.0)
    return math.log(value) if value > 0.0 else -math.inf


def model_root(rho: float, epsilon: float, delta: float, c0: float, g0: float) -> float | None:
    """The ``c`` at which the Gaussian model, shifted to equal ``g0`` at ``c0``, meets ``delta``."""
    base = gaussian_log_delta(rho, c0, epsilon)
    if not math.isfinite(base) or not math.isfinite(g0):
        return None
    shift = g0 - (base - math.log(delta))
    lo, hi = math.log(c0) - 12.0, math.log(c0) + 12.0

    def f(lc: float) -> float:
        return gaussian_log_delta(rho, math.exp(lc), epsilon) - math.log(delta) + shift

    if not (f(lo) > 0.0 > f(hi)):
        return None
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if f(mid) > 0.0 else (lo, mid)
    return math.exp(0.5 * (lo + hi))


def model_slope(rho: float, epsilon: float, c: float) -> float:
    """``d log delta / d log c`` of the Gaussian model at ``c`` (negative), or ``-1``."""
    h = 1e-4
    up = gaussian_log_delta(rho, c * math.exp(h), epsilon)
    dn = gaussian_log_delta(rho, c * math.exp(-h), epsilon)
    s = (up - dn) / (2 * h)
    return s if math.isfinite(s) and s < 0 else -1.0


@dataclass(frozen=True)
class Point:
    """One evaluation: ``log c``, the rung, the certified side and ``log(delta_lo / delta*)``,
    ``log(delta_hi / delta*)`` (``-inf`` for a zero lower end)."""

    lc: float
    rung: int
    side: int
    gl: float
    gh: float

    @property
    def mid(self) -> float:
        """``log`` of the bracket's midpoint over ``delta*``: the step rule's estimate of ``g``."""
        if math.isfinite(self.gl):
            return 0.5 * (self.gl + self.gh)
        return self.gh - math.log(2.0)

    @property
    def width(self) -> float:
        return self.gh - self.gl


Side = Callable[[float, int], Point]


def ladder_search(
    side: Side,
    rungs: int,
    start: Point,
    guess: float | None,
    slope_model: Callable[[float], float],
    rtol: float,
    budget: Callable[[], bool],
    affordable: Callable[[int, float], bool],
    coarse_rtol: float,
) -> tuple[float, float]:
    """Certified ``[a, b]`` with ``side(a) = -1`` and ``side(b) = +1`` (module docstring).

    ``side(c, rung)`` evaluates the rung's accountant at ``c``; rung ``rungs - 1`` is the default
    accountant. ``start`` is a first evaluation (any rung); ``guess`` is a first point (or ``None``);
    ``slope_model(c)`` a model of ``d log delta / d log c`` (negative); ``budget()`` is false once no
    evaluation is left. The search stops at ``rtol``, or at ``coarse_rtol`` when the next rung is
    not ``affordable(rung, c)``.
    """
    cheap: dict[int, bool] = {}

    def climbable(r: int, lc: float) -> bool:
        if r + 1 not in cheap:
            cheap[r + 1] = affordable(r + 1, math.exp(lc))
        return cheap[r + 1]

    points = [start]
    a = b = None  # certified log c ends
    rung = 0
    margin = PIN_FACTOR - 1.0
    pinning = False
    expand = 0.0
    widths: list[float] = []  # b - a after each evaluation with both ends known

    def record(p: Point) -> None:
        nonlocal a, b
        if p is not start:
            points.append(p)
        if p.side < 0 and (a is None or p.lc > a):
            a = p.lc
        elif p.side > 0 and (b is None or p.lc < b):
            b = p.lc

    record(start)
    x = None if guess is None else math.log(guess)
    while budget():
        if a is not None and b is not None and math.exp(b) - math.exp(a) <= rtol * math.exp(b):
            break
        pinning = False
        if x is None:
            same = [p for p in points if p.rung == rung]
            slope = _slope(same, slope_model)
            p = same[-1] if same else points[-1]
            width = p.width / slope
            root = p.lc + p.mid / slope
            reach = rtol if rung == rungs - 1 or climbable(rung, p.lc) else max(rtol, coarse_rtol)
            if same and rung < rungs - 1 and 1.5 * width > reach:
                located = abs(root - p.lc) <= 4.0 * width if math.isfinite(width) else False
                if located or p.side == 0:
                    rung += 1  # this rung has located c as well as it can
                    margin = PIN_FACTOR - 1.0
                    continue
                x = root
            elif same:
                # pin: points just outside the rung's band, found from its bracket at p
                pinning = True
                pad = margin * width + 0.05 * abs(root - p.lc)
                if not math.isfinite(pad):  # a zero lower end: step from the estimated root
                    pad = abs(root - p.lc) + 1e-6
                lo = min(p.lc + p.gl / slope, root) - pad if math.isfinite(p.gl) else root - pad
                hi = p.lc + p.gh / slope + pad
                if a is None or lo > a + 0.5 * width:
                    x = lo
                elif b is None or hi < b - 0.5 * width:
                    x = hi
                else:  # both ends are already as close as the rung allows
                    assert a is not None and b is not None
                    narrow = math.exp(b) - math.exp(a) <= coarse_rtol * math.exp(b)
                    if rung == rungs - 1 or (narrow and not climbable(rung, p.lc)):
                        break
                    rung += 1
                    continue
            else:
                x = root
            if (a is None) != (b is None):  # one end unknown: expand geometrically towards it
                ref = b if a is None else a
                assert ref is not None
                direction = -1.0 if a is None else 1.0
                dist = (x - ref) * direction
                if expand > 0.0 and points[-1].lc == ref:  # the last step only moved that end
                    dist = max(dist, 2.0 * expand)
                expand = min(max(dist, 1e-6), 8.0)
                x = ref + direction * expand
            stalled = len(widths) >= 4 and widths[-1] > 0.5 * widths[-4]
            x = _inside(x, a, b, stalled and not pinning)
        try:
            q = side(math.exp(x), rung)
        except AccountingError:
            if rung == rungs - 1:
                raise
            rung += 1  # a coarse rung that does not fit the budgets: skip it
            x = None
            continue
        before = (a, b)
        record(q)
        if pinning and (a, b) == before:  # it fell inside the band: place the next one further out
            margin *= 2.0
        if a is not None and b is not None:
            widths.append(math.exp(b) - math.exp(a))
        x = None
    if a is None or b is None:
        raise AccountingError("the calibration found no certified factor on one side")
    return math.exp(a), math.exp(b)


def _slope(same: Sequence[Point], model: Callable[[float], float]) -> float:
    """``-d g / d log c`` (positive): the secant through the last two points of one rung when it
    is positive, else the model's."""
    s_model = -model(math.exp(same[-1].lc)) if same else -model(1.0)
    if len(same) >= 2:
        p, q = same[-2], same[-1]
        if p.lc != q.lc and math.isfinite(p.mid) and math.isfinite(q.mid):
            s = -(q.mid - p.mid) / (q.lc - p.lc)
            if 0.0 < s < math.inf:
                return s
    return s_model


def _inside(x: float, a: float | None, b: float | None, bisect: bool) -> float:
    """``x`` moved strictly inside the certified ends (their midpoint when it is outside, or when
    ``bisect``: the steps stopped halving the interval); with one end unknown, at least ``1e-6``
    away from the known one."""
    if a is not None and b is not None:
        if not (a < x < b) or bisect:
            return 0.5 * (a + b)
        return x
    if a is not None and x <= a:
        return a + max(a - x, 1e-6)
    if b is not None and x >= b:
        return b - max(x - b, 1e-6)
    return x


def rung_settings(rung: int, rungs: int, base: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments of the accountant on ``rung`` (the last rung: ``base`` unchanged)."""
    if rung >= rungs - 1:
        return dict(base)
    return {**base, **RUNGS[rung]}
