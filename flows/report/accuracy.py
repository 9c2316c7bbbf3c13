"""The accuracy section (Su, Su & Wang §3.4): per level, for the query whose σ² is the level's median, the
exact MSE and MAE of a count under the Bureau's and the reduced noise, their change, the MSE at
count 0 after clipping, and the MSE/MAE-against-count figures."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import xarray as xr

from flows.report.figures import ReportFigure
from flows.report.figures_accuracy import accuracy_figure
from flows.report.format import fmt_num, is_finite
from flows.report.store_data import str_values


@dataclass
class AccuracySection:
    rows: list[dict[str, str]]
    counts: list[int]
    figure: ReportFigure | None
    mae_figure: ReportFigure | None
    has_reduced: bool


def _representative_query(s2: np.ndarray) -> int | None:
    """The measured query whose Bureau σ² is the level's median (one σ² per level here)."""
    ok = np.flatnonzero(np.isfinite(s2) & (s2 > 0))
    if ok.size == 0:
        return None
    order = ok[np.argsort(s2[ok], kind="stable")]
    return int(order[(order.size - 1) // 2])


def _change(new: float, old: float) -> str:
    if not (is_finite(new) and is_finite(old)) or old <= 0:
        return "—"
    return f"{100.0 * (new - old) / old:+.2f} %"


def accuracy_section(ds: xr.Dataset) -> AccuracySection | None:
    if "mse" not in ds or "geolevel" not in ds.coords:
        return None
    levels = str_values(ds["geolevel"].values)
    noises = str_values(ds["noise"].values) if "noise" in ds.coords else ["bureau"]
    b = noises.index("bureau") if "bureau" in noises else 0
    r = noises.index("reduced") if "reduced" in noises else None
    counts = [int(c) for c in np.asarray(ds["count"].values)] if "count" in ds.coords else []
    s2, mse, mae = (np.asarray(ds[v].values, dtype=float) for v in ("sigma2", "mse", "mae"))
    mse_c = np.asarray(ds["mse_clipped"].values, dtype=float) if "mse_clipped" in ds else None
    mae_c = np.asarray(ds["mae_clipped"].values, dtype=float) if "mae_clipped" in ds else None
    picks: list[tuple[str, int]] = []
    rows = []
    for i, level in enumerate(levels):
        q = _representative_query(s2[i, :, b])
        if q is None:
            continue
        picks.append((level, q))

        def v(a: np.ndarray | None, k: int | None, *idx: int, i: int = i, q: int = q) -> float:
            if a is None or k is None:
                return math.nan
            return float(a[(i, q, k, *idx)])

        c0 = 0 if counts else None
        rows.append(
            {
                "geolevel": level,
                "sigma2": fmt_num(v(s2, b), 4),
                "reduced_sigma2": fmt_num(v(s2, r), 4),
                "mse": fmt_num(v(mse, b), 4),
                "mse_reduced": fmt_num(v(mse, r), 4),
                "mse_change": _change(v(mse, r), v(mse, b)),
                "mae": fmt_num(v(mae, b), 4),
                "mae_reduced": fmt_num(v(mae, r), 4),
                "mae_change": _change(v(mae, r), v(mae, b)),
                "mse0": fmt_num(v(mse_c, b, c0) if c0 is not None else math.nan, 4),
                "mse0_reduced": fmt_num(v(mse_c, r, c0) if c0 is not None else math.nan, 4),
            }
        )
    if not rows:
        return None

    def figure(metric: str, clipped: np.ndarray | None, plain: np.ndarray) -> ReportFigure | None:
        """The figure of one metric: the same levels, picked queries, counts and noises."""
        return accuracy_figure(
            metric,
            clipped,
            plain,
            levels=levels,
            picks=picks,
            counts=counts,
            sigma2=s2,
            bureau=b,
            reduced=r,
        )

    return AccuracySection(
        rows=rows,
        counts=counts,
        figure=figure("MSE", mse_c, mse),
        mae_figure=figure("MAE", mae_c, mae),
        has_reduced=r is not None and any(row["reduced_sigma2"] != "—" for row in rows),
    )
