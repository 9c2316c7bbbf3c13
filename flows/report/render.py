"""Render one self-contained HTML audit report from a dpaudit result store.

The report is built from the Zarr v3 result store alone (no re-computation, no access to the
audit inputs): run metadata from the root attributes, the ``accounting`` group (exact ε(δ)
brackets against the Bureau's and the Canonne–Kamath–Steinke conversions), the ``epl`` group
(empirical privacy loss after Flaxman & Petti) and the ``residuals`` group (DP − truth samples).
Groups that are absent are reported as absent; the sections that exist are rendered.

Figures are drawn with matplotlib's Agg canvas on :class:`matplotlib.figure.Figure` objects that
are never registered with pyplot, so rendering is headless, thread-safe and leaks no figures, and
the process-wide backend of the caller is left untouched. Every figure is embedded as a base64
PNG; the page has inline CSS and no external resources.
"""

from __future__ import annotations

import importlib.resources
import json
import math
import os
import pathlib
import tempfile
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jinja2
import numpy as np
import xarray as xr

from flows.report.common import (
    ReportFigure,
    _attr_str,
    _isfinite,
    _new_figure,
    _open_group,
    _read_root_attrs,
    _store_arg,
    _strs,
    _style_axes,
    _to_data_uri,
    dg_pmf,
    epl_interval_label,
    fmt_bracket,
    fmt_delta,
    fmt_duration,
    fmt_int,
    fmt_num,
    fmt_pct,
    fmt_range,
)
from flows.report.epl import ComposedEpl, composed_section, surface_figures
from flows.report.sections import (
    accuracy_section,
    mpl_coverage_section,
    mpl_section,
    summary_section,
)

__all__ = ["dg_pmf", "fmt_bracket", "fmt_delta", "fmt_num", "render_report"]

#: Optional groups of a result store, in report order.
GROUPS: tuple[str, ...] = ("accounting", "accuracy", "epl", "mpl", "residuals")
#: Group written by ``dpaudit mpl-coverage`` (flows/mpl.py); rendered on its own or beside MPL.
COVERAGE_GROUP = "mpl_coverage"
#: δ used for the plain-language summary (the nearest stored δ is used).
SUMMARY_DELTA = 1e-10
#: Residual histograms read at most this many states and items per state of one replicate.
HIST_MAX_STATES = 5
HIST_MAX_ITEMS = 200_000

_TEMPLATE = "report.html.j2"
_NEIGHBOURS = {
    "add_remove": "add/remove one person (unbounded)",
    "bounded": "replace one person (bounded)",
}
_GROUP_DESCRIPTIONS = {
    "accounting": "privacy accounting (exact ε(δ) and conversions)",
    "epl": "empirical privacy loss",
    "residuals": "noise residuals (DP − truth)",
    "accuracy": "accuracy of counts under the Bureau's and the reduced noise",
    "mpl": "maximum privacy loss lower bounds (not run)",
}


# --------------------------------------------------------------------------------------------
# sections
# --------------------------------------------------------------------------------------------


@dataclass
class AccountingSection:
    deltas: list[str]
    rows: list[dict[str, Any]]
    composed: dict[str, Any] | None
    method: str
    neighbours: str
    figure: ReportFigure | None
    summary: str
    tradeoff_figure: ReportFigure | None = None


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


@dataclass
class ResidualSection:
    figure: ReportFigure | None
    note: str


@dataclass
class Provenance:
    software: list[tuple[str, str]]
    software_raw: str | None
    spec_toml: str | None
    attrs: list[tuple[str, str]] = field(default_factory=list)


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


def _nearest_index(values: Sequence[float], target: float) -> int:
    logs = [abs(math.log10(v) - math.log10(target)) if v > 0 else math.inf for v in values]
    return int(np.argmin(logs))


def _reduction(exact_upper: Any, bureau: Any) -> float:
    if not (_isfinite(exact_upper) and _isfinite(bureau)) or float(bureau) <= 0:
        return math.nan
    return (float(bureau) - float(exact_upper)) / float(bureau)


def _accounting_section(acc: xr.Dataset) -> AccountingSection:
    levels = _strs(acc["geolevel"].values)
    deltas = [float(d) for d in np.asarray(acc["delta"].values)] if "delta" in acc.coords else []

    def var(name: str) -> np.ndarray | None:
        return np.asarray(acc[name].values) if name in acc.variables else None

    rho, s2min, s2max, nq = var("rho"), var("sigma2_min"), var("sigma2_max"), var("n_queries")
    lower, upper = var("eps_exact_lower"), var("eps_exact_upper")
    bureau, cks = var("eps_bureau"), var("eps_cks")

    def at(a: np.ndarray | None, *idx: int) -> float:
        return float(a[idx]) if a is not None else math.nan

    def cells(get: Any) -> list[dict[str, str]]:
        if not deltas:
            keys = ("delta", "bureau", "cks", "exact", "exact_full", "reduction")
            return [dict.fromkeys(keys, "—")]
        out = []
        for j in range(len(deltas)):
            lo, hi, bu, ck = get(j)
            out.append(
                {
                    "delta": fmt_delta(deltas[j]),
                    "bureau": fmt_num(bu, 5),
                    "cks": fmt_num(ck, 5),
                    "exact": fmt_bracket(lo, hi),
                    "exact_full": f"[{lo!r}, {hi!r}]",
                    "reduction": fmt_pct(_reduction(hi, bu)),
                }
            )
        return out

    rows = []
    for i, level in enumerate(levels):
        rows.append(
            {
                "geolevel": level,
                "n_queries": fmt_int(at(nq, i)),
                "sigma2": fmt_range(at(s2min, i), at(s2max, i)),
                "rho": fmt_num(at(rho, i), 5),
                "cells": cells(
                    lambda j, i=i: (
                        at(lower, i, j),
                        at(upper, i, j),
                        at(bureau, i, j),
                        at(cks, i, j),
                    )
                ),
            }
        )

    composed = None
    c_lo, c_hi = var("composed_eps_exact_lower"), var("composed_eps_exact_upper")
    c_bu, c_ck = var("composed_eps_bureau"), var("composed_eps_cks")
    if any(a is not None for a in (c_lo, c_hi, c_bu, c_ck)):
        c_rho = var("composed_rho")
        composed = {
            "geolevel": "all levels composed",
            "n_queries": fmt_int(np.nansum(nq)) if nq is not None else "—",
            "sigma2": (
                fmt_range(np.min(s2min), np.max(s2max))
                if s2min is not None and s2max is not None and s2min.size
                else "—"
            ),
            "rho": fmt_num(float(c_rho) if c_rho is not None else math.nan, 5),
            "cells": cells(lambda j: (at(c_lo, j), at(c_hi, j), at(c_bu, j), at(c_ck, j))),
        }

    # plain-language summary
    summary = ""
    if deltas:
        j = _nearest_index(deltas, SUMMARY_DELTA)
        d_txt = fmt_delta(deltas[j])
        parts = []
        if composed is not None and c_hi is not None:
            parts.append(
                f"At δ = {d_txt}, composing all {len(levels)} geographic levels, the exact ε "
                f"lies in {fmt_bracket(at(c_lo, j), at(c_hi, j))}, against "
                f"ε = {fmt_num(at(c_bu, j), 5)} "
                f"from the Bureau's conversion ρ + 2√(ρ ln 1/δ) and "
                f"{fmt_num(at(c_ck, j), 5)} from the Canonne–Kamath–Steinke conversion; the "
                f"Bureau's figure overstates the privacy loss by "
                f"{fmt_pct(_reduction(at(c_hi, j), at(c_bu, j)))} of itself."
            )
        if upper is not None and levels:
            col = upper[:, j].astype(np.float64)
            if np.any(np.isfinite(col)):
                k = int(np.nanargmax(np.where(np.isfinite(col), col, -np.inf)))
                parts.append(
                    f"{'Per level, the' if parts else f'At δ = {d_txt} the'} largest exact ε is "
                    f"that of level {levels[k]}: {fmt_bracket(at(lower, k, j), at(upper, k, j))} "
                    f"vs the Bureau's {fmt_num(at(bureau, k, j), 5)} "
                    f"(ρ = {fmt_num(at(rho, k), 4)})."
                )
        summary = " ".join(parts)

    return AccountingSection(
        deltas=[fmt_delta(d) for d in deltas],
        rows=rows,
        composed=composed,
        method=_attr_str(acc.attrs, "method"),
        neighbours=_NEIGHBOURS.get(
            _attr_str(acc.attrs, "neighbours", ""), _attr_str(acc.attrs, "neighbours")
        ),
        figure=_accounting_figure(acc, levels, deltas),
        summary=summary,
        tradeoff_figure=_tradeoff_figure(acc, levels),
    )


def _tradeoff_figure(acc: xr.Dataset, levels: list[str]) -> ReportFigure | None:
    """f-DP trade-off curves β(α) per level: exact (certified lower end) vs Bureau-implied."""
    if "alpha" not in acc.coords or "tradeoff_exact_lower" not in acc or not levels:
        return None
    alpha = np.asarray(acc["alpha"].values, dtype=np.float64)
    exact = np.asarray(acc["tradeoff_exact_lower"].values, dtype=np.float64)
    bureau = (
        np.asarray(acc["tradeoff_bureau"].values, dtype=np.float64)
        if "tradeoff_bureau" in acc
        else None
    )
    fig, axes = _new_figure(len(levels))
    for i, (ax, level) in enumerate(zip(axes, levels, strict=True)):
        ax.plot(alpha, exact[i], color="#1f5fa8", linewidth=1.6, label="exact (certified)")
        if bureau is not None:
            ax.plot(
                alpha, bureau[i], color="#c0392b", linewidth=1.2, linestyle="--", label="Bureau"
            )
        ax.plot(alpha, 1 - alpha, color="0.6", linewidth=0.6, linestyle=":")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_title(level, fontsize=9)
        ax.set_xlabel("type I error α", fontsize=8)
        ax.set_ylabel("type II error β", fontsize=8)
        _style_axes(ax)
    if axes:
        axes[0].legend(fontsize=7, frameon=False)
    return ReportFigure(
        title="f-DP trade-off curves per geographic level",
        alt=(
            f"Small multiples, one per level ({', '.join(levels)}), of the smallest type II error β "
            "of any test at type I error α: the exact curve (solid blue) lies above the one implied "
            "by the Bureau's accounting (dashed red)."
        ),
        caption=(
            "β(α): the smallest type II error of any test that tells the neighbouring data sets "
            "apart at type I error α (higher is more private; the dotted line β = 1 − α is perfect "
            "privacy). Solid: certified lower end of the exact curve of the level's noise, a valid "
            "guarantee; dashed: the curve implied by the Bureau's zCDP accounting ε = ρ + 2√(ρ ln 1/δ)."
        ),
        src=_to_data_uri(fig),
    )


def _accounting_figure(
    acc: xr.Dataset, levels: list[str], deltas: list[float]
) -> ReportFigure | None:
    curves = {"delta_exact_upper", "delta_bureau"} & set(acc.data_vars)
    if "eps_grid" not in acc.coords or not curves or not levels:
        return None
    eps = np.asarray(acc["eps_grid"].values, dtype=np.float64)
    exact = (
        np.asarray(acc["delta_exact_upper"].values, dtype=np.float64)
        if "delta_exact_upper" in acc
        else None
    )
    bureau = (
        np.asarray(acc["delta_bureau"].values, dtype=np.float64) if "delta_bureau" in acc else None
    )
    floor = min([d for d in deltas if d > 0] or [1e-12]) / 100.0
    fig, axes = _new_figure(len(levels))
    for i, (ax, level) in enumerate(zip(axes, levels, strict=True)):
        x_max = 0.0
        for curve, style, label in (
            (exact, dict(color="#1f5fa8", linewidth=1.6), "exact (upper)"),
            (bureau, dict(color="#c0392b", linewidth=1.2, linestyle="--"), "Bureau"),
        ):
            if curve is None:
                continue
            y = np.where(curve[i] > 0, curve[i], np.nan)
            ax.plot(eps, y, label=label, **style)  # type: ignore[arg-type]
            visible = eps[np.isfinite(y) & (y >= floor)]
            if visible.size:
                x_max = max(x_max, float(visible.max()))
        for d in deltas:
            if d > 0:
                ax.axhline(d, color="0.6", linewidth=0.6, linestyle=":")
        ax.set_yscale("log")
        ax.set_ylim(floor, 1.5)
        if x_max > 0:
            ax.set_xlim(float(eps.min()), min(1.08 * x_max, float(eps.max())))
        ax.set_title(level, fontsize=9)
        ax.set_xlabel("ε", fontsize=8)
        ax.set_ylabel("δ(ε)", fontsize=8)
        _style_axes(ax)
    if axes:
        axes[0].legend(fontsize=7, frameon=False)
    return ReportFigure(
        title="(ε, δ) curves per geographic level",
        alt=(
            f"Small multiples, one per level ({', '.join(levels)}), of δ on a log scale against "
            "ε: the exact curve (solid blue) lies below the Bureau's conversion (dashed red)."
        ),
        caption=(
            "δ(ε) for each geographic level on a log scale. Solid: certified upper bound of the "
            "exact privacy profile of the level's noise; dashed: the Bureau's conversion of ρ "
            "(ε = ρ + 2√(ρ ln 1/δ) solved for δ). Dotted horizontal lines mark the δ of the table."
        ),
        src=_to_data_uri(fig),
    )


def _epl_section(epl: xr.Dataset) -> EplSection:
    levels = _strs(epl["geolevel"].values)
    queries = _strs(epl["query"].values)
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
        np.array(_strs(status), dtype=object).reshape(status.shape) if status is not None else None
    )

    rows: list[dict[str, Any]] = []
    n_unmeasured = 0
    best: tuple[float, str, str, float] | None = None
    for i, level in enumerate(levels):
        for q, query in enumerate(queries):
            st = str(status_s[i, q]) if status_s is not None else ""
            s2 = float(sigma2[i, q]) if sigma2 is not None else math.nan
            nr = float(n_res[i, q]) if n_res is not None else math.nan
            if st == "" and not _isfinite(s2) and not (nr > 0):
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
            slope = 1.0 / s2 if _isfinite(s2) and s2 > 0 else math.nan
            b = cell(ba, i, q)
            bias_aware = "—"
            if _isfinite(b):
                bias_aware = fmt_num(b, 4)
                lo, hi = cell(ci_lo, i, q), cell(ci_hi, i, q)
                if _isfinite(lo) and _isfinite(hi):
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
            if st == "ok" and _isfinite(p) and (best is None or p > best[0]):
                best = (p, query, level, s2)

    _mark_row_spans(rows, "geolevel")

    pct = _attr_str(epl.attrs, "percentiles", "5,95").replace(" ", "").split(",")
    pct_lo, pct_hi = (pct[0], pct[-1]) if pct else ("5", "95")
    bw_factor = _attr_str(epl.attrs, "bandwidth_factor")
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
        method=_attr_str(epl.attrs, "method"),
        bandwidth_factor=bw_factor,
        percentiles=(pct_lo, pct_hi),
        window_note=window_note,
        figure=_epl_figure(epl, levels, queries, (pct_lo, pct_hi)),
        summary=summary,
        n_states=n_states,
    )


def _epl_figure(
    epl: xr.Dataset, levels: list[str], queries: list[str], pct: tuple[str, str]
) -> ReportFigure | None:
    if "epl_curve" not in epl or "epl_curve_x" not in epl or not levels:
        return None
    fig, axes = _new_figure(len(levels))
    colours = [f"C{k % 10}" for k in range(len(queries))]
    sigma2 = np.asarray(epl["sigma2"].values, dtype=np.float64) if "sigma2" in epl else None
    handles: dict[str, Any] = {}
    for i, (ax, level) in enumerate(zip(axes, levels, strict=True)):
        x_all = np.asarray(epl["epl_curve_x"].isel(geolevel=i).values, dtype=np.float64)
        y_all = np.asarray(epl["epl_curve"].isel(geolevel=i).values, dtype=np.float64)
        drawn = False
        for q, query in enumerate(queries):
            ok = np.isfinite(x_all[q]) & np.isfinite(y_all[q])
            if not ok.any():
                continue
            x, y = x_all[q][ok], y_all[q][ok]
            (line,) = ax.plot(x, y, color=colours[q], linewidth=1.4)
            handles.setdefault(query, line)
            if sigma2 is not None and np.isfinite(sigma2[i, q]) and sigma2[i, q] > 0:
                ax.plot(x, np.abs(x) / sigma2[i, q], color=colours[q], linewidth=0.8, ls=":")
            drawn = True
        if not drawn:
            ax.text(0.5, 0.5, "no curve", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(level, fontsize=9)
        ax.set_xlabel("residual x", fontsize=8)
        ax.set_ylabel("EPL(x)", fontsize=8)
        _style_axes(ax)
    if handles:
        fig.legend(
            list(handles.values()),
            list(handles.keys()),
            loc="outside lower center",
            ncols=min(len(handles), 3),
            fontsize=7,
            frameon=False,
        )
    return ReportFigure(
        title="Pooled EPL(x) curves per geographic level",
        alt=(
            f"One panel per level ({', '.join(levels)}), one line per query, of the pooled "
            "empirical privacy loss EPL(x) against the residual x."
        ),
        caption=(
            "Pooled empirical privacy loss EPL(x) per query (solid, one colour per query), "
            f"estimated between the {pct[0]}th and {pct[1]}th percentile of the residuals. "
            "Dotted, same colour: |x|/σ², the slope-1/σ² growth of the loss of a discrete "
            "Gaussian with the query's variance."
        ),
        src=_to_data_uri(fig),
    )


def _level_sigma2(level: str, *sources: xr.Dataset | None) -> float:
    """Median σ² over the queries measured at ``level``, from the first source holding one.

    The residuals group carries ``sigma2(geolevel, query)`` itself; the EPL group is the fallback.
    """
    for ds in sources:
        if ds is None or "sigma2" not in ds or "geolevel" not in ds["sigma2"].dims:
            continue
        levels = _strs(ds["geolevel"].values)
        if level not in levels:
            continue
        v = np.asarray(ds["sigma2"].isel(geolevel=levels.index(level)).values, dtype=np.float64)
        v = v[np.isfinite(v) & (v > 0)]
        if v.size:
            return float(np.median(v))
    return math.nan


def _residual_section(res: xr.Dataset, epl: xr.Dataset | None) -> ResidualSection:
    if "residual" not in res or "geolevel" not in res.coords:
        return ResidualSection(None, "The residuals group holds no residual variable.")
    levels = _strs(res["geolevel"].values)
    n_states = int(res.sizes.get("state", 0))
    states = _strs(res["state"].values)[:HIST_MAX_STATES] if "state" in res.coords else []
    n_read_states = min(n_states, HIST_MAX_STATES)
    fig, axes = _new_figure(len(levels))
    any_overlay = False
    for i, (ax, level) in enumerate(zip(axes, levels, strict=True)):
        sel: dict[str, Any] = {"geolevel": i}
        if "replicate" in res["residual"].dims:
            sel["replicate"] = 0
        if "state" in res["residual"].dims:
            sel["state"] = slice(0, HIST_MAX_STATES)
        if "item" in res["residual"].dims:
            sel["item"] = slice(0, HIST_MAX_ITEMS)
        r = np.asarray(res["residual"].isel(sel).values, dtype=np.float64).ravel()
        r = r[np.isfinite(r)]
        if r.size == 0:
            ax.text(0.5, 0.5, "no residuals", ha="center", va="center", transform=ax.transAxes)
        else:
            lo, hi = float(np.floor(r.min())), float(np.ceil(r.max()))
            if hi - lo <= 120:
                bins = np.arange(lo - 0.5, hi + 1.5, 1.0)
            else:
                bins = np.linspace(lo - 0.5, hi + 0.5, 61)
            ax.hist(r, bins=bins.tolist(), density=True, color="#9bb7d4", edgecolor="none")
            s2 = _level_sigma2(level, res, epl)
            if _isfinite(s2):
                reach = math.ceil(3.5 * math.sqrt(s2))
                k = np.arange(min(int(lo) - 1, -reach), max(int(hi) + 1, reach) + 1)
                ax.plot(k, dg_pmf(k, s2), color="#c0392b", linewidth=1.2)
                any_overlay = True
                ax.text(
                    0.98,
                    0.95,
                    f"σ² = {fmt_num(s2, 3)}\nn = {r.size:,}",
                    ha="right",
                    va="top",
                    fontsize=7,
                    transform=ax.transAxes,
                )
        ax.set_title(level, fontsize=9)
        ax.set_xlabel("DP − truth", fontsize=8)
        ax.set_ylabel("density", fontsize=8)
        _style_axes(ax)
    overlay_txt = (
        "The red line is the exact discrete-Gaussian pmf ∝ exp(−k²/(2σ²)) for the median σ² of "
        "the queries measured at the level."
        if any_overlay
        else "The store records no σ² for these levels, so no reference pmf is drawn."
    )
    figure = ReportFigure(
        title="Residual histograms per geographic level",
        alt=(
            f"One histogram per level ({', '.join(levels)}) of the noise residuals DP − truth "
            "of the first replicate, with the discrete-Gaussian pmf overlaid."
        ),
        caption=(
            "Distribution of DP − truth over the items of the first replicate of "
            f"{n_read_states} of {n_states} states ({', '.join(states)}), pooled over "
            f"queries. {overlay_txt}"
        ),
        src=_to_data_uri(fig),
    )
    return ResidualSection(figure, "")


def _provenance(attrs: Mapping[str, Any]) -> Provenance:
    software: list[tuple[str, str]] = []
    raw: str | None = None
    sw = attrs.get("software")
    if isinstance(sw, Mapping):
        software = sorted((str(k), str(v)) for k, v in sw.items())
    elif isinstance(sw, str) and sw.strip():
        try:
            parsed = json.loads(sw)
        except json.JSONDecodeError:
            raw = sw
        else:
            if isinstance(parsed, Mapping):
                software = sorted((str(k), str(v)) for k, v in parsed.items())
            else:
                raw = sw
    spec = attrs.get("spec_toml")
    known = {"spec_toml", "software"}
    extra = [(str(k), str(v)) for k, v in sorted(attrs.items()) if k not in known]
    return Provenance(
        software=software,
        software_raw=raw,
        spec_toml=str(spec) if spec is not None and str(spec).strip() else None,
        attrs=extra,
    )


# --------------------------------------------------------------------------------------------
# entry point
# --------------------------------------------------------------------------------------------


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    return env


def _load_template(env: jinja2.Environment) -> jinja2.Template:
    source = (
        importlib.resources.files("flows.report")
        .joinpath("templates", _TEMPLATE)
        .read_text(encoding="utf-8")
    )
    return env.from_string(source)


def _atomic_write_text(path: pathlib.Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _spec_name(spec_toml: Any) -> str:
    """The spec's ``audit.name`` (shown as text; the template escapes it)."""
    if not isinstance(spec_toml, str):
        return "—"
    try:
        name = tomllib.loads(spec_toml).get("audit", {}).get("name")
    except tomllib.TOMLDecodeError:
        return "—"
    return str(name) if name else "—"


def render_report(
    store: str | os.PathLike[str],
    output: str | os.PathLike[str],
    *,
    storage_options: dict[str, Any] | None = None,
) -> pathlib.Path:
    """Render the HTML audit report of the result ``store`` to ``output``.

    ``store`` is a local path or an fsspec URI of a consolidated Zarr v3 result store;
    ``storage_options`` are passed to fsspec for URIs. The output is written atomically (a
    temporary file beside it, then :func:`os.replace`). Returns the output path.

    Raises :class:`FileNotFoundError` if ``store`` holds neither root attributes nor any of
    the result groups.
    """
    store_s = _store_arg(store)
    out = pathlib.Path(output)
    root_attrs = _read_root_attrs(store_s, storage_options)
    groups = {
        g: _open_group(store_s, g, storage_options) for g in (*GROUPS, "summary", COVERAGE_GROUP)
    }
    if root_attrs is None and all(ds is None for ds in groups.values()):
        raise FileNotFoundError(f"no dpaudit result store at {store_s!r}")

    attrs: dict[str, Any] = {}
    summary_ds = groups.pop("summary")
    coverage_ds = groups.pop(COVERAGE_GROUP)
    if summary_ds is not None:
        attrs.update(summary_ds.attrs)
    attrs.update(root_attrs or {})

    acc, epl, res = groups["accounting"], groups["epl"], groups["residuals"]
    accuracy_ds, mpl_ds = groups["accuracy"], groups["mpl"]
    try:
        accounting = _accounting_section(acc) if acc is not None else None
        epl_section = _epl_section(epl) if epl is not None else None
        epl_ci, epl_floor_q, epl_ba = epl_interval_label(epl)
        residuals = _residual_section(res, epl) if res is not None else None
        table = summary_section({**attrs, **(root_attrs or {})}, acc, epl, mpl_ds)
        accuracy = accuracy_section(accuracy_ds) if accuracy_ds is not None else None
        mpl = mpl_section(mpl_ds) if mpl_ds is not None else None
        coverage = mpl_coverage_section(coverage_ds) if coverage_ds is not None else None
    finally:
        for ds in (acc, epl, res, summary_ds, accuracy_ds, mpl_ds, coverage_ds):
            if ds is not None:
                ds.close()

    # a store of ``dpaudit mpl-coverage`` holds no audit group: render its coverage alone
    coverage_only = coverage is not None and all(groups[g] is None for g in GROUPS)
    missing = (
        [] if coverage_only else [(g, _GROUP_DESCRIPTIONS[g]) for g in GROUPS if groups[g] is None]
    )
    summary_parts = []
    if coverage_only:
        summary_parts.append(
            "This store was written by dpaudit mpl-coverage: it checks the maximum privacy loss "
            "lower bound on mechanisms whose loss is known, and holds no audit of a release."
        )
    if accounting is not None and accounting.summary:
        summary_parts.append(accounting.summary)
    if epl_section is not None:
        summary_parts.append(epl_section.summary)
    if missing:
        summary_parts.append(
            "This store holds no "
            + ", no ".join(desc for _, desc in missing)
            + "; the corresponding sections are omitted."
        )

    neighbours_raw = _attr_str(attrs, "neighbours", "")
    if not neighbours_raw and acc is not None:
        neighbours_raw = _attr_str(acc.attrs, "neighbours", "")
    header = {
        "name": _spec_name(attrs.get("spec_toml")),
        "source_commit": _attr_str(attrs, "source_commit"),
        "allocation_id": _attr_str(attrs, "allocation_id"),
        "allocation_source": _attr_str(attrs, "allocation_source"),
        "neighbours": _NEIGHBOURS.get(neighbours_raw, neighbours_raw or "—"),
        "run_id": _attr_str(attrs, "run_id"),
        "created_utc": _attr_str(attrs, "created_utc"),
        "seed": _attr_str(attrs, "seed"),
        "n_workers": _attr_str(attrs, "n_workers"),
        "dask_scheduler": _attr_str(attrs, "dask_scheduler"),
        "wall_time": fmt_duration(attrs.get("wall_time_s")),
        "dpaudit_version": _attr_str(attrs, "dpaudit_version"),
    }

    env = _environment()
    html = _load_template(env).render(
        header=header,
        summary=" ".join(summary_parts),
        accounting=accounting,
        epl=epl_section,
        residuals=residuals,
        table=table,
        accuracy=accuracy,
        mpl=mpl,
        coverage=coverage,
        coverage_only=coverage_only,
        epl_ci=epl_ci,
        epl_floor_q=epl_floor_q,
        epl_ba=epl_ba,
        missing=missing,
        provenance=_provenance(attrs),
        store_name=pathlib.PurePosixPath(store_s.rstrip("/")).name or store_s,
    )
    _atomic_write_text(out, html)
    return out
