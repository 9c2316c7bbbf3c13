"""Rounding of a sparse TopDown level that keeps the group lower bounds (``hhgq_total_lb``).

The DAS's rounder (``l1_plb_optimizer.py``, multipass ``rounder_query_ordering``) fixes the integer
answers of coarse queries first (total, hhgq, …) and constrains the finer passes to them. Here:

* **State** (one unit, the total invariant): the people of each unit type are rounded first (largest
  remainder, summing to the total), then the cells within each type (largest remainder to the type's
  integer). A type's fitted people ``T ≥ L`` (its bound) round to ``⌊T⌋`` or ``⌈T⌉ ≥ L``.
* **Children of a parent**: controlled rounding
  (:func:`~auditlib.simulate.rounding.round_controlled`, on the matrix's entries:
  :mod:`~auditlib.simulate.rounding_entries`) whose rows are the children's unit-type
  groups, not the children: every cell within one of its fitted value, the children summing to the
  parent in every cell, and every child's people of each unit type ``⌊T⌋`` or ``⌈T⌉`` — hence at
  least its bound. (A child's total is then within one per unit type it holds, not within one.)

Fitted values that meet a bound only up to floating point could still round below it;
:func:`fix_lower` then moves single people, cell by cell, from a sibling group above its bound (the
same parent cell: the sums stay) — rarely needed, and tested.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError
from auditlib.geography.sparse_histograms import SparseHistograms
from auditlib.simulate.postprocess import round_preserving
from auditlib.simulate.rounding_entries import round_controlled_entries

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def round_state(x: FloatArray, group: IntArray, total: int) -> IntArray:
    """The state's variables (``group``: unit type of each) to integers summing to ``total``: the
    types' people first, then the cells within each type (module docstring)."""
    n_g = int(group.max()) + 1 if group.size else 0
    per_type = np.bincount(group, weights=x, minlength=n_g)
    typed = round_preserving(per_type, np.zeros(n_g, dtype=np.int64), [float(total)])
    return round_preserving(x, group, typed.astype(np.float64))


def round_rows(
    x: FloatArray, row: IntArray, row_parent: IntArray, entry: IntArray, up: SparseHistograms
) -> IntArray:
    """Controlled rounding per parent over the parent's non-zero cells (local columns): variables
    sorted by ``row`` (``0..n_rows − 1``), rows grouped by parent (``row_parent`` sorted), ``entry``
    each variable's parent entry (its cell in the parent's CSR row)."""
    out = np.zeros(x.size, dtype=np.int64)
    per_parent = np.diff(up.indptr)
    width = int(per_parent.max()) if per_parent.size else 0
    n_rows = row_parent.size
    if width == 0 or n_rows == 0:
        return out
    local = entry - up.indptr[row_parent[row]]
    budget = max(1, (1 << 22) // width)  # rows per chunk
    r0 = 0
    while r0 < n_rows:  # whole parents, about `budget` rows
        p0 = int(row_parent[r0])
        r_end = min(r0 + budget, n_rows)
        p1 = int(row_parent[r_end - 1]) + 1
        r1 = int(np.searchsorted(row_parent, p1))
        sel = slice(*np.searchsorted(row, [r0, r1]))
        ups = np.zeros((p1 - p0, width), dtype=np.int64)
        pe = np.arange(up.indptr[p0], up.indptr[p1])
        pe_parent = np.repeat(np.arange(p0, p1), per_parent[p0:p1])
        ups[pe_parent - p0, pe - up.indptr[pe_parent]] = up.counts[pe]
        # the rows × cells matrix by its entries (the variables): S32's County is 4,500 × 91,000
        out[sel] = round_controlled_entries(
            row[sel] - r0, local[sel], x[sel], row_parent[r0:r1] - p0, ups
        )
        r0 = r1
    return out


def fix_lower(
    y: IntArray,
    x: FloatArray,
    segment: IntArray,
    group: IntArray,
    lower: IntArray,
    pair: IntArray,
    *,
    columns: bool,
) -> IntArray:
    """Integers ``y`` meeting every group's ``lower`` bound: a group below it takes one person at a
    time from a group of its ``pair`` above its bound — with ``columns`` in the same segment (parent
    cell), so every segment's sum stays; without (the state) from any cell of the donor into the
    group's cell with the largest fitted value. Raises if no donor is left (infeasible bounds)."""
    n_g = lower.size
    have = np.bincount(group, weights=y, minlength=n_g).astype(np.int64)
    short = np.flatnonzero(have < lower)
    if not short.size:
        return y
    out = y.copy()
    members: dict[int, IntArray] = {}

    def of(g: int) -> IntArray:
        if g not in members:
            members[g] = np.flatnonzero(group == g)
        return members[g]

    for g in short.tolist():
        while have[g] < lower[g]:
            donors = (
                np.flatnonzero((pair == pair[g]) & (have > lower))
                if columns
                else (np.flatnonzero(have > lower))
            )
            moved = False
            for h in donors.tolist():
                give = of(h)[out[of(h)] > 0]
                if columns:
                    take = of(g)
                    common = np.intersect1d(segment[give], segment[take])
                    if not common.size:
                        continue
                    cand = take[np.isin(segment[take], common)]
                    dst = int(cand[np.argmax(x[cand])])
                    src = int(give[segment[give] == segment[dst]][0])
                else:
                    src = int(give[np.argmax(out[give])])
                    dst = int(of(g)[np.argmax(x[of(g)])])
                out[src] -= 1
                out[dst] += 1
                have[h] -= 1
                have[g] += 1
                moved = True
                break
            if not moved:
                raise InvalidParameterError(
                    f"Infeasible lower bound: group {g} holds {have[g]} < {lower[g]} and no group "
                    "of its parent and type has people to spare"
                )
    return out
