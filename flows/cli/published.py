"""What ``dpaudit run`` prints and writes at the end of a published table's error bars
(``release.kind = "published"``): the CSV of every unit's and area's interval beside the store,
and a table of the intervals' widths by level, within 80 columns. Both read the groups in slices
of rows, so a state's long tables are never held whole."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import typer

from flows.audit.published_errors import (
    AREAS_GROUP,
    AREAS_LEVEL,
    READ_ROWS,
    UNITS_GROUP,
    csv_path_for,
    errors_frame,
)

if TYPE_CHECKING:
    from storage.result_store import ResultStore


def has_error_bars(store: ResultStore) -> bool:
    """Whether the store holds a published table's error bars."""
    return UNITS_GROUP in store.groups()


def error_bars_frames(store: ResultStore, rows: int = READ_ROWS) -> Iterator[Any]:
    """The store's intervals, units then areas, as tables of at most ``rows`` rows each, read
    from the groups in row slices, in order (together: the CSV's rows)."""
    held = store.groups()
    for g in (UNITS_GROUP, AREAS_GROUP):
        if g not in held:
            continue
        ds = store.open_group(g)  # lazy: each slice read alone
        n = int(ds.sizes["row"])
        for a in range(0, n, max(1, int(rows))):
            yield errors_frame(ds.isel(row=slice(a, min(a + int(rows), n))).load())


def error_bars_frame(store: ResultStore) -> Any:
    """The store's intervals, units then areas, as one table (the CSV's rows; a small store's:
    a large one is read in :func:`error_bars_frames`)."""
    import pandas as pd

    return pd.concat(list(error_bars_frames(store)), ignore_index=True)


def write_error_bars_csv(
    store: ResultStore, frame: Any = None, path: Path | None = None, rows: int = READ_ROWS
) -> Path | None:
    """The store's intervals as a CSV at ``path`` (default: beside a local store,
    :func:`~flows.audit.published_errors.csv_path_for`); ``None`` for a remote store. Written
    from ``frame`` if given, else read and written ``rows`` rows at a time (the header once): the
    same bytes as one table written whole."""
    if path is None:
        if store.remote:
            return None
        path = csv_path_for(store.shown)
    frames = [frame] if frame is not None else error_bars_frames(store, rows)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8", newline="") as fh:
        for i, part in enumerate(frames):
            part.to_csv(fh, index=False, header=i == 0, float_format="%.6g")
    tmp.replace(path)  # never a half-written CSV under its name
    return path


class Widths:
    """The widths of intervals by level (in order of appearance), gathered from tables of rows
    fed one after the other (:meth:`add`): the units, each row's width, and which rows are of
    the query ``total``."""

    def __init__(self) -> None:
        self.units: dict[str, set[str]] = {}
        self.width: dict[str, list[np.ndarray]] = {}
        self.total: dict[str, list[np.ndarray]] = {}

    def add(self, frame: Any) -> Widths:
        for level, rows in frame.groupby("level", sort=False):
            lv = str(level)
            self.units.setdefault(lv, set()).update(rows["unit"].astype(str))
            self.width.setdefault(lv, []).append((rows["upper"] - rows["lower"]).to_numpy())
            self.total.setdefault(lv, []).append(rows["query"].to_numpy() == "total")
        return self

    def lines(self) -> list[str]:
        """Per level (and the areas): units, the median and largest width of the intervals of
        the total count, and of every count's interval (at most 80 columns)."""
        lines = [
            f"{'level':<16}{'units':>8}{'total: median':>15}{'max':>7}{'all counts: median':>20}"
        ]
        for lv, units in self.units.items():
            width = np.concatenate(self.width[lv])
            total = np.concatenate(self.total[lv])
            tw = width[total] if total.any() else width
            lines.append(
                f"{lv[:15]:<16}{len(units):>8}{np.median(tw):>15.0f}"
                f"{tw.max():>7.0f}{np.median(width):>20.0f}"
            )
        return lines


def width_lines(frame: Any) -> list[str]:
    """:meth:`Widths.lines` of one table."""
    return Widths().add(frame).lines()


def print_error_bars_summary(
    store: ResultStore, report: str | None, summary: dict[str, Any], wall: float
) -> None:
    """The run's error bars: replicates, widths by level, where the store, CSV and report are."""
    url = store.shown
    ds = store.open_group(UNITS_GROUP)
    a = ds.attrs
    level = 100 * (1 - float(a["alpha"]))
    typer.echo(
        f"run {summary['run_id']}: {a['replicates']} TopDown runs from the published counts, "
        f"{wall:.1f} s"
    )
    widths = Widths()
    for frame in error_bars_frames(store):  # a slice of rows at a time
        widths.add(frame)
    csv = None if store.remote else csv_path_for(url)  # run_audit wrote it
    typer.echo(f"{level:g} % intervals of the true counts, widths (upper - lower):")
    for line in widths.lines():
        typer.echo(f"  {line}")
    if AREAS_LEVEL in widths.units:
        typer.echo(f"areas: {a['areas_file']} (sums per replicate, so their covariances count)")
    typer.echo(f"store:  {url}")
    if csv is not None:
        typer.echo(f"csv:    {csv}")
    if report:
        typer.echo(f"report: {report}")
