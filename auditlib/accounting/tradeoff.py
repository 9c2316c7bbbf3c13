"""f-DP trade-off curves of discrete-Gaussian compositions, and the curve rho-zCDP implies.

The trade-off function ``f = T(P, Q)`` gives the smallest type II error ``beta`` of any test of ``P``
against ``Q`` at type I error ``alpha`` (Dong, Roth & Su 2022). By the Neyman-Pearson lemma the
optimal tests reject on ``{L >= l}`` for the privacy loss ``L``, randomizing on the boundary atom:
the knots of ``f`` are ``(alpha_k, beta_k) = (Q[L > l_k], P[L <= l_k])`` over the loss atoms
``l_k`` and ``f`` is linear between them (slope ``-e^(l_k)`` on the segment of atom ``l_k``). For the
discrete Gaussian pair ``P = N_Z(0, s)``, ``Q = N_Z(1, s)`` (and compositions of such), ``x -> 1 - x``
swaps ``P`` and ``Q``, so ``T(P, Q) = T(Q, P)``: the curve is symmetric (it equals its inverse).

Certification. The segment of atom ``l`` lies on the supporting line

    beta >= 1 - delta(l) - e^l alpha,        delta(l) = E_P[(1 - e^(l - L))_+],

which holds for *every* real ``l`` and every ``alpha`` (it is the duality between f-DP and the
privacy profile), and ``f`` is the maximum of these lines over the atoms. Hence:

* ``lower``: the maximum over the lines with ``delta`` replaced by a certified *upper* bound -- the
  kept lattice measure plus its dropped mass, rounding radii added; in the bracket mode the lattice
  whose losses were rounded *up* (``delta_up >= delta`` for every real ``eps``). It errs low: a valid
  lower bound on ``beta``, i.e. a guarantee no test can beat.
* ``upper``: the maximum of the lines with a certified *lower* bound on ``delta`` (the rounded-down
  lattice in the bracket mode), then capped at ``1 - alpha``. Between consecutive atoms of that
  lattice the line value is monotone in ``l``, so the maximum over its atoms is the supremum over all
  real ``l``; the cap is valid for every trade-off function. It errs high.

In the exact-lattice mode both ends come from the same measure and differ only by the truncated mass
and rounding (about ``1e-11`` absolute here).

:func:`zcdp_tradeoff` is the curve the Bureau's accounting implies: rho-zCDP converted to the family
``(eps, delta(eps))`` with ``delta(eps) = exp(-(eps - rho)^2 / (4 rho))`` (:func:`bureau_delta`) and
that family converted to f-DP. :func:`gdp_mu_estimate` fits a Gaussian-DP curve to an exact curve:
an estimate for plots and summaries, not a bound.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import minimize_scalar
from scipy.special import ndtr, ndtri

from auditlib.accounting._floats import LIBM_LOG, U_LOG, U, summation_radius
from auditlib.accounting._profile import HockeyStick
from auditlib.accounting._queries import ProfileQueries
from auditlib.accounting._validation import check_rho
from auditlib.accounting.bracket import Bracket
from auditlib.accounting.zcdp import bureau_delta
from auditlib.exceptions import InvalidParameterError

MAX_TRADEOFF_POINTS = 100_000
"""Most type I errors ``alpha`` one call of :func:`tradeoff` or :func:`zcdp_tradeoff` evaluates
(and the largest evenly spaced grid, :func:`check_tradeoff_points`). A point costs 0.2-0.7 ms in
:func:`tradeoff` (the shipped allocations) and 0.3 ms in :func:`zcdp_tradeoff` (a grid search and a
Brent polish per point), so the bound is about two minutes of one core and well under 100 MB; an
alpha resolution of 1e-5 is finer than any use of a curve needs. Larger requests are refused
before any array is built."""

_CHUNK = 4_000_000
"""Largest (alpha x atoms) block evaluated at once."""

_BLOCK = 512
"""Lines per block when pruning the maximum over lines (see :func:`_max_lines`)."""

_LOSS_CAP = 700.0
"""Lines of atoms with a larger loss are left out (``e^l`` would overflow). Such a line is negative
for every ``alpha > e^-700`` and at most 1 at ``alpha = 0``, so the maximum over the others still
bounds ``f`` from above once ``f(alpha) <= 1 - alpha`` is applied at ``alpha <= 1e-290``; a maximum
over fewer lines remains a lower bound."""


def check_tradeoff_points(points: object) -> int:
    """The size of an evenly spaced ``alpha`` grid: an integer in ``2..MAX_TRADEOFF_POINTS``.

    Call it before building the grid (``numpy.linspace(0, 1, points)``): a huge ``points`` is
    refused without allocating anything.
    """
    if isinstance(points, bool) or not isinstance(points, int | np.integer) or points < 2:
        raise InvalidParameterError(f"Invalid points: {points!r}; an alpha grid needs >= 2 points")
    if points > MAX_TRADEOFF_POINTS:
        raise InvalidParameterError(
            f"Invalid points: {points!r}; the largest allowed is {MAX_TRADEOFF_POINTS} "
            "(MAX_TRADEOFF_POINTS: each point costs up to about 1 ms)"
        )
    return int(points)


def _check_size(alpha: ArrayLike) -> None:
    """Refuse more than MAX_TRADEOFF_POINTS values before any work (``np.size`` copies nothing
    when ``alpha`` is already an array)."""
    size = int(np.size(alpha))
    if size > MAX_TRADEOFF_POINTS:
        raise InvalidParameterError(
            f"Invalid alpha: {size} values; a trade-off curve is evaluated at up to "
            f"{MAX_TRADEOFF_POINTS} points per call (MAX_TRADEOFF_POINTS: each costs up to about "
            "1 ms); pass fewer, or split them over several calls"
        )


def check_alpha(alpha: ArrayLike) -> np.ndarray:
    """Float array of type I errors in ``[0, 1]``."""
    a = np.asarray(alpha, dtype=np.float64)
    bad = ~((a >= 0) & (a <= 1))
    if np.any(bad):
        raise InvalidParameterError(
            f"alpha must lie in [0, 1] (and not NaN), got {float(a[bad].flat[0])!r}"
        )
    return a


def _lines(hs: HockeyStick) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Supporting lines ``1 - delta(l_k) - e^(l_k) alpha`` at the atoms ``l_k`` of ``hs``.

    Returns ``(l_k, e^(l_k), delta_hat_k, err)``: ``delta_hat_k`` is the kept measure's
    ``sum_{t > k} mu_t - e^(l_k) sum_{t > k} mu_t e^(-l_t)``, and ``err`` bounds, absolutely, its
    distance to ``sum_t mu_t (1 - e^(l_k - L_t))_+`` at the float point ``l_k`` (rounding of the
    measure, the exponentials and the two cumulative sums, the float error of the losses, and the
    boundary atom whose loss may differ from ``l_k`` by that error). The dropped mass is not in it.
    """
    keep = hs.loss <= _LOSS_CAP
    loss = hs.loss[keep]
    mu = hs.values[keep]
    with np.errstate(divide="ignore"):
        log_mu = np.log(mu)
    q = np.where(mu > 0, np.exp(log_mu - loss), 0.0)  # mu e^(-L): Q-mass of the kept atoms
    # tails strictly above each atom, sum_{t > k} (atoms beyond the cap included in the first)
    mu_far, loss_far = hs.values[~keep], hs.loss[~keep]
    beyond = float(mu_far.sum())
    pos = mu_far > 0
    q_beyond = float(np.exp(np.log(mu_far[pos]) - loss_far[pos]).sum())
    sp = np.concatenate([np.cumsum(mu[::-1])[::-1][1:], [0.0]]) + beyond
    sq = np.concatenate([np.cumsum(q[::-1])[::-1][1:], [0.0]]) + q_beyond
    e = np.exp(loss)
    delta_hat = np.maximum(sp - e * sq, 0.0)
    n = int(hs.loss.size)
    r_sum = summation_radius(n + 1)
    e_x = hs.loss_error + 4.0 * U * (2.0 * hs.loss_abs_max)  # error of l_k - L_t
    r_p = hs.radius + r_sum
    r_q = hs.radius + 2.0 * LIBM_LOG + 4.0 * U_LOG + r_sum + e_x
    # both sums are <= 1 (sub-probabilities; e^(l_k) sq_k <= sp_k): absolute errors <= radii;
    # the boundary atom contributes at most its mass times e_x
    err = 2.0 * (r_p + 2.0 * r_q + e_x) + 1e-290
    return loss, e, delta_hat, err


def _max_lines(
    alpha: np.ndarray,
    e: np.ndarray,
    delta_hat: np.ndarray,
    shift: float,
    sign: float,
) -> np.ndarray:
    """``max_k (1 - delta_hat_k - shift - e_k alpha + sign * 16U * (2 + delta_hat_k + e_k alpha))``.

    The ``16U`` term covers the rounding of this evaluation (a product and two sums, each within
    ``2U`` of magnitudes bounded by the bracket). Small problems are evaluated densely. Large ones
    by blocks of ``_BLOCK`` consecutive lines: ``base_k`` and ``e_k`` both increase with ``k``, so
    ``max(base) - min(e) alpha`` (padded for its own rounding) bounds every line of a block; blocks
    are visited by decreasing bound and skipped once their bound cannot beat the best value found.
    The result is the same maximum over all lines, at a fraction of the cost.
    """
    out = np.full(alpha.size, -np.inf)
    n = int(e.size)
    if n == 0:
        return out
    base = 1.0 - delta_hat - shift + sign * 16.0 * U * (2.0 + delta_hat)
    slope = e * (1.0 - sign * 16.0 * U)
    if n * alpha.size <= _CHUNK or n <= 4 * _BLOCK:
        step = max(1, _CHUNK // n)
        for i in range(0, alpha.size, step):
            a = alpha[i : i + step, None]
            out[i : i + step] = np.max(base[None, :] - slope[None, :] * a, axis=1)
        return out
    n_blocks = -(-n // _BLOCK)
    pad = n_blocks * _BLOCK - n
    base_b = np.concatenate([base, np.full(pad, -np.inf)]).reshape(n_blocks, _BLOCK)
    slope_b = np.concatenate([slope, np.full(pad, slope[-1])]).reshape(n_blocks, _BLOCK)
    bmax = base_b.max(axis=1)
    smin = slope_b.min(axis=1)
    for i, a in enumerate(alpha.tolist()):
        prod = smin * a
        bound = bmax - prod + 4.0 * U * (np.abs(bmax) + prod) + 1e-300
        best = -np.inf
        for b in np.argsort(-bound).tolist():
            if bound[b] <= best:
                break
            best = max(best, float(np.max(base_b[b] - slope_b[b] * a)))
        out[i] = best
    return out


def tradeoff(composition: ProfileQueries, alpha: ArrayLike) -> Bracket:
    """Certified trade-off curve ``beta(alpha)`` of a composition (vectorized over ``alpha``).

    ``composition`` is a :class:`DiscreteGaussianComposition` or a
    :class:`~auditlib.accounting.composition.PrivacyLossComposition` (any mix of discrete Gaussian,
    geometric, Laplace and Gaussian releases): both carry the two bounding loss lattices used here.

    ``lower`` errs low (a valid f-DP guarantee), ``upper`` errs high; see the module docstring.
    The returned :class:`Bracket` has ``quantity="beta"``. At most :data:`MAX_TRADEOFF_POINTS`
    values of ``alpha`` per call.
    """
    _check_size(alpha)
    a = check_alpha(alpha)
    flat = a.ravel()
    hs_down: HockeyStick = composition._lower
    # delta errs high on this lattice; the split one (bracket mode) is tighter and errs high too
    hs_up: HockeyStick = getattr(composition, "_split_upper", None) or composition._upper
    _, e_up, d_up, err_up = _lines(hs_up)
    lower = _max_lines(flat, e_up, d_up, err_up + hs_up.dropped, -1.0)
    if hs_down is hs_up:
        e_dn, d_dn, err_dn = e_up, d_up, err_up
    else:
        _, e_dn, d_dn, err_dn = _lines(hs_down)
    upper = _max_lines(flat, e_dn, d_dn, -err_dn, 1.0)
    upper = np.minimum(upper, 1.0 - flat + 4.0 * U)
    upper = np.where(flat <= 1e-290, 1.0 - flat, upper)
    upper = np.minimum(np.maximum(upper, 0.0), 1.0)
    lower = np.minimum(np.maximum(lower, 0.0), upper)
    lo: np.ndarray | float = float(lower[0]) if a.ndim == 0 else lower.reshape(a.shape)
    hi: np.ndarray | float = float(upper[0]) if a.ndim == 0 else upper.reshape(a.shape)
    return Bracket(lo, hi, composition.method, "beta", composition.truncated_mass, composition.grid)


def tradeoff_knots(composition: ProfileQueries) -> tuple[np.ndarray, np.ndarray]:
    """Knots ``(alpha_k, beta_k)`` of the curve, ``alpha`` increasing (for plotting and export).

    Computed from the lattice whose losses err high (the only one in the exact-lattice mode) as
    ``alpha_k = Q[L > l_k]``, ``beta_k = P[L <= l_k]`` with the kept measure: within about the
    truncated mass of the exact knots; use :func:`tradeoff` for certified values. Knots carrying no
    mass are dropped; ``(0, 1)`` and ``(1, 0)`` end the list.
    """
    hs: HockeyStick = composition._upper
    mu = hs.values
    keep = mu > 0
    loss, mu = hs.loss[keep], mu[keep]
    q = np.exp(np.log(mu) - loss)
    sp = np.concatenate([np.cumsum(mu[::-1])[::-1][1:], [0.0]])
    sq = np.concatenate([np.cumsum(q[::-1])[::-1][1:], [0.0]])
    alpha = np.concatenate([[0.0], sq[::-1], [1.0]])
    beta = np.concatenate([[1.0], (1.0 - sp)[::-1], [0.0]])
    alpha = np.clip(alpha, 0.0, 1.0)
    beta = np.clip(beta, 0.0, 1.0)
    return alpha, beta


def gaussian_tradeoff(mu: float, alpha: ArrayLike) -> np.ndarray | float:
    """Gaussian-DP trade-off ``G_mu(alpha) = Phi(Phi^-1(1 - alpha) - mu)``."""
    a = check_alpha(alpha)
    out = ndtr(ndtri(1.0 - a) - mu)
    return float(out) if out.ndim == 0 else out


def zcdp_tradeoff(rho: float, alpha: ArrayLike) -> np.ndarray | float:
    """The trade-off curve the Bureau's accounting implies for rho-zCDP (vectorized over alpha).

    ``beta(alpha) = sup_{eps >= 0} max(0, 1 - delta(eps) - e^eps alpha, e^-eps (1 - delta(eps) -
    alpha))`` with ``delta(eps) = exp(-(eps - rho)^2 / (4 rho))`` (:func:`bureau_delta`, the inverse of
    ``eps = rho + 2 sqrt(rho ln 1/delta)``). The supremum is taken on a grid in ``eps`` and polished
    by bounded Brent search; a numerical supremum can only fall short of the true one, so the value
    errs low (by far less than ``1e-9``): it is what that (eps, delta) family guarantees, no more.
    At most :data:`MAX_TRADEOFF_POINTS` values of ``alpha`` per call.
    """
    r = float(check_rho(rho))
    _check_size(alpha)
    a = check_alpha(alpha)
    flat = a.ravel()
    # delta(eps) < 1e-300 beyond eps_hi: no line can improve there
    eps_hi = r + 2.0 * math.sqrt(r * 700.0)
    grid = np.linspace(r, eps_hi, 4001)
    d_grid = np.asarray(bureau_delta(r, grid), dtype=float)

    def value(eps: float, al: float) -> float:
        d = float(bureau_delta(r, eps))
        first = 1.0 - d - math.exp(eps) * al if eps < 700.0 else -math.inf
        return max(0.0, first, math.exp(-eps) * (1.0 - d - al))

    out = np.empty(flat.size)
    with np.errstate(over="ignore"):
        e_grid = np.exp(grid)
    for i, al in enumerate(flat.tolist()):
        if al == 0.0:  # delta(eps) -> 0 as eps -> infinity: the supremum is 1
            out[i] = 1.0
            continue
        vals = np.maximum.reduce(
            [np.zeros_like(grid), 1.0 - d_grid - e_grid * al, (1.0 - d_grid - al) / e_grid]
        )
        j = int(np.argmax(vals))
        best = float(vals[j])
        lo, hi = grid[max(j - 1, 0)], grid[min(j + 1, grid.size - 1)]
        if hi > lo:
            res = minimize_scalar(
                lambda x, al=al: -value(float(x), al),
                bounds=(lo, hi),
                method="bounded",
                options={"xatol": 1e-13},
            )
            best = max(best, -float(res.fun))
        out[i] = min(best, 1.0 - al)
    out = np.maximum(out, 0.0) + 0.0  # no negative zeros
    return float(out[0]) if a.ndim == 0 else out.reshape(a.shape)


def gdp_mu_estimate(
    composition: ProfileQueries, alpha: ArrayLike | None = None, *, rho: float | None = None
) -> float:
    """``mu`` of the Gaussian-DP curve ``G_mu`` closest (least squares over ``alpha``) to the exact
    curve's midpoint. An *estimate* for summaries, not a bound: ``G_mu`` may lie above the exact
    curve somewhere. ``alpha`` defaults to 199 points in ``(0, 1)``. ``rho`` (the zCDP of the
    composition, default its ``rho``: a :class:`PrivacyLossComposition` has none) sets the search
    range."""
    a = np.linspace(0.005, 0.995, 199) if alpha is None else check_alpha(alpha).ravel()
    beta = np.asarray(tradeoff(composition, a).midpoint, dtype=float)
    mu0 = math.sqrt(2.0 * (rho if rho is not None else composition.rho))  # type: ignore[attr-defined]

    def loss(mu: float) -> float:
        return float(np.sum((ndtr(ndtri(1.0 - a) - mu) - beta) ** 2))

    res = minimize_scalar(loss, bounds=(0.0, max(4.0 * mu0, 1.0)), method="bounded")
    return float(res.x)
