"""Randomized response with known privacy loss (Warner 1965; k-ary "generalized" RR).

:func:`randomized_response` — Warner's protocol on k values (binary for k = 2): keep the true
value with probability γ, else report a uniform draw from all k values;
ε = ln(1 + kγ/(1 − γ)), γ = (e^ε − 1)/(e^ε + k − 1) for a claimed ε; all pairs x ≠ x′,
C = {0..k−1}; exact ε_{x,x′,C} by enumerating the protocol's coin and uniform draw. Its
sampler, exact pmf and the γ ↔ ε conversions serve the f-DP catalogue too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError
from auditlib.mechanisms.base import positive_finite
from auditlib.mpl.catalogue import KnownMechanism, _known_mechanism
from auditlib.mpl.dpl import Region

# -- randomized response (Warner 1965; k-ary "generalized" RR) ---------------------------------


def rr_keep_probability(epsilon: float, k: int = 2) -> float:
    """γ = (e^ε − 1)/(e^ε + k − 1): the keep probability that makes k-ary RR exactly ε-DP.

    With probability γ the true value is reported, else a uniform draw from all k values, so
    P(t = x) = γ + (1 − γ)/k and P(t ≠ x) = (1 − γ)/k per other value; their ratio is
    1 + kγ/(1 − γ), hence ε = ln(1 + kγ/(1 − γ)), solved for γ above (k = 2: the true bit is
    reported with probability e^ε/(1 + e^ε)).
    """
    eps0 = positive_finite("epsilon", epsilon)
    _check_k(k)
    return -math.expm1(-eps0) / (1.0 + (k - 1) * math.exp(-eps0))


def rr_epsilon(keep: float, k: int = 2) -> float:
    """ε = ln(1 + kγ/(1 − γ)) of k-ary RR with keep probability γ ∈ [0, 1) (∞ at γ = 1)."""
    _check_k(k)
    if not (isinstance(keep, (int, float)) and 0.0 <= keep <= 1.0):
        raise InvalidParameterError(f"Invalid keep: {keep!r}; a probability in [0, 1].")
    if keep == 1.0:
        return math.inf
    return math.log1p(k * keep / (1.0 - keep))


def _check_k(k: object) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or int(k) < 2:
        raise InvalidParameterError(
            f"Invalid k: {k!r}; randomized response needs an integer number of values >= 2."
        )
    return int(k)


@dataclass(frozen=True)
class RandomizedResponseSampler:
    """Warner's protocol on {0..k−1}: a coin with P(heads) = ``keep`` reports the true value x;
    on tails the report is uniform on all k values (so it may still be x)."""

    k: int
    keep: float

    def __call__(self, x: Any, n: int, rng: np.random.Generator) -> npt.NDArray[np.int64]:
        if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or not 0 <= x < self.k:
            raise InvalidParameterError(
                f"Invalid input: {x!r}; randomized response on k = {self.k} values takes an "
                f"integer in 0..{self.k - 1}."
            )
        heads = rng.random(n) < self.keep
        uniform = rng.integers(0, self.k, size=n, dtype=np.int64)
        return np.where(heads, np.int64(x), uniform)


def randomized_response_pmf(x: int, k: int, keep: float) -> npt.NDArray[np.float64]:
    """P(report = t | x), t = 0..k−1, by enumerating the protocol: the coin (heads: report x)
    and, on tails, each of the k equally likely uniform draws."""
    out = np.zeros(k)
    out[x] += keep
    for t in range(k):
        out[t] += (1.0 - keep) / k
    return out


def randomized_response(
    epsilon: float, *, k: int = 2, keep: float | None = None, name: str | None = None
) -> KnownMechanism:
    """k-ary randomized response claiming ε; ``keep`` defaults to the exact
    :func:`rr_keep_probability` (ε, k). Another ``keep`` gives a mechanism that still claims ε but is
    :func:`rr_epsilon` (keep, k)-DP. Pairs: all x < x′ in {0..k−1}; C = {0..k−1}; every pair attains
    ε at t = x and t = x′ (ε*_C = ε).
    """
    eps0 = positive_finite("epsilon", epsilon)
    kk = _check_k(k)
    g = rr_keep_probability(eps0, kk) if keep is None else keep
    if not (isinstance(g, (int, float)) and 0.0 <= g < 1.0):
        raise InvalidParameterError(f"Invalid keep: {keep!r}; a probability in [0, 1).")
    true_eps = rr_epsilon(g, kk)
    log_table = np.log(np.array([randomized_response_pmf(x, kk, g) for x in range(kk)]))
    pairs = tuple((a, b) for a in range(kk) for b in range(a + 1, kk))
    region = Region.integers((0, kk - 1))

    def log_pmf(x: Any, t: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
        return np.asarray(log_table[int(x)][np.asarray(t, dtype=np.int64)])

    def loss(x: Any, x2: Any, t: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
        return np.asarray(np.abs(log_pmf(x, t) - log_pmf(x2, t)))

    default = "randomized_response" if kk == 2 else f"randomized_response_k{kk}"
    sampler = RandomizedResponseSampler(kk, g)
    return _known_mechanism(
        name or default, sampler, "discrete", pairs, region, eps0, true_eps, loss, log_pmf=log_pmf
    )
