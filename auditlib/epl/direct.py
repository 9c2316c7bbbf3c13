"""Direct privacy-loss estimate (Flaxman 2019 §2.3): one cell's error under D and D′ over many runs.

The algorithm runs R times on D and R times on a neighbour D′ (independent noise); for one unit we
keep the error ``e = DP − TC_unit(D)`` of every run (both samples against the same reference, so
an event on the output is the same event under both databases). For an event E,
``log P_D(E)/P_D′(E)`` is a lower bound on the loss ε of an ε-DP algorithm, for *every* E.

:func:`direct_log_ratio` estimates it for the events ``{e ∈ [k, k + w)}`` (``event="eq"``; w the
bin width, 1 for integer errors) or ``{e ≥ k}`` (``event="ge"``, Flaxman's tail events, far less
noisy), keeping only the k where **both** samples hold at least ``min_events`` events. The
pointwise band is the Katz log interval of a ratio of two binomial proportions,
``log(p̂₁/p̂₂) ± z·√(1/a − 1/n₁ + 1/b − 1/n₂)`` (a, b the event counts). Which way it errs:

* ``epl`` = max_k |log-ratio|: the max over many noisy ratios, biased **upward** (like every
  max-over-window statistic), far more at small R.
* ``epl_lower`` = max_k of the lower end of |log-ratio|'s interval at confidence
  ``1 − (1 − confidence)/K`` (Bonferroni over the K kept events): with probability ≳ ``confidence``
  (asymptotically in the counts) every interval holds at once, so ``epl_lower`` is a **lower
  bound** on the true loss ε — conservative twice over (Bonferroni, and a single cell and event
  family need not attain ε).

:func:`direct_chunk` computes the errors of a range of replicates with the keyed streams of
:func:`auditlib.simulate.neighbours.direct_samples` (``(NEIGHBOUR_NOISE, algorithm, database,
replicate)``), so chunks computed anywhere reproduce one run over all replicates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from auditlib import seeds
from auditlib.exceptions import InvalidParameterError
from auditlib.simulate.direct import MAX_REPLICATES
from auditlib.simulate.hierarchical import ALGORITHM_KEYS, Algorithm, CountTree, release
from auditlib.simulate.neighbours import NEIGHBOUR_NOISE, NeighbourPair

FloatArray = npt.NDArray[np.float64]
Event = Literal["eq", "ge"]
EVENTS: tuple[str, ...] = ("eq", "ge")


@dataclass(frozen=True)
class DirectEstimate:
    """log P_D(E_k)/P_D′(E_k) at ``k`` (kept events only) with its pointwise band and counts."""

    k: FloatArray = field(compare=False, repr=False)
    log_ratio: FloatArray = field(compare=False, repr=False)
    low: FloatArray = field(compare=False, repr=False)
    high: FloatArray = field(compare=False, repr=False)
    count_d: npt.NDArray[np.int64] = field(compare=False, repr=False)
    count_d_prime: npt.NDArray[np.int64] = field(compare=False, repr=False)
    epl: float
    epl_lower: float
    n_d: int
    n_d_prime: int
    event: str
    min_events: int
    confidence: float
    bin_width: float
    status: str  # ok | too_few (no event with min_events in both samples)

    def to_dict(self) -> dict[str, Any]:
        keys = ("epl", "epl_lower", "n_d", "n_d_prime", "event", "min_events", "confidence")
        out: dict[str, Any] = {k: getattr(self, k) for k in keys}
        out.update(bin_width=self.bin_width, status=self.status, n_events=int(self.k.size))
        return out


def _errors(name: str, values: npt.ArrayLike) -> FloatArray:
    try:
        e = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(f"Invalid {name}: not numeric ({exc}).") from exc
    if e.ndim != 1 or e.size == 0:
        raise InvalidParameterError(
            f"Invalid {name}: shape {e.shape}; pass a non-empty 1-D array of errors."
        )
    if not np.isfinite(e).all():
        raise InvalidParameterError(f"Invalid {name}: NaN or infinite errors; drop them first.")
    return e


def direct_log_ratio(
    errors_d: npt.ArrayLike,
    errors_d_prime: npt.ArrayLike,
    *,
    event: str = "eq",
    min_events: int = 10,
    confidence: float = 0.9,
    bin_width: float = 1.0,
) -> DirectEstimate:
    """The direct estimate from one cell's errors under D and under D′ (see the module docstring).

    Errors are binned as ``floor(e / bin_width)``: ``bin_width=1`` for integer errors, ``1/P`` for
    ADPC; RDPC's raked counts are not on a lattice, so pick a width.
    """
    a = _errors("errors_d", errors_d)
    b = _errors("errors_d_prime", errors_d_prime)
    if event not in EVENTS:
        raise InvalidParameterError(f"Invalid event: {event!r}; choose one of {EVENTS}.")
    if isinstance(min_events, bool) or not isinstance(min_events, int) or min_events < 1:
        raise InvalidParameterError(f"Invalid min_events: {min_events!r}; pass an integer ≥ 1.")
    if not 0.0 < float(confidence) < 1.0:
        raise InvalidParameterError(f"Invalid confidence: {confidence!r}; pass a number in (0, 1).")
    w = float(bin_width)
    if not math.isfinite(w) or w <= 0.0:
        raise InvalidParameterError(f"Invalid bin_width: {bin_width!r}; pass a finite number > 0.")
    ia = np.floor(a / w + 1e-9).astype(np.int64)
    ib = np.floor(b / w + 1e-9).astype(np.int64)
    lo = int(min(ia.min(), ib.min()))
    hi = int(max(ia.max(), ib.max()))
    ca = np.bincount(ia - lo, minlength=hi - lo + 1)
    cb = np.bincount(ib - lo, minlength=hi - lo + 1)
    if event == "ge":  # counts of {bin ≥ k}
        ca = np.cumsum(ca[::-1])[::-1]
        cb = np.cumsum(cb[::-1])[::-1]
    k = (np.arange(lo, hi + 1) * w).astype(np.float64)
    keep = (ca >= min_events) & (cb >= min_events)
    na, nb = a.size, b.size
    if event == "ge":
        keep &= (ca < na) | (cb < nb)  # {e ≥ min} holds for everything: no information
    ca_k, cb_k = ca[keep].astype(np.int64), cb[keep].astype(np.int64)
    if not keep.any():
        e = np.empty(0)
        return DirectEstimate(
            e, e, e, e, ca_k, cb_k, math.nan, math.nan, na, nb, event, min_events,
            float(confidence), w, "too_few",
        )  # fmt: skip
    lr = np.log(ca_k / na) - np.log(cb_k / nb)
    se = np.sqrt(1.0 / ca_k - 1.0 / na + 1.0 / cb_k - 1.0 / nb)
    alpha = 1.0 - float(confidence)
    from scipy import stats  # lazy: ≈ 0.5 s to import, unused by a run's own process

    z = float(stats.norm.ppf(1.0 - alpha / 2.0))
    z_all = float(stats.norm.ppf(1.0 - alpha / (2.0 * ca_k.size)))
    lower_abs = np.maximum(np.abs(lr) - z_all * se, 0.0)
    return DirectEstimate(
        k[keep],
        lr,
        lr - z * se,
        lr + z * se,
        ca_k,
        cb_k,
        float(np.max(np.abs(lr))),
        float(np.max(lower_abs)),
        na,
        nb,
        event,
        min_events,
        float(confidence),
        w,
        "ok",
    )


def direct_chunk(
    pair: NeighbourPair,
    algorithm: Algorithm,
    epsilon: float,
    *,
    level: int,
    unit: int,
    start: int,
    stop: int,
    seed: int,
    n_runs: int | None = None,
) -> tuple[FloatArray, FloatArray]:
    """Errors ``DP_unit − TC_unit(D)`` under D and under D′ of replicates ``start..stop−1`` (ADPC
    needs ``n_runs`` = P)."""
    if algorithm not in ALGORITHM_KEYS:
        raise InvalidParameterError(
            f"Invalid algorithm: {algorithm!r}; allowed: {', '.join(ALGORITHM_KEYS)}"
        )
    if not 0 <= int(start) < int(stop):
        raise InvalidParameterError(
            f"Invalid replicate range: {start}..{stop}; need 0 <= start < stop."
        )
    if int(stop) > MAX_REPLICATES:
        raise InvalidParameterError(
            f"Invalid replicate range: {start}..{stop}; the largest allowed stop is "
            f"{MAX_REPLICATES} (MAX_REPLICATES)."
        )
    trees: tuple[CountTree, CountTree] = pair.trees()
    if not 0 <= level <= trees[0].levels:
        raise InvalidParameterError(f"Invalid level: {level}; allowed 0..{trees[0].levels}")
    n_units = trees[0].counts[level].size
    if not 0 <= unit < n_units:
        raise InvalidParameterError(f"Invalid unit: {unit}; level {level} has {n_units} units")
    key = ALGORITHM_KEYS[algorithm]
    truth = float(trees[0].counts[level][unit])
    out = np.empty((2, int(stop) - int(start)), dtype=np.float64)
    for b, tree in enumerate(trees):
        for i, r in enumerate(range(int(start), int(stop))):
            g = seeds.rng(seed, NEIGHBOUR_NOISE, key, b, r)
            rel = release(tree, algorithm, epsilon, g, n_runs=n_runs)
            if level not in rel.dp:
                raise InvalidParameterError(
                    f"Invalid level: {level}; {algorithm} releases levels {sorted(rel.dp)}"
                )
            out[b, i] = float(rel.dp[level][unit]) - truth
    return out[0], out[1]
