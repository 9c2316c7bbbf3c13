"""What ``dpaudit run`` prints and writes at the end of a published table's error bars
(``release.kind = "published"``): the CSV of every unit's and area's interval beside the store,
and a table of the intervals' widths by level, within 80 columns."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import typer

from flows.audit.published_errors import (
    AREAS_GROUP,
    AREAS_LEVEL,
    UNITS_GROUP,
    csv_path_for,
    errors_frame,
)

if TYPE_CHECKING:
    from storage.result_store import ResultStore


def has_error_bars(store: ResultStore) -> bool:
    """Whether the store holds a published table's error bars."""
    return UNITS_GROUP in store.groups()


def error_bars_frame(store: ResultStore) -> Any:
    """The store's intervals, units then areas, as one table (the CSV's rows)."""
    held = store.groups()
    groups = [g for g in (UNITS_GROUP, AREAS_GROUP) if g in held]
    return errors_frame(*(store.open_group(g).load() for g in groups))


def write_error_bars_csv(
    store: ResultStore, frame: Any = None, path: Path | None = None
) -> Path | None:
    """The store's intervals (``frame``: :func:`error_bars_frame`) as a CSV at ``path`` (default:
    beside a local store, :func:`~flows.audit.published_errors.csv_path_for`); ``None`` for a
    remote store."""
    if path is None:
        if store.remote:
            return None
        path = csv_path_for(store.shown)
    frame = error_bars_frame(store) if frame is None else frame
    tmp = path.with_name(path.name + ".tmp")
    frame.to_csv(tmp, index=False, float_format="%.6g")
    tmp.replace(path)  # never a half-written CSV under its name
    return path


def width_lines(frame: Any) -> list[str]:
    """Per level (and the areas): units, the median and largest width of the intervals of the
    total count, and of every count's interval (at most 80 columns)."""
    lines = [f"{'level':<16}{'units':>8}{'total: median':>15}{'max':>7}{'all counts: median':>20}"]
    for level, rows in frame.groupby("level", sort=False):
        width = (rows["upper"] - rows["lower"]).to_numpy()
        total = rows["query"].to_numpy() == "total"
        tw = width[total] if total.any() else width
        lines.append(
            f"{str(level)[:15]:<16}{rows['unit'].nunique():>8}{np.median(tw):>15.0f}"
            f"{tw.max():>7.0f}{np.median(width):>20.0f}"
        )
    return lines


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
    frame = error_bars_frame(store)
    csv = None if store.remote else csv_path_for(url)  # run_audit wrote it
    typer.echo(f"{level:g} % intervals of the true counts, widths (upper - lower):")
    for line in width_lines(frame):
        typer.echo(f"  {line}")
    if AREAS_LEVEL in set(frame["level"]):
        typer.echo(f"areas: {a['areas_file']} (sums per replicate, so their covariances count)")
    typer.echo(f"store:  {url}")
    if csv is not None:
        typer.echo(f"csv:    {csv}")
    if report:
        typer.echo(f"report: {report}")
