"""Building blocks of the report's figures: the captioned figure of the page, a grid of panels,
the axes style and the embedding as a base64 PNG.

Figures are drawn on :class:`matplotlib.figure.Figure` objects with an Agg canvas that are never
registered with pyplot (headless, thread-safe, no leaked figures) and embedded as base64 PNGs.
"""

from __future__ import annotations

import base64
import io
import math
from dataclasses import dataclass

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

#: Resolution of the embedded PNGs.
PNG_DPI = 110


@dataclass
class ReportFigure:
    title: str
    alt: str
    caption: str
    src: str  # data URI


def new_figure(
    n_panels: int, *, panel_w: float = 3.3, panel_h: float = 2.6
) -> tuple[Figure, list[Axes]]:
    ncols = min(max(n_panels, 1), 4)
    nrows = max(math.ceil(n_panels / ncols), 1)
    fig = Figure(figsize=(panel_w * ncols, panel_h * nrows + 0.4), layout="constrained")
    FigureCanvasAgg(fig)
    axes_grid = fig.subplots(nrows, ncols, squeeze=False)
    axes = [ax for row in axes_grid for ax in row]
    for ax in axes[n_panels:]:
        ax.set_visible(False)
    return fig, axes[:n_panels]


def to_data_uri(fig: Figure) -> str:
    """``fig`` as a base64 PNG data URI (:data:`PNG_DPI`, no software tag).

    The bytes are those of ``fig.savefig(buf, format="png", dpi=PNG_DPI, metadata={"Software":
    None})``, drawn once: ``savefig`` runs a figure's layout engine inside a whole extra draw
    (rendering disabled) before the draw it prints; here the engine runs alone. The figure is not
    cleared afterwards (that resets every axes one by one); it is garbage once the caller drops it.
    """
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    fig.set_dpi(PNG_DPI)
    engine = fig.get_layout_engine()
    if engine is not None:
        engine.execute(fig)
        fig.set_layout_engine("none")
    buf = io.BytesIO()
    canvas.print_png(buf, metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def style_axes(ax: Axes) -> None:
    ax.grid(True, which="major", linewidth=0.4, alpha=0.5)
    ax.tick_params(labelsize=7)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def label_panel(ax: Axes, title: str, xlabel: str, ylabel: str) -> None:
    """A small-multiples panel's title and axis labels in the report's sizes, then its style."""
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    style_axes(ax)
