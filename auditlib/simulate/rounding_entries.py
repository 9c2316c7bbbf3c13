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

from auditlib.exceptions import InvalidParameterError
from auditlib.simulate.postprocess import snap
from auditlib.simulate.rounding import (
    cell_roundups,
    check_inputs,
    check_sums,
    flow_roundups,
    total_targets,
)

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
    v = check_inputs(v, par, tgt)
    if n == 0:
        return np.floor(v).astype(np.int64)
    pk = par[r_] * n_cells + k_  # each entry's (parent, cell)
    sums = np.bincount(pk, weights=v, minlength=n_par * n_cells).astype(np.float64, copy=False)
    check_sums(sums.reshape(n_par, n_cells), tgt)
    del sums
    v = snap(v)  # near-ties are ties, broken by position: the same integers on any machine
    fl = np.floor(v)
    frac = v - fl
    out = fl.astype(np.int64)
    fl_sums = np.bincount(pk, weights=fl, minlength=n_par * n_cells).reshape(n_par, n_cells)
    deficit = np.clip(tgt.astype(np.int64) - np.rint(fl_sums).astype(np.int64), 0, None)
    del fl, fl_sums
    # multiples of 2⁻¹⁶: exact in any order
    r = np.bincount(r_, weights=frac, minlength=n).astype(np.float64, copy=False)
    lo, hi, target = total_targets(r, par, deficit)
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
        if need[k].any():
            sel = cell_roundups(c, frac[idx], par, need[k], a, chances, lo, hi, target)
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
    bpar = np.searchsorted(bad, par[rows_bad])
    dfc = deficit[bad]
    lo_b, hi_b = lo[rows_bad], hi[rows_bad]
    e_row = np.searchsorted(rows_bad, row[in_bad])  # each entry's row among them
    e_col = col[in_bad]
    take = pos[in_bad] & (dfc[bpar[e_row], e_col] > 0)
    o = np.lexsort((e_col[take], e_row[take]))  # row-major, as numpy.nonzero of the dense
    found = flow_roundups(bpar, dfc, lo_b, hi_b, e_row[take][o], e_col[take][o])
    if found is None:
        return None
    got = found[0] * n_cells + found[1]
    return np.isin(e_row * n_cells + e_col, got)
