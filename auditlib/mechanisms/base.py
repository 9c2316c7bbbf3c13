"""Shared pieces of the noise distributions: the protocols they satisfy and parameter checks.

Every distribution here is the law of the *noise* a mechanism adds to a sensitivity-1 query, centred
at 0. Discrete ones expose ``pmf/logpmf/cdf/sf/ppf/rvs``; continuous ones ``pdf/logpdf/cdf/sf/rvs``,
with the names and broadcasting conventions of ``scipy.stats``. Randomness only ever comes from an
explicit :class:`numpy.random.Generator` passed to ``rvs``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError

Size = int | tuple[int, ...] | None
ArrayLikeFloat = npt.ArrayLike


@runtime_checkable
class DiscreteNoise(Protocol):
    """An integer-valued, symmetric noise law (scipy.stats-like)."""

    def pmf(self, k: npt.ArrayLike) -> npt.NDArray[np.float64]: ...

    def logpmf(self, k: npt.ArrayLike) -> npt.NDArray[np.float64]: ...

    def cdf(self, k: npt.ArrayLike) -> npt.NDArray[np.float64]: ...

    def sf(self, k: npt.ArrayLike) -> npt.NDArray[np.float64]: ...

    def ppf(self, q: npt.ArrayLike) -> npt.NDArray[np.int64]: ...

    def var(self) -> float: ...

    def rvs(self, size: Size, rng: np.random.Generator) -> npt.NDArray[np.int64]: ...


@runtime_checkable
class ContinuousNoise(Protocol):
    """A real-valued, symmetric noise law (scipy.stats-like)."""

    def pdf(self, x: npt.ArrayLike) -> npt.NDArray[np.float64]: ...

    def logpdf(self, x: npt.ArrayLike) -> npt.NDArray[np.float64]: ...

    def cdf(self, x: npt.ArrayLike) -> npt.NDArray[np.float64]: ...

    def sf(self, x: npt.ArrayLike) -> npt.NDArray[np.float64]: ...

    def var(self) -> float: ...

    def rvs(self, size: Size, rng: np.random.Generator) -> npt.NDArray[np.float64]: ...


def positive_finite(name: str, value: object) -> float:
    """Return ``value`` as a float, or raise if it is not a finite number > 0."""
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidParameterError(
            f"Invalid {name}: {value!r} is not a number; pass a finite float > 0."
        ) from None
    if not math.isfinite(x) or x <= 0.0:
        raise InvalidParameterError(f"Invalid {name}: {value!r}; it must be finite and > 0.")
    return x


def check_rng(rng: object) -> np.random.Generator:
    """Refuse anything but an explicit ``numpy.random.Generator`` (no global state, no seeds)."""
    if not isinstance(rng, np.random.Generator):
        raise InvalidParameterError(
            f"Invalid rng: {type(rng).__name__}; pass a numpy.random.Generator, "
            "e.g. numpy.random.default_rng(seed)."
        )
    return rng


def check_probabilities(q: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Return ``q`` as a float array, or raise if any entry is outside [0, 1] or NaN."""
    arr = np.asarray(q, dtype=np.float64)
    if np.any(~((arr >= 0.0) & (arr <= 1.0))):
        bad = arr[~((arr >= 0.0) & (arr <= 1.0))].ravel()[0]
        raise InvalidParameterError(f"Invalid q: {bad!r}; quantile levels must lie in [0, 1].")
    return arr


def quantiles(
    q: npt.ArrayLike,
    search: Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]],
) -> npt.NDArray[np.float64]:
    """A ppf: ``search`` of the levels ``q`` (checked by :func:`check_probabilities`; it returns a
    new array), with −inf at level 0 and +inf at level 1 as in scipy."""
    qq = check_probabilities(q)
    out = search(qq)
    out[qq == 0.0] = -np.inf
    out[qq == 1.0] = np.inf
    return out


def as_integer_points(k: npt.ArrayLike) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """Return ``k`` as floats and a mask of entries that are integers (the support).

    Non-integer points are off the lattice: pmf 0 there, and cdf/sf use ``floor(k)``, as in scipy.
    """
    arr = np.asarray(k, dtype=np.float64)
    return arr, np.isfinite(arr) & (arr == np.floor(arr))
