"""The composed EPL of the counts containing one person (seed 001 trees): the per-level EPLs,
their sum with its interval, the projection, the dependence factor and the cross-level residual
correlations, as stored in the ``epl`` group."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import xarray as xr

from flows.report.format import fmt_num, is_finite
from flows.report.store_data import attr_str, float_values, str_values


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
    levels = str_values(epl["geolevel"].values)
    ba, lo, hi = (float_values(epl, k) for k in ("epl_bias_aware", "epl_ci_low", "epl_ci_high"))
    status = str_values(epl["epl_status"].values) if "epl_status" in epl.variables else []
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
            if is_finite(c_lo) and is_finite(c_hi)
            else "—"
        ),
        projection=fmt_num(scalar("epl_composed_projection"), 4),
        factor=fmt_num(scalar("composed_dependence_factor"), 3),
        over=attr_str(epl["epl_composed"].attrs, "composed_over"),
    )
    if "level_correlation" in epl.variables:
        corr = np.asarray(epl["level_correlation"].values, dtype=np.float64)
        if np.any(np.isfinite(corr)):
            keep = [i for i in range(corr.shape[0]) if np.any(np.isfinite(corr[i]))]
            out.correlation_levels = [levels[i] for i in keep]
            out.correlation = [[_fmt_corr(corr[i, j]) for j in keep] for i in keep]
    return out


def _fmt_corr(r: float) -> str:
    return f"{r:+.3f}".replace("-", "−") if is_finite(r) else "—"
