"""Post-processing of noisy measurements into non-negative, consistent, integer histograms.

Every operation is vectorized over many independent *segments* (a segment is a set of variables
whose sum is fixed: one parent's children in one cell, or one state's cells): the variables are a flat
array, ``segment`` gives each variable's segment id, ``target`` each segment's sum.

- :func:`project_simplex` / :class:`Segments` — the exact Euclidean projection onto ``{x ≥ 0,
  Σ_segment x = target}`` for all segments at once, sort-free (:mod:`auditlib.simulate.projection`:
  each segment's threshold by Newton's method from the left, finished exactly on its active set).
- :class:`ChildSegments` — the same projection for the layout TopDown solves at every level below the
  top: units grouped by parent, a segment per (parent, cell). No sort and no gather: the thresholds
  are found by Newton's method on the piecewise-linear ``Σ max(v − τ, 0) − target`` (Michelot 1986),
  with per-parent sums by one sparse (parents × units) product, warm-started from the previous
  projection's thresholds.
- :func:`round_preserving` — largest-remainder rounding per segment: integers, non-negative, within 1
  of the real solution, summing exactly to the (integer) target of every segment.

The weighted least-squares fit onto these feasible sets is in :mod:`auditlib.simulate.wls`.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy import sparse

from auditlib.exceptions import InvalidParameterError
from auditlib.simulate.projection import project_thresholds

#: the grid the rounders snap their real-valued inputs to (2⁻¹⁶ ≈ 1.5e-5 people): fractional parts
#: closer than this are ties, broken by position, so two machines whose fits differ in the last
#: digits (another BLAS, another order of sums) release the same integers. A perturbation of size
#: d moves a value across a grid point with probability about 2d / ROUNDING_GRID (3e-5 per value at
#: d = 1e-9); a tie broken by float noise flipped about 7 % of a level's cells before.
ROUNDING_GRID = 2.0**-16


def snap(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """``x`` to the nearest multiple of :data:`ROUNDING_GRID` (exact in float64 below 2³⁶)."""
    return np.round(x / ROUNDING_GRID) * ROUNDING_GRID


FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def _check_segments(
    n: int, segment: npt.ArrayLike, target: npt.ArrayLike
) -> tuple[IntArray, FloatArray]:
    seg = np.asarray(segment, dtype=np.int64).ravel()
    tgt = np.asarray(target, dtype=np.float64).ravel()
    if seg.size != n:
        raise InvalidParameterError(f"Invalid segment: {seg.size} ids for {n} values")
    if seg.size and (seg.min() < 0 or seg.max() >= tgt.size):
        raise InvalidParameterError(
            f"Invalid segment ids in [{seg.min()}, {seg.max()}]; need 0..{tgt.size - 1}"
        )
    if not np.isfinite(tgt).all() or (tgt < 0).any():
        bad = tgt[~(np.isfinite(tgt) & (tgt >= 0))][0]
        raise InvalidParameterError(f"Invalid segment target {bad}; targets must be finite, >= 0")
    counts = np.bincount(seg, minlength=tgt.size)
    empty = (counts == 0) & (tgt > 0)
    if empty.any():
        i = int(np.flatnonzero(empty)[0])
        raise InvalidParameterError(
            f"Inconsistent hierarchy: segment {i} has target {tgt[i]:g} but no variables "
            "(a parent with people and no children)"
        )
    return seg, tgt


def _check_child_segments(par: IntArray, tgt: FloatArray) -> FloatArray:
    """:func:`_check_segments` of the segments ``par[i] · n_cells + k`` (same checks, same
    messages) without building them: the targets, raveled."""
    n_par, n_cells = tgt.shape
    if par.size and n_cells and (par.min() < 0 or par.max() >= n_par):
        lo, hi = int(par.min()) * n_cells, int(par.max()) * n_cells + n_cells - 1
        raise InvalidParameterError(f"Invalid segment ids in [{lo}, {hi}]; need 0..{tgt.size - 1}")
    flat = tgt.ravel()
    if not np.isfinite(flat).all() or (flat < 0).any():
        bad = flat[~(np.isfinite(flat) & (flat >= 0))][0]
        raise InvalidParameterError(f"Invalid segment target {bad}; targets must be finite, >= 0")
    childless = np.bincount(par, minlength=n_par) == 0
    empty = childless[:, None] & (tgt > 0)
    if empty.any():
        i = int(np.flatnonzero(empty)[0])
        raise InvalidParameterError(
            f"Inconsistent hierarchy: segment {i} has target {flat[i]:g} but no variables "
            "(a parent with people and no children)"
        )
    return flat


def _sort_within(values: FloatArray, seg: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """Order sorting ``values`` descending within segments; each sorted entry's 0-based rank; and
    the start (in sorted order) of every segment's run."""
    order = np.lexsort((-values, seg))
    s = seg[order]
    start = np.ones(s.size, dtype=bool)
    start[1:] = s[1:] != s[:-1]
    first = np.flatnonzero(start)
    run_start = np.repeat(first, np.diff(np.append(first, s.size)))
    rank = np.arange(s.size) - run_start
    return order, rank, run_start


class Segments:
    """A segmentation, checked once, and the thresholds of its last projection: every projection
    onto it (:func:`~auditlib.simulate.projection.project_thresholds`, sort-free) starts from them,
    which saves steps when successive inputs are close (FISTA's iterates) and gives the same result
    bit for bit as a cold start."""

    def __init__(self, segment: npt.ArrayLike, target: npt.ArrayLike) -> None:
        seg = np.asarray(segment, dtype=np.int64).ravel()
        self.seg, self.target = _check_segments(seg.size, seg, target)
        self.sizes = np.bincount(self.seg, minlength=self.target.size)
        self.tau: FloatArray | None = None  # thresholds of the last projection (warm start)

    def project(self, y: npt.ArrayLike) -> FloatArray:
        """Euclidean projection onto ``{x ≥ 0, Σ_{segment s} x = target[s]}``."""
        v = np.asarray(y, dtype=np.float64).ravel()
        if v.size != self.seg.size:
            raise InvalidParameterError(f"Invalid y: {v.size} values for {self.seg.size} ids")
        if not np.isfinite(v).all():
            raise InvalidParameterError("Invalid y: values must be finite")
        if v.size == 0:
            return v.copy()
        x, self.tau = project_thresholds(v, self.seg, self.target, self.sizes, self.tau)
        return x


class ChildSegments:
    """Segments of children in cells: unit ``i`` (rows grouped by parent, ``parent`` non-decreasing)
    in cell ``k`` belongs to segment ``parent[i] · n_cells + k``; ``target`` is (n_parents, n_cells).

    :meth:`project` is the Euclidean projection onto ``{x ≥ 0, Σ_{children of p} x[:, k] = target[p,
    k]}``, exact up to floating point (each segment's sum within ``1e-11 · (1 + target)``), like
    :meth:`Segments.project` on the same segments, with cost linear in the size of ``y``.

    The threshold ``τ`` of a segment solves ``g(τ) = Σ max(v − τ, 0) − t = 0``; ``g`` is convex,
    decreasing and piecewise linear, so a Newton step from any point with a non-zero slope lands at or
    left of the root, and from the left Newton's iterates increase to the root, reaching it in finitely
    many steps (each step drops at least one value from the active set). Start: the previous
    thresholds (one Newton step maps them to the left of the root) raised to the lower bound
    ``(Σ v − t) / n`` (all children active); a segment with target 0 has ``τ = ∞`` (all zero). Should floating
    point stall the iteration, :meth:`Segments.project` finishes the job.
    """

    def __init__(self, parent: npt.ArrayLike, target: npt.ArrayLike) -> None:
        par = np.asarray(parent, dtype=np.int64).ravel()
        tgt = np.asarray(target, dtype=np.float64)
        if tgt.ndim != 2:
            raise InvalidParameterError(
                f"Invalid target of shape {tgt.shape}; expected (n_parents, n_cells)"
            )
        n_par, n_cells = tgt.shape
        if par.size and (np.diff(par) < 0).any():
            raise InvalidParameterError("Invalid parent: units must be grouped by parent (sorted)")
        flat = _check_child_segments(par, tgt)
        self.parent, self.target = par, flat.reshape(n_par, n_cells)
        self.sizes = np.bincount(par, minlength=n_par)
        has = self.sizes > 0
        self.has = has
        self.starts = (np.cumsum(self.sizes) - self.sizes)[has]
        self.width = int(self.sizes.max(initial=0))
        # row i's parent among the parents with children; the (parents × units) 0/1 sum operator
        self.rows = (np.cumsum(has) - 1)[par]
        n_has = int(has.sum())
        self._sum = sparse.csr_matrix(
            (np.ones(par.size), self.rows, np.arange(par.size + 1)), shape=(par.size, n_has)
        ).T.tocsr()
        self.tau: FloatArray | None = None  # thresholds of the last projection (warm start)
        self._scratch: FloatArray | None = None

    def runs(self, max_units: int) -> list[tuple[int, int, ChildSegments]]:
        """The layout cut into runs of whole parents of about ``max_units`` units (at least one
        parent each): ``(first unit, end unit, the run's own ChildSegments)``. The projection is
        separable by parent, so projecting each run projects the whole."""
        n_par = self.target.shape[0]
        bounds = np.searchsorted(self.parent, np.arange(n_par + 1))  # each parent's first unit
        out, p0 = [], 0
        while p0 < n_par:
            p1 = int(np.searchsorted(bounds, bounds[p0] + max_units, side="right")) - 1
            p1 = min(max(p1, p0 + 1), n_par)
            r0, r1 = int(bounds[p0]), int(bounds[p1])
            out.append((r0, r1, ChildSegments(self.parent[r0:r1] - p0, self.target[p0:p1])))
            p0 = p1
        return out

    def project(self, y: npt.ArrayLike, out: FloatArray | None = None) -> FloatArray:
        """Euclidean projection of ``y`` (n_units, n_cells) onto the feasible set (into ``out``, an
        array of ``y``'s shape other than ``y``, if given)."""
        v = np.asarray(y, dtype=np.float64)
        n_units, n_cells = self.parent.size, self.target.shape[1]
        if v.shape != (n_units, n_cells):
            raise InvalidParameterError(
                f"Invalid y of shape {v.shape}; expected ({n_units}, {n_cells})"
            )
        if not np.isfinite(v).all():
            raise InvalidParameterError("Invalid y: values must be finite")
        if v.size == 0:
            return v.copy()
        return self._project(np.ascontiguousarray(v), out)

    def _project(self, v: FloatArray, out: FloatArray | None) -> FloatArray:
        """:meth:`project` of a finite ``v`` of the right shape (no check)."""
        n_units, n_cells = v.shape
        total = self._sum
        t = self.target[self.has]
        lower = (total @ v - t) / self.sizes[self.has][:, None]
        zero = t == 0
        lower[zero] = np.inf  # target 0: every child 0
        tau = lower if self.tau is None else self.tau
        if self._scratch is None or self._scratch.shape != v.shape:
            self._scratch = np.empty_like(v)
        act = self._scratch
        d = np.empty_like(v) if out is None or out.shape != v.shape or out is v else out
        slack = 1e-11 * (1.0 + t)
        for it in range(self.width + 3):
            # each unit's thresholds, into a kept buffer (a fresh array per step costs more)
            np.take(tau, self.rows, axis=0, out=act, mode="clip")
            np.subtract(v, act, out=d)
            np.maximum(d, 0.0, out=d)
            gap = total @ d - t
            if np.all(np.abs(gap) <= slack):
                self.tau = tau
                return d
            np.sign(d, out=act)  # d ≥ 0: 1 where active
            active = total @ act
            step = np.divide(gap, active, out=np.zeros_like(gap), where=active > 0)
            tau = tau + step
            if it == 0:  # now left of the root everywhere; raise to the lower bound
                stuck = (active == 0) & ~zero  # right of every value: slope 0
                tau = np.where(stuck, lower, np.maximum(tau, lower))
        seg = (self.parent[:, None] * n_cells + np.arange(n_cells)).ravel()
        self.tau = None
        return Segments(seg, self.target).project(v).reshape(n_units, n_cells)


def project_simplex(y: npt.ArrayLike, segment: npt.ArrayLike, target: npt.ArrayLike) -> FloatArray:
    """Euclidean projection of ``y`` onto ``{x ≥ 0, Σ_{segment s} x = target[s]}`` for every s.

    Exact up to floating point: ``x = max(y − τ_s, 0)`` with the threshold τ_s of each segment
    (:mod:`auditlib.simulate.projection`). Segments with target 0 come out all zero.
    """
    return Segments(segment, target).project(y)


def round_preserving(x: npt.ArrayLike, segment: npt.ArrayLike, target: npt.ArrayLike) -> IntArray:
    """Largest-remainder rounding of a non-negative ``x`` whose segments sum to integer targets.

    Each value is floored; each segment's deficit ``target − Σ floor`` (between 0 and the segment's
    size) goes, one unit each, to its values with the largest fractional parts (ties: lower index).
    The result is integer, ``≥ 0``, within 1 of ``x``, and sums exactly to every target.
    """
    v = np.asarray(x, dtype=np.float64).ravel()
    seg, tgt = _check_segments(v.size, segment, target)
    if (tgt != np.round(tgt)).any():
        raise InvalidParameterError("Invalid target: rounding needs integer segment targets")
    if not np.isfinite(v).all() or (v < -1e-6).any():
        raise InvalidParameterError("Invalid x: values must be finite and >= 0")
    v = snap(np.maximum(v, 0.0))
    fl = np.floor(v)
    frac = v - fl
    out = fl.astype(np.int64)
    nseg = np.bincount(seg, minlength=tgt.size)
    deficit = tgt.astype(np.int64) - np.bincount(seg, weights=fl, minlength=tgt.size).astype(
        np.int64
    )
    if (deficit < 0).any() or (deficit > nseg).any():
        i = int(np.flatnonzero((deficit < 0) | (deficit > nseg))[0])
        raise InvalidParameterError(
            f"Invalid x: segment {i} sums to {v[seg == i].sum():g}, not its target {tgt[i]:g}"
        )
    order, rank, _ = _sort_within(frac, seg)
    bump = rank < deficit[seg[order]]
    out[order[bump]] += 1
    return out
