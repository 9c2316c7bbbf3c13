"""Sort-free thresholds of the Euclidean projection onto ``{x ≥ 0, Σ_{segment s} x = target[s]}``.

The projection is ``x = max(v − τ_s, 0)``, where the threshold ``τ_s`` of segment ``s`` solves
``g(τ) = Σ_{i ∈ s} max(v_i − τ, 0) − t_s = 0``. ``g`` is convex, decreasing and piecewise linear, so
a Newton step ``τ' = (Σ_{v_i > τ} v_i − t_s) / #{v_i > τ}`` from any point with an active value
lands at or left of the root, and from the left the iterates increase to it (Michelot 1986); the
active set only shrinks on the way, so each step works on the values still active (compacted), and a
segment is done when a step drops none of them: then ``τ' = (Σ_A v − t_s) / |A|`` with ``A = {v >
τ'}``, the exact threshold. All segments step together (``np.bincount`` sums); no sort.

Start: from the left at ``(Σ v − t_s) / n_s`` (every value active), or, warm, one Newton step from
given thresholds (the previous projection's: iterates of a first-order method move little), raised
to that bound where it is needed (no value above the given threshold). The last thresholds are
found from the same active set, summed in the same (index) order, whichever the start: a warm start
gives the cold result bit for bit. Should a segment take more than :data:`MAX_STEPS` steps, its
remaining active values are sorted (the threshold of the values left is the threshold of all).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Newton steps before the segments still moving are finished by a sort of their active values
MAX_STEPS = 40


def _sorted_thresholds(v: FloatArray, seg: IntArray, target: FloatArray) -> FloatArray:
    """Thresholds by sorting each segment's values (every segment of ``seg`` non-empty, target > 0):
    ``τ = (Σ_{j ≤ ρ} u_j − t) / ρ`` with ``u`` descending and ``ρ`` the last ``j`` where ``u_j >
    (Σ_{i ≤ j} u_i − t) / j``. The sums run across segments (one cumulative sum), so each segment's
    values are shifted by their mean (the sum over a segment is then its rounding) and the segments
    taken from the smallest values to the largest: what a segment's sums carry from the segments
    before it is below its own rounding."""
    m = target.size
    n = np.bincount(seg, minlength=m)
    mean = np.bincount(seg, weights=v, minlength=m) / np.maximum(n, 1)
    big = np.zeros(m)
    np.maximum.at(big, seg, np.abs(v - mean[seg]))
    place = np.empty(m, dtype=np.int64)
    place[np.argsort(big, kind="stable")] = np.arange(m)
    order = np.lexsort((-v, place[seg]))
    s = seg[order]
    u = v[order] - mean[s]
    start = np.ones(s.size, dtype=bool)
    start[1:] = s[1:] != s[:-1]
    first = np.flatnonzero(start)
    run = np.repeat(first, np.diff(np.append(first, s.size)))
    c = np.cumsum(u)
    css = c - np.where(run > 0, c[run - 1], 0.0)
    rank = np.arange(s.size) - run + 1.0
    ok = u - (css - target[s]) / rank > 0
    rho = np.maximum(np.add.reduceat(ok.astype(np.int64), first), 1)
    tau = np.full(m, np.inf)
    ids = s[first]
    tau[ids] = (css[first + rho - 1] - target[ids]) / rho + mean[ids]
    return tau


def project_thresholds(
    v: FloatArray,
    seg: IntArray,
    target: FloatArray,
    sizes: IntArray,
    start: FloatArray | None = None,
) -> tuple[FloatArray, FloatArray]:
    """The projection of finite ``v`` (segment ids ``seg``, every segment with a positive target
    non-empty: the caller checks) and each segment's threshold (``inf`` where the target is 0 or
    the segment empty), from the thresholds ``start`` if given (module docstring)."""
    m = target.size
    live = target > 0
    x = np.zeros(v.size)
    tau = np.full(m, np.inf)
    if not live.any():
        return x, tau
    size = np.maximum(sizes, 1)
    if start is None:
        tau0 = (np.bincount(seg, weights=v, minlength=m) - target) / size
    else:
        above = np.flatnonzero(v > start[seg])  # compacted: most values are below
        s_above = seg[above]
        count = np.bincount(s_above, minlength=m).astype(np.float64)
        total = np.bincount(s_above, weights=v[above], minlength=m)
        tau0 = np.divide(total - target, count, out=np.full(m, -np.inf), where=count > 0)
        stuck = (count == 0) & live
        if stuck.any():  # every value at or below its threshold: start from the bound
            lower = (np.bincount(seg, weights=v, minlength=m) - target) / size
            tau0 = np.where(stuck, lower, tau0)
    tau0[~live] = np.inf
    idx = np.flatnonzero(v > tau0[seg])
    vv, ss = v[idx], seg[idx]
    count = np.bincount(ss, minlength=m).astype(np.float64)
    # a positive target below the rounding of its values: no value above the bound (x = 0 there)
    tau[live & (count == 0)] = tau0[live & (count == 0)]
    for _ in range(MAX_STEPS):
        if not idx.size:
            return x, tau
        step = (np.bincount(ss, weights=vv, minlength=m) - target) / np.maximum(count, 1.0)
        keep = vv > step[ss]
        if keep.all():  # no value dropped: every segment left is done
            tau[count > 0] = step[count > 0]
            x[idx] = vv - step[ss]
            return x, tau
        dropped = np.bincount(ss, weights=~keep, minlength=m)
        # done: none dropped (exact), or, by rounding, all (the values at the threshold: x = 0)
        done = ((dropped == 0) | (dropped == count)) & (count > 0)
        tau[done] = step[done]
        fin = done[ss]
        x[idx[fin]] = np.maximum(vv[fin] - step[ss[fin]], 0.0)
        more = keep & ~fin
        idx, vv, ss = idx[more], vv[more], ss[more]
        count -= dropped
        count[done] = 0.0
    if idx.size:  # the rest by sorting the values still active
        rest = _sorted_thresholds(vv, ss, target)
        moving = np.unique(ss)
        tau[moving] = rest[moving]
        x[idx] = np.maximum(vv - rest[ss], 0.0)
    return x, tau
