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
from auditlib.simulate.release import ResidualBlock, ResidualParts

IntArray = npt.NDArray[np.int64]


#: most histogram entries (the truth's and every replicate's together) one part of a level's
#: units is answered in: the temporaries of a block's build stay near ``40 ×`` this many bytes
#: whatever the block's size (a large state's Block level at ten replicates holds ~10⁸ entries),
#: and the block is held once, as its parts (:class:`ResidualParts`, never concatenated)
PART_ENTRIES = 1 << 22


def unit_parts(
    hists: Sequence[SparseHistograms], limit: int = PART_ENTRIES
) -> list[tuple[int, int]]:
    """[start, stop) of consecutive ranges of the units of ``hists`` (same units) each holding at
    most ``limit`` entries of them all together (a single unit may hold more: it is a part
    alone)."""
    n = hists[0].n_units
    cum = np.zeros(n + 1, dtype=np.int64)  # entries before each unit, over all of them
    for h in hists:
        cum += np.asarray(h.indptr, dtype=np.int64)
    parts, u = [], 0
    while u < n:
        v = int(np.searchsorted(cum, cum[u] + max(int(limit), 1), side="right")) - 1
        v = min(max(v, u + 1), n)
        parts.append((u, v))
        u = v
    return parts


def _part(
    hists: Sequence[SparseHistograms], units: tuple[int, int], query: str
) -> tuple[IntArray, np.ndarray, np.ndarray]:
    """One query over units ``[u0, u1)`` of ``hists`` (the truth, then each replicate): the
    sorted keys ``unit · n_q + query cell`` non-zero in any of them, the true answers there and
    the residuals (replicates, keys), from one sort of all their entries' keys."""
    keys, weights = _keys(hists, units, query)
    seg = np.cumsum([0, *(k.size for k in keys)]).tolist()
    items, inv = np.unique(np.concatenate(keys), return_inverse=True)
    del keys
    w = np.concatenate(weights).astype(np.float64)
    m = items.size
    true = np.bincount(inv[: seg[1]], weights=w[: seg[1]], minlength=m)
    rows = np.empty((len(hists) - 1, m), dtype=np.float32)
    for j in range(1, len(hists)):
        a, b = seg[j], seg[j + 1]
        rows[j - 1] = np.bincount(inv[a:b], weights=w[a:b], minlength=m) - true
    return items, true, rows


def sparse_level_parts(
    truth: SparseHistograms,
    dps: Sequence[SparseHistograms],
    queries: Sequence[str],
    query_ids: Mapping[str, int],
    part_entries: int = PART_ENTRIES,
) -> ResidualParts:
    """Residuals released − true of every query cell non-zero in ``truth`` or in one of ``dps``
    (the replicates' released histograms of the same units), at one level (module docstring), as
    consecutive parts: each query over ranges of the units of at most ``part_entries`` entries
    (:func:`unit_parts`; the items and their order do not depend on them)."""
    _check(truth, dps, queries, query_ids)
    hists = [truth, *dps]
    units = unit_parts(hists, part_entries)
    parts = [_block(hists, u, q, query_ids[q]) for q in dict.fromkeys(queries) for u in units]
    if not parts:  # no units, or no queries
        parts.append(_empty(len(dps)))
    return ResidualParts(tuple(parts))


class StreamedParts:
    """One level's block as :func:`sparse_level_parts` cuts it, its parts computed when a reader
    reaches them and dropped once it has passed them: a block too large to hold (a state's Block
    level at a hundred replicates) is written in one pass holding a few parts. Its size is found
    first (each part's items, by a sort of their keys), then each part is computed again when it
    is read: the same items and values as :func:`sparse_level_parts`, for about twice its work.
    Read it forwards (:meth:`items` with non-decreasing ranges)."""

    def __init__(
        self,
        truth: SparseHistograms,
        dps: Sequence[SparseHistograms],
        queries: Sequence[str],
        query_ids: Mapping[str, int],
        part_entries: int = PART_ENTRIES,
    ) -> None:
        _check(truth, dps, queries, query_ids)
        self._hists = [truth, *dps]
        self._ids = query_ids
        units = unit_parts(self._hists, part_entries)
        self._parts = [(q, u) for q in dict.fromkeys(queries) for u in units]
        sizes = [_part_size(self._hists, u, q) for q, u in self._parts]
        self._ends = np.cumsum([0, *sizes])
        self._held: dict[int, ResidualBlock] = {}

    @property
    def n_items(self) -> int:
        return int(self._ends[-1])

    @property
    def replicates(self) -> int:
        return len(self._hists) - 1

    def items(self, start: int, stop: int) -> ResidualBlock:
        """Items ``[start, stop)`` as one block; parts wholly before ``start`` are dropped."""
        first = int(np.searchsorted(self._ends, start, side="right")) - 1
        last = int(np.searchsorted(self._ends, stop, side="left"))
        for i in [i for i in self._held if i < first]:
            del self._held[i]
        for i in range(max(first, 0), min(last, len(self._parts))):
            if i not in self._held:
                q, u = self._parts[i]
                self._held[i] = _block(self._hists, u, q, self._ids[q])
        held = [(i, self._held[i]) for i in range(max(first, 0), min(last, len(self._parts)))]
        parts = ResidualParts(tuple(b for _, b in held) or (_empty(self.replicates),))
        base = int(self._ends[held[0][0]]) if held else start
        return parts.items(start - base, stop - base)


def _check(
    truth: SparseHistograms,
    dps: Sequence[SparseHistograms],
    queries: Sequence[str],
    query_ids: Mapping[str, int],
) -> None:
    if not dps:
        raise InvalidParameterError("Invalid releases: give at least one replicate")
    for d in dps:
        if d.schema_name != truth.schema_name or d.n_units != truth.n_units:
            raise InvalidParameterError(
                f"Invalid release: {d.n_units} units of {d.schema_name!r} beside a truth of "
                f"{truth.n_units} units of {truth.schema_name!r}; give the same units and schema"
            )
    for q in dict.fromkeys(queries):
        if q not in query_ids:
            raise UnknownNameError(f"Unknown query: {q!r}; no index given for it")


def _keys(
    hists: Sequence[SparseHistograms], units: tuple[int, int], query: str
) -> tuple[list[IntArray], list[np.ndarray]]:
    """Per histogram, the keys ``unit · n_q + query cell`` of its entries of units ``[u0, u1)``
    and their counts."""
    sch = hists[0].schema
    nq = sch.n_query_cells(query)
    u0, u1 = units
    keys, counts = [], []
    for h in hists:
        ip = np.asarray(h.indptr[u0 : u1 + 1], dtype=np.int64)
        a, b = int(ip[0]), int(ip[-1])
        unit = np.repeat(np.arange(u0, u1, dtype=np.int64), np.diff(ip))
        keys.append(unit * nq + sch.cells_query_index(query, h.cells[a:b]))
        counts.append(h.counts[a:b])
    return keys, counts


def _part_size(hists: Sequence[SparseHistograms], units: tuple[int, int], query: str) -> int:
    """The items of :func:`_part` (without computing them)."""
    keys, _ = _keys(hists, units, query)
    k = np.sort(np.concatenate(keys))  # a sort: numpy's hashing unique is slower here
    return int(k.size and 1 + np.count_nonzero(k[1:] != k[:-1]))


def _block(
    hists: Sequence[SparseHistograms], units: tuple[int, int], query: str, qid: int
) -> ResidualBlock:
    """:func:`_part` as a block of query index ``qid``."""
    nq = hists[0].schema.n_query_cells(query)
    items, true, rows = _part(hists, units, query)
    if true.size and true.max() > np.iinfo(np.int32).max:
        raise InvalidParameterError("Invalid truth: a count exceeds int32")
    return ResidualBlock(
        residual=rows,
        truth=true.astype(np.int32),
        query_index=np.full(items.size, qid, dtype=np.int16),
        unit_index=(items // nq).astype(np.int32),
        cell_index=(items % nq).astype(np.int32),
    )


def _empty(replicates: int) -> ResidualBlock:
    return ResidualBlock(
        np.zeros((replicates, 0), np.float32),
        np.zeros(0, np.int32),
        np.zeros(0, np.int16),
        np.zeros(0, np.int32),
        np.zeros(0, np.int32),
    )


def sparse_level_residuals(
    truth: SparseHistograms,
    dps: Sequence[SparseHistograms],
    queries: Sequence[str],
    query_ids: Mapping[str, int],
    part_entries: int = PART_ENTRIES,
) -> ResidualBlock:
    """:func:`sparse_level_parts` in one piece."""
    return sparse_level_parts(truth, dps, queries, query_ids, part_entries).whole()


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
