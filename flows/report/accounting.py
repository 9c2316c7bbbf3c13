"""The accounting section: per geolevel and composed, the exact ε(δ) bracket beside the Bureau's
and the Canonne–Kamath–Steinke conversions of ρ, the reduction, a plain-language summary at
δ ≈ 1e-10, and the (ε, δ) and trade-off figures."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from flows.report.figures import ReportFigure
from flows.report.figures_accounting import accounting_figure, tradeoff_figure
from flows.report.format import (
    fmt_bracket,
    fmt_delta,
    fmt_int,
    fmt_num,
    fmt_pct,
    fmt_range,
    is_finite,
)
from flows.report.store_data import attr_str, str_values

#: δ used for the plain-language summary (the nearest stored δ is used).
SUMMARY_DELTA = 1e-10


NEIGHBOURS = {
    "add_remove": "add/remove one person (unbounded)",
    "bounded": "replace one person (bounded)",
}


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


def _nearest_index(values: Sequence[float], target: float) -> int:
    logs = [abs(math.log10(v) - math.log10(target)) if v > 0 else math.inf for v in values]
    return int(np.argmin(logs))


def _reduction(exact_upper: Any, bureau: Any) -> float:
    if not (is_finite(exact_upper) and is_finite(bureau)) or float(bureau) <= 0:
        return math.nan
    return (float(bureau) - float(exact_upper)) / float(bureau)


def accounting_section(acc: xr.Dataset) -> AccountingSection:
    levels = str_values(acc["geolevel"].values)
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
        method=attr_str(acc.attrs, "method"),
        neighbours=NEIGHBOURS.get(
            attr_str(acc.attrs, "neighbours", ""), attr_str(acc.attrs, "neighbours")
        ),
        figure=accounting_figure(acc, levels, deltas),
        summary=summary,
        tradeoff_figure=tradeoff_figure(acc, levels),
    )
