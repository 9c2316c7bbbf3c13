"""Controlled rounding of a TopDown level: children's histograms to integers with every cell and
every child's total within one of the real-valued solution, children summing to their parent's
integer histogram in every cell.

The real-valued children ``x`` (n_units, n_cells) of a parent sum, cell by cell, to the parent's
integer histogram. Rounding each (parent, cell) on its own (largest remainder, what
:func:`auditlib.simulate.postprocess.round_preserving` does) keeps those sums but lets a child's
total drift: the rounding errors of its cells add up, about 0.2 people² per cell with a fractional
part, over 1 person² per total over the 28 cells of ``pl94``. Controlled rounding (Cox 1987; the
Census Bureau's TopDown rounds with the totals controlled too) adds a second margin: each child's
total, ``T_i = Σ_k x_ik``, is rounded to ``⌊T_i⌋`` or ``⌈T_i⌉``.

Write ``x = ⌊x⌋ + f``: within a parent, cell k needs ``d_k = parent_k − Σ_i ⌊x_ik⌋`` of its
children rounded up (an integer, ``= Σ_i f_ik``), and child i's total is controlled when the number
``a_i`` of its cells rounded up lies in ``[⌊r_i⌋, ⌈r_i⌉]``, ``r_i = Σ_k f_ik``. Such a choice
always exists: ``f`` is a fractional flow in the bipartite network source → child ``[⌊r_i⌋,
⌈r_i⌉]`` → cell (capacity 1 where ``f_ik > 0``) → sink ``[d_k, d_k]``, whose constraint matrix is
totally unimodular, so it has an integral flow too. Rounding up only where ``f_ik > 0`` keeps every
cell within one of ``x`` and integer cells unchanged (an empty cell stays empty).

:func:`round_controlled` finds one for every parent at once:

1. **Totals first**: targets ``s_i`` = largest-remainder rounding of the ``r_i`` within each parent
   (summing to ``Σ_k d_k``): the totals closest to the real ones.
2. **Cells constrained to them**: cell by cell (a loop over the cells, vectorized over all units),
   each parent's ``d_k`` round-ups go to the children with a positive fraction in that cell, in
   order: those that must take every remaining chance to reach ``⌊r_i⌋``; those below their target
   ``s_i``; those below ``⌈r_i⌉``; by largest fraction within each class.
3. **Repair**: where that greedy pass misses a bound (the targets of step 1 are not always jointly
   feasible with the cells'), the parents concerned are solved exactly as the integral flow above
   (lower bounds by the usual circulation transform; one :func:`scipy.sparse.csgraph.maximum_flow`
   over all of them).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import sparse
from scipy.sparse.csgraph import maximum_flow

from auditlib.exceptions import InvalidParameterError
from auditlib.simulate.postprocess import snap

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: slack on a child's summed fractional parts when bounding its rounded total (floating point)
TOTAL_SLACK = 1e-9


def _rank_within(sorted_groups: IntArray) -> IntArray:
    """0-based rank of every entry within its run of equal (sorted) group ids."""
    return np.arange(sorted_groups.size) - np.searchsorted(sorted_groups, sorted_groups)


def _by_group_then_key(group: IntArray, key: FloatArray) -> IntArray:
    """The order sorting by group, then by ``key`` descending (``key`` in [0, 8)), ties by index:
    one stable sort of ``group · 8 + (8 − key)`` (keys closer than float64 resolves there, about
    1e-9 at a million groups, count as tied)."""
    return np.argsort(group * 8.0 + (8.0 - key), kind="stable")


def _group_sums(values: FloatArray, starts: IntArray, has: npt.NDArray[np.bool_]) -> FloatArray:
    """Per group (rows grouped, ``starts`` the first row of the groups with rows), column sums."""
    out = np.zeros((has.size, values.shape[1]))
    if values.shape[0]:
        out[has] = np.add.reduceat(values, starts, axis=0)
    return out


def round_controlled(x: npt.ArrayLike, parent: npt.ArrayLike, up: npt.ArrayLike) -> IntArray:
    """Controlled rounding of children ``x`` (n_units, n_cells), grouped by ``parent`` (sorted, in
    ``0..n_parents − 1``), whose cells sum per parent to the integer ``up`` (n_parents, n_cells).

    The result ``y`` is integer, ``≥ 0``, ``|y − x| < 1`` in every cell (``y = x`` where ``x`` is an
    integer), ``Σ_{children of p} y[:, k] = up[p, k]`` exactly, and every child's total
    ``Σ_k y_ik`` is ``⌊Σ_k x_ik⌋`` or ``⌈Σ_k x_ik⌉`` (up to :data:`TOTAL_SLACK`)."""
    v = np.asarray(x, dtype=np.float64)
    par = np.asarray(parent, dtype=np.int64).ravel()
    tgt = np.asarray(up)
    if v.ndim != 2 or tgt.ndim != 2 or tgt.shape[1] != v.shape[1] or par.size != v.shape[0]:
        raise InvalidParameterError(
            f"Invalid controlled rounding: x {v.shape}, parent {par.shape}, up {tgt.shape}; need "
            "(n_units, n_cells), (n_units,) and (n_parents, n_cells)"
        )
    n = v.shape[0]
    n_par = tgt.shape[0]
    v = check_inputs(v, par, tgt)
    fl = np.floor(v)
    frac = v - fl
    out = fl.astype(np.int64)
    if n == 0:
        return out
    sizes = np.bincount(par, minlength=n_par)
    has = sizes > 0
    starts = (np.cumsum(sizes) - sizes)[has]
    check_sums(_group_sums(v, starts, has), tgt)
    v = snap(v)  # near-ties are ties, broken by position: the same integers on any machine
    fl = np.floor(v)
    frac = v - fl
    out = fl.astype(np.int64)
    deficit = np.clip(
        tgt.astype(np.int64) - np.rint(_group_sums(fl, starts, has)).astype(np.int64), 0, None
    )
    lo, hi, target = total_targets(frac.sum(axis=1), par, deficit)
    pos = frac > 0
    picks = _greedy(frac, pos, par, deficit, lo, hi, target)
    a = picks.sum(axis=1)
    bad = np.unique(par[(a < lo) | (a > hi)])
    if bad.size:
        rows = np.flatnonzero(np.isin(par, bad))
        fixed = _flow_repair(
            pos[rows], np.searchsorted(bad, par[rows]), deficit[bad], lo[rows], hi[rows]
        )
        if fixed is not None:
            picks[rows] = fixed
    out += picks
    return out


def check_inputs(v: FloatArray, par: IntArray, tgt: npt.NDArray[Any]) -> FloatArray:
    """Integer parents, parents' indices in range and sorted, values finite and ``≥ 0`` (up to
    rounding error): ``v`` clipped at 0."""
    n_par = tgt.shape[0]
    if not np.issubdtype(tgt.dtype, np.integer) and (tgt != np.round(tgt)).any():
        raise InvalidParameterError("Invalid up: controlled rounding needs integer parents")
    if par.size and (par.min() < 0 or par.max() >= n_par or (np.diff(par) < 0).any()):
        raise InvalidParameterError(
            f"Invalid parent: need indices in 0..{n_par - 1}, units grouped by parent (sorted)"
        )
    if not np.isfinite(v).all() or (v < -1e-6).any():
        raise InvalidParameterError("Invalid x: values must be finite and >= 0")
    return np.maximum(v, 0.0)


def check_sums(sums: FloatArray, tgt: npt.NDArray[Any]) -> None:
    """The children's sums per (parent, cell) are the parents' (to 1e-6 relative)."""
    off = np.abs(sums - tgt) > 1e-6 * (1.0 + np.abs(tgt))
    if off.any():
        p, k = np.argwhere(off)[0]
        raise InvalidParameterError(
            f"Invalid x: the children of parent {p} sum to {float(sums[p, k]):g} in cell {k}, not "
            f"the parent's {int(tgt[p, k])}"
        )


def total_targets(
    r: FloatArray, par: IntArray, deficit: IntArray
) -> tuple[IntArray, IntArray, IntArray]:
    """Step 1: the rows' bounds ``⌊r⌋``, ``⌈r⌉`` (``r`` their fractional parts' sums) and their
    targets, the largest remainder of ``r`` within each parent, summing to ``Σ_k d_k``."""
    lo = np.floor(r + TOTAL_SLACK).astype(np.int64)
    hi = np.ceil(r - TOTAL_SLACK).astype(np.int64)
    n_par = deficit.shape[0]
    extra = deficit.sum(axis=1) - np.bincount(par, weights=lo, minlength=n_par).astype(np.int64)
    order = _by_group_then_key(par, np.clip(r - lo, 0.0, 1.0))
    target = lo.copy()
    up_one = order[_rank_within(par[order]) < extra[par[order]]]
    target[up_one] = np.minimum(target[up_one] + 1, hi[up_one])
    return lo, hi, target


def cell_roundups(
    c: IntArray,
    fc: FloatArray,
    par: IntArray,
    need_k: IntArray,
    a: IntArray,
    chances: IntArray,
    lo: IntArray,
    hi: IntArray,
    target: IntArray,
) -> IntArray:
    """One cell of step 2: of its rows ``c`` with a positive fraction ``fc`` (increasing), the
    positions of those rounded up: each parent's ``need_k`` by class (must / below target /
    below ceiling / at ceiling), then largest fraction (``a``: the rows' round-ups so far,
    ``chances``: their cells with a fraction not yet visited, this one included)."""
    pc = par[c]
    ac = a[c]
    cls = np.where(
        ac >= hi[c],
        0,
        np.where(lo[c] - ac >= chances[c], 3, np.where(ac < target[c], 2, 1)),
    )
    order = _by_group_then_key(pc, cls + fc)
    ps = pc[order]
    return order[_rank_within(ps) < need_k[ps]]


def _greedy(
    frac: FloatArray,
    pos: BoolArray,
    par: IntArray,
    deficit: IntArray,
    lo: IntArray,
    hi: IntArray,
    target: IntArray,
) -> BoolArray:
    """Step 2: cell by cell, each parent's round-ups to its children with a positive fraction, by
    class (must / below target / below ceiling / at ceiling), then largest fraction."""
    n, n_cells = frac.shape
    picks = np.zeros((n_cells, n), dtype=bool)
    a = np.zeros(n, dtype=np.int64)  # cells rounded up so far
    chances = pos.sum(axis=1)  # cells with a fraction not yet visited (this one included)
    # cell-major copies: each cell's units are read contiguously
    pos_t, frac_t, need = np.ascontiguousarray(pos.T), np.ascontiguousarray(frac.T), deficit.T
    for k in range(n_cells):
        c = np.flatnonzero(pos_t[k])
        if c.size == 0:
            continue
        if need[k].any():
            chosen = c[cell_roundups(c, frac_t[k, c], par, need[k], a, chances, lo, hi, target)]
            picks[k, chosen] = True
            a[chosen] += 1
        chances[c] -= 1
    return picks.T.copy()


def _flow_repair(
    pos: BoolArray, par: IntArray, deficit: IntArray, lo: IntArray, hi: IntArray
) -> BoolArray | None:
    """Step 3: round-ups of the children (``pos``: where they may be) of a few parents as an
    integral flow with child bounds ``[lo, hi]`` and cell demands ``deficit``; None if none exists
    (only through floating point in the bounds).

    Circulation with lower bounds: per parent p, nodes s_p and t_p with t_p → s_p unbounded;
    s_p → child i carries ``hi − lo`` and the super source S supplies ``lo`` to i; a cell node
    sends its ``d`` to the super sink T; S supplies t_p with ``Σ d`` and s_p drains ``Σ lo`` to T.
    A flow saturating S is a feasible rounding."""
    n, n_cells = pos.shape
    ri, ki = np.nonzero(pos & (deficit[par] > 0))
    got = flow_roundups(par, deficit, lo, hi, ri, ki)
    if got is None:
        return None
    out = np.zeros((n, n_cells), dtype=bool)
    out[got] = True
    return out


def flow_roundups(
    par: IntArray, deficit: IntArray, lo: IntArray, hi: IntArray, ri: IntArray, ki: IntArray
) -> tuple[IntArray, IntArray] | None:
    """The integral flow of :func:`_flow_repair`: rows ``0..n−1`` of parents ``par`` (in
    ``0..n_parents − 1``) with bounds ``[lo, hi]``, cells' demands ``deficit`` (n_parents,
    n_cells), an edge row → cell for each ``(ri, ki)`` (row-major: the network's edges in this
    order); the ``(rows, cells)`` rounded up, or None if no flow saturates the source."""
    n, (n_par, n_cells) = par.size, deficit.shape
    s_node = 2 + 2 * np.arange(n_par)
    t_node = s_node + 1
    row0 = 2 + 2 * n_par
    col0 = row0 + n
    rows = row0 + np.arange(n)
    need = deficit.sum(axis=1)
    lo_sum = np.bincount(par, weights=lo, minlength=n_par).astype(np.int64)
    big = int(need.sum() + lo_sum.sum() + 1)
    pc = np.flatnonzero(deficit.ravel() > 0)
    edges = [
        (s_node[par], rows, hi - lo),
        (rows[ri], col0 + par[ri] * n_cells + ki, np.ones(ri.size, dtype=np.int64)),
        (t_node, s_node, np.full(n_par, big)),
        (np.zeros(n, dtype=np.int64), rows, lo),
        (np.zeros(n_par, dtype=np.int64), t_node, need),
        (col0 + pc, np.ones(pc.size, dtype=np.int64), deficit.ravel()[pc]),
        (s_node, np.ones(n_par, dtype=np.int64), lo_sum),
    ]
    u = np.concatenate([e[0] for e in edges])
    w = np.concatenate([e[1] for e in edges])
    cap = np.concatenate([e[2] for e in edges])
    keep = cap > 0
    n_nodes = col0 + n_par * n_cells
    graph = sparse.csr_matrix(
        (cap[keep].astype(np.int32), (u[keep], w[keep])), shape=(n_nodes, n_nodes)
    )
    res = maximum_flow(graph, 0, 1)
    if res.flow_value != int(need.sum() + lo_sum.sum()):
        return None
    flow = res.flow.tocoo()
    on = (flow.row >= row0) & (flow.row < col0) & (flow.col >= col0) & (flow.data > 0)
    return flow.row[on] - row0, (flow.col[on] - col0) % n_cells
