"""Real counts from a table: rows are geographic units, count columns are the cells of a schema.

:func:`read_counts` reads a CSV or Parquet file (or takes a pandas DataFrame) with one row per unit,
one column per detailed cell (in the schema's C order) and optional hierarchy columns naming the
unit's ancestors, top to bottom (e.g. ``state``; the rows are then counties). It checks everything and
returns a :class:`TabularPopulation`: the units of every level (children contiguous, as in
:mod:`auditlib.geography.spine`), their parent indices, and the rows' histograms.

Labels are scoped by their parent by default (a county ``ADAMS`` in two states is two counties);
with ``unique_labels=True`` a level's labels are identifiers (e.g. FIPS codes) and a label found under
two parents is an inconsistent hierarchy. Two rows for the same unit are refused (aggregate first).

Parquet needs ``pyarrow`` (``pip install 'dpaudit[parquet]'``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from auditlib.exceptions import InvalidParameterError
from auditlib.geography.schema import AttributeSchema, custom_schema
from auditlib.simulate.hierarchical import CountTree

IntArray = npt.NDArray[np.int64]

#: name of the level of the table's rows when no unit column is given
ROW_LEVEL = "unit"

#: The largest total of all the counts of a table (and so of any one count): 2**31 − 1. Every
#: level's counts are sums of the table's, and the largest is the top unit's (the root of
#: :meth:`TabularPopulation.count_tree`, released by RDPC): result stores hold true counts as
#: int32 (:class:`auditlib.simulate.release.ResidualBlock`), so this bound makes every count of
#: every level, every marginal query and every sum fit, and keeps the float64 arithmetic of the
#: releases (raking, ADPC means, residuals) exact. A larger table is refused on reading, naming
#: the file, column and row, before any work is done.
MAX_TABLE_TOTAL = 2**31 - 1


@dataclass(frozen=True)
class TabularPopulation:
    """Units of every level (``levels`` top to bottom; the last level holds the table's rows)."""

    schema: AttributeSchema
    levels: tuple[str, ...]
    labels: dict[str, tuple[str, ...]]  # each unit's own label, per level
    parents: dict[str, IntArray]  # levels[1:]: index of each unit's parent at the level above
    histograms: IntArray  # (n_rows, schema.n_cells), rows in the order of labels[levels[-1]]
    rows: IntArray  # the table row each unit of the last level came from

    def n_units(self, level: str) -> int:
        return len(self.labels[self._check_level(level)])

    def _check_level(self, level: str) -> str:
        if level not in self.levels:
            raise InvalidParameterError(
                f"Unknown level {level!r}; the table's levels are {list(self.levels)}"
            )
        return level

    def level_histograms(self, level: str) -> IntArray:
        """Histograms ``(n_units(level), n_cells)`` of a level: exact sums of its rows."""
        return self.sum_rows(self.histograms, level)

    def sum_rows(self, rows: npt.NDArray[Any], level: str, axis: int = 0) -> npt.NDArray[Any]:
        """``rows`` (one entry a row along ``axis``) summed to the units of ``level``."""
        i = self.levels.index(self._check_level(level))
        h = rows
        for lo in reversed(self.levels[i + 1 :]):
            # children are contiguous and every unit has one: sum runs of equal parents
            p = self.parents[lo]
            starts = np.flatnonzero(np.r_[True, p[1:] != p[:-1]])
            h = np.add.reduceat(h, starts, axis=axis)
        return h

    def path(self, level: str, index: int) -> tuple[str, ...]:
        """Labels from the top level down to unit ``index`` of ``level``."""
        i = self.levels.index(self._check_level(level))
        out = [self.labels[level][index]]
        for lv in reversed(self.levels[1 : i + 1]):
            index = int(self.parents[lv][index])
            out.append(self.labels[self.levels[self.levels.index(lv) - 1]][index])
        return tuple(reversed(out))

    def count_tree(self, query: str = "total", cell: int = 0) -> CountTree:
        """A :class:`CountTree` (a root over the top level) of one cell of a query, for GDPC/RDPC/ADPC."""
        n_cells = self.schema.n_query_cells(query)
        if not 0 <= cell < n_cells:
            raise InvalidParameterError(
                f"Invalid cell {cell} of query {query!r}; it has cells 0..{n_cells - 1}"
            )
        counts: list[IntArray] = [
            np.asarray(self.schema.answer(self.level_histograms(lv), query)[:, cell], np.int64)
            for lv in self.levels
        ]
        root = np.array([counts[0].sum()], dtype=np.int64)
        parents = [np.zeros(len(counts[0]), dtype=np.int64)]
        parents += [self.parents[lv] for lv in self.levels[1:]]
        return CountTree((root, *counts), tuple(parents))


def _read(source: str | Path | pd.DataFrame) -> pd.DataFrame:
    if isinstance(source, pd.DataFrame):
        return source
    path = Path(source)
    if not path.is_file():
        raise InvalidParameterError(
            f"Invalid table path {str(path)!r}: no such file; give the path of a CSV or Parquet file"
        )
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        try:
            return pd.read_parquet(path)
        except ImportError as e:
            raise InvalidParameterError(
                f"Reading {path.name!r} needs pyarrow: pip install 'dpaudit[parquet]' ({e})"
            ) from None
    if suffix in (".csv", ".txt", ".gz"):
        return pd.read_csv(path)
    raise InvalidParameterError(
        f"Invalid table {path.name!r}: unknown suffix {suffix!r}; use .csv or .parquet"
    )


def _numbers(s: pd.Series, col: str, where: str) -> npt.NDArray[np.float64]:
    """A count column as float64 (integers beyond int64 arrive as Python ints), or raise."""
    if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s):
        return s.to_numpy(dtype=np.float64)
    if s.dtype == object and all(
        isinstance(x, int | float | np.integer | np.floating) and not isinstance(x, bool) for x in s
    ):
        return np.array([float(x) for x in s], dtype=np.float64)
    raise InvalidParameterError(
        f"Invalid column {col!r}: dtype {s.dtype} in {where}; counts must be numbers"
    )


def _counts(frame: pd.DataFrame, columns: Sequence[str], where: str) -> IntArray:
    """The count columns as int64, each a whole number in 0..MAX_TABLE_TOTAL, or raise naming
    the value, its column and row and ``where`` (the file)."""
    out = np.empty((len(frame), len(columns)), dtype=np.int64)
    for j, col in enumerate(columns):
        s = frame[col]
        if s.isna().any():
            i = int(np.flatnonzero(s.isna().to_numpy())[0])
            raise InvalidParameterError(
                f"Invalid count in column {col!r}, row {i}: missing in {where}; every count "
                "must be given"
            )
        v = _numbers(s, col, where)
        bad = ~np.isfinite(v) | (v != np.round(v))
        if bad.any():
            i = int(np.argmax(bad))
            raise InvalidParameterError(
                f"Invalid count {float(v[i])!r} in column {col!r}, row {i} of {where}; counts "
                "must be whole numbers"
            )
        if (v < 0).any():
            i = int(np.argmax(v < 0))
            raise InvalidParameterError(
                f"Invalid count {int(v[i])} in column {col!r}, row {i} of {where}; counts must "
                "be >= 0"
            )
        if (v > MAX_TABLE_TOTAL).any():
            i = int(np.argmax(v > MAX_TABLE_TOTAL))
            raise InvalidParameterError(
                f"Invalid count {_show(s.iloc[i])} in column {col!r}, row {i} of {where}; the "
                f"largest allowed count is {MAX_TABLE_TOTAL} (2**31 - 1), and so is the total "
                "of all counts: true counts are stored as int32"
            )
        out[:, j] = v.astype(np.int64)  # exact: whole numbers <= 2**31 - 1
    return out


def _show(x: object) -> str:
    """A count as written: integers in full, floats as repr (1e+30)."""
    return str(int(x)) if isinstance(x, int | np.integer) else repr(float(x))  # type: ignore[arg-type]


def _check_total(hist: IntArray, columns: Sequence[str], where: str) -> None:
    """Refuse a table whose counts sum past MAX_TABLE_TOTAL, naming where the sum crosses it."""
    total = int(hist.sum())  # exact: each count <= 2**31 - 1, far fewer than 2**32 of them
    if total <= MAX_TABLE_TOTAL:
        return
    k = int(np.argmax(np.cumsum(hist.ravel()) > MAX_TABLE_TOTAL))
    i, j = divmod(k, hist.shape[1])
    raise InvalidParameterError(
        f"Invalid table {where}: its counts sum to {total}, past the largest allowed total "
        f"{MAX_TABLE_TOTAL} (2**31 - 1; the top level's count is stored as int32); the sum "
        f"crosses it at column {columns[j]!r}, row {i}: split the table into parts within it"
    )


def _cell_order(schema: AttributeSchema) -> str:
    """The detailed cells of a schema, in C order (the first few, then their number)."""
    cells = schema.cell_labels(" * ".join(schema.attribute_names)) if schema.n_cells > 1 else ()
    if not cells:
        return "one column: the total"
    shown = ", ".join(cells[:3])
    return f"{shown}, ... ({len(cells)} cells)" if len(cells) > 3 else shown


def _one_parent(keys: pd.DataFrame, order: IntArray, up: str, lv: str, where: str) -> None:
    """Refuse a unit of ``lv`` (an identifier) found under two units of ``up``, naming both rows
    of the table (``keys`` are its rows sorted by ``order``)."""
    first = keys.drop_duplicates([lv, up])
    dup = first[lv].duplicated(keep=False).to_numpy()
    if not dup.any():
        return
    name = first[lv].to_numpy()[np.flatnonzero(dup)[0]]
    rows = np.flatnonzero((keys[lv] == name).to_numpy())
    homes = keys[up].to_numpy()[rows]
    i = int(order[rows[0]])
    k = int(order[rows[np.flatnonzero(homes != homes[0])[0]]])
    raise InvalidParameterError(
        f"Inconsistent hierarchy in {where}: {lv} {name!r} lies in {up} {sorted(set(homes))} "
        f"(rows {min(i, k)} and {max(i, k)}, column {up!r}); an identifier in column {lv!r} "
        "names one unit, with one parent: fix one of those rows"
    )


def read_counts(
    source: str | Path | pd.DataFrame,
    counts: Sequence[str],
    *,
    levels: Sequence[str] = (),
    unit: str | None = None,
    schema: AttributeSchema | None = None,
    attribute: str = "category",
    total: str | None = None,
    unique_labels: bool = False,
) -> TabularPopulation:
    """Read a table of units × count columns into a hierarchy and histograms.

    ``counts``: the columns of the detailed cells, in ``schema``'s C order (without a schema, one
    attribute called ``attribute`` whose levels are the column names). ``levels``: hierarchy columns
    top to bottom; ``unit``: the column labelling the rows (default: the row number). ``total``: a
    column that must equal the sum of the counts in every row.

    Counts are whole numbers >= 0 summing to at most :data:`MAX_TABLE_TOTAL` (2**31 − 1); a
    missing, fractional, negative, infinite or too large count is refused naming the file, its
    column and row (rows numbered from 0, the header not counted).
    """
    frame = _read(source)
    counts = list(counts)
    levels = list(levels)
    if not counts:
        raise InvalidParameterError("Invalid counts: no count column given")
    wanted = [*levels, *([unit] if unit else []), *counts, *([total] if total else [])]
    missing = [c for c in wanted if c not in frame.columns]
    if missing:
        raise InvalidParameterError(
            f"Missing columns {missing}; the table has {list(map(str, frame.columns))}"
        )
    if len(set(wanted)) != len(wanted):
        raise InvalidParameterError(f"Invalid columns {wanted}: a column is named twice")
    if len(frame) == 0:
        raise InvalidParameterError("Invalid table: no rows")
    if schema is None:
        schema = custom_schema(attribute, [(attribute, [str(c) for c in counts])])
    elif schema.n_cells != len(counts):
        raise InvalidParameterError(
            f"Invalid counts {counts}: {len(counts)} columns for schema {schema.name!r} with "
            f"{schema.n_cells} cells; give one column per detailed cell, in C order "
            f"({_cell_order(schema)})"
        )
    where = "the table" if isinstance(source, pd.DataFrame) else repr(str(source))
    hist = _counts(frame, counts, where)
    _check_total(hist, counts, where)
    if total is not None:
        t = _counts(frame, [total], where)[:, 0]
        bad = t != hist.sum(axis=1)
        if bad.any():
            i = int(np.argmax(bad))
            raise InvalidParameterError(
                f"Inconsistent row {i}: {total!r} = {t[i]} but the counts {counts} sum to "
                f"{hist[i].sum()}; fix the table or leave out total="
            )

    row_level = unit or ROW_LEVEL
    if row_level in levels:
        raise InvalidParameterError(f"Invalid unit column {unit!r}: it is also a hierarchy level")
    keys = pd.DataFrame({lv: frame[lv] for lv in levels})
    keys[row_level] = frame[unit] if unit else np.arange(len(frame))
    for lv in keys.columns:
        na = keys[lv].isna() | (keys[lv].astype(str).str.strip() == "")
        if na.any():
            i = int(np.flatnonzero(na.to_numpy())[0])
            raise InvalidParameterError(
                f"Invalid hierarchy: row {i} has no {lv!r} label; every row needs one"
            )
        keys[lv] = keys[lv].astype(str)
    all_levels = [*levels, row_level]
    order = np.lexsort([keys[lv].to_numpy() for lv in reversed(all_levels)])
    keys = keys.iloc[order].reset_index(drop=True)
    dup = keys.duplicated(keep=False).to_numpy()
    if dup.any():
        rows = order[np.flatnonzero(dup)[:2]]
        raise InvalidParameterError(
            f"Inconsistent hierarchy: rows {int(rows[0])} and {int(rows[1])} are the same unit "
            f"{tuple(keys.iloc[np.flatnonzero(dup)[0]])}; aggregate them first"
        )
    labels: dict[str, tuple[str, ...]] = {}
    parents: dict[str, IntArray] = {}
    prev_code: IntArray | None = None
    for j, lv in enumerate(all_levels):
        code = keys.groupby(all_levels[: j + 1], sort=False).ngroup().to_numpy().astype(np.int64)
        first = np.unique(code, return_index=True)[1]
        labels[lv] = tuple(keys[lv].to_numpy()[first])
        if prev_code is not None:
            parents[lv] = prev_code[first]
            if unique_labels:
                _one_parent(keys, order, all_levels[j - 1], lv, where)
        prev_code = code
    return TabularPopulation(
        schema=schema,
        levels=tuple(all_levels),
        labels=labels,
        parents=parents,
        histograms=hist[order],
        rows=order.astype(np.int64),
    )
