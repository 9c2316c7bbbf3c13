"""Replicates of published counts reduced to the sums the AMC estimates need, and areas built from
bottom-level units.

:class:`Moments` holds, per count (rows: units or areas; columns: query cells), the published value
``P`` and, over ``R`` replicates ``P_1..P_R``, the sums ``Σ (P_r − P)`` and ``Σ (P_r − P)²`` — no
replicate is kept. Deviations from ``P`` are small integers for an integer release, so both sums
are exact in float64 (below 2⁵³) and the variance has no cancellation of large squares.

:class:`AreaMap` sums bottom-level units into user-defined areas (blocks into districts, say); the
area sums are taken of every replicate before its moments are accumulated, so an area's variance
includes the covariances of its units.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: a mapping of bottom-level units to areas: an integer array (one area index >= 0 per unit) or a
#: mapping of area names to the indices of their units (areas may overlap)
Areas = npt.ArrayLike | Mapping[str, Sequence[int] | npt.NDArray[np.integer]]


def check_counts(values: npt.ArrayLike, what: str = "published counts") -> IntArray:
    """``values`` as an int64 array after checking they are finite, integer and >= 0."""
    a = np.asarray(values)
    if a.dtype == object or not (
        np.issubdtype(a.dtype, np.integer)
        or np.issubdtype(a.dtype, np.floating)
        or a.dtype == np.bool_
    ):
        raise InvalidParameterError(f"Invalid {what}: dtype {a.dtype}; need integer counts")
    if np.issubdtype(a.dtype, np.floating):
        bad = ~np.isfinite(a)
        if bad.any():
            i = tuple(int(j) for j in np.argwhere(bad)[0])
            raise InvalidParameterError(
                f"Invalid {what}: {a[i]} at index {i}; every count must be a finite number "
                "(fill or drop the missing counts first)"
            )
        frac = a != np.round(a)
        if frac.any():
            i = tuple(int(j) for j in np.argwhere(frac)[0])
            raise InvalidParameterError(
                f"Invalid {what}: {a[i]} at index {i} is not an integer; published counts are "
                "whole numbers"
            )
    neg = a < 0
    if neg.any():
        i = tuple(int(j) for j in np.argwhere(neg)[0])
        raise InvalidParameterError(
            f"Invalid {what}: {a[i]} at index {i} is negative; published counts are >= 0"
        )
    return a.astype(np.int64)


@dataclass(frozen=True)
class Moments:
    """Published counts and the sums of their replicates' deviations (shapes ``(n, k)``).

    The estimates follow Ashmead et al. (2024), eqs. (4)–(6): ``bias = Σ (P_r − P) / R``,
    ``variance`` the sample variance of the ``P_r`` (divisor ``R − 1``) and ``mse`` the mean of
    ``(P_r − P)²`` (divisor ``R``; equal to ``bias² + (R − 1)/R · variance``)."""

    published: FloatArray
    sum_dev: FloatArray
    sum_sq_dev: FloatArray
    n_replicates: int

    def __post_init__(self) -> None:
        if self.n_replicates < 2:
            raise InvalidParameterError(
                f"Invalid n_replicates: {self.n_replicates}; a variance needs at least 2 "
                "replicates (the Bureau runs 25)"
            )
        if not (self.published.shape == self.sum_dev.shape == self.sum_sq_dev.shape):
            raise InvalidParameterError(
                f"Inconsistent moments: shapes {self.published.shape}, {self.sum_dev.shape}, "
                f"{self.sum_sq_dev.shape}"
            )

    @property
    def bias(self) -> FloatArray:
        """Mean replicate minus the published count."""
        return self.sum_dev / self.n_replicates

    @property
    def mean(self) -> FloatArray:
        """Mean of the replicates."""
        return self.published + self.bias

    @property
    def variance(self) -> FloatArray:
        """Sample variance of the replicates (divisor ``R − 1``)."""
        r = self.n_replicates
        v = (self.sum_sq_dev - self.sum_dev**2 / r) / (r - 1)
        return np.maximum(v, 0.0)

    @property
    def sd(self) -> FloatArray:
        return np.sqrt(self.variance)

    @property
    def mse(self) -> FloatArray:
        """Mean squared deviation of the replicates from the published count (divisor ``R``)."""
        return self.sum_sq_dev / self.n_replicates

    @property
    def rmse(self) -> FloatArray:
        return np.sqrt(self.mse)

    def merge(self, other: Moments) -> Moments:
        """The moments of both sets of replicates (of the same published counts): the sums add,
        so replicates run in ranges on several workers merge into those of one run."""
        if other.published.shape != self.published.shape or not np.array_equal(
            other.published, self.published
        ):
            raise InvalidParameterError(
                "Inconsistent moments: merged replicates must be of the same published counts "
                f"(shapes {self.published.shape} and {other.published.shape})"
            )
        return Moments(
            self.published,
            self.sum_dev + other.sum_dev,
            self.sum_sq_dev + other.sum_sq_dev,
            self.n_replicates + other.n_replicates,
        )

    def columns(self, cols: slice) -> Moments:
        """The moments of a range of columns (one query's cells)."""
        return Moments(
            self.published[:, cols],
            self.sum_dev[:, cols],
            self.sum_sq_dev[:, cols],
            self.n_replicates,
        )


class MomentAccumulator:
    """Running sums of replicates' deviations from published counts ``(n, k)``."""

    def __init__(self, published: npt.ArrayLike) -> None:
        p = np.asarray(published, dtype=np.float64)
        if p.ndim != 2:
            raise InvalidParameterError(f"Invalid published counts of shape {p.shape}; need 2-D")
        self.published = p
        self.sum_dev = np.zeros_like(p)
        self.sum_sq_dev = np.zeros_like(p)
        self.n_replicates = 0

    def add(self, values: npt.ArrayLike) -> None:
        """Accumulate one replicate ``P_r`` (same shape as the published counts)."""
        v = np.asarray(values, dtype=np.float64)
        if v.shape != self.published.shape:
            raise InvalidParameterError(
                f"Invalid replicate of shape {v.shape}; expected {self.published.shape}"
            )
        d = v - self.published
        self.sum_dev += d
        d *= d
        self.sum_sq_dev += d
        self.n_replicates += 1

    def moments(self) -> Moments:
        return Moments(
            self.published.copy(), self.sum_dev.copy(), self.sum_sq_dev.copy(), self.n_replicates
        )


@dataclass(frozen=True)
class AreaMap:
    """Areas as (area, unit) membership pairs over ``n_units`` bottom-level units."""

    names: tuple[str, ...]
    area: IntArray  # per pair: the area
    unit: IntArray  # per pair: the unit
    n_units: int

    @property
    def n_areas(self) -> int:
        return len(self.names)

    def sums(self, values: npt.ArrayLike) -> FloatArray:
        """Area sums ``(n_areas, k)`` of unit values ``(n_units, k)``."""
        v = np.asarray(values, dtype=np.float64)
        if v.ndim != 2 or v.shape[0] != self.n_units:
            raise InvalidParameterError(
                f"Invalid unit values of shape {v.shape}; expected ({self.n_units}, k)"
            )
        k = v.shape[1]
        idx = (self.area[:, None] * k + np.arange(k)).ravel()
        out = np.bincount(idx, weights=v[self.unit].ravel(), minlength=self.n_areas * k)
        return np.asarray(out, dtype=np.float64).reshape(self.n_areas, k)


def area_map(areas: Areas | AreaMap, n_units: int) -> AreaMap:
    """Check a mapping of ``n_units`` bottom-level units to areas and return its :class:`AreaMap`.

    ``areas`` is an integer array of length ``n_units`` (unit ``i`` is in area ``areas[i]``; areas
    are ``0..max``, named by their index) or a mapping of area names to the unit indices of each
    area (areas may overlap; a unit listed twice in one area counts twice). An :class:`AreaMap`
    is returned as it is if it was built for ``n_units`` units."""
    if isinstance(areas, AreaMap):
        if areas.n_units != n_units:
            raise InvalidParameterError(
                f"Invalid areas: built for {areas.n_units} units; the counts have {n_units}"
            )
        return areas
    if isinstance(areas, Mapping):
        if not areas:
            raise InvalidParameterError("Invalid areas: the mapping is empty; name at least one")
        names, area_parts, unit_parts = [], [], []
        for j, (name, members) in enumerate(areas.items()):
            m = np.asarray(members)
            if m.ndim != 1 or m.size == 0 or not np.issubdtype(m.dtype, np.integer):
                raise InvalidParameterError(
                    f"Invalid area {name!r}: need a non-empty 1-D array of unit indices, got "
                    f"{m.size} values of dtype {m.dtype}"
                )
            bad = (m < 0) | (m >= n_units)
            if bad.any():
                raise InvalidParameterError(
                    f"Invalid area {name!r}: unit index {int(m[bad][0])} outside 0..{n_units - 1}"
                )
            names.append(str(name))
            area_parts.append(np.full(m.size, j, dtype=np.int64))
            unit_parts.append(m.astype(np.int64))
        return AreaMap(
            tuple(names), np.concatenate(area_parts), np.concatenate(unit_parts), n_units
        )
    a = np.asarray(areas)
    if a.ndim != 1 or a.shape[0] != n_units:
        raise InvalidParameterError(
            f"Invalid areas: an array of shape {a.shape}; need one area index per bottom-level "
            f"unit, shape ({n_units},)"
        )
    if not np.issubdtype(a.dtype, np.integer):
        raise InvalidParameterError(
            f"Invalid areas: dtype {a.dtype}; need integer area indices (or a mapping of area "
            "names to unit indices)"
        )
    if (a < 0).any():
        i = int(np.flatnonzero(a < 0)[0])
        raise InvalidParameterError(
            f"Invalid areas: unit {i} has area {int(a[i])}; area indices must be >= 0 (leave a "
            "unit out by giving areas as a mapping of area names to unit indices)"
        )
    n_areas = int(a.max()) + 1
    return AreaMap(
        tuple(str(j) for j in range(n_areas)),
        a.astype(np.int64),
        np.arange(n_units, dtype=np.int64),
        n_units,
    )
