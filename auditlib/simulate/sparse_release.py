"""Residual blocks of a sparse production-schema release: which query cells are items, and what is
left out.

A level's query ``q`` has ``n_units × n_q`` cells (the DHC's detailed query alone: 1,227,744 per
unit); almost all are zero in the truth and in every replicate's release, with residual exactly 0.
The items stored are the cells of each query that are **non-zero in the truth or in at least one
replicate's release** (the union over replicates: every replicate has a residual at every item, 0
where that replicate and the truth are both 0). The cells left out are zero in the truth and in
every replicate; :func:`unstored_cells` counts them per query, so a reader can add them back as
residuals of 0 (``R`` per cell) or state that an estimate conditions on their absence
(``docs/simulation.md``, "Production schemas").

Items are ordered query-major, then unit, then cell (as the dense
:func:`~auditlib.simulate.topdown_residuals.level_residuals`), so a dense and a sparse block of the
same release list the same non-zero cells in the same order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError, UnknownNameError
from auditlib.geography.sparse_histograms import SparseHistograms, from_keys
from auditlib.simulate.release import ResidualBlock

IntArray = npt.NDArray[np.int64]


def query_keys(hist: SparseHistograms, query: str) -> tuple[IntArray, IntArray]:
    """Sorted distinct keys ``unit · n_q + query cell`` of a query's non-zero answers and the answers."""
    sch = hist.schema
    nq = sch.n_query_cells(query)
    keys = hist.unit_of_entry() * nq + sch.cells_query_index(query, hist.cells)
    uniq, inv = np.unique(keys, return_inverse=True)
    return uniq, np.bincount(inv, weights=hist.counts, minlength=uniq.size).astype(np.int64)


def _at(keys: IntArray, values: IntArray, where: IntArray) -> IntArray:
    """``values`` at ``where`` (keys absent from ``keys``: 0); ``keys`` sorted and distinct."""
    out = np.zeros(where.size, dtype=np.int64)
    if keys.size:
        pos = np.minimum(np.searchsorted(keys, where), keys.size - 1)
        hit = keys[pos] == where
        out[hit] = values[pos[hit]]
    return out


def sparse_level_residuals(
    truth: SparseHistograms,
    dps: Sequence[SparseHistograms],
    queries: Sequence[str],
    query_ids: Mapping[str, int],
) -> ResidualBlock:
    """Residuals released − true of every query cell non-zero in ``truth`` or in one of ``dps``
    (the replicates' released histograms of the same units), at one level (module docstring)."""
    if not dps:
        raise InvalidParameterError("Invalid releases: give at least one replicate")
    for d in dps:
        if d.schema_name != truth.schema_name or d.n_units != truth.n_units:
            raise InvalidParameterError(
                f"Invalid release: {d.n_units} units of {d.schema_name!r} beside a truth of "
                f"{truth.n_units} units of {truth.schema_name!r}; give the same units and schema"
            )
    sch = truth.schema
    res, tr, qi, ui, ci = [], [], [], [], []
    for q in dict.fromkeys(queries):
        if q not in query_ids:
            raise UnknownNameError(f"Unknown query: {q!r}; no index given for it")
        nq = sch.n_query_cells(q)
        t_keys, t_vals = query_keys(truth, q)
        d_answers = [query_keys(d, q) for d in dps]
        items = np.unique(np.concatenate([t_keys, *(k for k, _ in d_answers)]))
        true = _at(t_keys, t_vals, items)
        tr.append(true)
        res.append(np.stack([_at(k, v, items) - true for k, v in d_answers]))
        qi.append(np.full(items.size, query_ids[q], dtype=np.int16))
        ui.append((items // nq).astype(np.int32))
        ci.append((items % nq).astype(np.int32))
    truth_all = np.concatenate(tr)
    if truth_all.size and truth_all.max() > np.iinfo(np.int32).max:
        raise InvalidParameterError("Invalid truth: a count exceeds int32")
    return ResidualBlock(
        residual=np.hstack(res).astype(np.float32),
        truth=truth_all.astype(np.int32),
        query_index=np.concatenate(qi),
        unit_index=np.concatenate(ui),
        cell_index=np.concatenate(ci),
    )


def unstored_cells(block: ResidualBlock, query_cells: Mapping[int, int]) -> dict[int, int]:
    """Per query index, the cells a block left out (zero in the truth and in every replicate):
    ``query_cells[q]`` (its units × the query's cells) less the block's items of ``q``."""
    stored = np.bincount(
        block.query_index.astype(np.int64), minlength=1 + max(query_cells, default=0)
    )
    out = {}
    for q, n in query_cells.items():
        left = int(n) - int(stored[q])
        if left < 0:
            raise InvalidParameterError(
                f"Invalid query cells: query {q} has {int(stored[q])} items, more than its {n} cells"
            )
        out[q] = left
    return out


def sum_units(hists: Sequence[SparseHistograms]) -> SparseHistograms:
    """One unit holding the sum of the one-unit histograms ``hists`` (e.g. states into the nation)."""
    if not hists:
        raise InvalidParameterError("Invalid histograms: give at least one")
    name = hists[0].schema_name
    if any(h.schema_name != name or h.n_units != 1 for h in hists):
        raise InvalidParameterError("Invalid histograms: give one-unit histograms of one schema")
    cells = np.concatenate([h.cells.astype(np.int64) for h in hists])
    counts = np.concatenate([h.counts.astype(np.int64) for h in hists])
    uniq, inv = np.unique(cells, return_inverse=True)
    return from_keys(name, uniq, np.bincount(inv, weights=counts).astype(np.int64), 1)


def capacity(n_units: int, query_cells: Sequence[int], people: int, replicates: int) -> int:
    """The most items a level's block can hold: per query, its ``n_units × cells`` or, fewer, the
    non-zero cells of the truth and ``replicates`` releases that each sum to ``people``."""
    bound = (int(replicates) + 1) * max(int(people), 0)
    return int(sum(min(int(n_units) * int(c), bound) for c in query_cells))
