"""Figures of the accounting section: the (ε, δ) curves per level (exact upper bound against the
Bureau's conversion, log scale) and the f-DP trade-off curves β(α) (exact certified lower end
against the Bureau-implied curve), one panel per geographic level."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import xarray as xr
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from flows.report.figures import ReportFigure, label_panel, new_figure, to_data_uri


def _level_panels(
    levels: list[str], draw: Callable[[Axes, int], None], xlabel: str, ylabel: str
) -> Figure:
    """One panel per level, drawn by ``draw(ax, level index)`` and labelled; the legend on the
    first panel."""
    fig, axes = new_figure(len(levels))
    for i, (ax, level) in enumerate(zip(axes, levels, strict=True)):
        draw(ax, i)
        label_panel(ax, level, xlabel, ylabel)
    if axes:
        axes[0].legend(fontsize=7, frameon=False)
    return fig


def tradeoff_figure(acc: xr.Dataset, levels: list[str]) -> ReportFigure | None:
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

    def draw(ax: Axes, i: int) -> None:
        ax.plot(alpha, exact[i], color="#1f5fa8", linewidth=1.6, label="exact (certified)")
        if bureau is not None:
            ax.plot(
                alpha, bureau[i], color="#c0392b", linewidth=1.2, linestyle="--", label="Bureau"
            )
        ax.plot(alpha, 1 - alpha, color="0.6", linewidth=0.6, linestyle=":")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)

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
        src=to_data_uri(_level_panels(levels, draw, "type I error α", "type II error β")),
    )


def accounting_figure(
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

    def draw(ax: Axes, i: int) -> None:
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
        src=to_data_uri(_level_panels(levels, draw, "ε", "δ(ε)")),
    )
