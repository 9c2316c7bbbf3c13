"""The summary table ("at a glance"): one row per geolevel, and all levels composed, of what each
of the three answers says — the Bureau's and the exact ε, the reduced σ² and variance cut, the
largest EPL with its interval and floor, and the MPL lower bound."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from flows.report.format import fmt_bracket, fmt_cut, fmt_delta, fmt_num, fmt_range, is_finite
from flows.report.store_data import attr_str, str_values, var_values


def _level_index(ds: xr.Dataset | None) -> dict[str, int]:
    if ds is None or "geolevel" not in ds.coords:
        return {}
    return {g: i for i, g in enumerate(str_values(ds["geolevel"].values))}


@dataclass
class SummarySection:
    product: str
    universe: str
    delta: str
    rows: list[dict[str, str]]
    mpl_alpha: str | None
    notes: list[str]


def _summary_delta(acc: xr.Dataset) -> tuple[int | None, float | None]:
    if "delta" not in acc.coords:
        return None, None
    deltas = [float(d) for d in np.asarray(acc["delta"].values)]
    if not deltas:
        return None, None
    want = acc.attrs.get("calibration_delta")
    target = float(want) if want is not None and is_finite(want) else 1e-10
    j = int(np.argmin([abs(math.log10(d) - math.log10(target)) for d in deltas]))
    return j, deltas[j]


def _epl_cell(epl: xr.Dataset | None, levels: Mapping[str, int], level: str) -> tuple[str, str]:
    """The level's largest EPL over its measured queries: ``(value [interval], floor)``."""
    if epl is None or level not in levels:
        return "not run", "—"
    i = levels[level]
    status = var_values(epl, "epl_status")
    ok = (
        np.array([s == "ok" for s in str_values(status[i])])
        if status is not None
        else np.ones(epl.sizes.get("query", 0), dtype=bool)
    )
    ba = var_values(epl, "epl_bias_aware")
    if ba is not None:
        v = np.where(ok, ba[i].astype(float), np.nan)
        if np.any(np.isfinite(v)):
            q = int(np.nanargmax(v))
            lo, hi = var_values(epl, "epl_ci_low"), var_values(epl, "epl_ci_high")
            floor = var_values(epl, "epl_null_upper")
            txt = fmt_num(v[q], 3)
            if lo is not None and hi is not None and is_finite(lo[i, q]) and is_finite(hi[i, q]):
                txt += f" [{fmt_num(lo[i, q], 3)}, {fmt_num(hi[i, q], 3)}]"
            return txt, fmt_num(floor[i, q], 3) if floor is not None else "—"
    pooled = var_values(epl, "epl_pooled")
    if pooled is not None:
        v = np.where(ok, pooled[i].astype(float), np.nan)
        if np.any(np.isfinite(v)):
            return fmt_num(float(np.nanmax(v)), 3), "—"
    return "—", "—"


def _mpl_cell(mpl: xr.Dataset | None, levels: Mapping[str, int], level: str) -> str:
    if mpl is None:
        return "not run"
    lb = var_values(mpl, "lb")
    if lb is None or level not in levels:
        return "not run"
    return fmt_num(float(lb[levels[level]]), 4)


def summary_section(
    attrs: Mapping[str, Any],
    acc: xr.Dataset | None,
    epl: xr.Dataset | None,
    mpl: xr.Dataset | None,
) -> SummarySection | None:
    """One row per geolevel (and all levels composed) of what each of the three answers says."""
    level_order: list[str] = []
    for ds in (acc, epl, mpl):
        for g in _level_index(ds):
            if g not in level_order:
                level_order.append(g)
    if not level_order:
        return None
    acc_idx, epl_idx, mpl_idx = _level_index(acc), _level_index(epl), _level_index(mpl)
    j, delta = _summary_delta(acc) if acc is not None else (None, None)

    def acc_cells(prefix: str, i: int | None) -> dict[str, str]:
        def get(name: str) -> np.ndarray | None:
            return var_values(acc, prefix + name)

        def at(a: np.ndarray | None, *idx: int) -> float:
            if a is None:
                return math.nan
            return float(a[idx]) if idx else float(a)

        ix: tuple[int, ...] = () if i is None else (i,)
        bu, lo, hi = get("eps_bureau"), get("eps_exact_lower"), get("eps_exact_upper")
        out = {"bureau": "—", "exact": "—"}
        if j is not None:
            out["bureau"] = fmt_num(at(bu, *ix, j), 5)
            # six decimals at most: still rounded outwards, so still a certified bracket
            out["exact"] = fmt_bracket(at(lo, *ix, j), at(hi, *ix, j), max_decimals=6)
        out["reduced_sigma2"] = fmt_range(
            at(get("reduced_sigma2_min"), *ix), at(get("reduced_sigma2_max"), *ix)
        )
        out["sigma2"] = fmt_range(at(get("sigma2_min"), *ix), at(get("sigma2_max"), *ix))
        out["cut"] = fmt_cut(at(get("variance_cut_lower"), *ix), at(get("variance_cut_upper"), *ix))
        return out

    rows: list[dict[str, str]] = []
    for level in level_order:
        row: dict[str, str] = {"geolevel": level, "composed": ""}
        if acc is not None and level in acc_idx:
            row.update(acc_cells("", acc_idx[level]))
        else:
            row.update(dict.fromkeys(("bureau", "exact", "reduced_sigma2", "sigma2", "cut"), "—"))
        row["epl"], row["epl_floor"] = _epl_cell(epl, epl_idx, level)
        row["mpl"] = _mpl_cell(mpl, mpl_idx, level)
        rows.append(row)
    if acc is not None and "composed_eps_bureau" in acc:
        row = {"geolevel": "all levels composed", "composed": "composed"}
        row.update(acc_cells("composed_", None))
        s2min, s2max = var_values(acc, "sigma2_min"), var_values(acc, "sigma2_max")
        if s2min is not None and s2max is not None and s2min.size:
            row["sigma2"] = fmt_range(np.min(s2min), np.max(s2max))
        row.update({"epl": "—", "epl_floor": "—", "mpl": "—"})
        rows.append(row)

    notes = []
    if acc is None:
        notes.append("No accounting group: the Bureau's and the exact ε are not shown.")
    elif "variance_cut_lower" not in acc:
        notes.append("This store was written without seed 004's reduced noise (no calibration).")
    if epl is None:
        notes.append("No epl group: EPL was not estimated.")
    if mpl is None:
        notes.append(
            "No mpl group: maximum privacy loss lower bounds were not run for this store "
            "(dpaudit mpl-coverage checks the method on mechanisms with known ε)."
        )
    alpha = mpl.attrs.get("alpha") if mpl is not None else None
    return SummarySection(
        product=attr_str(attrs, "allocation_id", "") or attr_str(attrs, "release"),
        universe=" · ".join(
            v for v in (attr_str(attrs, "universe", ""), attr_str(attrs, "region", "")) if v
        )
        or "—",
        delta=fmt_delta(delta) if delta is not None else "—",
        rows=rows,
        mpl_alpha=fmt_num(alpha, 3) if is_finite(alpha) else None,
        notes=notes,
    )
