"""Figures of the ``epl`` group: the pooled EPL(x) curves per level and the EPL(x) surfaces.

* :func:`epl_figure` — one panel per geolevel, one line per query, of the pooled EPL(x) with the
  slope-1/σ² reference |x|/σ² dotted.
* :func:`surface_figures` — one PNG per geolevel: a row per shown query (at most
  :data:`SURFACE_MAX_QUERIES`, those with the largest bias-aware EPL), the pooled surface with its
  bootstrap band first, then the per-state surfaces (at most :data:`SURFACE_MAX_STATES`) as small
  multiples on the same axes limits, each with the discrete-Gaussian reference (2x + 1)/(2σ²).

Nothing is recomputed: the curves are the stored, already thinned surfaces (≤ 101 points).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import xarray as xr
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from flows.report.figures import ReportFigure, label_panel, new_figure, style_axes, to_data_uri
from flows.report.format import is_finite
from flows.report.store_data import epl_interval_label, float_values, str_values

#: Queries shown per geolevel in the surface figures (largest bias-aware EPL first).
SURFACE_MAX_QUERIES = 3
#: States shown as small multiples per query (in store order).
SURFACE_MAX_STATES = 7


POOLED_COLOUR = "#1f5fa8"
STATE_COLOUR = "#4d4d4d"
REFERENCE_COLOUR = "#c0392b"


def epl_figure(
    epl: xr.Dataset, levels: list[str], queries: list[str], pct: tuple[str, str]
) -> ReportFigure | None:
    if "epl_curve" not in epl or "epl_curve_x" not in epl or not levels:
        return None
    fig, axes = new_figure(len(levels))
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
        label_panel(ax, level, "residual x", "EPL(x)")
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
        src=to_data_uri(fig),
    )


def _chosen_queries(epl: xr.Dataset, i: int, have: np.ndarray) -> list[int]:
    """Queries of level ``i`` with a pooled surface, largest bias-aware EPL first, capped."""
    qs = [int(q) for q in np.flatnonzero(have)]
    ba = float_values(epl, "epl_bias_aware")
    if ba is not None:
        key = np.where(np.isfinite(ba[i]), ba[i], -np.inf)
        qs.sort(key=lambda q: -key[q])
    return qs[:SURFACE_MAX_QUERIES]


def _panel(
    ax: Any,
    x: np.ndarray,
    y: np.ndarray,
    lo: np.ndarray | None,
    hi: np.ndarray | None,
    colour: str,
    sigma2: float,
) -> bool:
    ok = np.isfinite(x) & np.isfinite(y)
    if not ok.any():
        ax.text(
            0.5, 0.5, "no surface", ha="center", va="center", fontsize=7, transform=ax.transAxes
        )
        return False
    if lo is not None and hi is not None:
        band = ok & np.isfinite(lo) & np.isfinite(hi)
        if band.any():
            ax.fill_between(x[band], lo[band], hi[band], color=colour, alpha=0.22, lw=0)
    ax.plot(x[ok], y[ok], color=colour, lw=1.2)
    if is_finite(sigma2) and sigma2 > 0:
        xs = np.array([x[ok].min(), x[ok].max()])
        ax.plot(xs, (2 * xs + 1) / (2 * sigma2), color=REFERENCE_COLOUR, lw=0.8, ls=":")
    return True


def surface_figures(epl: xr.Dataset) -> tuple[list[ReportFigure], str]:
    """One figure per geolevel of the stored EPL(x) surfaces, and a note on what is shown."""
    need = ("surface_pooled_x", "surface_pooled", "surface_pooled_low", "surface_pooled_high")
    if any(v not in epl.variables for v in need) or "geolevel" not in epl.coords:
        return [], ""
    levels = str_values(epl["geolevel"].values)
    queries = str_values(epl["query"].values) if "query" in epl.coords else []
    states = str_values(epl["state"].values) if "state" in epl.coords else []
    px, py = float_values(epl, "surface_pooled_x"), float_values(epl, "surface_pooled")
    plo, phi = float_values(epl, "surface_pooled_low"), float_values(epl, "surface_pooled_high")
    if px is None or py is None:
        return [], ""
    per_state = all(v in epl.variables for v in ("surface_x", "surface", "surface_low"))
    sx, sy = float_values(epl, "surface_x"), float_values(epl, "surface")
    slo, shi = float_values(epl, "surface_low"), float_values(epl, "surface_high")
    ci = epl_interval_label(epl)[0]
    sigma2 = float_values(epl, "sigma2")
    figures: list[ReportFigure] = []
    capped_q = 0
    for i, level in enumerate(levels):
        have = np.any(np.isfinite(px[i]) & np.isfinite(py[i]), axis=-1)
        if not have.any():
            continue
        qs = _chosen_queries(epl, i, have)
        capped_q = max(capped_q, int(have.sum()) - len(qs))
        # the states with a surface at this level (the nation only at the national level)
        level_states = (
            [k for k in range(len(states)) if np.isfinite(sx[k, i]).any()]
            if per_state and sx is not None
            else []
        )
        # one region with data (the nation at the national level): its surface is the pooled one
        shown = level_states[:SURFACE_MAX_STATES] if len(level_states) > 1 else []
        ncols = 1 + len(shown)
        # fixed margins, not constrained layout: laying out tens of panels costs seconds
        w, h = 1.75 * ncols + 0.6, 1.55 * len(qs) + 0.5
        fig = Figure(figsize=(w, h))
        fig.subplots_adjust(
            left=0.6 / w,
            right=1 - 0.1 / w,
            bottom=0.45 / h,
            top=1 - 0.3 / h,
            wspace=0.12,
            hspace=0.3,
        )
        FigureCanvasAgg(fig)
        axes = fig.subplots(len(qs), ncols, squeeze=False, sharex="row", sharey="row")
        for r, q in enumerate(qs):
            s2 = float(sigma2[i, q]) if sigma2 is not None else math.nan
            ax = axes[r][0]
            _panel(
                ax,
                px[i, q],
                py[i, q],
                plo[i, q] if plo is not None else None,
                phi[i, q] if phi is not None else None,
                POOLED_COLOUR,
                s2,
            )
            ax.set_ylabel(_short(queries[q]) if q < len(queries) else f"query {q}", fontsize=7)
            for c in range(1, ncols):
                if sx is None or sy is None:
                    break
                k = shown[c - 1]
                _panel(
                    axes[r][c],
                    sx[k, i, q],
                    sy[k, i, q],
                    slo[k, i, q] if slo is not None else None,
                    shi[k, i, q] if shi is not None else None,
                    STATE_COLOUR,
                    s2,
                )
            for c in range(ncols):
                style_axes(axes[r][c])
                axes[r][c].tick_params(labelsize=6)
                axes[r][c].xaxis.set_major_locator(MaxNLocator(4))
                axes[r][c].yaxis.set_major_locator(MaxNLocator(4))
                if c:
                    axes[r][c].tick_params(labelleft=False)
                if r == 0:
                    axes[r][c].set_title("pooled" if c == 0 else states[shown[c - 1]], fontsize=8)
        fig.supxlabel("residual x", fontsize=8, y=0.02)
        n_q = int(have.sum())
        q_note = (
            f"the {len(qs)} of {n_q} queries with the largest bias-aware EPL"
            if len(qs) < n_q
            else f"all {n_q} quer{'y' if n_q == 1 else 'ies'} with a surface"
        )
        s_note = (
            f"; then one column each for {', '.join(states[k] for k in shown)}"
            + (
                f" ({len(shown)} of the {len(level_states)} with data at this level)"
                if len(shown) < len(level_states)
                else ""
            )
            if shown
            else (
                f" (the only region with data here: {states[level_states[0]]})"
                if level_states
                else ""
            )
        )
        figures.append(
            ReportFigure(
                title=f"EPL(x) surfaces at level {level}",
                alt=(
                    f"Level {level}: rows are queries, the first column the pooled EPL(x) "
                    "with its bootstrap band, the other columns single states."
                ),
                caption=(
                    f"Bias-aware EPL(x) = log p(x)/p(x + 1) (solid) with its pointwise {ci} "
                    f"bootstrap band (shaded), for {q_note}; first column pooled{s_note}. "
                    "Dotted red: (2x + 1)/(2σ²), the loss of a discrete "
                    "Gaussian with the query's σ² — a surface that follows it is what the "
                    "accounting assumes; a steeper one departs from it (in a simulated release: "
                    "post-processing or the estimator, whose noise is the claimed noise)."
                ),
                src=to_data_uri(fig),
            )
        )
    note = ""
    if figures:
        note = (
            f"One figure per level; at most {SURFACE_MAX_QUERIES} queries (largest bias-aware "
            f"EPL) and {SURFACE_MAX_STATES} states are drawn"
            + (f", so up to {capped_q} queries per level are not shown" if capped_q else "")
            + "; the table above lists every query."
        )
    return figures, note


def _short(text: str, width: int = 22) -> str:
    text = text.split(":")[-1]
    return text if len(text) <= width else text[: width - 1] + "…"
