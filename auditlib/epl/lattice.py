"""Residuals on their own lattice: detect it, and evaluate the KDE at its points by FFT.

An average of P integer counts (Flaxman's ADPC, P runs of GDPC) lives on ℤ/P, not on ℤ: its pmf
and its log-ratio ``log P(x)/P(x+1)`` are defined at every x ∈ ℤ/P, and the loss of the release is
the maximum over *all* of them. Evaluating the EPL curve only at integer x misses the points
between (at ε = 1, P = 4 the integer points reach 0.929 of the lattice's maximum).

:func:`residual_lattice` finds the coarsest lattice ``offset + ℤ/q`` (q ≤ :data:`MAX_DENOMINATOR`)
holding every distinct residual, to a relative tolerance :data:`TOLERANCE` (float32 stores k/3
with a relative error ≈ 6e-8); ``None`` when there is none (raked, continuous residuals). A
:class:`~auditlib.epl.stream.LatticeHistogram` that was not binned holds its values exactly, so
the lattice read from its points is the one the stream kept (ADPC's k/4 on a dyadic spacing).

:func:`lattice_log_densities` evaluates ``log p̂`` of R count vectors on the lattice (the data and
B bootstrap resamples) at lattice queries for several bandwidths: the density is the discrete
convolution of the counts with the sampled kernel, one real FFT of the rows and one inverse per
bandwidth. Terms farther than ``√(d₀² + 2h²(ln n + 40))`` from a query are dropped, as in
:mod:`auditlib.epl.kde` (< e⁻⁴⁰ of the kept sum). The FFT's rounding is ≈ 1e-16 of the row's
total mass per point; a query whose density is below :data:`_FFT_FLOOR` of the total (only far
outside the data) gets NaN rather than a rounding-dominated value, so its curve is left out like
a log of an empty region.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import fft as sfft

#: largest q of a detected lattice ℤ/q (an average of up to 64 runs)
MAX_DENOMINATOR = 64
#: relative tolerance of "on the lattice" (float32 residuals hold k/q to ≈ 6e-8)
TOLERANCE = 1e-6
_NEGLIGIBLE = 40.0
_FFT_FLOOR = 1e-9  # smallest density (× n) trusted from the FFT: its rounding is ≈ 1e-16 × n
_FFT_ELEMENTS = 1 << 22  # complex elements per block of rows (≈ 64 MiB)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


@dataclass(frozen=True)
class Lattice:
    """The points ``offset + k / denominator`` (k ∈ ℤ); ``offset`` in [0, 1/denominator)."""

    denominator: int
    offset: float = 0.0

    @property
    def spacing(self) -> float:
        return 1.0 / self.denominator

    @property
    def is_integers(self) -> bool:
        """ℤ itself (where the estimators keep their integer-grid code and numbers)."""
        return self.denominator == 1 and self.offset == 0.0

    def index(self, values: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Lattice index k of each value (rounded to the nearest point)."""
        v = np.asarray(values, dtype=np.float64)
        return np.round((v - self.offset) * self.denominator).astype(np.int64)

    def value(self, index: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """``offset + k/q`` (exact for dyadic q)."""
        k = np.asarray(index, dtype=np.float64)
        return np.asarray(self.offset + k / self.denominator, dtype=np.float64)

    def steps(self, shift: float) -> int | None:
        """``shift`` in lattice steps, or None if it is not a whole number of them."""
        s = float(shift) * self.denominator
        k = round(s)
        return k if k > 0 and abs(s - k) <= TOLERANCE * max(1.0, abs(s)) else None


def _on_lattice(t: npt.NDArray[np.float64], tol: float) -> bool:
    return bool(np.all(np.abs(t - np.round(t)) <= tol * np.maximum(1.0, np.abs(t))))


def residual_lattice(
    points: npt.ArrayLike, *, max_denominator: int = MAX_DENOMINATOR, tol: float = TOLERANCE
) -> Lattice | None:
    """The coarsest lattice ``offset + ℤ/q``, q ≤ ``max_denominator``, holding every value of
    ``points`` (distinct residuals), or None. One point alone: its own lattice ℤ + point."""
    p = np.asarray(points, dtype=np.float64).ravel()
    if p.size == 0 or not np.all(np.isfinite(p)):
        return None
    d = p - p[0]
    for q in range(1, int(max_denominator) + 1):
        if _on_lattice(d * q, tol):
            off = float(p[0]) * q
            frac = off - math.floor(off)
            if frac <= tol * max(1.0, abs(off)) or 1.0 - frac <= tol * max(1.0, abs(off)):
                frac = 0.0
            return Lattice(q, frac / q)
    return None


def lattice_log_densities(
    index: npt.NDArray[np.int64],
    counts: npt.NDArray[np.float64],
    spacing: float,
    bandwidths: list[float],
    query: npt.NDArray[np.int64],
) -> list[npt.NDArray[np.float64]]:
    """``log p̂`` at lattice indices ``query`` for each row of ``counts`` (R × P, the counts at the
    sorted lattice indices ``index``) and each bandwidth (absolute, residual units): a list of
    R × Q arrays, one per bandwidth. NaN where the density is below the FFT's trusted floor."""
    rows = np.atleast_2d(np.asarray(counts, dtype=np.float64))
    idx = np.asarray(index, dtype=np.int64)
    q = np.asarray(query, dtype=np.int64)
    totals = rows.sum(axis=1)
    pos = np.searchsorted(idx, q)
    left = idx[np.clip(pos - 1, 0, idx.size - 1)]
    right = idx[np.clip(pos, 0, idx.size - 1)]
    d0 = float(np.max(np.minimum(np.abs(q - left), np.abs(q - right))))
    log_n = math.log(max(float(np.max(totals)), 2.0))
    hs = [float(h) / spacing for h in bandwidths]  # bandwidths in lattice steps
    reach = max(math.ceil(math.sqrt(d0 * d0 + 2.0 * h * h * (log_n + _NEGLIGIBLE))) for h in hs)
    lo, hi = int(q.min()) - reach, int(q.max()) + reach
    keep = (idx >= lo) & (idx <= hi)
    width = hi - lo + 1
    size = sfft.next_fast_len(width + 2 * reach, real=True)
    j = np.arange(-reach, reach + 1, dtype=np.float64)
    spectra = []
    for h in hs:
        kern = np.zeros(size)
        kern[: 2 * reach + 1] = np.exp(-0.5 * (j / h) ** 2)
        spectra.append(sfft.rfft(kern))
    cols = q - lo + reach  # position of each query in the full linear convolution
    out = [np.empty((rows.shape[0], q.size)) for _ in hs]
    step = max(1, _FFT_ELEMENTS // (size // 2 + 1))
    for a in range(0, rows.shape[0], step):
        block = np.zeros((min(step, rows.shape[0] - a), size))
        block[:, idx[keep] - lo] = rows[a : a + step, keep]
        spec = sfft.rfft(block, axis=1)
        tot = totals[a : a + step, None]
        for k, (h, kspec) in enumerate(zip(hs, spectra, strict=True)):
            dens = sfft.irfft(spec * kspec[None, :], n=size, axis=1)[:, cols]
            with np.errstate(divide="ignore", invalid="ignore"):
                logd = np.log(dens) - np.log(tot) - math.log(h * spacing) - _LOG_SQRT_2PI
            out[k][a : a + step] = np.where(dens > _FFT_FLOOR * tot, logd, math.nan)
    return out
