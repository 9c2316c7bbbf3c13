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
from flows.report.epl_headline import (
    estimate_text,
    flag_class,
    flag_text,
    level_epls,
    ok_mask,
)
from flows.report.figures import ReportFigure
from flows.report.figures_epl import epl_figure, surface_figures
from flows.report.format import fmt_int, fmt_num, fmt_range, is_finite
from flows.report.resolution import Resolution, chance_of_at_least, null_quantile, resolutions
from flows.report.store_data import attr_str, float_values, nation_and_states, str_values


@dataclass
class EplSection:
    rows: list[dict[str, Any]]
    diagnostics: list[dict[str, Any]]
    n_unmeasured: int
    method: str
    bandwidth_factor: str
    percentiles: tuple[str, str]
    window_note: str
    figure: ReportFigure | None
    summary: list[str]
    states: list[str]
    nation: list[str]
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


def epl_section(epl: xr.Dataset, replicates: int | None = None) -> EplSection:
    levels = str_values(epl["geolevel"].values)
    queries = str_values(epl["query"].values)
    nation, states = nation_and_states(epl)

    def var(name: str) -> np.ndarray | None:
        return np.asarray(epl[name].values) if name in epl.variables else None

    pooled, status, n_res = var("epl_pooled"), var("epl_status"), var("n_residuals")
    sigma2, bw, per_state = var("sigma2"), var("bandwidth"), var("epl")
    cx = var("epl_curve_x")
    ba, ci_lo, ci_hi = var("epl_bias_aware"), var("epl_ci_low"), var("epl_ci_high")
    floor, slope_hat = var("epl_null_upper"), var("inv_sigma2_hat")
    res = resolutions(epl, replicates)

    def cell(a: np.ndarray | None, i: int, q: int) -> float:
        return float(a[i, q]) if a is not None else math.nan

    status_s = (
        np.array(str_values(status), dtype=object).reshape(status.shape)
        if status is not None
        else None
    )

    rows: list[dict[str, Any]] = []
    diagnostics: list[dict[str, Any]] = []
    n_unmeasured = 0
    for i, level in enumerate(levels):
        for q, query in enumerate(queries):
            st = str(status_s[i, q]) if status_s is not None else ""
            s2 = float(sigma2[i, q]) if sigma2 is not None else math.nan
            nr = float(n_res[i, q]) if n_res is not None else math.nan
            if st == "" and not is_finite(s2) and not (nr > 0):
                n_unmeasured += 1
                continue
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
            b = cell(ba, i, q)
            fl = cell(floor, i, q)
            r = res.get((i, q))
            if st not in ("", "ok"):
                flag = {"too_few": "too few residuals", "invariant": "no noise"}.get(st, st)
            else:
                flag = flag_text(b, fl, r, short=True)
            rows.append(
                {
                    "geolevel": level,
                    "level_sigma2": fmt_num(s2, 4),
                    "query": query,
                    "n_residuals": fmt_int(nr),
                    "estimate": estimate_text(b, cell(ci_lo, i, q), cell(ci_hi, i, q))
                    if is_finite(b)
                    else "—",
                    "floor": fmt_num(fl, 3),
                    "loss": fmt_num(r.loss, 3) if r is not None and r.known else "—",
                    "flag": flag or "—",
                    "flag_class": flag_class(flag) if st in ("", "ok") else "other",
                }
            )
            diagnostics.append(
                {
                    "geolevel": level,
                    "query": query,
                    "status": st or "—",
                    "status_class": st if st in {"ok", "too_few", "invariant"} else "other",
                    "epl": fmt_num(cell(pooled, i, q), 4),
                    "spread": spread,
                    "window": window,
                    "bandwidth": fmt_num(cell(bw, i, q), 3),
                    "slope": fmt_num(1.0 / s2 if is_finite(s2) and s2 > 0 else math.nan, 3),
                    "slope_hat": fmt_num(cell(slope_hat, i, q), 3),
                }
            )

    _mark_row_spans(rows, "geolevel")
    _mark_row_spans(diagnostics, "geolevel")

    pct = attr_str(epl.attrs, "percentiles", "5,95").replace(" ", "").split(",")
    pct_lo, pct_hi = (pct[0], pct[-1]) if pct else ("5", "95")
    bw_factor = attr_str(epl.attrs, "bandwidth_factor")
    window_note = (
        "For discrete-Gaussian noise the true per-query privacy loss is unbounded in the noise "
        "value x: the loss of a DG with variance σ² grows linearly in x with slope 1/σ², so any "
        "finite EPL describes a window, not the worst case: each estimate is the largest "
        f"EPL(x) between the {pct_lo}th and {pct_hi}th percentile of its residuals."
    )

    surfaces, surface_note = surface_figures(epl)
    composed = composed_section(epl, res, replicates)
    return EplSection(
        surfaces=surfaces,
        surface_note=surface_note,
        composed=composed,
        rows=rows,
        diagnostics=diagnostics,
        n_unmeasured=n_unmeasured,
        method=attr_str(epl.attrs, "method"),
        bandwidth_factor=bw_factor,
        percentiles=(pct_lo, pct_hi),
        window_note=window_note,
        figure=epl_figure(epl, levels, queries, (pct_lo, pct_hi)),
        summary=epl_summary(epl, res, composed),
        states=states,
        nation=nation,
    )


def _floor_count(n: int, above: int, p: float) -> str:
    """How many estimates lie above their floors, against what chance puts there."""
    what = "(what noise of exactly the claimed σ² gives at this sample size)"
    floors = f"{'its floor' if above == 1 else 'their floors'} {what}"
    if above == 0:
        return f"All {n} estimates lie within their floors {what}: no loss beyond the claimed noise is seen."
    chance = chance_of_at_least(above, n, p)
    verb = "lies" if above == 1 else "lie"
    share = f"{100 * p:.3g} %"
    if chance >= 0.05:
        return (
            f"{above} of {n} estimates {verb} above {floors}, no more than such noise puts there by "
            f"chance ({share}, about {n * p:.2g}): no loss beyond the claimed noise is seen."
        )
    return (
        f"{above} of {n} estimates {verb} above {floors}, more than such noise puts there by chance "
        f"({share}, about {n * p:.2g}; {above} or more: probability {chance:.2g}): the residuals "
        "show more loss than the claimed noise."
    )


def epl_summary(
    epl: xr.Dataset, res: dict[tuple[int, int], Resolution], composed: ComposedEpl | None
) -> list[str]:
    """The EPL points of the summary box: the same bias-aware numbers as the at-a-glance table,
    each with its floor and whether it is resolved; then the composed EPL and how to read it."""
    heads = level_epls(epl, res)
    if not heads:
        return ["No level–query pair has enough residuals for an empirical privacy loss."]
    best = max(heads.values(), key=lambda h: h.value)
    if not best.bias_aware:
        return [
            f"The largest empirical privacy loss is {best.text} at level {best.level} "
            f"(“{best.query}”), a Flaxman–Petti estimate biased upward at small samples (this "
            "store holds no bias-aware estimate)."
        ]
    levels = str_values(epl["geolevel"].values)
    ba = float_values(epl, "epl_bias_aware")
    floor = float_values(epl, "epl_null_upper")
    have = ok_mask(epl) & np.isfinite(ba) if ba is not None else ok_mask(epl)
    points = [
        f"The empirical privacy loss (EPL, bias-aware) is largest at level {best.level} "
        f"(“{best.query}”): {best.text}, {best.flag}."
    ]
    if floor is not None and ba is not None:
        points[0] += " " + (
            _floor_count(
                int(have.sum()), int(np.count_nonzero(have & (ba > floor))), 1 - null_quantile(epl)
            )
        )
    known = {k: r for k, r in res.items() if r.known}
    open_ = [r for r in known.values() if not r.resolved]
    if open_:
        most = max(r.needed or 0 for r in open_)
        done = [
            lvl
            for i, lvl in enumerate(levels)
            if any(k[0] == i for k in known)
            and all(r.resolved for k, r in known.items() if k[0] == i)
        ]
        points.append(
            f"{len(open_)} of {len(known)} estimates are not resolved at "
            f"{open_[0].replicates} replicates"
            + (f" (all would be at ≥ {fmt_int(most)} replicates)" if most else "")
            + (f"; every estimate of {', '.join(done)} is resolved" if done else "")
            + "."
        )
    elif known:
        points.append("Every EPL estimate is resolved.")
    if composed is not None and composed.summary:
        points.append(composed.summary)
    return points
