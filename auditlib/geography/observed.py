"""A published release beside its truth: per unit and cell, the true count and one or more published
DP counts (one *run* each), as an agency holds them (the 2010 demonstration products beside the
2010 counts, or any internal comparison).

The truth is a table of :func:`auditlib.geography.tabular.read_counts` (rows = units of the last
level, ``levels`` columns their ancestors top to bottom, ``counts`` columns the cells). The runs are

* **columns** of the same table: ``published[r]`` lists run ``r``'s columns, one per count column
  and in the same order (``published = [["white_dp1"], ["white_dp2"]]``); or
* **files**, one per run: each a CSV/Parquet table with the same ``levels`` and ``unit`` columns and,
  under the count columns' own names, that run's published counts; its rows may come in any order
  but must name exactly the truth's units.

A level above the rows is released as the sums of its rows' published counts (what a consistent
release such as TopDown publishes; for independent noise per row, the sums are a post-processed
release of the parent counts). :meth:`ObservedRelease.residual_block` returns one level's
residuals published − true, every run a replicate, in the layout simulated releases have.

Every problem is refused with :class:`~auditlib.exceptions.InvalidParameterError` naming the file,
the column and the row (rows numbered from 0, the header not counted): a missing column, a missing
(NaN) or infinite published count, a fractional one when ``integer`` (the mechanism publishes whole
numbers), a unit one run has and another has not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

from auditlib.exceptions import InvalidParameterError
from auditlib.geography.attributes import DETAILED, TOTAL
from auditlib.geography.schema import AttributeSchema
from auditlib.geography.tabular import ROW_LEVEL, TabularPopulation, _read, read_counts
from auditlib.simulate.release import ResidualBlock

FloatArray = npt.NDArray[np.float64]

#: largest |published count| accepted: residuals are stored as float32, exact for integers to 2**24
#: and well within range beyond; a published count past 2**31 is taken for a corrupt value
MAX_PUBLISHED = 2.0**31


@dataclass(frozen=True)
class ObservedRelease:
    """The truth (``population``) and the published counts ``(runs, rows, cells)`` in the order of
    the population's rows (``population.labels[population.levels[-1]]``)."""

    population: TabularPopulation
    published: FloatArray

    @property
    def n_runs(self) -> int:
        return int(self.published.shape[0])

    @property
    def queries(self) -> tuple[str, ...]:
        """``"total"`` (each unit's cells summed) and, with more than one cell, ``"detailed"``."""
        return (TOTAL,) if self.population.schema.n_cells == 1 else (TOTAL, DETAILED)

    def level_published(self, level: str | None) -> FloatArray:
        """Published counts ``(runs, n_units(level), cells)``: sums of the level's rows (``None``:
        the root above the top level, the sum of every row)."""
        pop = self.population
        if level is None:
            return self.published.sum(axis=1, keepdims=True)
        return pop.sum_rows(self.published, level, axis=1)

    def level_truth(self, level: str | None) -> npt.NDArray[np.int64]:
        """True counts ``(n_units(level), cells)`` (``None``: the root)."""
        h = self.population.histograms
        return (
            h.sum(axis=0, keepdims=True)
            if level is None
            else self.population.level_histograms(level)
        )

    def residual_block(self, level: str | None) -> ResidualBlock:
        """Residuals published − true of every query at ``level`` (``None``: the root; items
        query-major, then unit, then cell; one replicate per run)."""
        truth = self.level_truth(level)  # (units, cells)
        pub = self.level_published(level)
        parts_r, parts_t, qi, ui, ci = [], [], [], [], []
        for q, name in enumerate(self.queries):
            t = truth.sum(axis=1, keepdims=True) if name == TOTAL else truth
            p = pub.sum(axis=2, keepdims=True) if name == TOTAL else pub
            units, cells = t.shape
            parts_r.append((p - t[None]).reshape(self.n_runs, -1))
            parts_t.append(t.ravel())
            qi.append(np.full(units * cells, q))
            ui.append(np.repeat(np.arange(units), cells))
            ci.append(np.tile(np.arange(cells), units))
        return ResidualBlock(
            residual=np.concatenate(parts_r, axis=1).astype(np.float32),
            truth=np.concatenate(parts_t).astype(np.int32),  # read_counts: every sum <= 2**31 - 1
            query_index=np.concatenate(qi).astype(np.int16),
            unit_index=np.concatenate(ui).astype(np.int32),
            cell_index=np.concatenate(ci).astype(np.int32),
        )


def _published(s: pd.Series, col: str, where: str, integer: bool) -> FloatArray:
    """A published count column as float64, or raise naming the value, column, row and file."""
    na = s.isna().to_numpy()
    if na.any():
        i = int(np.flatnonzero(na)[0])
        raise InvalidParameterError(
            f"Invalid published count in column {col!r}, row {i} of {where}: missing (NaN); "
            "every unit needs a published count in every run"
        )
    if not pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s):
        raise InvalidParameterError(
            f"Invalid column {col!r}: dtype {s.dtype} in {where}; published counts must be numbers"
        )
    v = s.to_numpy(dtype=np.float64)
    bad = ~np.isfinite(v) | (np.abs(v) > MAX_PUBLISHED)
    if bad.any():
        i = int(np.argmax(bad))
        raise InvalidParameterError(
            f"Invalid published count {float(v[i])!r} in column {col!r}, row {i} of {where}; "
            f"published counts must be finite and within +-2**31"
        )
    if integer:
        frac = v != np.round(v)
        if frac.any():
            i = int(np.argmax(frac))
            raise InvalidParameterError(
                f"Invalid published count {float(v[i])!r} in column {col!r}, row {i} of {where}: "
                "not a whole number, but the declared mechanism publishes integers; fix the "
                "column, or declare real-valued noise (release.published_integer = false)"
            )
    return v


def _where(source: str | Path | pd.DataFrame) -> str:
    return "the table" if isinstance(source, pd.DataFrame) else repr(str(source))


def _keys(frame: pd.DataFrame, columns: Sequence[str], where: str) -> list[tuple[str, ...]]:
    out = []
    for i, row in enumerate(frame[list(columns)].itertuples(index=False, name=None)):
        if any(pd.isna(x) or str(x).strip() == "" for x in row):
            col = columns[next(j for j, x in enumerate(row) if pd.isna(x) or str(x).strip() == "")]
            raise InvalidParameterError(
                f"Invalid row {i} of {where}: no {col!r} label; every row needs one"
            )
        out.append(tuple(str(x) for x in row))
    return out


def _run_from_file(
    pop: TabularPopulation,
    source: str | Path | pd.DataFrame,
    counts: Sequence[str],
    key_columns: Sequence[str],
    integer: bool,
) -> FloatArray:
    """One run's published counts from its own file, rows matched to the truth's units."""
    frame = _read(source)
    where = _where(source)
    missing = [c for c in (*key_columns, *counts) if c not in frame.columns]
    if missing:
        raise InvalidParameterError(
            f"Missing columns {missing} in published run {where}; it has "
            f"{list(map(str, frame.columns))}; a run file has the truth's level and unit columns "
            "and its published counts under the count columns' names"
        )
    values = np.stack([_published(frame[c], c, where, integer) for c in counts], axis=1)
    keys = _keys(frame, key_columns, where)
    want = {pop.path(pop.levels[-1], i): i for i in range(pop.n_units(pop.levels[-1]))}
    out = np.full((len(want), len(counts)), np.nan)
    for i, k in enumerate(keys):
        if k not in want:
            raise InvalidParameterError(
                f"Inconsistent runs: row {i} of {where} is unit {k}, which the true counts do "
                "not have; every run must publish exactly the truth's units"
            )
        j = want[k]
        if not np.isnan(out[j, 0]):
            raise InvalidParameterError(
                f"Inconsistent runs: unit {k} appears twice in {where} (row {i}); give each unit "
                "once per run"
            )
        out[j] = values[i]
    absent = np.flatnonzero(np.isnan(out[:, 0]))
    if absent.size:
        k = pop.path(pop.levels[-1], int(absent[0]))
        raise InvalidParameterError(
            f"Inconsistent runs: unit {k} (true-count row {int(pop.rows[absent[0]])}) is missing "
            f"from {where}; every run must publish exactly the truth's units"
        )
    return out


def read_observed(
    source: str | Path | pd.DataFrame,
    counts: Sequence[str],
    *,
    levels: Sequence[str] = (),
    unit: str | None = None,
    published: Sequence[Sequence[str]] = (),
    published_files: Sequence[str | Path | pd.DataFrame] = (),
    integer: bool = True,
    schema: AttributeSchema | None = None,
) -> ObservedRelease:
    """Read the true counts (``source``, as :func:`read_counts`, the count columns the cells of
    ``schema`` when given) and the published runs: either ``published`` (per run, its columns of
    ``source`` parallel to ``counts``) or ``published_files`` (one table per run, keyed by
    ``levels`` and ``unit``)."""
    if bool(published) == bool(published_files):
        raise InvalidParameterError(
            "Invalid published runs: give either published (columns of the table, one list per "
            "run) or published_files (one file per run), not "
            + ("both" if published else "neither")
        )
    counts = list(counts)
    pop = read_counts(source, counts, levels=levels, unit=unit, schema=schema)
    if published:
        frame = _read(source)
        where = _where(source)
        runs = []
        for r, cols in enumerate(published):
            cols = list(cols)
            if len(cols) != len(counts):
                raise InvalidParameterError(
                    f"Invalid published run {r}: {len(cols)} columns {cols} for {len(counts)} count "
                    f"columns {counts}; list one published column per count column, in order"
                )
            missing = [c for c in cols if c not in frame.columns]
            if missing:
                raise InvalidParameterError(
                    f"Missing columns {missing} (published run {r}) in {where}; it has "
                    f"{list(map(str, frame.columns))}"
                )
            v = np.stack([_published(frame[c], c, where, integer) for c in cols], axis=1)
            runs.append(v[pop.rows])
        return ObservedRelease(pop, np.stack(runs))
    if unit is None and not levels:
        key_columns: list[str] = []
    else:
        key_columns = [*levels, *([unit] if unit else [])]
    if not unit:
        raise InvalidParameterError(
            "Invalid published_files: run files are matched to the truth by unit; name the unit "
            f"column (unit=...; the rows' level is otherwise {ROW_LEVEL!r}, a row number)"
        )
    runs = [_run_from_file(pop, f, counts, key_columns, integer) for f in published_files]
    return ObservedRelease(pop, np.stack(runs))
