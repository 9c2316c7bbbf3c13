"""Shared pieces of the HTML report: number formatting, store access and figure building blocks.

Figures are drawn on :class:`matplotlib.figure.Figure` objects with an Agg canvas that are never
registered with pyplot (headless, thread-safe, no leaked figures) and embedded as base64 PNGs.
"""

from __future__ import annotations

import base64
import io
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import Any

import numpy as np
import xarray as xr
import zarr
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

# --------------------------------------------------------------------------------------------
# number formatting
# --------------------------------------------------------------------------------------------


def _isfinite(x: Any) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def fmt_num(x: Any, sig: int = 4) -> str:
    """Format a number to ``sig`` significant digits; "—" for missing values."""
    if x is None or not _isfinite(x):
        if x is not None and isinstance(x, float | np.floating) and math.isinf(float(x)):
            return "∞" if float(x) > 0 else "−∞"
        return "—"
    v = float(x)
    if v == 0:
        return "0"
    if 1e-4 <= abs(v) < 1e6:
        return f"{v:.{sig}g}"
    return fmt_sci(v, sig)


def fmt_sci(x: float, sig: int = 3) -> str:
    """Compact scientific notation: ``1e-10``, ``2.5e-5``, ``1.2e+6`` -> ``1.2e6``."""
    s = f"{float(x):.{sig}g}"
    if "e" not in s:
        s = f"{float(x):.{max(sig - 1, 0)}e}"
    mant, exp = s.split("e")
    if "." in mant:
        mant = mant.rstrip("0").rstrip(".")
    return f"{mant}e{int(exp)}"


def fmt_delta(d: float) -> str:
    return fmt_sci(d, 3)


def fmt_int(x: Any) -> str:
    if x is None or not _isfinite(x):
        return "—"
    return f"{int(x):,}".replace(",", "\u202f")


def fmt_bracket(lower: Any, upper: Any, *, min_decimals: int = 3, max_decimals: int = 12) -> str:
    """Format a certified bracket ``[lower, upper]`` of ε.

    The number of decimals follows the width of the bracket: both ends are shown to the first
    decimal at which they can differ, rounded *outwards* (lower down, upper up), so the printed
    bracket still contains the exact value and the digits the ends share are the certified ones.
    """
    if not (_isfinite(lower) and _isfinite(upper)):
        if _isfinite(upper):
            return f"≤ {fmt_num(upper, 6)}"
        if _isfinite(lower):
            return f"≥ {fmt_num(lower, 6)}"
        return "—"
    lo, hi = float(lower), float(upper)
    if lo > hi:
        lo, hi = hi, lo
    width = hi - lo
    if width <= 0:
        decimals = max(min_decimals, 6)
    else:
        decimals = min(max(math.ceil(-math.log10(width)), min_decimals), max_decimals)
    q = Decimal(1).scaleb(-decimals)
    lo_d = Decimal(repr(lo)).quantize(q, rounding=ROUND_FLOOR)
    hi_d = Decimal(repr(hi)).quantize(q, rounding=ROUND_CEILING)
    if width <= 0:
        return f"{float(lo_d):.{decimals}f}".rstrip("0").rstrip(".") + " (exact)"
    return f"[{lo_d:.{decimals}f}, {hi_d:.{decimals}f}]"


def fmt_pct(x: Any) -> str:
    if x is None or not _isfinite(x):
        return "—"
    return f"{100.0 * float(x):.1f} %"


def fmt_range(lo: Any, hi: Any, sig: int = 4) -> str:
    if not (_isfinite(lo) and _isfinite(hi)):
        return "—"
    a, b = fmt_num(lo, sig), fmt_num(hi, sig)
    return a if a == b else f"{a} – {b}"


def fmt_duration(seconds: Any) -> str:
    if seconds is None or not _isfinite(seconds):
        return "—"
    s = float(seconds)
    if s < 60:
        return f"{s:.1f} s"
    m, sec = divmod(round(s), 60)
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min {sec:02d} s" if h else f"{m} min {sec:02d} s"


# --------------------------------------------------------------------------------------------
# store access
# --------------------------------------------------------------------------------------------


def _store_arg(store: str | os.PathLike[str]) -> str:
    return os.fspath(store)


def _open_group(
    store: str, group: str, storage_options: dict[str, Any] | None
) -> xr.Dataset | None:
    """Open one group lazily (no dask), or ``None`` if the store does not hold it."""
    try:
        return xr.open_zarr(
            store,
            group=group,
            consolidated=True,
            chunks=None,
            storage_options=storage_options or None,
        )
    except (KeyError, FileNotFoundError, zarr.errors.NodeNotFoundError):
        return None


def _read_root_attrs(store: str, storage_options: dict[str, Any] | None) -> dict[str, Any] | None:
    kwargs: dict[str, Any] = {"mode": "r"}
    if storage_options:
        kwargs["storage_options"] = storage_options
    try:
        root = zarr.open_group(store, **kwargs)
    except (KeyError, FileNotFoundError, zarr.errors.NodeNotFoundError):
        return None
    return dict(root.attrs)


def _strs(values: Any) -> list[str]:
    """Coordinate or string variable values as plain ``str`` (object / StringDType / bytes)."""
    out = []
    for v in np.asarray(values).ravel().tolist():
        out.append(v.decode() if isinstance(v, bytes) else str(v))
    return out


def _attr_str(attrs: Mapping[str, Any], key: str, default: str = "—") -> str:
    v = attrs.get(key)
    if v is None or (isinstance(v, str) and not v.strip()):
        return default
    return str(v)


# --------------------------------------------------------------------------------------------
# figures
# --------------------------------------------------------------------------------------------


@dataclass
class ReportFigure:
    title: str
    alt: str
    caption: str
    src: str  # data URI


def _new_figure(
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


def _to_data_uri(fig: Figure) -> str:
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=110, metadata={"Software": None})
    finally:
        fig.clear()
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _style_axes(ax: Axes) -> None:
    ax.grid(True, which="major", linewidth=0.4, alpha=0.5)
    ax.tick_params(labelsize=7)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def dg_pmf(k: np.ndarray, sigma2: float) -> np.ndarray:
    """Discrete-Gaussian pmf ∝ exp(−k²/(2σ²)) at integers ``k``, normalised on a wide range."""
    sigma = math.sqrt(sigma2)
    half = math.ceil(max(40.0 * sigma, float(np.max(np.abs(k))) + 1.0))
    support = np.arange(-half, half + 1, dtype=np.float64)
    log_z = np.log(np.sum(np.exp(-(support**2) / (2.0 * sigma2))))
    return np.exp(-(np.asarray(k, dtype=np.float64) ** 2) / (2.0 * sigma2) - log_z)


def epl_interval_label(epl: Any) -> tuple[str, str, str]:
    """(interval, floor quantile, bias-aware description) of an ``epl`` group, from the knobs it
    was computed with (stores written before the knobs were stored: 90 % basic, 95 %)."""
    import json

    attrs = getattr(epl, "attrs", None) or {}
    try:
        knobs = json.loads(attrs.get("bias_aware_settings", "{}"))
    except (TypeError, ValueError):
        knobs = {}
    conf = float(knobs.get("confidence", 0.9))
    kind = str(knobs.get("ci_kind", "basic"))
    null_q = float(knobs.get("null_quantile", 0.95))
    describe = str(attrs.get("bias_aware", "bandwidth 0.3 sd, integer window")).split(";")[0]
    return (
        f"{100 * conf:g} % {kind}",
        f"{100 * null_q:g} %",
        describe.removeprefix("epl_bias_aware: "),
    )
