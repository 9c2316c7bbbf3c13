"""Direct (non-FFT) convolution of sub-probability measures on the integers, with an error budget.

A :class:`LatticeMeasure` holds computed values ``v[i]`` standing for a sub-probability measure
``mu`` at the integers ``offset + i``. Two invariants carry every certified bound downstream:

* ``mu <= p`` pointwise, where ``p`` is the exact distribution being approximated, and the missing
  mass ``sum(p - mu)`` is at most ``dropped`` (truncations only ever remove mass);
* ``|log(v[i] / mu(offset + i))| <= radius`` wherever ``mu > 0`` (floating-point rounding; the
  model is in :mod:`auditlib.accounting._floats`).

Convolving two such measures gives ``mu_a * mu_b <= p_a * p_b`` pointwise with missing mass at most
``dropped_a + dropped_b`` (the masses multiply: ``(1 - d_a)(1 - d_b) >= 1 - d_a - d_b``).
Every convolution here is a direct sum of products: ``numpy.convolve`` (a direct method, never
FFT) for dense operands, and shifted, scaled copies for sparse ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from auditlib.accounting._floats import U_LOG, summation_radius


@dataclass(frozen=True)
class LatticeMeasure:
    """Computed sub-probability measure on ``offset + arange(len(values))`` (see module docstring)."""

    offset: int
    values: np.ndarray
    radius: float
    dropped: float

    @property
    def size(self) -> int:
        """Number of lattice points held (including interior zeros)."""
        return int(self.values.size)


def convolve(a: LatticeMeasure, b: LatticeMeasure) -> LatticeMeasure:
    """Direct convolution of two dense measures (``numpy.convolve``; each output is a sum of at most
    ``min(len a, len b)`` products, which bounds its rounding)."""
    out = np.convolve(a.values, b.values)
    adds = min(a.size, b.size)
    return LatticeMeasure(
        offset=a.offset + b.offset,
        values=out,
        radius=a.radius + b.radius + (adds + 1) * U_LOG,
        dropped=a.dropped + b.dropped,
    )


def add_sparse(
    acc: LatticeMeasure, positions: np.ndarray, values: np.ndarray, radius: float, dropped: float
) -> LatticeMeasure:
    """Convolve the dense ``acc`` with a measure given at sorted, distinct integer ``positions``.

    The work is ``len(acc) * len(positions)`` multiply-adds, done as ``min`` of the two vectorized
    passes: for each point of the smaller operand one shifted, scaled copy of the larger one is added.
    Each output thus receives at most ``min(...)`` products, added one at a time.
    """
    positions = np.asarray(positions, dtype=np.int64)
    p0 = int(positions[0])
    rel = positions - p0
    span = int(rel[-1])
    n_acc = acc.size
    if span + 1 == positions.size:  # contiguous: numpy's direct convolution is fastest
        out = np.convolve(acc.values, values)
    elif positions.size <= n_acc:
        out = np.zeros(n_acc + span)
        tmp = np.empty(n_acc)
        for r, v in zip(rel.tolist(), values.tolist(), strict=True):
            if v == 0.0:
                continue
            np.multiply(acc.values, v, out=tmp)
            window = out[r : r + n_acc]
            np.add(window, tmp, out=window)
    else:
        out = np.zeros(n_acc + span)
        for j, a in enumerate(acc.values.tolist()):
            if a == 0.0:
                continue
            out[rel + j] += a * values  # rel is distinct, so fancy-index += is exact per element
    adds = min(n_acc, int(positions.size))
    return LatticeMeasure(
        offset=acc.offset + p0,
        values=out,
        radius=acc.radius + radius + (adds + 1) * U_LOG,
        dropped=acc.dropped + dropped,
    )


def trim(m: LatticeMeasure, tail_mass: float) -> LatticeMeasure:
    """Drop both tails of ``m`` while each side's (upper-bounded) true mass stays ``<= tail_mass/2``.

    Exact zeros at the ends are removed for free. The dropped mass is bounded from above (computed
    partial sums times ``exp(radius + summation radius)`` and a relative pad of ``1e-12``) and added
    to ``dropped``, so the invariants of the module docstring keep holding.
    """
    v = m.values
    nonzero = v != 0.0
    if not nonzero.any():
        return LatticeMeasure(m.offset, np.zeros(1), m.radius, m.dropped)
    lo, hi = int(np.argmax(nonzero)), v.size - int(np.argmax(nonzero[::-1]))
    v = v[lo:hi]
    offset = m.offset + lo
    n = v.size
    scale = math.exp(m.radius + summation_radius(n) + U_LOG) * (1.0 + 1e-12)
    half = tail_mass / 2.0
    i, left = _tail(v, half, scale)
    j, right = _tail(v[::-1], half, scale)
    if i + j >= n:  # never drop everything: keep at least the largest point
        k = int(np.argmax(v))
        i, j = k, n - k - 1
        left = float(np.cumsum(v[:i])[-1]) * scale if i > 0 else 0.0
        right = float(np.cumsum(v[::-1][:j])[-1]) * scale if j > 0 else 0.0
    return LatticeMeasure(offset + i, v[i : n - j].copy(), m.radius, m.dropped + (left + right))


def _tail(v: np.ndarray, half: float, scale: float) -> tuple[int, float]:
    """The first ``i`` with ``cumsum(v)[i] * scale > half`` (``v.size`` if none) and
    ``cumsum(v)[i - 1] * scale`` (0 for ``i = 0``): the mass bound a trim drops on that side.

    The running sums are taken on growing prefixes only as far as needed; a prefix's running sums
    are the first ones of the whole array's (``cumsum`` adds left to right), so the same bits.
    """
    n = v.size
    k = min(n, 4096)
    while True:
        sums = np.cumsum(v[:k]) * scale
        if sums[-1] > half or k == n:
            i = int(np.searchsorted(sums, half, side="right"))
            return i, (float(sums[i - 1]) if i > 0 else 0.0)
        k = min(n, 4 * k)


def power(m: LatticeMeasure, count: int, tail_mass: float) -> LatticeMeasure:
    """``count``-fold convolution power of a dense measure (binary powering, trimmed after each step)."""
    result: LatticeMeasure | None = None
    base = m
    k = count
    while k:
        if k & 1:
            result = base if result is None else trim(convolve(result, base), tail_mass)
        k >>= 1
        if k:
            base = trim(convolve(base, base), tail_mass)
    assert result is not None
    return result


def aggregate(positions: list[int], m: LatticeMeasure) -> tuple[np.ndarray, np.ndarray, float]:
    """Push ``m`` forward through a non-decreasing integer map given as ``positions`` (one per point).

    Returns distinct positions, summed values and the log-radius the summing adds (at most
    ``max run length - 1`` additions per output).
    """
    pos = np.asarray(positions, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, pos[1:] != pos[:-1]])
    sums = np.add.reduceat(m.values, starts)
    runs = np.diff(np.r_[starts, pos.size])
    return pos[starts], sums, summation_radius(int(runs.max()))
