"""The EPL section: per level and query the pooled EPL, its window, spread over states, bias-aware
estimate with interval and floor, a plain-language summary, and the curve, surface and composed
EPL pieces (:mod:`flows.report.figures_epl`, :mod:`flows.report.composed_epl`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr

from flows.report.composed_epl import ComposedEpl, composed_section
from flows.report.figures import ReportFigure
from flows.report.figures_epl import epl_figure, surface_figures
from flows.report.format import fmt_int, fmt_num, fmt_range, is_finite
from flows.report.store_data import attr_str, str_values


@dataclass
class EplSection:
    rows: list[dict[str, Any]]
    n_unmeasured: int
    method: str
    bandwidth_factor: str
    percentiles: tuple[str, str]
    window_note: str
    figure: ReportFigure | None
    summary: str
    n_states: int
    surfaces: list[ReportFigure] = field(default_factory=list)
    surface_note: str = ""
    composed: ComposedEpl | None = None


def _mark_row_spans(rows: list[dict[str, Any]], key: str) -> None:
    """Set ``span`` on the first row of each run of equal ``key`` (0 on the others)."""
    i = 0
    while i < len(rows):
        j = i
        while j < len(rows) and rows[j][key] == rows[i][key]:
            rows[j]["span"] = 0
            j += 1
        rows[i]["span"] = j - i
        i = j


def epl_section(epl: xr.Dataset) -> EplSection:
    levels = str_values(epl["geolevel"].values)
    queries = str_values(epl["query"].values)
    n_states = int(epl.sizes.get("state", 0))

    def var(name: str) -> np.ndarray | None:
        return np.asarray(epl[name].values) if name in epl.variables else None

    pooled, status, n_res = var("epl_pooled"), var("epl_status"), var("n_residuals")
    sigma2, bw, per_state = var("sigma2"), var("bandwidth"), var("epl")
    cx = var("epl_curve_x")
    ba, ci_lo, ci_hi = var("epl_bias_aware"), var("epl_ci_low"), var("epl_ci_high")
    floor, slope_hat = var("epl_null_upper"), var("inv_sigma2_hat")

    def cell(a: np.ndarray | None, i: int, q: int) -> float:
        return float(a[i, q]) if a is not None else math.nan

    status_s = (
        np.array(str_values(status), dtype=object).reshape(status.shape)
        if status is not None
        else None
    )

    rows: list[dict[str, Any]] = []
    n_unmeasured = 0
    best: tuple[float, str, str, float] | None = None
    for i, level in enumerate(levels):
        for q, query in enumerate(queries):
            st = str(status_s[i, q]) if status_s is not None else ""
            s2 = float(sigma2[i, q]) if sigma2 is not None else math.nan
            nr = float(n_res[i, q]) if n_res is not None else math.nan
            if st == "" and not is_finite(s2) and not (nr > 0):
                n_unmeasured += 1
                continue
            p = float(pooled[i, q]) if pooled is not None else math.nan
            spread = "—"
            if per_state is not None:
                v = per_state[:, i, q].astype(np.float64)
                v = v[np.isfinite(v)]
                if v.size:
                    spread = fmt_range(v.min(), v.max())
            window = "—"
            if cx is not None:
                x = cx[i, q].astype(np.float64)
                x = x[np.isfinite(x)]
                if x.size:
                    window = f"[{fmt_num(x.min(), 3)}, {fmt_num(x.max(), 3)}]"
            slope = 1.0 / s2 if is_finite(s2) and s2 > 0 else math.nan
            b = cell(ba, i, q)
            bias_aware = "—"
            if is_finite(b):
                bias_aware = fmt_num(b, 4)
                lo, hi = cell(ci_lo, i, q), cell(ci_hi, i, q)
                if is_finite(lo) and is_finite(hi):
                    bias_aware += f" [{fmt_num(lo, 3)}, {fmt_num(hi, 3)}]"
            rows.append(
                {
                    "geolevel": level,
                    "query": query,
                    "epl": fmt_num(p, 4),
                    "status": st or "—",
                    "status_class": st if st in {"ok", "too_few", "invariant"} else "other",
                    "n_residuals": fmt_int(nr),
                    "sigma2": fmt_num(s2, 4),
                    "slope": fmt_num(slope, 3),
                    "bandwidth": fmt_num(float(bw[i, q]) if bw is not None else math.nan, 3),
                    "window": window,
                    "spread": spread,
                    "bias_aware": bias_aware,
                    "floor": fmt_num(cell(floor, i, q), 3),
                    "slope_hat": fmt_num(cell(slope_hat, i, q), 3),
                }
            )
            if st == "ok" and is_finite(p) and (best is None or p > best[0]):
                best = (p, query, level, s2)

    _mark_row_spans(rows, "geolevel")

    pct = attr_str(epl.attrs, "percentiles", "5,95").replace(" ", "").split(",")
    pct_lo, pct_hi = (pct[0], pct[-1]) if pct else ("5", "95")
    bw_factor = attr_str(epl.attrs, "bandwidth_factor")
    window_note = (
        "For discrete-Gaussian noise the true per-query privacy loss is unbounded in the noise "
        "value x: the loss of a DG with variance σ² grows linearly in x with slope 1/σ², so any "
        "finite EPL describes a window, not the worst case. The EPL(x) curves here are estimated "
        f"on the window between the {pct_lo}th and {pct_hi}th percentile of the residuals "
        f"(kernel bandwidth factor {bw_factor}), and the reported EPL is the maximum of EPL(x) "
        "over that window; the column \u201cwindow\u201d gives its bounds and \u201c1/σ²\u201d "
        "the slope of the DG's loss."
    )

    n_ok = sum(1 for r in rows if r["status"] == "ok")
    summary = (
        f"Empirical privacy loss was estimated for {len(rows)} measured level–query pairs "
        f"({n_ok} with enough residuals)"
    )
    if best is not None:
        summary += (
            f"; the largest pooled EPL is {fmt_num(best[0], 4)} for “{best[1]}” at level "
            f"{best[2]} (σ² = {fmt_num(best[3], 4)})."
        )
    else:
        summary += "."

    surfaces, surface_note = surface_figures(epl)
    composed = composed_section(epl)
    if composed is not None and composed.value != "—":
        summary += (
            f" Composed over the levels, the EPL of the counts containing one person is "
            f"{composed.value} (interval {composed.interval})."
        )
    return EplSection(
        surfaces=surfaces,
        surface_note=surface_note,
        composed=composed,
        rows=rows,
        n_unmeasured=n_unmeasured,
        method=attr_str(epl.attrs, "method"),
        bandwidth_factor=bw_factor,
        percentiles=(pct_lo, pct_hi),
        window_note=window_note,
        figure=epl_figure(epl, levels, queries, (pct_lo, pct_hi)),
        summary=summary,
        n_states=n_states,
    )
