"""The accounting section: per geolevel and composed, the exact ε(δ) bracket beside the Bureau's
and the Canonne–Kamath–Steinke conversions of ρ, the reduction, a plain-language summary at the
headline δ (:func:`flows.report.store_data.headline_delta`), Su, Su & Wang's reduced noise at its δ*,
and the (ε, δ) and trade-off figures."""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from flows.report.figures import ReportFigure
from flows.report.figures_accounting import accounting_figure, tradeoff_figure
from flows.report.format import (
    fmt_bracket,
    fmt_cut,
    fmt_delta,
    fmt_int,
    fmt_num,
    fmt_pct,
    fmt_range,
    is_finite,
)
from flows.report.store_data import attr_str, headline_delta, str_values

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
    headline: str = "—"  # the headline δ
    reduced: list[dict[str, str]] | None = (
        None  # Su, Su & Wang's reduced noise per level and composed
    )
    reduced_delta: str = "—"  # its δ*


def _reduction(exact_upper: Any, bureau: Any) -> float:
    if not (is_finite(exact_upper) and is_finite(bureau)) or float(bureau) <= 0:
        return math.nan
    return (float(bureau) - float(exact_upper)) / float(bureau)


def composed_words(
    levels: list[str],
    rho: np.ndarray | None,
    composed_rho: float,
    unsimulated: list[str] | None = None,
    audited: list[str] | None = None,
) -> str:
    """What the composed ε composes, counted truly: "all 8 geographic levels" when the composed ρ
    is the sum of the rows' ρ (the declared allocation's levels when those are not the audited
    ``audited`` levels), or the allocation's levels with those the audit left unsimulated
    (``unsimulated``: the spec's ``release.levels`` mapped to "")."""
    n = len(levels)
    total = float(np.nansum(rho)) if rho is not None else math.nan
    if not (is_finite(composed_rho) and is_finite(total)) or math.isclose(
        total, composed_rho, rel_tol=1e-6
    ):
        if audited and not set(audited) <= set(levels):
            return f"the declared allocation's {n} levels (the rows of the accounting table)"
        return f"all {n} geographic levels"
    if unsimulated:
        return (
            f"the allocation's {n + len(unsimulated)} levels (the {n} here and "
            f"{', '.join(unsimulated)}, not simulated)"
        )
    return (
        f"every level of the allocation (the {n} here carry ρ = {fmt_num(total, 4)} of its "
        f"{fmt_num(composed_rho, 4)})"
    )


def unsimulated_levels(attrs: Mapping[str, Any]) -> list[str]:
    """The allocation's geolevels the spec leaves unsimulated: those ``release.levels`` maps to
    "", or those below ``release.lowest_level``."""
    spec = attrs.get("spec_toml")
    if not isinstance(spec, str):
        return []
    try:
        data = tomllib.loads(spec)
        release = data.get("release", {})
        mapping = release.get("levels", {})
        lowest = release.get("lowest_level", "")
    except (tomllib.TOMLDecodeError, AttributeError):
        return []
    if isinstance(lowest, str) and lowest:
        return _below(data.get("audit", {}), lowest)
    if not isinstance(mapping, dict):
        return []
    return [str(g) for g, v in mapping.items() if v == ""]


def _below(audit: Any, lowest: str) -> list[str]:
    """The declared allocation's geolevels below ``lowest`` ([] if it cannot be read)."""
    from auditlib.allocations import load_allocation
    from auditlib.exceptions import DPAuditError

    try:
        levels = list(
            load_allocation(audit["allocation"]).geolevels(audit["universe"], audit["region"])
        )
    except (DPAuditError, KeyError, TypeError, ValueError, OSError):
        return []
    return levels[levels.index(lowest) + 1 :] if lowest in levels else []


def accounting_section(
    acc: xr.Dataset,
    attrs: Mapping[str, Any] | None = None,
    audited: list[str] | None = None,
) -> AccountingSection:
    """The accounting section; ``attrs`` (the store's root attributes) and ``audited`` (the levels
    with residuals) say what the composed ε composes."""
    levels = str_values(acc["geolevel"].values)
    deltas = [float(d) for d in np.asarray(acc["delta"].values)] if "delta" in acc.coords else []

    def var(name: str) -> np.ndarray | None:
        return np.asarray(acc[name].values) if name in acc.variables else None

    rho, s2min, s2max, nq = var("rho"), var("sigma2_min"), var("sigma2_max"), var("n_queries")
    lower, upper = var("eps_exact_lower"), var("eps_exact_upper")
    bureau, cks = var("eps_bureau"), var("eps_cks")

    def at(a: np.ndarray | None, *idx: int) -> float:
        return float(a[idx]) if a is not None else math.nan

    hd = headline_delta(acc)
    head_j = hd[0] if hd is not None else None
    # an allocation file with pure eps-DP (geometric, Laplace) noise: no zCDP conversion applies
    na = attr_str(acc.attrs, "bureau_na", "")

    def conv(x: float) -> str:
        return "n/a" if na and not is_finite(x) else fmt_num(x, 5)

    def cells(get: Any) -> list[dict[str, str]]:
        if not deltas:
            keys = ("delta", "bureau", "cks", "exact", "exact_full", "reduction", "headline")
            return [dict.fromkeys(keys, "—")]
        out = []
        for j in range(len(deltas)):
            lo, hi, bu, ck = get(j)
            out.append(
                {
                    "headline": "headline" if j == head_j else "",
                    "delta": fmt_delta(deltas[j]),
                    "bureau": conv(bu),
                    "cks": conv(ck),
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

    # plain-language summary, at the headline δ
    summary = ""
    what = composed_words(
        levels,
        rho,
        float(np.asarray(var("composed_rho"))) if var("composed_rho") is not None else math.nan,
        unsimulated_levels(attrs or {}),
        audited,
    )
    if hd is not None:
        j = hd[0]
        d_txt = fmt_delta(deltas[j])
        parts = []
        if composed is not None and c_hi is not None and na and not is_finite(at(c_bu, j)):
            parts.append(
                f"At δ = {d_txt}, composing {what}, the exact ε is "
                f"{_exact_words(at(c_lo, j), at(c_hi, j))}; the Bureau's and the "
                f"Canonne–Kamath–Steinke zCDP conversions are {na}."
            )
        elif composed is not None and c_hi is not None:
            parts.append(
                f"At δ = {d_txt}, composing {what}, the exact ε is "
                f"{_exact_words(at(c_lo, j), at(c_hi, j))}, against "
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
                    f"vs the Bureau's {conv(at(bureau, k, j))} "
                    f"(ρ = {fmt_num(at(rho, k), 4)})."
                )
        summary = " ".join(parts)

    reduced, reduced_delta = _reduced_rows(acc, levels)
    return AccountingSection(
        headline=fmt_delta(hd[1]) if hd is not None else "—",
        reduced=reduced,
        reduced_delta=reduced_delta,
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


def _exact_words(lo: float, hi: float) -> str:
    text = fmt_bracket(lo, hi)
    return f"in {text}" if text.startswith("[") else text


def _reduced_rows(acc: xr.Dataset, levels: list[str]) -> tuple[list[dict[str, str]] | None, str]:
    """Su, Su & Wang's reduced noise (σ², reduced σ², certified variance cut) per level and composed,
    and the δ* it keeps the Bureau's ε at; ``None`` for a store without calibration."""
    if "variance_cut_lower" not in acc.variables:
        return None, "—"

    def get(name: str) -> np.ndarray | None:
        return np.asarray(acc[name].values, dtype=np.float64) if name in acc.variables else None

    def at(a: np.ndarray | None, *idx: int) -> float:
        return float(a[idx]) if a is not None else math.nan

    s2_lo, s2_hi = get("sigma2_min"), get("sigma2_max")
    rows = []
    for prefix, name, ix in [("", lv, (i,)) for i, lv in enumerate(levels)] + [
        ("composed_", "all levels composed", ())
    ]:
        if prefix and f"{prefix}variance_cut_lower" not in acc.variables:
            continue
        s2 = (
            fmt_range(at(s2_lo, *ix), at(s2_hi, *ix))
            if ix or s2_lo is None or s2_hi is None
            else fmt_range(np.nanmin(s2_lo), np.nanmax(s2_hi))
        )
        rows.append(
            {
                "geolevel": name,
                "composed": "composed" if not ix else "",
                "sigma2": s2,
                "reduced_sigma2": fmt_range(
                    at(get(f"{prefix}reduced_sigma2_min"), *ix),
                    at(get(f"{prefix}reduced_sigma2_max"), *ix),
                ),
                "target": fmt_num(at(get(f"{prefix}calibration_target_eps"), *ix), 5),
                "cut": fmt_cut(
                    at(get(f"{prefix}variance_cut_lower"), *ix),
                    at(get(f"{prefix}variance_cut_upper"), *ix),
                ),
            }
        )
    want = acc.attrs.get("calibration_delta")
    return rows, fmt_delta(float(want)) if want is not None and is_finite(want) else "—"
