"""Second-order certified brackets for incommensurate compositions: mass-preserving grid splits.

The loss of a composition is ``L = sum_F L_F`` over independent classes ``F`` (one per distinct
``sigma^2``), each exact on its own lattice ``L_F = c_F + g_F t``. The classes are mutually
incommensurate, so they are combined on a dyadic grid ``h Z`` (``h = 2^-m``, exact in binary64):

**Split.** An atom at ``l = k h + d`` (``0 <= d < h``) with ``P``-mass ``p`` becomes ``p w_0`` at
``k h`` and ``p w_1`` at ``(k + 1) h`` with ``w_0 + w_1 = 1`` and
``w_0 e^(-k h) + w_1 e^(-(k+1) h) = e^(-l)``, i.e. ``w_1 = (1 - e^(-d)) / (1 - e^(-h))``: the
``P``- and ``Q``-masses are kept (``Y = e^(-L)`` keeps its mean). Split independently per class,
``Y' = prod_F Y'_F`` satisfies ``E[Y' | L] = Y``, and ``|L' - L| <= G h`` (``G`` classes).

**Upper bound.** ``delta(eps) = E_P[phi(Y)]`` with ``phi(y) = (1 - e^eps y)_+`` convex, so by
Jensen ``delta(eps) <= E_P[phi(Y')] = delta'(eps)``, the profile of the split composition, for
every ``eps``.

**Lower bound.** With ``phi'`` a subgradient at ``Y``, ``E[phi'(Y)(Y' - Y)] = 0`` and
``phi(Y') - phi(Y) - phi'(Y)(Y' - Y)`` is 0 unless ``L`` and ``L'`` lie on different sides of
``eps``, where it is at most ``e^eps |Y' - Y| <= (e^(Gh) - 1) e^(eps - L)`` with
``|L - eps| <= G h``. Hence

    delta'(eps) - B(eps) <= delta(eps) <= delta'(eps),
    B(eps) = (e^(Gh) - 1) e^(Gh) P'[|L' - eps| <= 2 G h]   (the window mass of the split measure).

That ``B`` is of order ``(G h)^2``; the one used is sharper: given ``L = eps + s``, the excess is ``E[(e^(-s) R - 1)_+] <= E[(R - 1 - s)_+]``
for ``R = Y'/Y = prod_F R_F`` (and symmetrically for ``s < 0``, with ``s e^(-Gh)``); with
``E R = 1`` and ``V >= Var R``, ``E[(R - 1 - s)_+] <= min(sqrt(V)/2, V / (4 s))``
(``(x - s)_+ <= x^2 / (4s)``). Each ``R_F`` is a two-point, mean-one variable in
``[e^(d - h), e^d]`` (``0 <= d < h``), of range at most ``e^h - 1``, so (Popoviciu)
``Var R_F <= (e^h - 1)^2 / 4`` and ``Var R <= e^(G (e^h - 1)^2 / 4) - 1``. The law of ``L`` is
reached through the split measure by Hoeffding (:class:`SplitLowerBound`): ``B`` is about
``G h^2`` times the loss density at ``eps``, where rounding every class up and down costs ``G h``.

**Floating point.** The atom's loss is evaluated as ``l_hat`` (``|l_hat - l| <= E_F``), and the
split is the exact split of ``l_hat``: ``d = l_hat - k h`` is exact (``h`` dyadic), ``w_1`` and
``w_0 = e^(-d) (1 - e^(-(h - d))) / (1 - e^(-h))`` are each computed to a small *relative* error,
a log-radius on the split masses. The perturbation ``sum_F E_F`` is an error of the loss, carried by
the hockey-stick sum (:class:`~auditlib.accounting._profile.HockeyStick`) like its own float error.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from auditlib.accounting._floats import LIBM_LOG, U_LOG, U, blocked_sum, summation_radius, widen
from auditlib.accounting._lattice import LatticeMeasure
from auditlib.accounting._profile import HockeyStick

SPLIT_RADIUS = 3.0 * LIBM_LOG + 6.0 * U_LOG
"""Log-radius of a computed split weight against the exact one (three libm calls, ``1 - frac``,
a product and a quotient; ``expm1(-y (1 + t))`` moves by at most ``|t|`` relative)."""


def split_to_grid(
    c: Fraction, g: Fraction, measure: LatticeMeasure, shift: int
) -> tuple[LatticeMeasure, float]:
    """Split the atoms ``c + g t`` of ``measure`` onto the grid ``2^-shift Z`` (module docstring).

    Returns the split measure (integer positions ``k`` stand for losses ``k 2^-shift``) and the
    bound ``E`` on ``|l_hat - l|`` of the loss values it split.
    """
    h = math.ldexp(1.0, -shift)
    t = measure.offset + np.arange(measure.size, dtype=np.int64)
    keep = measure.values > 0
    t, v = t[keep], measure.values[keep]
    c_f, g_f = float(c), float(g)
    t_max = max(abs(int(t[0])), abs(int(t[-1])))
    loss_error = 4.0 * U * (abs(c_f) + g_f * t_max) * (1.0 + 1e-9)
    x = np.ldexp(c_f + g_f * t.astype(np.float64), shift)  # exact scaling by 2^shift
    k = np.floor(x)
    frac = x - k  # exact
    d = np.ldexp(frac, -shift)  # exact
    den = np.expm1(-h)
    w1 = np.expm1(-d) / den
    w0 = np.exp(-d) * np.expm1(-np.ldexp(1.0 - frac, -shift)) / den
    k_int = k.astype(np.int64)
    lo = int(k_int[0])
    pos = np.concatenate([k_int - lo, k_int + 1 - lo])
    vals = np.concatenate([v * w0, v * w1])
    out = np.bincount(pos, weights=vals)
    per_bin = int(np.bincount(pos).max())
    radius = measure.radius + SPLIT_RADIUS + U_LOG + summation_radius(per_bin)
    return LatticeMeasure(lo, out, radius, measure.dropped), loss_error


HOEFFDING_MISS = 0.25
"""Probability allowed for the split's displacement to exceed its Hoeffding radius (the window
mass is divided by ``1 - HOEFFDING_MISS``)."""


class SplitLowerBound:
    """``delta'(eps) - B(eps)``: a certified lower bound on ``delta(eps)`` (errs low).

    ``B = E[kappa(|L - eps|)]`` with ``kappa(s) = min(sqrt(V)/2, V e^(Gh) / (4 s))`` for
    ``s <= G h`` and 0 beyond, ``V = e^(G (e^h - 1)^2 / 4) - 1`` bounding ``Var(Y'/Y)`` (module
    docstring). The law of ``L`` is reached through the split measure: given ``L``, the displacement
    ``D = L' - L`` is a sum of ``G`` independent terms of range ``h`` with mean in
    ``[0, G h^2 e^h / 2]`` (``E e^(-D_j) = 1`` and ``e^(-x) <= 1 - x + e^h x^2 / 2`` on
    ``[-h, h]``), so by Hoeffding ``P[|D| > t'] <= q`` for
    ``t' = h sqrt(G ln(2/q) / 2) + G h^2 e^h / 2``, and ``P[|L - eps| < r] <= P'[|L' - eps| < r + t'] / (1 - q)`` for every ``r``.
    Layer by layer (``kappa`` does not increase), ``B <= E'[kappa((|L' - eps| - t')_+)] / (1 - q)``.
    """

    def __init__(self, hs: HockeyStick, moved: int, h: float) -> None:
        self.hs = hs
        self.gh = moved * h
        self.var = math.expm1(moved * math.expm1(h) ** 2 / 4.0) * (1.0 + 1e-9)
        self.cap = 0.5 * math.sqrt(self.var) * (1.0 + 1e-9)
        q = HOEFFDING_MISS
        mean = moved * h * h * math.exp(h) / 2.0
        self.reach = (h * math.sqrt(moved * math.log(2.0 / q) / 2.0) + mean) * (1.0 + 1e-9)
        self.inflate = 1.0 / (1.0 - q) * (1.0 + 1e-12)

    def correction(self, eps: float) -> float:
        """``B`` at the point where :meth:`HockeyStick.lower` evaluates ``eps`` (errs high)."""
        if self.gh == 0.0:
            return 0.0
        hs = self.hs
        slack = 2.0 * hs._arg_error(eps) + 8.0 * U * (abs(eps) + self.gh + self.reach)
        e_eff = eps + hs._arg_error(eps)
        half = self.gh + self.reach + slack
        lo = int(np.searchsorted(hs.loss, e_eff - half, side="left"))
        hi = int(np.searchsorted(hs.loss, e_eff + half, side="right"))
        if hi <= lo:
            return self.cap * hs.dropped * self.inflate
        dist = np.abs(hs.loss[lo:hi] - e_eff) - self.reach - slack
        tail = self.var * math.exp(self.gh) / (4.0 * np.maximum(dist, 1e-300))
        kappa = np.where(dist > 0.0, np.minimum(self.cap, tail), self.cap)
        total, r_sum = blocked_sum(hs.values[lo:hi] * kappa)
        _, up = widen(total, hs.radius + r_sum + 4.0 * U_LOG)
        return (up * (1.0 + 1e-9) + self.cap * hs.dropped) * self.inflate

    def lower(self, eps: float) -> float:
        if math.isinf(eps):
            return 0.0
        return max(0.0, self.hs.lower(eps) - self.correction(eps))


def dyadic_shift(target: float) -> int:
    """Smallest ``m`` with ``2^-m <= target``."""
    return max(0, math.ceil(-math.log2(target)))
