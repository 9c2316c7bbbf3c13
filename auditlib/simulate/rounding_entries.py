"""Controlled rounding (:func:`auditlib.simulate.rounding.round_controlled`) over a matrix's
entries instead of the dense matrix: the same three steps on the ``(row, column)`` pairs that may
be non-zero, so memory goes with the entries, not with rows × columns. A sparse TopDown level
below the State rounds rows = the children's unit-type groups by columns = the parent's non-zero
cells: S32's DHC County is about 4,500 rows × 91,000 State cells, 3.3 GB a dense float64 array and
several of them, for 14 M entries.

The result is the dense function's, integer for integer (``tests/unit/test_rounding_entries.py``):
every quantity is formed from the same numbers, and the one sum whose order differs, a row's
fractional parts, is exact in any order (the inputs are snapped to multiples of
:data:`~auditlib.simulate.postprocess.ROUNDING_GRID` = 2⁻¹⁶ first, so a row's sum of fewer than
2³⁷ of them is a float64 without rounding); the cells are visited in the same order, each with its
rows in the same order, and the repair's flow network has the same edges in the same order.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy import sparse
from scipy.sparse.csgraph import maximum_flow

from auditlib.exceptions import InvalidParameterError
from auditlib.simulate.postprocess import snap
from auditlib.simulate.rounding import TOTAL_SLACK, _by_group_then_key, _rank_within

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def round_controlled_entries(
    row: npt.ArrayLike, col: npt.ArrayLike, x: npt.ArrayLike, parent: npt.ArrayLike,
    up: npt.ArrayLike,
) -> IntArray:  # fmt: skip
    """:func:`~auditlib.simulate.rounding.round_controlled` of the matrix whose only possible
    non-zeros are ``x`` at ``(row, col)`` (distinct pairs), rows grouped by ``parent`` (one per
    row, sorted), columns summing per parent to ``up`` (n_parents, n_cells): the rounded value of
    each entry."""
    r_ = np.asarray(row, dtype=np.int64).ravel()
    k_ = np.asarray(col, dtype=np.int64).ravel()
    v = np.asarray(x, dtype=np.float64).ravel()
    par = np.asarray(parent, dtype=np.int64).ravel()
    tgt = np.asarray(up)
    n, n_par = par.size, tgt.shape[0] if tgt.ndim == 2 else -1
    if tgt.ndim != 2 or not (r_.size == k_.size == v.size):
        raise InvalidParameterError(
            f"Invalid controlled rounding: {r_.size} rows, {k_.size} columns and {v.size} values "
            f"of entries, up {tgt.shape}; need one row, column and value per entry and "
            "(n_parents, n_cells)"
        )
    n_cells = tgt.shape[1]
    if v.size and (r_.min() < 0 or r_.max() >= n or k_.min() < 0 or k_.max() >= n_cells):
        raise InvalidParameterError(
            f"Invalid entries: rows must be in 0..{n - 1} and columns in 0..{n_cells - 1}"
        )
    if not np.issubdtype(tgt.dtype, np.integer) and (tgt != np.round(tgt)).any():
        raise InvalidParameterError("Invalid up: controlled rounding needs integer parents")
    if par.size and (par.min() < 0 or par.max() >= n_par or (np.diff(par) < 0).any()):
        raise InvalidParameterError(
            f"Invalid parent: need indices in 0..{n_par - 1}, units grouped by parent (sorted)"
        )
    if not np.isfinite(v).all() or (v < -1e-6).any():
        raise InvalidParameterError("Invalid x: values must be finite and >= 0")
    v = np.maximum(v, 0.0)
    if n == 0:
        return np.floor(v).astype(np.int64)
    pk = par[r_] * n_cells + k_  # each entry's (parent, cell)
    sums = np.bincount(pk, weights=v, minlength=n_par * n_cells).reshape(n_par, n_cells)
    off = np.abs(sums - tgt) > 1e-6 * (1.0 + np.abs(tgt))
    if off.any():
        p, k = np.argwhere(off)[0]
        raise InvalidParameterError(
            f"Invalid x: the children of parent {p} sum to {float(sums[p, k]):g} in cell {k}, not "
            f"the parent's {int(tgt[p, k])}"
        )
    del sums, off
    v = snap(v)  # near-ties are ties, broken by position: the same integers on any machine
    fl = np.floor(v)
    frac = v - fl
    out = fl.astype(np.int64)
    fl_sums = np.bincount(pk, weights=fl, minlength=n_par * n_cells).reshape(n_par, n_cells)
    deficit = np.clip(tgt.astype(np.int64) - np.rint(fl_sums).astype(np.int64), 0, None)
    del fl, fl_sums
    r = np.bincount(r_, weights=frac, minlength=n)  # multiples of 2⁻¹⁶: exact in any order
    lo = np.floor(r + TOTAL_SLACK).astype(np.int64)
    hi = np.ceil(r - TOTAL_SLACK).astype(np.int64)
    extra = deficit.sum(axis=1) - np.bincount(par, weights=lo, minlength=n_par).astype(np.int64)
    order = _by_group_then_key(par, np.clip(r - lo, 0.0, 1.0))
    target = lo.copy()
    up_one = order[_rank_within(par[order]) < extra[par[order]]]
    target[up_one] = np.minimum(target[up_one] + 1, hi[up_one])
    pos = frac > 0
    picks = _greedy(r_, k_, frac, pos, par, deficit, lo, hi, target)
    a = np.bincount(r_[picks], minlength=n)
    bad = np.unique(par[(a < lo) | (a > hi)])
    if bad.size:
        in_bad = np.isin(par[r_], bad)
        fixed = _flow_repair(r_, k_, pos, in_bad, par, bad, deficit, lo, hi, n_cells)
        if fixed is not None:
            picks[in_bad] = fixed
    out += picks
    return out


def _greedy(
    row: IntArray,
    col: IntArray,
    frac: FloatArray,
    pos: BoolArray,
    par: IntArray,
    deficit: IntArray,
    lo: IntArray,
    hi: IntArray,
    target: IntArray,
) -> BoolArray:
    """Step 2 of :func:`~auditlib.simulate.rounding.round_controlled` (its ``_greedy``) on the
    entries: cell by cell in increasing order, the cell's rows with a positive fraction in
    increasing order, each parent's round-ups by class then largest fraction."""
    n = par.size
    picks = np.zeros(row.size, dtype=bool)
    a = np.zeros(n, dtype=np.int64)  # cells rounded up so far
    on = np.flatnonzero(pos)
    chances = np.bincount(row[on], minlength=n)  # cells with a fraction not yet visited
    on = on[np.lexsort((row[on], col[on]))]  # by cell, then row
    cells, starts = np.unique(col[on], return_index=True)
    ends = np.append(starts[1:], on.size)[: starts.size]
    need = deficit.T
    for k, s, e in zip(cells.tolist(), starts.tolist(), ends.tolist(), strict=True):
        idx = on[s:e]
        c = row[idx]
        pc = par[c]
        if need[k].any():
            ac = a[c]
            cls = np.where(
                ac >= hi[c],
                0,
                np.where(lo[c] - ac >= chances[c], 3, np.where(ac < target[c], 2, 1)),
            )
            order = _by_group_then_key(pc, cls + frac[idx])
            ps = pc[order]
            sel = order[_rank_within(ps) < need[k, ps]]
            picks[idx[sel]] = True
            a[c[sel]] += 1
        chances[c] -= 1
    return picks


def _flow_repair(
    row: IntArray,
    col: IntArray,
    pos: BoolArray,
    in_bad: BoolArray,
    par: IntArray,
    bad: IntArray,
    deficit: IntArray,
    lo: IntArray,
    hi: IntArray,
    n_cells: int,
) -> BoolArray | None:
    """Step 3 (:func:`~auditlib.simulate.rounding._flow_repair`) for the parents ``bad`` on the
    entries ``in_bad`` of their rows: the same network, the same edges in the same order; the
    round-ups of those entries, or None if no integral flow exists."""
    rows_bad = np.flatnonzero(np.isin(par, bad))  # the bad parents' rows, in order
    n = rows_bad.size
    n_par = bad.size
    bpar = np.searchsorted(bad, par[rows_bad])
    dfc = deficit[bad]
    lo_b, hi_b = lo[rows_bad], hi[rows_bad]
    local = np.searchsorted(rows_bad, row[in_bad])  # each entry's row among them
    s_node = 2 + 2 * np.arange(n_par)
    t_node = s_node + 1
    row0 = 2 + 2 * n_par
    col0 = row0 + n
    rows = row0 + np.arange(n)
    need = dfc.sum(axis=1)
    lo_sum = np.bincount(bpar, weights=lo_b, minlength=n_par).astype(np.int64)
    big = int(need.sum() + lo_sum.sum() + 1)
    e_row, e_col = local, col[in_bad]
    take = pos[in_bad] & (dfc[bpar[e_row], e_col] > 0)
    o = np.lexsort((e_col[take], e_row[take]))  # row-major, as numpy.nonzero of the dense
    ri, ki = e_row[take][o], e_col[take][o]
    pc = np.flatnonzero(dfc.ravel() > 0)
    edges = [
        (s_node[bpar], rows, hi_b - lo_b),
        (rows[ri], col0 + bpar[ri] * n_cells + ki, np.ones(ri.size, dtype=np.int64)),
        (t_node, s_node, np.full(n_par, big)),
        (np.zeros(n, dtype=np.int64), rows, lo_b),
        (np.zeros(n_par, dtype=np.int64), t_node, need),
        (col0 + pc, np.ones(pc.size, dtype=np.int64), dfc.ravel()[pc]),
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
    got = (flow.row[on] - row0) * n_cells + (flow.col[on] - col0) % n_cells
    return np.isin(e_row * n_cells + e_col, got)
