"""Residuals of TopDown releases: a level's released − true cells, and the bias of unit totals.

- :func:`level_residuals` — the residuals DP − truth of every cell (zero cells included) of a
  level's queries, from the true histograms and each replicate's released ones, as one
  :class:`~auditlib.simulate.release.ResidualBlock` (query-major, then unit, then cell).
- :func:`total_bias_sums` — the released − true totals of a block's units summed per class of
  true total (:data:`TRUTH_CLASSES`, by :data:`TOTAL_EDGES`): the stored bias of a TopDown geolevel.

The release itself, its replicates and their residual blocks are in
:mod:`auditlib.simulate.topdown`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt
from scipy import sparse

from auditlib.exceptions import UnknownNameError
from auditlib.simulate.release import ResidualBlock
from auditlib.simulate.wls import query_matrix


def level_residuals(
    truth: npt.ArrayLike,
    dps: Sequence[npt.ArrayLike],
    query_matrices: Mapping[str, npt.ArrayLike],
    queries: Sequence[str],
    query_ids: Mapping[str, int],
) -> ResidualBlock:
    """Residuals DP − truth of every cell (zero cells included) of ``queries`` at one level, from the
    true (n_units, n_cells) and each replicate's released histograms; items ordered query-major, then
    unit, then cell."""
    t_hist = np.asarray(truth, dtype=np.int64)
    truths, dp_rows, qidx, unit, cell = [], [], [], [], []
    for q in dict.fromkeys(queries):
        if q not in query_ids:
            raise UnknownNameError(f"Unknown query: {q!r}; no index given for it")
        m = query_matrix(query_matrices, q).astype(np.int64)
        t = t_hist @ m.T
        truths.append(t.ravel())
        dp_rows.append(np.stack([(np.asarray(d) @ m.T).ravel() for d in dps]))  # int64 or float64
        qidx.append(np.full(t.size, query_ids[q], dtype=np.int16))
        unit.append(np.repeat(np.arange(t.shape[0], dtype=np.int32), t.shape[1]))
        cell.append(np.tile(np.arange(t.shape[1], dtype=np.int32), t.shape[0]))
    tr = np.concatenate(truths)
    return ResidualBlock(
        residual=(np.hstack(dp_rows) - tr).astype(np.float32),
        truth=tr.astype(np.int32),
        query_index=np.concatenate(qidx),
        unit_index=np.concatenate(unit),
        cell_index=np.concatenate(cell),
    )


#: classes of a unit by its true total: the stored bias of a TopDown geolevel is per class —
#: empty (0), populated (> 0), and the populated ones again by size (:data:`TOTAL_EDGES`)
TRUTH_CLASSES: tuple[str, ...] = ("empty", "populated", "1–9", "10–99", "100–999", "≥ 1000")
#: lower ends of the size classes of populated units (the classes after "populated")
TOTAL_EDGES: tuple[int, ...] = (1, 10, 100, 1000)


def total_bias_sums(
    residual: npt.ArrayLike,
    query_index: npt.ArrayLike,
    truth: npt.ArrayLike,
    unit_index: npt.ArrayLike,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """The released − true totals of a TopDown block's units, summed per :data:`TRUTH_CLASSES`
    (true total 0, > 0, then 1–9, 10–99, 100–999, ≥ 1000) over units and replicates, with their
    number: ``(sums, counts)``, each of length ``len(TRUTH_CLASSES)`` (the mean residual of a
    class is ``sums / counts``; blocks add).

    ``residual`` is (replicates, items), the other arrays (items,) as :func:`level_residuals`
    lays them out (``query_index`` −1: padding). Every marginal query partitions the detailed
    cells, so a unit's total is the sum of any one query's cells: the query with the fewest items
    is used."""
    res = np.asarray(residual)
    qi = np.asarray(query_index)
    k = len(TRUTH_CLASSES)
    sums, counts = np.zeros(k), np.zeros(k, dtype=np.int64)
    valid = qi >= 0
    if not valid.any():
        return sums, counts
    qs, sizes = np.unique(qi[valid], return_counts=True)
    cols = np.flatnonzero(qi == qs[np.argmin(sizes)])
    units, inv = np.unique(np.asarray(unit_index)[cols], return_inverse=True)
    true_total = np.bincount(inv, weights=np.asarray(truth, dtype=np.float64)[cols])
    # (replicates, cols) @ (cols, units): each unit's released − true total, per replicate
    by_unit = sparse.csr_matrix(
        (np.ones(cols.size), (np.arange(cols.size), inv)), shape=(cols.size, units.size)
    )
    totals = np.asarray((by_unit.T @ res[:, cols].astype(np.float64).T).T)
    size = np.searchsorted(np.asarray(TOTAL_EDGES), true_total, side="right")  # 0: empty
    classes = [
        true_total == 0,
        true_total > 0,
        *(size == j for j in range(1, len(TOTAL_EDGES) + 1)),
    ]
    for c, members in enumerate(classes):
        sums[c] = float(totals[:, members].sum())
        counts[c] = int(members.sum()) * res.shape[0]
    return sums, counts
