"""The headline EPL of each level — its largest bias-aware estimate over the level's queries, with
its interval, floor and whether it is resolved — shared by the at-a-glance table and the summary,
so the two never quote different numbers."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import xarray as xr

from flows.report.format import fmt_num, is_finite
from flows.report.release_basis import ReleaseBasis
from flows.report.resolution import Resolution, null_quantile, resolution_words
from flows.report.store_data import float_values, str_values


@dataclass(frozen=True)
class LevelEpl:
    level: str
    query: str
    value: float
    text: str  # the estimate and its interval, e.g. "0.695 [0.103, 0.827]"
    floor: float
    flag: str  # "within its floor; not resolved at 4 replicates: run ≥ 121", ...
    bias_aware: bool  # False: an older store's Flaxman–Petti estimate
    low: float = math.nan  # the bootstrap interval of the bias-aware estimate (NaN: none)
    high: float = math.nan

    @property
    def above_floor(self) -> bool:
        return is_finite(self.floor) and self.value > self.floor


def estimate_text(value: float, low: float, high: float) -> str:
    """An estimate with its interval, to three significant digits."""
    text = fmt_num(value, 3)
    if is_finite(low) and is_finite(high):
        text += f" [{fmt_num(low, 3)}, {fmt_num(high, 3)}]"
    return text


def floor_words(
    value: float,
    floor: float,
    *,
    short: bool = False,
    quantile: float = 0.95,
    basis: ReleaseBasis | None = None,
) -> str:
    """Within or above the floor; above it, the share of estimates of exactly the claimed noise
    that are above it too (1 − the floor's quantile), and for a simulated release what puts it
    there (its noise is the claimed noise: TopDown's post-processing bias, or the estimator)."""
    if not (is_finite(value) and is_finite(floor)):
        return ""
    if value > floor:
        cause = ""
        if basis is not None and basis.simulated:
            cause = "post-processing bias" if basis.topdown else "estimator effects"
        if short:
            return f"above floor: {cause}" if cause else "above floor"
        share = f"{100 * (1 - quantile):.3g} %"
        text = f"above its floor (as {share} of estimates of the claimed noise are)"
        return f"{text}: {cause}, not loss" if cause else text
    return "within floor" if short else "within its floor"


def flag_text(
    value: float,
    floor: float,
    res: Resolution | None,
    *,
    short: bool = False,
    quantile: float = 0.95,
    basis: ReleaseBasis | None = None,
) -> str:
    """What an estimate's reader needs beside it: within or above its floor, and whether it is
    resolved (``short``: for a table whose caption gives the replicates; ``basis``: the store's
    release, simulated or published)."""
    words = (
        floor_words(value, floor, short=short, quantile=quantile, basis=basis),
        resolution_words(res, short=short, basis=basis),
    )
    return "; ".join(w for w in words if w)


def flag_class(flag: str, *, simulated: bool = False) -> str:
    """CSS class of a flag: ``warn`` above the floor or not resolved, ``ok`` resolved; for a
    simulated release (``simulated``: its noise is the claimed noise) neither is a warning:
    ``info``."""
    unresolved = any(w in flag for w in ("run ≥", "needs ≥", "not resolvable", "dominate"))
    if flag.startswith("above") or unresolved:
        return "info" if simulated else "warn"
    return "ok" if flag.endswith("resolved") else ""


def ok_mask(epl: xr.Dataset) -> np.ndarray:
    shape = (epl.sizes.get("geolevel", 0), epl.sizes.get("query", 0))
    if "epl_status" not in epl.variables:
        return np.ones(shape, dtype=bool)
    return np.array([s == "ok" for s in str_values(epl["epl_status"].values)]).reshape(shape)


def level_epls(
    epl: xr.Dataset,
    res: dict[tuple[int, int], Resolution],
    basis: ReleaseBasis | None = None,
) -> dict[int, LevelEpl]:
    """Per geolevel index: its largest bias-aware EPL (older stores without one: the largest
    Flaxman–Petti EPL, flagged as biased upward)."""
    levels = str_values(epl["geolevel"].values)
    queries = str_values(epl["query"].values) if "query" in epl.coords else []
    ok = ok_mask(epl)
    ba, pooled = float_values(epl, "epl_bias_aware"), float_values(epl, "epl_pooled")
    lo, hi = float_values(epl, "epl_ci_low"), float_values(epl, "epl_ci_high")
    floor = float_values(epl, "epl_null_upper")
    quantile = null_quantile(epl)
    out: dict[int, LevelEpl] = {}
    for i, level in enumerate(levels):
        for values, aware in ((ba, True), (pooled, False)):
            if values is None:
                continue
            v = np.where(ok[i] & np.isfinite(values[i]), values[i], -np.inf)
            if not np.isfinite(v).any():
                continue
            q = int(np.argmax(v))
            value = float(v[q])
            if aware:
                low = float(lo[i, q]) if lo is not None else math.nan
                high = float(hi[i, q]) if hi is not None else math.nan
                fl = float(floor[i, q]) if floor is not None else math.nan
                flag = flag_text(value, fl, res.get((i, q)), quantile=quantile, basis=basis)
                text = estimate_text(value, low, high)
            else:
                low = high = fl = math.nan
                text = fmt_num(value, 3)
                flag = "Flaxman–Petti estimate (no bias-aware one stored): biased upward"
            out[i] = LevelEpl(
                level,
                queries[q] if q < len(queries) else "",
                value,
                text,
                fl,
                flag,
                aware,
                low,
                high,
            )
            break
    return out
