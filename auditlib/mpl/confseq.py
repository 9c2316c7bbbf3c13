"""Anytime-valid confidence sequences for binomial proportions: Robbins' beta-binomial mixture.

For i.i.d. Bernoulli(p) draws with k successes in the first n, the mixture of likelihood ratios

    M_n(p) = ∫ θ^k (1 − θ)^{n−k} dBeta(θ; ½, ½) / (p^k (1 − p)^{n−k})
           = B(k + ½, n − k + ½) / (B(½, ½) p^k (1 − p)^{n−k})

is a non-negative martingale with M_0 = 1 under p, so by Ville's inequality
P(∃ n: M_n(p) ≥ 1/r) ≤ r. The set {p : M_n(p) < 1/r} is therefore a confidence sequence: it holds at
*every* n at once, so it may be looked at after every draw and the sampling stopped at any
data-dependent time, with no schedule fixed in advance (unlike a union bound over planned looks).
−ln M_n(p) is concave in p with its maximum at k/n, where M_n ≤ 1, so the set is an interval
around k/n; its ends are found by bisection (80 halvings: to rounding).

Which way it errs: the upper end errs high and the lower end low, each with probability ≤ r over
all n at once (one-sided use spends r on one side). It is wider than a Clopper–Pearson bound at a
single fixed n (by about a factor √(ln n) in the deviation) — the price of validity at every n.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.special import betaln

FloatArray = npt.NDArray[np.float64]
_PRIOR = 0.5  # Beta(½, ½): Jeffreys' prior as the mixing law
_HALVINGS = 80


def log_mixture(k: FloatArray, n: int, p: FloatArray) -> FloatArray:
    """ln M_n(p) of the Beta(½, ½) mixture (vectorized; p in (0, 1))."""
    with np.errstate(divide="ignore", invalid="ignore"):
        tail = np.where(k > 0, k * np.log(p), 0.0) + np.where(
            n - k > 0, (n - k) * np.log1p(-p), 0.0
        )
    return np.asarray(
        betaln(k + _PRIOR, n - k + _PRIOR) - betaln(_PRIOR, _PRIOR) - tail, dtype=np.float64
    )


def mixture_bound(k: npt.ArrayLike, n: int, risk: float, *, upper: bool = True) -> FloatArray:
    """The upper (or lower) end of the confidence sequence {p : M_n(p) < 1/risk} at k of n.

    With probability ≥ 1 − risk the true p stays below every upper end (above every lower end),
    at all n simultaneously."""
    kk = np.asarray(k, dtype=np.float64)
    level = np.log(1.0 / risk)
    centre = kk / n
    lo = centre.copy()  # inside the set
    hi = np.ones_like(centre) if upper else np.zeros_like(centre)  # outside, or the edge
    edge = hi.copy()
    # at the edge itself: p = 1 (upper) is in the set only when k = n, p = 0 only when k = 0
    inside_edge = kk >= n if upper else kk <= 0
    for _ in range(_HALVINGS):
        mid = 0.5 * (lo + hi)
        ok = log_mixture(kk, n, mid) < level
        lo = np.where(ok, mid, lo)
        hi = np.where(ok, hi, mid)
    return np.asarray(np.where(inside_edge, edge, hi), dtype=np.float64)
