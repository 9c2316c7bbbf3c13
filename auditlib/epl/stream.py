"""Streaming EPL input: the lattice histogram of residuals, accumulated chunk by chunk.

Every EPL computation on lattice residuals (TopDown's, the geometric mechanism's) needs only the
histogram: the KDE is a convolution of it, the sd and percentiles are weighted statistics of it and
the bootstrap resamples it. :class:`LatticeHistogram` accumulates it from chunks — e.g. the Zarr
chunks of a residual store, read one at a time by :func:`histogram_of_zarr`, or the blocks of an
audit's geolevel (:func:`histograms_by_query`) — so 10⁸ residuals never sit in memory at all: peak
memory is one chunk and the histogram. Histograms on the same lattice add (:meth:`merge`), so a
pooled histogram is the sum of per-state ones. :func:`auditlib.epl.epl`,
:func:`auditlib.epl.estimate_epl` and :func:`auditlib.epl.epl_surface` accept the histogram in
place of the residuals and give the same numbers as on the concatenated residuals.

Non-integer residuals (RDPC's raked counts, ADPC's means) need a lattice of ``spacing`` s < 1:
each value is split linearly between its two neighbouring lattice points k·s, as
:mod:`auditlib.epl.kde` does for large non-integer inputs. Values *on* the lattice (ADPC's k/4 with
s a power of two ≤ 1/4) are counted exactly; otherwise the histogram is ``binned`` and the KDE at
bandwidth h errs by at most :func:`auditlib.epl.binning_error_bound` (n, h/s) relative, either sign
(:meth:`LatticeHistogram.kde_error`), the percentiles by at most s and the sd by at most s/2.
:func:`lattice_spacing` picks s = a power of two ≤ h/200 from a sample, so that bound is ≈ 4e-4.

NaN is the store's padding and is skipped by :func:`histogram_of_zarr`; :meth:`LatticeHistogram.add`
itself rejects non-finite values, and non-integer ones on the unit lattice.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from auditlib.epl.kde import binning_error_bound
from auditlib.exceptions import InvalidParameterError

#: lattice points a histogram may span
MAX_BINS = 50_000_000
#: elements of a residual block turned into lattice indices at a time by histograms_by_query
STEP_ELEMENTS = 1 << 21


class LatticeHistogram:
    """Counts of residuals on the lattice ``spacing``·ℤ; ``add`` chunks, ``merge`` histograms,
    then read ``points``/``counts``/``n``.

    ``spacing=1`` (default): integer residuals, counted exactly; non-integer values are refused.
    Other spacings: values linearly binned (exact for values on the lattice; see the module
    docstring for the error otherwise).
    """

    def __init__(self, spacing: float = 1.0) -> None:
        s = float(spacing)
        if not math.isfinite(s) or s <= 0.0:
            raise InvalidParameterError(
                f"Invalid spacing: {spacing!r}; pass a lattice spacing > 0 (1 for integer residuals)."
            )
        self.spacing = s
        self._unit = s == 1.0
        self._lo = 0
        self._counts: npt.NDArray[Any] = np.zeros(0, dtype=np.int64 if self._unit else np.float64)
        self._min = math.inf
        self._max = -math.inf
        #: True once a value fell between lattice points (the KDE is then binned, see kde_error)
        self.binned = False

    def _grow(self, lo: int, hi: int) -> None:
        """Make the counts cover lattice indices lo..hi."""
        if self._counts.size == 0:
            self._lo = lo
        new_lo = min(self._lo, lo)
        new_hi = max(self._lo + self._counts.size - 1, hi)
        if new_hi - new_lo >= MAX_BINS:
            raise InvalidParameterError(
                f"Invalid residual chunk: range {new_lo * self.spacing}..{new_hi * self.spacing} "
                f"spans more than {MAX_BINS} lattice points of spacing {self.spacing}; pass a "
                "coarser spacing, or the residuals to estimate_epl directly."
            )
        if new_lo < self._lo or new_hi >= self._lo + self._counts.size:
            grown = np.zeros(new_hi - new_lo + 1, dtype=self._counts.dtype)
            grown[self._lo - new_lo : self._lo - new_lo + self._counts.size] = self._counts
            self._counts, self._lo = grown, new_lo

    def add(self, chunk: npt.ArrayLike) -> LatticeHistogram:
        """Count one chunk of residuals (any shape). Returns self."""
        a = np.asarray(chunk)
        if a.size == 0:
            return self
        integer = np.issubdtype(a.dtype, np.integer) or a.dtype == np.bool_
        if not integer:
            af = a.astype(np.float64, copy=False).ravel()
            if not np.isfinite(af).all():
                raise InvalidParameterError(
                    "Invalid residual chunk: NaN or infinite values; drop padding first "
                    "(histogram_of_zarr skips NaN)."
                )
        if self._unit:
            if not integer and not (af == np.round(af)).all():
                raise InvalidParameterError(
                    "Invalid residual chunk: non-integer values on the unit lattice; pass "
                    "LatticeHistogram(spacing=lattice_spacing(sample)) to bin them, or the "
                    "residuals to estimate_epl directly."
                )
            ints = a.astype(np.int64).ravel()
            lo, hi = int(ints.min()), int(ints.max())
            self._grow(lo, hi)
            self._counts += np.bincount(ints - self._lo, minlength=self._counts.size)
            self._min, self._max = min(self._min, lo), max(self._max, hi)
            return self
        af = a.astype(np.float64, copy=False).ravel()
        t = af / self.spacing
        k = np.floor(t)
        frac = t - k
        ki = k.astype(np.int64)
        off = bool(np.any(frac > 0.0))
        self._grow(int(ki.min()), int(ki.max()) + (1 if off else 0))
        size = self._counts.size
        if off:
            self.binned = True
            self._counts += np.bincount(ki - self._lo, weights=1.0 - frac, minlength=size)
            self._counts += np.bincount(ki + 1 - self._lo, weights=frac, minlength=size)
        else:
            self._counts += np.bincount(ki - self._lo, minlength=size)
        self._min, self._max = min(self._min, float(af.min())), max(self._max, float(af.max()))
        return self

    def merge(self, other: LatticeHistogram) -> LatticeHistogram:
        """Add ``other``'s counts (same spacing) to this histogram. Returns self."""
        if other.spacing != self.spacing:
            raise InvalidParameterError(
                f"Invalid merge: spacing {other.spacing} into a histogram of spacing "
                f"{self.spacing}; build both on one lattice."
            )
        if other._counts.size == 0:
            return self
        self._grow(other._lo, other._lo + other._counts.size - 1)
        start = other._lo - self._lo
        self._counts[start : start + other._counts.size] += other._counts
        self._min, self._max = min(self._min, other._min), max(self._max, other._max)
        self.binned = self.binned or other.binned
        return self

    @property
    def n(self) -> int:
        return round(float(self._counts.sum()))

    @property
    def low(self) -> float:
        """The smallest residual added (before binning)."""
        return float(self._min)

    @property
    def high(self) -> float:
        """The largest residual added (before binning)."""
        return float(self._max)

    @property
    def points(self) -> npt.NDArray[np.float64]:
        idx = np.flatnonzero(self._counts).astype(np.float64) + self._lo
        return idx if self._unit else idx * self.spacing

    @property
    def counts(self) -> npt.NDArray[np.float64]:
        return self._counts[self._counts > 0].astype(np.float64)

    def kde_error(self, bandwidth: float) -> float:
        """Bound on the relative error of the KDE at bandwidth h of this histogram (0 if exact)."""
        if not self.binned:
            return 0.0
        return binning_error_bound(max(self.n, 1), float(bandwidth) / self.spacing)


def lattice_spacing(
    sample: npt.ArrayLike, bandwidth_factor: float = 0.1, *, bandwidth: float | None = None
) -> float:
    """The lattice for streaming residuals like ``sample``: 1 if they are integers, else the largest
    power of two ≤ h / 200 with h = factor × sd(sample), or h = ``bandwidth`` (absolute) when given
    (so the binned KDE at that h errs by ≈ 4e-4 at most; a power of two keeps dyadic values such as
    ADPC's k/4 exact); 1/256 for a constant non-integer sample."""
    a = np.asarray(sample, dtype=np.float64).ravel()
    a = a[np.isfinite(a)]
    if a.size == 0 or bool(np.all(a == np.round(a))):
        return 1.0
    if bandwidth is not None:
        target = float(bandwidth) / 200.0
    else:
        sd = float(np.std(a, ddof=1)) if a.size > 1 else 0.0
        target = float(bandwidth_factor) * sd / 200.0
    if not math.isfinite(target) or target <= 0.0:  # a constant sample: no spread to scale by
        target = 2.0**-8
    return float(min(2.0 ** math.floor(math.log2(target)), 1.0))


def histograms_by_query(
    residual: npt.NDArray[Any],
    query_index: npt.NDArray[Any],
    n_queries: int,
    spacings: Sequence[float] | None = None,
    *,
    step_elements: int = STEP_ELEMENTS,
    into: list[LatticeHistogram | None] | None = None,
) -> list[LatticeHistogram | None]:
    """Per-query histograms of one block: ``residual`` (replicates, items), ``query_index``
    (items,); ``None`` for queries without items. Rows are taken ``step_elements`` at a time, so
    the block is never copied whole. ``spacings[q]`` is query q's lattice (default 1). ``into``:
    the histograms of the block's earlier rows (this function's result for them), counted on: a
    block read in ranges of whole steps of rows is counted in the same order as at once."""
    qi = np.asarray(query_index)
    if residual.ndim != 2 or residual.shape[1] != qi.size:
        raise InvalidParameterError(
            f"Invalid block: residual shape {residual.shape} and {qi.size} query indices; pass "
            "(replicates, items) residuals with one query index per item."
        )
    order = np.argsort(qi, kind="stable")
    bounds = np.searchsorted(qi[order], np.arange(n_queries + 1))
    hists: list[LatticeHistogram | None] = into if into is not None else [
        LatticeHistogram(1.0 if spacings is None else spacings[q])
        if bounds[q + 1] > bounds[q]
        else None
        for q in range(n_queries)
    ]  # fmt: skip
    rows = max(1, int(step_elements) // max(qi.size, 1))
    for start in range(0, residual.shape[0], rows):
        part = residual[start : start + rows][:, order]
        for q, h in enumerate(hists):
            if h is not None:
                h.add(part[:, bounds[q] : bounds[q + 1]])
    return hists


def histogram_of_zarr(
    array: Any, *, skip_nan: bool = True, spacing: float = 1.0
) -> LatticeHistogram:
    """The histogram of a Zarr (or any chunked, sliceable) array, read one chunk along the first
    axis at a time; NaN (the store's padding) skipped unless ``skip_nan=False``."""
    shape = tuple(array.shape)
    if not shape:
        raise InvalidParameterError("Invalid array: a scalar; pass an array of residuals.")
    step = int(getattr(array, "chunks", shape)[0]) or 1
    hist = LatticeHistogram(spacing)
    for start in range(0, shape[0], step):
        block = np.asarray(array[start : start + step])
        if skip_nan and np.issubdtype(block.dtype, np.floating):
            block = block[~np.isnan(block)]
        hist.add(block)
    return hist
