"""The error bars' groups built and written in parts, and their CSV, widths and report rows read
back in slices, are the same as the one-shot path they replace (kept here as the reference: every
row of every level built at once, written whole, read whole): the same group files byte for byte,
the same CSV bytes, the same summary lines and report rows, with parts small enough that every
level is cut into several."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from auditlib.geography.schema import schema
from auditlib.published import AMCResult, Moments, amc_interval
from flows.audit.published_errors import (
    AREAS_GROUP,
    AREAS_LEVEL,
    CSV_COLUMNS,
    UNITS_GROUP,
    amc_range,
    errors_groups,
    unit_labels,
)
from flows.cli.published import Widths, error_bars_frames, write_error_bars_csv
from flows.report.error_bars import BINS, open_error_bars, width_rows
from flows.report.format import fmt_num
from flows.spec import parse_spec
from flows.spec.plan import make_plan
from storage.result_store import ResultStore
from tests.unit.test_published_errors import spec_data, write_published

BLOCKS = 40


# --- the one-shot path, as it was -------------------------------------------------------------
def one_shot_rows(level: str, labels: Any, query: str, cells: Any, m: Moments, alpha: float):  # type: ignore[no-untyped-def]
    iv = amc_interval(m, alpha)
    n, k = m.published.shape
    return {
        "level": np.full(n * k, level, dtype=object),
        "unit": np.repeat(np.asarray(labels, dtype=object), k),
        "query": np.full(n * k, query, dtype=object),
        "cell": np.tile(np.asarray(cells, dtype=object), n),
        "published": m.published.ravel(),
        "bias": m.bias.ravel(),
        "variance": m.variance.ravel(),
        "mse": m.mse.ravel(),
        "centre": iv.centre.ravel(),
        "lower": iv.lower.ravel(),
        "upper": iv.upper.ravel(),
        "bias_corrected": iv.bias_corrected.ravel(),
    }


def one_shot_dataset(parts: list[dict[str, np.ndarray]], attrs: dict[str, Any]) -> xr.Dataset:
    cols = {c: np.concatenate([p[c] for p in parts]) for c in parts[0]}
    coords = {c: ("row", cols.pop(c)) for c in ("level", "unit", "query", "cell")}
    return xr.Dataset({c: ("row", v) for c, v in cols.items()}, coords=coords, attrs=attrs)


def one_shot_datasets(plan: Any, result: AMCResult, alpha: float, attrs: dict[str, Any]):  # type: ignore[no-untyped-def]
    sch = schema(plan.topdown.schema)
    labels = unit_labels(plan)
    units = [
        one_shot_rows(lv, labels[i], q, sch.cell_labels(q), result.levels[lv][q], alpha)
        for i, lv in enumerate(result.level_names)
        for q in result.queries
    ]
    areas = [
        one_shot_rows(AREAS_LEVEL, result.area_names, q, sch.cell_labels(q), result.areas[q], alpha)
        for q in result.queries
    ]
    return {
        UNITS_GROUP: one_shot_dataset(units, attrs),
        AREAS_GROUP: one_shot_dataset(areas, attrs),
    }


def one_shot_frame(*datasets: xr.Dataset) -> pd.DataFrame:
    frames = [ds.to_dataframe().reset_index(drop=True) for ds in datasets]
    frame = pd.concat(frames, ignore_index=True)
    frame["bias_corrected"] = frame["bias_corrected"].astype(bool)
    for c in ("published", "lower", "upper"):
        frame[c] = frame[c].astype(np.int64)
    return frame[list(CSV_COLUMNS)]


def one_shot_width_lines(frame: pd.DataFrame) -> list[str]:
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


def one_shot_width_rows(datasets: list[xr.Dataset]) -> list[dict[str, str]]:
    rows = []
    for ds in datasets:
        levels = np.asarray([str(v) for v in ds["level"].values])
        p = np.asarray(ds["published"].values, dtype=float)
        width = np.asarray(ds["upper"].values - ds["lower"].values, dtype=float)
        corrected = np.asarray(ds["bias_corrected"].values, dtype=bool)
        for lv in dict.fromkeys(levels.tolist()):
            for label, lo, hi in BINS:
                m = (levels == lv) & (p >= lo) & (p <= hi)
                if not m.any():
                    continue
                w = width[m]
                rows.append(
                    {
                        "level": str(lv),
                        "bin": label,
                        "counts": f"{int(m.sum()):,}",
                        "median": fmt_num(float(np.median(w)), 3),
                        "mean": fmt_num(float(w.mean()), 3),
                        "max": fmt_num(float(w.max()), 3),
                        "corrected": f"{100 * corrected[m].mean():.0f} %",
                    }
                )
    return rows


# ----------------------------------------------------------------------------------------------
def files_of(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def new_store(url: Path) -> ResultStore:
    import zarr

    zarr.open_group(str(url), mode="w", zarr_format=3, attributes={"dpaudit_store": True})
    return ResultStore.at(str(url))


@pytest.mark.parametrize("part_rows", [100, 10**6])
def test_error_bars_in_parts_are_the_one_shot_groups_and_csv(
    tmp_path: Path, part_rows: int
) -> None:
    table, areas, _ = write_published(tmp_path, blocks=BLOCKS)
    plan = make_plan(parse_spec(spec_data(table, areas)))
    result = amc_range(plan, 0, 2).merge(amc_range(plan, 2, 2))
    groups = errors_groups(plan, result, 0.1, str(areas))
    assert [g.name for g in groups] == [UNITS_GROUP, AREAS_GROUP]
    parts = [list(g.parts(part_rows)) for g in groups]
    block_parts = [p for p in parts[0] if "block" in set(p["level"].values)]
    if part_rows <= 100:  # the Block level is cut into several parts
        assert len(block_parts) >= 3
    else:
        assert [len(ps) for ps in parts] == [1, 1]
    assert all(p.sizes["row"] <= max(part_rows, 28) for ps in parts for p in ps)

    old = new_store(tmp_path / "old.zarr")
    ref = one_shot_datasets(plan, result, 0.1, groups[0].attrs)
    for name, ds in ref.items():
        old.write_group(name, ds)
    new = new_store(tmp_path / "new.zarr")
    for g in groups:
        assert new.write_group_parts(g.name, g.parts(part_rows), g.rows) == ref[g.name].sizes["row"]
    for name in ref:  # the same documents and chunks, checksums and completion marker
        a, b = files_of(Path(old.url) / name), files_of(Path(new.url) / name)
        assert a.keys() == b.keys() and [k for k in a if a[k] != b[k]] == []
    for s in (old, new):
        s.finalize()

    # the CSV: one table written whole, against slices of ``part_rows`` rows read and appended
    frame = one_shot_frame(*(old.open_group(g).load() for g in (UNITS_GROUP, AREAS_GROUP)))
    frame.to_csv(tmp_path / "old.csv", index=False, float_format="%.6g")
    path = write_error_bars_csv(new, path=tmp_path / "new.csv", rows=part_rows)
    assert path is not None and path.read_bytes() == (tmp_path / "old.csv").read_bytes()
    assert len(path.read_text().splitlines()) == frame.shape[0] + 1

    # what ``dpaudit run`` prints and the report shows, read in slices
    widths = Widths()
    for piece in error_bars_frames(new, part_rows):
        widths.add(piece)
    assert widths.lines() == one_shot_width_lines(frame)
    assert AREAS_LEVEL in widths.units
    assert width_rows(open_error_bars(new), part_rows) == one_shot_width_rows(
        [old.open_group(g).load() for g in (UNITS_GROUP, AREAS_GROUP)]
    )
