"""Streaming EPL input: the lattice histogram of integer residuals, accumulated chunk by chunk.

Every EPL computation on integer residuals (TopDown's, the geometric mechanism's) needs only the
histogram: the KDE is a convolution of it, the sd and percentiles are weighted statistics of it and
the bootstrap resamples it. :class:`LatticeHistogram` accumulates it from chunks — e.g. the Zarr
chunks of a residual store, read one at a time by :func:`histogram_of_zarr` — so 10⁸ residuals
never sit in memory at all: peak memory is one chunk (plus its int64 copy) and the histogram.
:func:`auditlib.epl.estimate_epl` and :func:`auditlib.epl.epl_surface` accept the histogram in
place of the residuals and give the same numbers as on the concatenated residuals.

NaN is the store's padding and is skipped by :func:`histogram_of_zarr`; :meth:`LatticeHistogram.add`
itself rejects non-finite and non-integer values (bin non-integer residuals first).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError


class LatticeHistogram:
    """Counts of integer residuals; ``add`` chunks, then read ``points``/``counts``/``n``."""

    def __init__(self) -> None:
        self._lo = 0
        self._counts = np.zeros(0, dtype=np.int64)

    def add(self, chunk: npt.ArrayLike) -> LatticeHistogram:
        """Count one chunk of integer-valued residuals (any shape). Returns self."""
        a = np.asarray(chunk)
        if a.size == 0:
            return self
        if not np.issubdtype(a.dtype, np.integer):
            af = a.astype(np.float64, copy=False)
            if not np.isfinite(af).all():
                raise InvalidParameterError(
                    "Invalid residual chunk: NaN or infinite values; drop padding first "
                    "(histogram_of_zarr skips NaN)."
                )
            if not (af == np.round(af)).all():
                raise InvalidParameterError(
                    "Invalid residual chunk: non-integer values; the streaming path needs lattice "
                    "residuals (bin them, or pass the residuals to estimate_epl directly)."
                )
        ints = a.astype(np.int64).ravel()
        lo, hi = int(ints.min()), int(ints.max())
        if self._counts.size == 0:
            self._lo = lo
        new_lo = min(self._lo, lo)
        new_hi = max(self._lo + self._counts.size - 1, hi)
        if new_hi - new_lo >= 50_000_000:
            raise InvalidParameterError(
                f"Invalid residual chunk: range {new_lo}..{new_hi} too wide for a lattice "
                "histogram; pass the residuals to estimate_epl directly."
            )
        if new_lo < self._lo or new_hi >= self._lo + self._counts.size:
            grown = np.zeros(new_hi - new_lo + 1, dtype=np.int64)
            grown[self._lo - new_lo : self._lo - new_lo + self._counts.size] = self._counts
            self._counts, self._lo = grown, new_lo
        self._counts += np.bincount(ints - self._lo, minlength=self._counts.size)
        return self

    @property
    def n(self) -> int:
        return int(self._counts.sum())

    @property
    def points(self) -> npt.NDArray[np.float64]:
        return np.flatnonzero(self._counts).astype(np.float64) + self._lo

    @property
    def counts(self) -> npt.NDArray[np.float64]:
        return self._counts[self._counts > 0].astype(np.float64)


def histogram_of_zarr(array: Any, *, skip_nan: bool = True) -> LatticeHistogram:
    """The histogram of a Zarr (or any chunked, sliceable) array, read one chunk along the first
    axis at a time; NaN (the store's padding) skipped unless ``skip_nan=False``."""
    shape = tuple(array.shape)
    if not shape:
        raise InvalidParameterError("Invalid array: a scalar; pass an array of residuals.")
    step = int(getattr(array, "chunks", shape)[0]) or 1
    hist = LatticeHistogram()
    for start in range(0, shape[0], step):
        block = np.asarray(array[start : start + step])
        if skip_nan and np.issubdtype(block.dtype, np.floating):
            block = block[~np.isnan(block)]
        hist.add(block)
    return hist
