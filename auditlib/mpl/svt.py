"""The Sparse Vector Technique with known privacy loss (Lyu, Su & Li 2017).

:func:`svt2`, :func:`svt4`, :func:`svt5`, :func:`svt6` — SVT Algorithms 2, 4, 5 and 6 of Lyu et al.,
T = 1, 10 queries (cutoff 1 for SVT2/4) on the pattern pairs of Ding et al.; SVT4 rescaled to its
true ε; SVT5/6 are not DP. Each is a :class:`~auditlib.mpl.catalogue.KnownMechanism` whose exact
output law (first-⊤ index or ⊤/⊥ bits) is computed by quadrature in ρ.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError
from auditlib.mechanisms import Laplace
from auditlib.mechanisms.base import positive_finite
from auditlib.mpl.catalogue import (
    KnownMechanism,
    LossFunction,
    _known_mechanism,
    _laplace,
    _table_loss,
)
from auditlib.mpl.dpl import Region

# -- Sparse Vector Technique (Lyu, Su & Li 2017, Algorithms 2, 4, 5) ------------------------------

# Patterns of Ding et al. for 10 queries (Table I of Askin, Kutta & Dette), plus two mirrored ones.
SVT_PATTERNS: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = (
    ((1,) * 10, (2,) + (1,) * 9),  # one above
    ((1,) * 10, (0,) + (1,) * 9),  # one below
    ((1,) * 10, (2,) + (0,) * 9),  # one above, rest below
    ((1,) * 10, (0,) + (2,) * 9),  # one below, rest above
    ((1,) * 10, (2,) * 5 + (0,) * 5),  # half half
    ((1,) * 10, (0,) * 5 + (2,) * 5),  # half half, mirrored
    ((1,) * 10, (2,) * 10),  # all above
    ((1,) * 10, (0,) * 10),  # all below
    ((1,) * 5 + (0,) * 5, (0,) * 5 + (1,) * 5),  # X shape
    ((0,) * 5 + (1,) * 5, (1,) * 5 + (0,) * 5),  # X shape, mirrored
)
SVT_THRESHOLD = 1.0


@dataclass(frozen=True)
class SVTSampler:
    """SVT with cutoff c = 1 (``first_above``: index of the first ⊤, len(q) if none) or without
    cutoff (the ⊤/⊥ bits as an integer, bit i = query i).

    ρ ~ Lap(``rho_scale``) once; ν_i ~ Lap(``nu_scale``) per query (0: no query noise); query i is
    ⊤ when q_i + ν_i ≥ T + ρ. With c = 1 Algorithm 2's fresh ρ after a ⊤ is never used.
    """

    rho_scale: float
    nu_scale: float
    first_above: bool
    threshold: float = SVT_THRESHOLD

    def __call__(self, q: Any, n: int, rng: np.random.Generator) -> npt.NDArray[np.int64]:
        qa = np.asarray(q, dtype=np.float64)
        rho = _laplace(rng, self.rho_scale, (n, 1))
        if self.nu_scale > 0.0:
            noisy = _laplace(rng, self.nu_scale, (n, qa.size))
            noisy += qa
        else:
            noisy = np.broadcast_to(qa, (n, qa.size))
        above = noisy - rho >= self.threshold
        if self.first_above:
            first = np.argmax(above, axis=1)
            return np.where(above.any(axis=1), first, qa.size).astype(np.int64)
        return (above.astype(np.int64) << np.arange(qa.size, dtype=np.int64)).sum(axis=1)


def _rho_quadrature(
    qa: npt.NDArray[np.float64], br: float, bn: float, threshold: float
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Nodes and weights in ρ: Gauss–Legendre (48) on pieces ≤ min scale between the kinks."""
    nodes, weights = np.polynomial.legendre.leggauss(48)
    big = 40.0 * max(br, bn)
    kinks = np.unique(np.concatenate([[-big, 0.0, big], qa - threshold]))
    kinks = kinks[(kinks >= -big) & (kinks <= big)]
    rs, ws = [], []
    for a, c in itertools.pairwise(kinks.tolist()):
        cuts = np.linspace(a, c, max(1, math.ceil((c - a) / min(br, bn))) + 1)
        u, v = cuts[:-1, None], cuts[1:, None]
        rs.append((0.5 * (v - u) * nodes + 0.5 * (u + v)).ravel())
        ws.append((0.5 * (v - u) * weights).ravel())
    return np.concatenate(rs), np.concatenate(ws)


def svt_first_above_pmf(
    q: npt.ArrayLike, rho_scale: float, nu_scale: float, threshold: float = SVT_THRESHOLD
) -> npt.NDArray[np.float64]:
    """Exact law of the first-⊤ index of SVT with cutoff 1 (entries 0..k−1; k = no ⊤).

    P(K = i) = ∫ f_ρ(r) ∏_{j<i} F_ν(T + r − q_j) · S_ν(T + r − q_i) dr, by Gauss–Legendre (48
    nodes) on pieces of length ≤ the smaller scale between the kinks, over |r| ≤ 40·max scale
    (the ρ-mass beyond is e^{−40} ≈ 4e-18: errs low by at most that); agrees with adaptive
    quadrature to ~ 1e-15.
    """
    qa = np.asarray(q, dtype=np.float64)
    br, bn = positive_finite("rho_scale", rho_scale), positive_finite("nu_scale", nu_scale)
    k = qa.size
    r, w = _rho_quadrature(qa, br, bn, threshold)
    nu = Laplace(bn)
    z = threshold + r[:, None] - qa[None, :]
    log_f = np.log(nu.cdf(z))  # ⊥ at query j
    log_s = np.log(nu.sf(z))  # ⊤ at query j
    prefix = np.concatenate([np.zeros((r.size, 1)), np.cumsum(log_f, axis=1)], axis=1)
    log_rho = Laplace(br).logpdf(r)[:, None]
    terms = np.concatenate([prefix[:, :k] + log_s, prefix[:, k:]], axis=1) + log_rho
    return np.asarray((np.exp(terms) * w[:, None]).sum(axis=0))


def svt_bits_pmf(
    q: npt.ArrayLike, rho_scale: float, nu_scale: float, threshold: float = SVT_THRESHOLD
) -> npt.NDArray[np.float64]:
    """Exact law of the ⊤/⊥ bit vector of SVT without cutoff (SVT6), codes 0..2^k − 1.

    Given ρ the bits are independent: P(b) = ∫ f_ρ(r) ∏_i S_ν(T + r − q_i)^{b_i}
    F_ν(T + r − q_i)^{1−b_i} dr, same quadrature as :func:`svt_first_above_pmf`.
    """
    qa = np.asarray(q, dtype=np.float64)
    br, bn = positive_finite("rho_scale", rho_scale), positive_finite("nu_scale", nu_scale)
    k = qa.size
    if k > 16:
        raise InvalidParameterError(
            f"Invalid q: {k} queries; the exact law is tabulated for <= 16."
        )
    r, w = _rho_quadrature(qa, br, bn, threshold)
    nu = Laplace(bn)
    z = threshold + r[:, None] - qa[None, :]
    log_f, log_s = np.log(nu.cdf(z)), np.log(nu.sf(z))
    bits = ((np.arange(1 << k)[:, None] >> np.arange(k)[None, :]) & 1).astype(np.float64)
    log_terms = bits @ log_s.T + (1.0 - bits) @ log_f.T + Laplace(br).logpdf(r)[None, :]
    return np.asarray(np.exp(log_terms) @ w)


def svt_no_query_noise_pmf(
    q: npt.ArrayLike, rho_scale: float, threshold: float = SVT_THRESHOLD
) -> dict[int, float]:
    """Exact law of SVT5's bit vector (no query noise, no cutoff): {code: probability > 0}.

    Bits are ``[q_i ≥ T + ρ]``; the pattern is constant for ρ between consecutive q_i − T.
    """
    qa = np.asarray(q, dtype=np.float64)
    lap = Laplace(positive_finite("rho_scale", rho_scale))
    u = np.unique(qa - threshold)
    weights = 1 << np.arange(qa.size)
    out: dict[int, float] = {}
    lower = -math.inf
    for j in range(u.size + 1):
        upper = float(u[j]) if j < u.size else math.inf
        prob = float(lap.cdf(upper)) - (float(lap.cdf(lower)) if lower > -math.inf else 0.0)
        code = int(((qa - threshold >= upper) * weights).sum()) if j < u.size else 0
        if prob > 0.0:
            out[code] = out.get(code, 0.0) + prob
        lower = upper
    return out


def _svt_entry(
    name: str, sampler: SVTSampler, claimed: float, epsilon: float, loss: LossFunction
) -> KnownMechanism:
    kq = len(SVT_PATTERNS[0][0])
    size = kq + 1 if sampler.first_above else 1 << kq
    region = Region.integers((0, size - 1))
    return _known_mechanism(name, sampler, "discrete", SVT_PATTERNS, region, claimed, epsilon, loss)


def _exact_loss(sampler: SVTSampler) -> LossFunction:
    """The exact loss from the output law of ``sampler``: the first-⊤ index or the bit vector."""
    pmf = svt_first_above_pmf if sampler.first_above else svt_bits_pmf
    return _table_loss(lambda q: pmf(q, sampler.rho_scale, sampler.nu_scale))


def svt2(epsilon: float) -> KnownMechanism:
    """SVT, Algorithm 2 of Lyu et al. (Dwork & Roth), c = 1, T = 1: ρ ~ Lap(2/ε), ν ~ Lap(4/ε).

    ε-DP; output: index of the first ⊤ (10 if none), C = {0..10}.
    """
    eps0 = positive_finite("epsilon", epsilon)
    s = SVTSampler(rho_scale=2.0 / eps0, nu_scale=4.0 / eps0, first_above=True)
    return _svt_entry("svt2", s, eps0, eps0, _exact_loss(s))


def svt4(epsilon: float) -> KnownMechanism:
    """SVT, Algorithm 4 of Lyu et al., c = 1, rescaled so that its true ε is ``epsilon``.

    As published (ε₁ = ε/4, ρ ~ Lap(1/ε₁), ν ~ Lap(1/(ε − ε₁))) it is (1 + 6c)/4 · ε-DP; here the
    nominal ε is 4ε/7 (Askin, Kutta & Dette §V corrects the scaling the same way).
    """
    eps0 = positive_finite("epsilon", epsilon)
    nominal = 4.0 * eps0 / 7.0
    e1 = nominal / 4.0
    s = SVTSampler(rho_scale=1.0 / e1, nu_scale=1.0 / (nominal - e1), first_above=True)
    return _svt_entry("svt4", s, eps0, eps0, _exact_loss(s))


def svt6(epsilon: float) -> KnownMechanism:
    """SVT, Algorithm 6 of Lyu et al.: ρ ~ Lap(2/ε), ν ~ Lap(2/ε), no cutoff. Not DP (ε = ∞).

    Output: the 10 ⊤/⊥ bits as an integer, C = {0..1023}. Every output has positive probability,
    so ``epsilon_c`` on the fixed patterns is *finite* (it grows without bound with the number of
    queries): it is the target of LB; the claim ε is refuted when LB exceeds it.
    """
    eps0 = positive_finite("epsilon", epsilon)
    s = SVTSampler(rho_scale=2.0 / eps0, nu_scale=2.0 / eps0, first_above=False)
    return _svt_entry("svt6", s, eps0, math.inf, _exact_loss(s))


def svt5(epsilon: float) -> KnownMechanism:
    """SVT, Algorithm 5 of Lyu et al.: ρ ~ Lap(2/ε), *no query noise*, no cutoff. Not DP (ε = ∞).

    Output: the 10 ⊤/⊥ bits as an integer, C = {0..1023}; ``epsilon_c`` is ∞ on most patterns.
    """
    eps0 = positive_finite("epsilon", epsilon)
    s = SVTSampler(rho_scale=2.0 / eps0, nu_scale=0.0, first_above=False)
    cache: dict[tuple[float, ...], dict[int, float]] = {}

    def logpmf(q: Any, idx: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        key = tuple(float(v) for v in q)
        if key not in cache:
            cache[key] = svt_no_query_noise_pmf(key, s.rho_scale)
        table = cache[key]
        with np.errstate(divide="ignore"):
            return np.log(np.array([table.get(int(i), 0.0) for i in idx]))

    def loss(q: Any, q2: Any, t: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
        idx = np.asarray(t, dtype=np.int64)
        a, b = logpmf(q, idx), logpmf(q2, idx)
        same = a == b  # includes −inf = −inf: ∞ − ∞ := 0 (Askin, Kutta & Dette, eq. (2))
        with np.errstate(invalid="ignore"):
            return np.asarray(np.where(same, 0.0, np.abs(a - b)))

    return _svt_entry("svt5", s, eps0, math.inf, loss)
