"""The EPL curves of the data and of its resamples, on the grid the residuals call for.

:class:`Curves` holds the residuals as distinct values and counts and evaluates ``log p̂`` at query
points for several bandwidths, for the data and for bootstrap count rows, on one of two grids:

* the residuals' own lattice when it is finer than ℤ or offset from it (ADPC's ℤ/P; found by
  :func:`auditlib.epl.lattice.residual_lattice`) — FFT convolutions of the lattice counts;
* the integers otherwise — integer residuals, residuals on no lattice, or ``grid="integers"``:
  the exact mixture (:func:`auditlib.epl.kde.mixture_logpdf`, or
  :func:`~auditlib.epl.kde.lattice_kde_logpdf` for raw non-integer values) and the kernel matrix
  of :mod:`auditlib.epl.bootstrap`, the same computations (and numbers) as before the lattice
  was used.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from auditlib.epl.bootstrap import KernelMatrix, multinomial_counts
from auditlib.epl.floor import lattice_reference_floor, reference_floor
from auditlib.epl.kde import (
    _linear_binning,
    integer_view,
    lattice_kde_logpdf,
    mixture_logpdf,
    support,
)
from auditlib.epl.lattice import TOLERANCE, Lattice, lattice_log_densities, residual_lattice
from auditlib.epl.stream import LatticeHistogram

#: Distinct non-integer values above which the bootstrap works on a linearly binned lattice.
_MAX_DISTINCT = 20_000


class Curves:
    """Where the curves come from: the residuals' own lattice finer than ℤ (FFT convolutions,
    :mod:`auditlib.epl.lattice`), or the integer grid (exact mixtures and the kernel matrix, as
    for integer residuals always)."""

    def __init__(
        self,
        hist: LatticeHistogram | None,
        raw: npt.ArrayLike,
        r: npt.NDArray[np.float64],
        delta: float,
        use_lattice: bool,
    ) -> None:
        self.r = r
        self.ints: npt.NDArray[np.int64] | None
        found: Lattice | None
        if hist is not None:  # streamed: exact points unless binned
            self.ints = np.empty(0, dtype=np.int64)  # the exact-mixture path
            self.points, self.counts = hist.points, hist.counts
            found = None if hist.binned else residual_lattice(self.points)
        else:
            self.ints = integer_view(raw, r)
            self.points, self.counts = support(r, self.ints)
            found = Lattice(1) if self.ints is not None else residual_lattice(self.points)
        self.steps = found.steps(delta) if found is not None else None
        #: the residuals' lattice when the curves are evaluated on it (None: the integer grid)
        self.lattice = found if found is not None and not found.is_integers else None
        if self.steps is None or not use_lattice:
            self.lattice = None
        #: spacing of the residuals' lattice (NaN: on none)
        self.spacing = found.spacing if found is not None else math.nan
        self._index = self.lattice.index(self.points) if self.lattice is not None else None

    def grid(self, window: tuple[float, float], delta: float) -> npt.NDArray[np.float64]:
        """The points x with x and x + Δ in ``window``."""
        if self.lattice is None:
            return np.arange(
                math.ceil(window[0]), math.floor(window[1] - delta) + 1, dtype=np.float64
            )
        lat = self.lattice
        q = lat.denominator
        k0 = math.ceil((window[0] - lat.offset) * q - TOLERANCE)
        k1 = math.floor((window[1] - delta - lat.offset) * q + TOLERANCE)
        return lat.value(np.arange(k0, k1 + 1))

    def centre(self, mean: float) -> float:
        """The lattice point nearest the mean (an integer on the integer grid)."""
        if self.lattice is None:
            return float(round(mean))
        return float(self.lattice.value(self.lattice.index(mean)))

    def main(self, hs: list[float], xq: npt.NDArray[np.float64]) -> list[npt.NDArray[np.float64]]:
        """log p̂ of the data at ``xq`` for each bandwidth."""
        if self._index is not None and self.lattice is not None:
            lat = self.lattice
            logs = lattice_log_densities(self._index, self.counts, lat.spacing, hs, lat.index(xq))
            return [lf[0] for lf in logs]
        if self.ints is not None:
            return [mixture_logpdf(self.points, self.counts, h, xq) for h in hs]
        return [lattice_kde_logpdf(self.r, h, xq) for h in hs]

    def resample(
        self, n: int, draws: int, h: float, rng: np.random.Generator
    ) -> npt.NDArray[np.float64]:
        """``draws`` multinomial histograms of n (a linearly binned lattice for many distinct
        non-lattice values)."""
        if self._index is None and self.ints is None and self.points.size > _MAX_DISTINCT:
            self.points, self.counts = _linear_binning(self.r, h / 200.0)
        return multinomial_counts(self.counts, n, draws, rng)

    def boot(
        self, rows: npt.NDArray[np.float64], hs: list[float], xq: npt.NDArray[np.float64]
    ) -> list[npt.NDArray[np.float64]]:
        """log p̂ of each count row at ``xq`` for each bandwidth (B × Q each)."""
        if self._index is not None and self.lattice is not None:
            lat = self.lattice
            return lattice_log_densities(self._index, rows, lat.spacing, hs, lat.index(xq))
        n = float(self.counts.sum())
        return [KernelMatrix(self.points, h, xq, n).log_density(rows) for h in hs]

    def reference_floor(
        self,
        sd: float,
        centre: float,
        n: int,
        h: float,
        x: npt.NDArray[np.float64],
        delta: float,
        draws: int,
        quantile: float,
        rng: np.random.Generator,
    ) -> dict[str, Any]:
        """The matched floor: a discrete Gaussian on the integers, or on the residuals' lattice."""
        if self.lattice is None:
            return reference_floor(sd, centre, n, h, x, delta, draws, quantile, rng)
        return lattice_reference_floor(
            self.lattice, sd, centre, n, h, x, delta, draws, quantile, rng
        )
