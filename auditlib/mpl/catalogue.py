"""Mechanisms with known privacy loss, the test bed of Askin, Kutta & Dette §V (and a few census-like counts).

Each factory returns a :class:`KnownMechanism`: the black-box mechanism, the B input pairs and the
region C of the paper's experiment, the ε the mechanism *claims*, its true global ε and the exact
``epsilon_c = max_b ε_{x_b,x′_b,C}`` that MPL's LB bounds from below (Theorem 2). Coverage is to be
judged against ``epsilon_c``, which can be below the claim (e.g. Report Noisy Max).

* :func:`laplace_mechanism` — s + Lap(b); pairs s = 0 vs s′ = j/10 (j = 1..10), C = [−1, 1].
  ``scale`` other than 1/ε gives a *broken* mechanism that claims ε but is 1/scale-DP.
* :func:`report_noisy_max` — argmax_i (q_i + Lap(2/ε)), 6 counting queries, 10 pattern pairs;
  exact output pmf by quadrature.
* :func:`continuous_noisy_max` — max_i (v_i + Lap(k/ε)), k = 3, v = 0³ vs (j/10)·1³, C = [−1, 1].
* :func:`exponential_mechanism` — density ∝ exp(−λ|s − t|) on t ≥ 0; s = 1 vs 1 + j/10,
  C = [0, 2]; ε = λ + ln(2 − e^{−2λ}) − ln(2 − e^{−λ}) and λ solved for the requested ε.
* :func:`geometric_count`, :func:`discrete_gaussian_count` — c + noise for a count c, neighbours
  c vs c ± 1, C a range of integers; exact ε_{x,x′,C} by enumerating the pmfs over C.

The Sparse Vector Technique (SVT2/4/5/6) is in :mod:`~auditlib.mpl.svt`, randomized response in
:mod:`~auditlib.mpl.randomized_response`; both build their entries on :class:`KnownMechanism`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import optimize

from auditlib.exceptions import InvalidParameterError
from auditlib.mechanisms import DiscreteGaussian, Laplace, TwoSidedGeometric
from auditlib.mechanisms.base import positive_finite
from auditlib.mpl.dpl import Region
from auditlib.mpl.protocol import MechanismUnderTest, OutputKind

LossFunction = Callable[[Any, Any, npt.NDArray[Any]], npt.NDArray[np.float64]]


@dataclass(frozen=True, eq=False)
class KnownMechanism:
    """A mechanism under test with exactly known losses on its pairs and region.

    ``loss(x, x′, t)`` is the exact ℓ_{x,x′}(t) = |ln f_x(t) − ln f_x′(t)| (vectorized in t);
    ``epsilon_c_pairs[b]`` = sup_{t∈C} ℓ_{x_b,x′_b}(t); ``epsilon_c`` their maximum.
    """

    mechanism: MechanismUnderTest
    pairs: tuple[tuple[Any, Any], ...]
    region: Region
    claimed_epsilon: float
    epsilon: float
    epsilon_c_pairs: npt.NDArray[np.float64]
    loss: LossFunction
    #: log P(A(x) = t) for discrete mechanisms with an exact law (None if not provided)
    log_pmf: Callable[[Any, npt.NDArray[Any]], npt.NDArray[np.float64]] | None = None

    @property
    def epsilon_c(self) -> float:
        """max_b ε_{x_b,x′_b,C}: the quantity LB bounds from below."""
        return float(np.max(self.epsilon_c_pairs))


def _sup_over(
    loss: LossFunction, pairs: tuple[tuple[Any, Any], ...], points: npt.NDArray[Any]
) -> npt.NDArray[np.float64]:
    return np.array([float(np.max(loss(a, b, points))) for a, b in pairs])


def _known_mechanism(
    name: str,
    sampler: Any,
    kind: OutputKind,
    pairs: tuple[tuple[Any, Any], ...],
    region: Region,
    claimed: float,
    epsilon: float,
    loss: LossFunction,
    *,
    sup_points: npt.NDArray[Any] | None = None,
    log_pmf: Callable[[Any, npt.NDArray[Any]], npt.NDArray[np.float64]] | None = None,
) -> KnownMechanism:
    """The entry of ``sampler`` (output ``kind``) on ``pairs`` and ``region``: ``epsilon_c_pairs``
    the sup of ``loss`` over ``sup_points`` (default: the region's points)."""
    points = region.points if sup_points is None else sup_points
    return KnownMechanism(
        mechanism=MechanismUnderTest(name, sampler, kind),
        pairs=pairs,
        region=region,
        claimed_epsilon=claimed,
        epsilon=epsilon,
        epsilon_c_pairs=_sup_over(loss, pairs, points),
        loss=loss,
        log_pmf=log_pmf,
    )


def _table_loss(pmf: Callable[[tuple[float, ...]], npt.NDArray[np.float64]]) -> LossFunction:
    """The exact loss ``|ln p_q(t) − ln p_q′(t)|`` of a mechanism with finitely many outputs
    ``0, 1, ...``, ``pmf(q)`` its output law at the query vector ``q`` (one table a vector, cached)."""
    cache: dict[tuple[float, ...], npt.NDArray[np.float64]] = {}

    def logpmf(q: Any) -> npt.NDArray[np.float64]:
        key = tuple(float(v) for v in q)
        if key not in cache:
            cache[key] = np.log(pmf(key))
        return cache[key]

    def loss(q: Any, q2: Any, t: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
        idx = np.asarray(t, dtype=np.int64)
        return np.asarray(np.abs(logpmf(q)[idx] - logpmf(q2)[idx]))

    return loss


def _continuous_sup_points(region: Region, kinks: list[float]) -> npt.NDArray[np.float64]:
    lo, hi = region.bounds[0]
    fine = np.linspace(lo, hi, 20_001)
    extra = np.array([k for k in kinks if lo <= k <= hi], dtype=np.float64)
    return np.unique(np.concatenate([fine, extra]))


def _laplace(
    rng: np.random.Generator, scale: float, size: tuple[int, ...]
) -> npt.NDArray[np.float64]:
    """Lap(scale) as the difference of two standard exponentials (ziggurat: ~2x rng.laplace)."""
    out = rng.standard_exponential(size)
    out -= rng.standard_exponential(size)
    out *= scale
    return out


def _plus_laplace(
    q: Any, scale: float, n: int, rng: np.random.Generator
) -> npt.NDArray[np.float64]:
    """``n`` rows of the entries of ``q`` plus i.i.d. Lap(scale) noise."""
    qa = np.asarray(q, dtype=np.float64)
    noisy = _laplace(rng, scale, (n, qa.size))
    noisy += qa
    return noisy


# -- Laplace ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LaplaceSampler:
    """s + Lap(scale)."""

    scale: float

    def __call__(self, s: Any, n: int, rng: np.random.Generator) -> npt.NDArray[np.float64]:
        return float(s) + Laplace(self.scale).rvs(n, rng)


def laplace_mechanism(
    epsilon: float, *, scale: float | None = None, grid_size: int = 201
) -> KnownMechanism:
    """The Laplace mechanism of Askin, Kutta & Dette §V claiming ε; ``scale`` defaults to the correct 1/ε.

    With another scale it is 1/scale-DP (``epsilon``) while still claiming ε (a broken mechanism).
    """
    eps0 = positive_finite("epsilon", epsilon)
    b = 1.0 / eps0 if scale is None else positive_finite("scale", scale)
    pairs = tuple((0.0, j / 10.0) for j in range(1, 11))
    region = Region.interval(-1.0, 1.0, grid_size=grid_size)

    def loss(s: Any, s2: Any, t: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
        tt = np.asarray(t, dtype=np.float64)
        return np.asarray(np.abs(np.abs(tt - float(s2)) - np.abs(tt - float(s))) / b)

    pts = _continuous_sup_points(region, [0.0] + [p[1] for p in pairs])
    sampler = LaplaceSampler(b)
    return _known_mechanism(
        "laplace", sampler, "continuous", pairs, region, eps0, 1.0 / b, loss, sup_points=pts
    )


# -- Report Noisy Max ---------------------------------------------------------------------------

# Patterns of Ding et al. (Table I of Askin, Kutta & Dette) for 6 counting queries, plus two from q = 0⁶.
RNM_PATTERNS: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = (
    ((1, 1, 1, 1, 1, 1), (2, 1, 1, 1, 1, 1)),  # one above
    ((1, 1, 1, 1, 1, 1), (0, 1, 1, 1, 1, 1)),  # one below
    ((1, 1, 1, 1, 1, 1), (2, 0, 0, 0, 0, 0)),  # one above, rest below
    ((1, 1, 1, 1, 1, 1), (0, 2, 2, 2, 2, 2)),  # one below, rest above
    ((1, 1, 1, 1, 1, 1), (2, 2, 2, 0, 0, 0)),  # half half
    ((1, 1, 1, 1, 1, 1), (2, 2, 2, 2, 2, 2)),  # all above
    ((1, 1, 1, 1, 1, 1), (0, 0, 0, 0, 0, 0)),  # all below
    ((1, 1, 1, 0, 0, 0), (0, 0, 0, 1, 1, 1)),  # X shape
    ((0, 0, 0, 0, 0, 0), (0, 1, 1, 1, 1, 1)),
    ((0, 0, 0, 0, 0, 0), (1, 0, 0, 0, 0, 0)),
)


@dataclass(frozen=True)
class NoisyMaxSampler:
    """argmax_i (q_i + Lap(scale)) as int64 index."""

    scale: float

    def __call__(self, q: Any, n: int, rng: np.random.Generator) -> npt.NDArray[np.int64]:
        return np.argmax(_plus_laplace(q, self.scale, n, rng), axis=1).astype(np.int64)


def noisy_max_pmf(q: npt.ArrayLike, scale: float) -> npt.NDArray[np.float64]:
    """Exact P(argmax_i (q_i + Lap(scale)) = i) = ∫ f(t − q_i) ∏_{j≠i} F(t − q_j) dt.

    Between consecutive distinct q_j the integrand is a sum of exponentials (Gauss–Legendre with 64
    nodes on pieces of length ≤ 2·scale: exact to rounding); on each tail, after
    ``s = e^{∓(t − q_extreme)/scale}``, it is a polynomial of degree k − 1 in s (Gauss–Legendre is
    exact for k ≤ 128). Agrees with adaptive quadrature to ~ 1e-15 per entry.
    """
    qa = np.asarray(q, dtype=np.float64)
    b = positive_finite("scale", scale)
    if qa.ndim != 1 or qa.size < 1 or not np.all(np.isfinite(qa)):
        raise InvalidParameterError(f"Invalid q: {q!r}; a non-empty 1-D array of finite values.")
    nodes, weights = np.polynomial.legendre.leggauss(64)

    def integrand(t: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        z = t[:, None] - qa[None, :]
        log_f = -np.abs(z) / b - math.log(2.0 * b)
        log_cdf = np.where(z < 0, math.log(0.5) + z / b, np.log1p(-0.5 * np.exp(-np.abs(z) / b)))
        return np.asarray(np.exp(log_f + log_cdf.sum(axis=1, keepdims=True) - log_cdf))

    # tails: s ∈ (0, 1] on the nodes mapped from [−1, 1]
    s = 0.5 * (nodes + 1.0)
    ws = 0.5 * weights
    lo, hi = float(qa.min()), float(qa.max())
    out = (integrand(lo + b * np.log(s)) * (b / s)[:, None] * ws[:, None]).sum(axis=0)
    out += (integrand(hi - b * np.log(s)) * (b / s)[:, None] * ws[:, None]).sum(axis=0)
    knots = np.unique(qa)
    max_len = 2.0 * b
    for a, c in itertools.pairwise(knots.tolist()):
        cuts = np.linspace(a, c, max(1, math.ceil((c - a) / max_len)) + 1)
        for u, v in itertools.pairwise(cuts.tolist()):
            t = 0.5 * (v - u) * nodes + 0.5 * (u + v)
            out += (integrand(t) * (0.5 * (v - u) * weights)[:, None]).sum(axis=0)
    return np.asarray(out, dtype=np.float64)


def report_noisy_max(epsilon: float) -> KnownMechanism:
    """Report Noisy Max with Lap(2/ε) on 6 queries (Askin, Kutta & Dette §V), C = {0, ..., 5}.

    Claimed and global ε: ε. ``epsilon_c`` of these pairs is below ε (≈ 0.693 at ε = 0.7).
    """
    eps0 = positive_finite("epsilon", epsilon)
    scale = 2.0 / eps0
    loss = _table_loss(lambda q: noisy_max_pmf(q, scale))
    region = Region.integers((0, 5))
    sampler = NoisyMaxSampler(scale)
    return _known_mechanism(
        "report_noisy_max", sampler, "discrete", RNM_PATTERNS, region, eps0, eps0, loss
    )


# -- continuous Noisy Max (Example 1 of Askin, Kutta & Dette) ------------------------------------------------


@dataclass(frozen=True)
class ContinuousMaxSampler:
    """max_i (v_i + Lap(scale)) as float64."""

    scale: float

    def __call__(self, v: Any, n: int, rng: np.random.Generator) -> npt.NDArray[np.float64]:
        return np.asarray(_plus_laplace(v, self.scale, n, rng).max(axis=1), dtype=np.float64)


def continuous_max_logpdf(
    v: npt.ArrayLike, t: npt.ArrayLike, scale: float
) -> npt.NDArray[np.float64]:
    """log density of max_i (v_i + Lap(scale)): ``log Σ_i f_i(t) ∏_{j≠i} F_j(t)`` (Example 1)."""
    va = np.asarray(v, dtype=np.float64)
    tt = np.asarray(t, dtype=np.float64)
    z = tt[..., None] - va
    log_f = -np.abs(z) / scale - math.log(2.0 * scale)
    log_cdf = np.where(
        z < 0, math.log(0.5) + z / scale, np.log1p(-0.5 * np.exp(-np.abs(z) / scale))
    )
    terms = log_f + log_cdf.sum(axis=-1, keepdims=True) - log_cdf
    return np.asarray(np.logaddexp.reduce(terms, axis=-1))


def continuous_noisy_max(epsilon: float, *, k: int = 3, grid_size: int = 201) -> KnownMechanism:
    """Continuous Noisy Max: max_i (v_i + Lap(k/ε)) of v ∈ [0, 1]^k, ε-DP exactly (ε = kλ).

    Pairs v = 0^k vs (j/10)·1^k (j = 1..10), C = [−1, 1] (Askin, Kutta & Dette §V, k = 3); the loss
    j/10 · ε is attained for t ≤ 0.
    """
    eps0 = positive_finite("epsilon", epsilon)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidParameterError(f"Invalid k: {k!r}; the number of entries is an integer >= 1.")
    scale = k / eps0
    pairs = tuple(((0.0,) * k, (j / 10.0,) * k) for j in range(1, 11))
    region = Region.interval(-1.0, 1.0, grid_size=grid_size)

    def loss(v: Any, v2: Any, t: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
        return np.asarray(
            np.abs(continuous_max_logpdf(v, t, scale) - continuous_max_logpdf(v2, t, scale))
        )

    pts = _continuous_sup_points(region, [0.0] + [p[1][0] for p in pairs])
    sampler = ContinuousMaxSampler(scale)
    return _known_mechanism(
        "continuous_noisy_max",
        sampler,
        "continuous",
        pairs,
        region,
        eps0,
        eps0,
        loss,
        sup_points=pts,
    )


# -- exponential mechanism on [0, ∞) ------------------------------------------------------------


def exponential_epsilon(lam: float) -> float:
    """ε = λ + ln(2 − e^{−2λ}) − ln(2 − e^{−λ}) of the exponential mechanism (Askin, Kutta & Dette §V)."""
    lam = positive_finite("lam", lam)
    return lam + math.log(2.0 - math.exp(-2.0 * lam)) - math.log(2.0 - math.exp(-lam))


def exponential_lambda(epsilon: float) -> float:
    """The λ with :func:`exponential_epsilon` (λ) = ε (increasing in λ; ε ≈ 2λ for small λ)."""
    eps0 = positive_finite("epsilon", epsilon)
    return float(
        optimize.brentq(
            lambda lam: exponential_epsilon(lam) - eps0, eps0 / 4.0, eps0 + 1.0, xtol=1e-15
        )
    )


@dataclass(frozen=True)
class ExponentialSampler:
    """Density ``λ e^{−λ|s−t|} / (2 − e^{−λ s})`` on t ≥ 0, by inversion (s ≥ 0)."""

    lam: float

    def __call__(self, s: Any, n: int, rng: np.random.Generator) -> npt.NDArray[np.float64]:
        sv, lam = float(s), self.lam
        a = -math.expm1(-lam * sv)  # 1 − e^{−λ s}: the left mass is a/(1 + a)
        left = rng.random(n) < a / (1.0 + a)
        u = rng.random(n)
        left_draw = sv + np.log1p(-u * a) / lam  # s − E, E ~ Exp(λ) truncated to [0, s]
        right_draw = sv - np.log1p(-u) / lam
        return np.where(left, left_draw, right_draw)


def exponential_logpdf(s: float, t: npt.ArrayLike, lam: float) -> npt.NDArray[np.float64]:
    """log density of the exponential mechanism at input s (−inf for t < 0)."""
    tt = np.asarray(t, dtype=np.float64)
    val = math.log(lam) - lam * np.abs(s - tt) - math.log(2.0 - math.exp(-lam * s))
    return np.asarray(np.where(tt >= 0.0, val, -np.inf))


def exponential_mechanism(epsilon: float, *, grid_size: int = 201) -> KnownMechanism:
    """The exponential mechanism of Askin, Kutta & Dette §V with λ set so that its exact ε is ``epsilon``."""
    eps0 = positive_finite("epsilon", epsilon)
    lam = exponential_lambda(eps0)
    pairs = tuple((1.0, 1.0 + j / 10.0) for j in range(1, 11))
    region = Region.interval(0.0, 2.0, grid_size=grid_size)

    def loss(s: Any, s2: Any, t: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
        return np.asarray(
            np.abs(exponential_logpdf(float(s), t, lam) - exponential_logpdf(float(s2), t, lam))
        )

    pts = _continuous_sup_points(region, [0.0, 1.0, 2.0] + [p[1] for p in pairs])
    sampler = ExponentialSampler(lam)
    eps = exponential_epsilon(lam)
    return _known_mechanism(
        "exponential", sampler, "continuous", pairs, region, eps0, eps, loss, sup_points=pts
    )


# -- noisy counts (census-like) -----------------------------------------------------------------


@dataclass(frozen=True)
class CountSampler:
    """c + integer noise drawn from ``noise.rvs``."""

    noise: Any

    def __call__(self, c: Any, n: int, rng: np.random.Generator) -> npt.NDArray[np.int64]:
        return (int(c) + self.noise.rvs(n, rng)).astype(np.int64)


def _count_entry(
    name: str, noise: Any, radius: int, claimed: float, epsilon: float
) -> KnownMechanism:
    if isinstance(radius, bool) or not isinstance(radius, int) or radius < 1:
        raise InvalidParameterError(f"Invalid radius: {radius!r}; an integer >= 1.")
    pairs = ((0, 1), (0, -1))
    region = Region.integers((-radius, radius))

    def loss(c: Any, c2: Any, t: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
        tt = np.asarray(t, dtype=np.int64)
        return np.asarray(np.abs(noise.logpmf(tt - int(c)) - noise.logpmf(tt - int(c2))))

    return _known_mechanism(
        name, CountSampler(noise), "discrete", pairs, region, claimed, epsilon, loss
    )


def geometric_count(epsilon: float, *, radius: int = 5) -> KnownMechanism:
    """c + G(ε) (two-sided geometric), c = 0 vs ±1, C = {−radius, ..., radius}: ε_C = ε."""
    eps0 = positive_finite("epsilon", epsilon)
    return _count_entry("geometric_count", TwoSidedGeometric(eps0), radius, eps0, eps0)


def discrete_gaussian_count(sigma2: float, *, radius: int = 5) -> KnownMechanism:
    """c + N_Z(0, σ²), c = 0 vs ±1, C = {−radius, ..., radius}.

    Not pure DP (``epsilon`` = ∞, ``claimed_epsilon`` = ∞); over C the loss is
    ``ε_C = (2·radius + 1)/(2σ²)``, attained at the edge of C.
    """
    dg = DiscreteGaussian(positive_finite("sigma2", sigma2))
    return _count_entry("discrete_gaussian_count", dg, radius, math.inf, math.inf)
