"""The residuals figure: per geographic level, a histogram of DP − truth over the first replicate of
the first states, with the exact discrete-Gaussian pmf of the level's median σ² overlaid."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import xarray as xr

from flows.report.figures import ReportFigure, label_panel, new_figure, to_data_uri
from flows.report.format import fmt_num, is_finite
from flows.report.store_data import nation_and_states, str_values

#: Residual histograms read at most this many states and items per state of one replicate.
HIST_MAX_STATES = 5
HIST_MAX_ITEMS = 200_000


def dg_pmf(k: np.ndarray, sigma2: float) -> np.ndarray:
    """Discrete-Gaussian pmf ∝ exp(−k²/(2σ²)) at integers ``k``, normalised on a wide range."""
    sigma = math.sqrt(sigma2)
    half = math.ceil(max(40.0 * sigma, float(np.max(np.abs(k))) + 1.0))
    support = np.arange(-half, half + 1, dtype=np.float64)
    log_z = np.log(np.sum(np.exp(-(support**2) / (2.0 * sigma2))))
    return np.exp(-(np.asarray(k, dtype=np.float64) ** 2) / (2.0 * sigma2) - log_z)


def _level_sigma2(level: str, *sources: xr.Dataset | None) -> float:
    """Median σ² over the queries measured at ``level``, from the first source holding one.

    The residuals group carries ``sigma2(geolevel, query)`` itself; the EPL group is the fallback.
    """
    for ds in sources:
        if ds is None or "sigma2" not in ds or "geolevel" not in ds["sigma2"].dims:
            continue
        levels = str_values(ds["geolevel"].values)
        if level not in levels:
            continue
        v = np.asarray(ds["sigma2"].isel(geolevel=levels.index(level)).values, dtype=np.float64)
        v = v[np.isfinite(v) & (v > 0)]
        if v.size:
            return float(np.median(v))
    return math.nan


def residual_figure(res: xr.Dataset, epl: xr.Dataset | None) -> ReportFigure:
    """The residual histograms of a ``residuals`` group holding ``residual`` and ``geolevel``
    (σ² from the group itself, else from ``epl``)."""
    levels = str_values(res["geolevel"].values)
    n_states = int(res.sizes.get("state", 0))
    states = str_values(res["state"].values)[:HIST_MAX_STATES] if "state" in res.coords else []
    fig, axes = new_figure(len(levels))
    any_overlay = False
    for i, (ax, level) in enumerate(zip(axes, levels, strict=True)):
        r = _first_replicate(res, i)
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
            if is_finite(s2):
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
        label_panel(ax, level, "DP − truth", "density")
    overlay_txt = (
        "The red line is the exact discrete-Gaussian pmf ∝ exp(−k²/(2σ²)) for the median σ² of "
        "the queries measured at the level."
        if any_overlay
        else "The store records no σ² for these levels, so no reference pmf is drawn."
    )
    return ReportFigure(
        title="Residual histograms per geographic level",
        alt=(
            f"One histogram per level ({', '.join(levels)}) of the noise residuals DP − truth "
            "of the first replicate, with the discrete-Gaussian pmf overlaid."
        ),
        caption=(
            "Distribution of DP − truth over the items of the first replicate of "
            f"{_regions(res, states, n_states)}, pooled over queries. {overlay_txt}"
        ),
        src=to_data_uri(fig),
    )


def _first_replicate(res: xr.Dataset, level: int) -> np.ndarray:
    """The first replicate's residuals of geolevel ``level``: the first items (at most
    :data:`HIST_MAX_ITEMS`) of each of the first :data:`HIST_MAX_STATES` states, in state order,
    from blocks on one item axis (``item_offset``) or padded per (state, geolevel)."""
    var = res["residual"]
    if "item_offset" in res and "state" not in var.dims:
        off = np.asarray(res["item_offset"].values)[:HIST_MAX_STATES, level]
        n = np.asarray(res["n_items"].values)[:HIST_MAX_STATES, level]
        first = var.isel(replicate=0) if "replicate" in var.dims else var
        parts = [
            np.asarray(first.isel(item=slice(int(o), int(o) + min(int(k), HIST_MAX_ITEMS))).values)
            for o, k in zip(off, n, strict=True)
        ]
        return np.concatenate(parts).astype(np.float64) if parts else np.zeros(0)
    sel: dict[str, Any] = {"geolevel": level}
    if "replicate" in var.dims:
        sel["replicate"] = 0
    if "state" in var.dims:
        sel["state"] = slice(0, HIST_MAX_STATES)
    if "item" in var.dims:
        sel["item"] = slice(0, HIST_MAX_ITEMS)
    return np.asarray(var.isel(sel).values, dtype=np.float64).ravel()


def _regions(res: xr.Dataset, read: list[str], n_states: int) -> str:
    """The regions read, in words: the nation (a state-equivalent at the national level only)
    apart from the states, e.g. "the nation (US) and 3 states (ST01, ST02, ST03)"."""
    nation, states = nation_and_states(res)
    n_read = [s for s in read if s in states]
    parts = (
        [f"the nation ({', '.join(s for s in read if s in nation)})"]
        if set(nation) & set(read)
        else []
    )
    if n_read:
        of = f" of {len(states)}" if len(n_read) < len(states) else ""
        parts.append(
            f"{len(n_read)}{of} state{'s' if len(states) != 1 else ''} ({', '.join(n_read)})"
        )
    return " and ".join(parts) or f"{n_states} regions"
