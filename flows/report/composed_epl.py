"""The composed EPL of the counts containing one person (Flaxman 2019 trees): the per-level EPLs,
their sum with its interval, the projection, the dependence factor and the cross-level residual
correlations, as stored in the ``epl`` group; beside it, what noise of exactly the claimed σ²
gives (:mod:`flows.report.resolution`) and why an empty projection is empty."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import xarray as xr

from flows.report.epl_headline import ok_mask
from flows.report.format import fmt_num, is_finite
from flows.report.release_basis import ReleaseBasis
from flows.report.resolution import Resolution, composed_resolution, resolution_words
from flows.report.store_data import attr_str, float_values, str_values


@dataclass
class ComposedEpl:
    rows: list[dict[str, str]]
    value: str
    interval: str
    projection: str
    factor: str
    over: str
    summary: str = ""
    reference: str = "—"  # what the claimed noise gives with unlimited residuals
    floor: str = "—"  # the sum of the floors
    flag: str = ""
    projection_note: str = ""
    correlation_levels: list[str] = field(default_factory=list)
    correlation: list[list[str]] = field(default_factory=list)


def composed_section(
    epl: xr.Dataset,
    res: dict[tuple[int, int], Resolution] | None = None,
    replicates: int | None = None,
    basis: ReleaseBasis | None = None,
) -> ComposedEpl | None:
    """The composed EPL of the counts containing one person, or ``None`` if not stored
    (``basis``: the store's release, for the words of its resolution)."""
    if "epl_composed" not in epl.variables:
        return None
    res = res or {}
    levels = str_values(epl["geolevel"].values)
    ba, lo, hi = (float_values(epl, k) for k in ("epl_bias_aware", "epl_ci_low", "epl_ci_high"))
    ok = ok_mask(epl)
    rows = []
    parts: list[Resolution] = []
    for i, level in enumerate(levels):
        if ba is None:
            break
        have = ok[i] & np.isfinite(ba[i])
        n = int(have.sum())
        interval = "—"
        if n and lo is not None and hi is not None:
            interval = f"[{fmt_num(np.sum(lo[i][have]), 3)}, {fmt_num(np.sum(hi[i][have]), 3)}]"
        level_parts = [res[(i, q)] for q in map(int, np.flatnonzero(have)) if (i, q) in res]
        parts += level_parts
        level_res = composed_resolution(level_parts, replicates) if len(level_parts) == n else None
        rows.append(
            {
                "geolevel": level,
                "n": str(n),
                "epl": fmt_num(float(np.sum(ba[i][have])), 4) if n else "—",
                "interval": interval,
                "reference": fmt_num(level_res.loss, 4) if level_res else "—",
                "floor": fmt_num(level_res.floor, 4) if level_res else "—",
                "flag": resolution_words(level_res, basis=basis),
            }
        )

    def scalar(name: str) -> float:
        return float(epl[name].values) if name in epl.variables else math.nan

    value, c_lo, c_hi = (
        scalar("epl_composed"),
        scalar("epl_composed_ci_low"),
        scalar("epl_composed_ci_high"),
    )
    projection, factor = scalar("epl_composed_projection"), scalar("composed_dependence_factor")
    over = attr_str(epl["epl_composed"].attrs, "composed_over")
    interval = (
        f"[{fmt_num(c_lo, 4)}, {fmt_num(c_hi, 4)}]" if is_finite(c_lo) and is_finite(c_hi) else "—"
    )
    n_have = int((ok & np.isfinite(ba)).sum()) if ba is not None else 0
    total = composed_resolution(parts, replicates) if parts and len(parts) == n_have else None
    out = ComposedEpl(
        rows=rows,
        value=fmt_num(value, 4),
        interval=interval,
        projection=fmt_num(projection, 4),
        factor=fmt_num(factor, 3),
        over=over,
        reference=fmt_num(total.loss, 4) if total else "—",
        floor=fmt_num(total.floor, 4) if total else "—",
        flag=resolution_words(total, basis=basis),
        projection_note=_projection_note(projection, factor, over),
    )
    out.summary = _summary(out, value, total, n_have)
    if "level_correlation" in epl.variables:
        corr = np.asarray(epl["level_correlation"].values, dtype=np.float64)
        if np.any(np.isfinite(corr)):
            keep = [i for i in range(corr.shape[0]) if np.any(np.isfinite(corr[i]))]
            out.correlation_levels = [levels[i] for i in keep]
            out.correlation = [[_fmt_corr(corr[i, j]) for j in keep] for i in keep]
    return out


def _summary(c: ComposedEpl, value: float, total: Resolution | None, n: int) -> str:
    if not is_finite(value):
        return ""
    counts = f"each of the {n} counts" if n > 1 else "each count"
    text = (
        f"Composed over the levels (one person counted at every level), the EPL is {c.value} "
        f"(interval {c.interval}). It is no ε(δ) and not comparable with the exact ε: it adds "
        f"the largest loss of {counts} over its window, as if they all happened at once."
    )
    if total is not None:
        text += (
            f" Noise of exactly the claimed σ² gives {c.reference} on the same windows with "
            f"unlimited residuals, and up to {c.floor} at this sample size (the sum of the floors)"
            + (f"; {c.flag}." if c.flag else ".")
        )
    return text


def _projection_note(projection: float, factor: float, over: str) -> str:
    if is_finite(projection) and is_finite(factor):
        return ""
    if "independent" in over:
        return (
            "The projection and the dependence factor are not computed: the noise of this "
            "release is independent across levels by construction, so the sum is the joint "
            "loss (dependence factor 1) and needs no lower-bound check."
        )
    return (
        "The projection and the dependence factor could not be computed from the stored "
        "residual paths (too few paths, or a degenerate covariance)."
    )


def _fmt_corr(r: float) -> str:
    return f"{r:+.3f}".replace("-", "−") if is_finite(r) else "—"
