"""Report pieces of the ``epl`` group beyond the table: EPL(x) surfaces and the composed EPL.

* :func:`surface_figures` — one PNG per geolevel: a row per shown query (at most
  :data:`SURFACE_MAX_QUERIES`, those with the largest bias-aware EPL), the pooled surface with its
  bootstrap band first, then the per-state surfaces (at most :data:`SURFACE_MAX_STATES`) as small
  multiples on the same axes limits, each with the discrete-Gaussian reference (2x + 1)/(2σ²).
* :func:`composed_section` — the composed EPL of the counts containing one person: the per-level
  EPLs, their sum with its interval, the projection, the dependence factor and the cross-level
  residual correlations (seed 001 trees).

Nothing is recomputed: the curves are the stored, already thinned surfaces (≤ 101 points).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from flows.report.common import (
    ReportFigure,
    _attr_str,
    _isfinite,
    _strs,
    _style_axes,
    _to_data_uri,
    epl_interval_label,
    fmt_num,
)

#: Queries shown per geolevel in the surface figures (largest bias-aware EPL first).
SURFACE_MAX_QUERIES = 3
#: States shown as small multiples per query (in store order).
SURFACE_MAX_STATES = 7

POOLED_COLOUR = "#1f5fa8"
STATE_COLOUR = "#4d4d4d"
REFERENCE_COLOUR = "#c0392b"


def _arr(ds: xr.Dataset, name: str) -> np.ndarray | None:
    return np.asarray(ds[name].values, dtype=np.float64) if name in ds.variables else None


def _chosen_queries(epl: xr.Dataset, i: int, have: np.ndarray) -> list[int]:
    """Queries of level ``i`` with a pooled surface, largest bias-aware EPL first, capped."""
    qs = [int(q) for q in np.flatnonzero(have)]
    ba = _arr(epl, "epl_bias_aware")
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
    if _isfinite(sigma2) and sigma2 > 0:
        xs = np.array([x[ok].min(), x[ok].max()])
        ax.plot(xs, (2 * xs + 1) / (2 * sigma2), color=REFERENCE_COLOUR, lw=0.8, ls=":")
    return True


def surface_figures(epl: xr.Dataset) -> tuple[list[ReportFigure], str]:
    """One figure per geolevel of the stored EPL(x) surfaces, and a note on what is shown."""
    need = ("surface_pooled_x", "surface_pooled", "surface_pooled_low", "surface_pooled_high")
    if any(v not in epl.variables for v in need) or "geolevel" not in epl.coords:
        return [], ""
    levels = _strs(epl["geolevel"].values)
    queries = _strs(epl["query"].values) if "query" in epl.coords else []
    states = _strs(epl["state"].values) if "state" in epl.coords else []
    px, py = _arr(epl, "surface_pooled_x"), _arr(epl, "surface_pooled")
    plo, phi = _arr(epl, "surface_pooled_low"), _arr(epl, "surface_pooled_high")
    if px is None or py is None:
        return [], ""
    per_state = all(v in epl.variables for v in ("surface_x", "surface", "surface_low"))
    sx, sy = _arr(epl, "surface_x"), _arr(epl, "surface")
    slo, shi = _arr(epl, "surface_low"), _arr(epl, "surface_high")
    ci = epl_interval_label(epl)[0]
    sigma2 = _arr(epl, "sigma2")
    shown_states = states[:SURFACE_MAX_STATES] if per_state else []
    figures: list[ReportFigure] = []
    capped_q = 0
    for i, level in enumerate(levels):
        have = np.any(np.isfinite(px[i]) & np.isfinite(py[i]), axis=-1)
        if not have.any():
            continue
        qs = _chosen_queries(epl, i, have)
        capped_q = max(capped_q, int(have.sum()) - len(qs))
        ncols = 1 + len(shown_states)
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
                _panel(
                    axes[r][c],
                    sx[c - 1, i, q],
                    sy[c - 1, i, q],
                    slo[c - 1, i, q] if slo is not None else None,
                    shi[c - 1, i, q] if shi is not None else None,
                    STATE_COLOUR,
                    s2,
                )
            for c in range(ncols):
                _style_axes(axes[r][c])
                axes[r][c].tick_params(labelsize=6)
                axes[r][c].xaxis.set_major_locator(MaxNLocator(4))
                axes[r][c].yaxis.set_major_locator(MaxNLocator(4))
                if c:
                    axes[r][c].tick_params(labelleft=False)
                if r == 0:
                    axes[r][c].set_title(
                        "all states" if c == 0 else shown_states[c - 1], fontsize=8
                    )
        fig.supxlabel("residual x", fontsize=8, y=0.02)
        n_q = int(have.sum())
        q_note = (
            f"the {len(qs)} of {n_q} queries with the largest bias-aware EPL"
            if len(qs) < n_q
            else f"all {n_q} quer{'y' if n_q == 1 else 'ies'} with a surface"
        )
        s_note = (
            ""
            if not per_state
            else (
                f"; then {len(shown_states)} of {len(states)} states (in store order)"
                if len(shown_states) < len(states)
                else f"; then every state ({len(states)})"
            )
        )
        figures.append(
            ReportFigure(
                title=f"EPL(x) surfaces at level {level}",
                alt=(
                    f"Level {level}: rows are queries, the first column the pooled EPL(x) over "
                    "all states with its bootstrap band, the other columns single states."
                ),
                caption=(
                    f"Bias-aware EPL(x) = log p(x)/p(x + 1) (solid) with its pointwise {ci} "
                    f"bootstrap band (shaded), for {q_note}; first column pooled over all "
                    f"states{s_note}. Dotted red: (2x + 1)/(2σ²), the loss of a discrete "
                    "Gaussian with the query's σ² — a surface that follows it is what the "
                    "accounting assumes; a steeper one is more loss than claimed."
                ),
                src=_to_data_uri(fig),
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


# --------------------------------------------------------------------------------------------
# composed EPL
# --------------------------------------------------------------------------------------------


@dataclass
class ComposedEpl:
    rows: list[dict[str, str]]
    value: str
    interval: str
    projection: str
    factor: str
    over: str
    correlation_levels: list[str] = field(default_factory=list)
    correlation: list[list[str]] = field(default_factory=list)


def composed_section(epl: xr.Dataset) -> ComposedEpl | None:
    """The composed EPL of the counts containing one person, or ``None`` if not stored."""
    if "epl_composed" not in epl.variables:
        return None
    levels = _strs(epl["geolevel"].values)
    ba, lo, hi = (_arr(epl, k) for k in ("epl_bias_aware", "epl_ci_low", "epl_ci_high"))
    status = _strs(epl["epl_status"].values) if "epl_status" in epl.variables else []
    nq = epl.sizes.get("query", 0)
    ok = (
        np.array([s == "ok" for s in status]).reshape(len(levels), nq)
        if status
        else np.ones((len(levels), nq), dtype=bool)
    )
    rows = []
    for i, level in enumerate(levels):
        if ba is None:
            break
        have = ok[i] & np.isfinite(ba[i])
        n = int(have.sum())
        interval = "—"
        if n and lo is not None and hi is not None:
            interval = f"[{fmt_num(np.sum(lo[i][have]), 3)}, {fmt_num(np.sum(hi[i][have]), 3)}]"
        rows.append(
            {
                "geolevel": level,
                "n": str(n),
                "epl": fmt_num(float(np.sum(ba[i][have])), 4) if n else "—",
                "interval": interval,
            }
        )

    def scalar(name: str) -> float:
        return float(epl[name].values) if name in epl.variables else math.nan

    c_lo, c_hi = scalar("epl_composed_ci_low"), scalar("epl_composed_ci_high")
    out = ComposedEpl(
        rows=rows,
        value=fmt_num(scalar("epl_composed"), 4),
        interval=(
            f"[{fmt_num(c_lo, 4)}, {fmt_num(c_hi, 4)}]"
            if _isfinite(c_lo) and _isfinite(c_hi)
            else "—"
        ),
        projection=fmt_num(scalar("epl_composed_projection"), 4),
        factor=fmt_num(scalar("composed_dependence_factor"), 3),
        over=_attr_str(epl["epl_composed"].attrs, "composed_over"),
    )
    if "level_correlation" in epl.variables:
        corr = np.asarray(epl["level_correlation"].values, dtype=np.float64)
        if np.any(np.isfinite(corr)):
            keep = [i for i in range(corr.shape[0]) if np.any(np.isfinite(corr[i]))]
            out.correlation_levels = [levels[i] for i in keep]
            out.correlation = [[_fmt_corr(corr[i, j]) for j in keep] for i in keep]
    return out


def _fmt_corr(r: float) -> str:
    return f"{r:+.3f}".replace("-", "−") if _isfinite(r) else "—"
