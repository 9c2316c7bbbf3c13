"""The EPL section: per level and query the pooled EPL, its window, spread over states, bias-aware
estimate with interval and floor, a plain-language summary, and the curve, surface and composed
EPL pieces (:mod:`flows.report.figures_epl`, :mod:`flows.report.composed_epl`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr

from flows.report.composed_epl import ComposedEpl, composed_section
from flows.report.epl_headline import (
    LevelEpl,
    estimate_text,
    flag_class,
    flag_text,
    level_epls,
    ok_mask,
)
from flows.report.figures import ReportFigure
from flows.report.figures_epl import epl_figure, surface_figures
from flows.report.format import fmt_int, fmt_num, fmt_range, is_finite
from flows.report.release_basis import PRACTICAL_REPLICATES, ReleaseBasis
from flows.report.resolution import Resolution, chance_of_at_least, null_quantile, resolutions
from flows.report.store_data import attr_str, float_values, nation_and_states, str_values


@dataclass
class EplSection:
    rows: list[dict[str, Any]]
    diagnostics: list[dict[str, Any]]
    n_unmeasured: int
    method: str
    bandwidth_factor: str
    percentiles: tuple[str, str]
    window_note: str
    figure: ReportFigure | None
    summary: list[str]
    states: list[str]
    nation: list[str]
    surfaces: list[ReportFigure] = field(default_factory=list)
    surface_note: str = ""
    composed: ComposedEpl | None = None


def _mark_row_spans(rows: list[dict[str, Any]], key: str) -> None:
    """Set ``span`` on the first row of each run of equal ``key`` (0 on the others)."""
    i = 0
    while i < len(rows):
        j = i
        while j < len(rows) and rows[j][key] == rows[i][key]:
            rows[j]["span"] = 0
            j += 1
        rows[i]["span"] = j - i
        i = j


def epl_section(
    epl: xr.Dataset,
    replicates: int | None = None,
    basis: ReleaseBasis | None = None,
    exact_eps: Mapping[str, float] | None = None,
) -> EplSection:
    """The EPL section; ``basis`` (the store's release) and ``exact_eps`` (each level's exact ε
    at the headline δ) shape the words of its summary points."""
    basis = basis or ReleaseBasis("")
    levels = str_values(epl["geolevel"].values)
    queries = str_values(epl["query"].values)
    nation, states = nation_and_states(epl)

    def var(name: str) -> np.ndarray | None:
        return np.asarray(epl[name].values) if name in epl.variables else None

    pooled, status, n_res = var("epl_pooled"), var("epl_status"), var("n_residuals")
    sigma2, bw, per_state = var("sigma2"), var("bandwidth"), var("epl")
    cx = var("epl_curve_x")
    ba, ci_lo, ci_hi = var("epl_bias_aware"), var("epl_ci_low"), var("epl_ci_high")
    floor, slope_hat = var("epl_null_upper"), var("inv_sigma2_hat")
    res = resolutions(epl, replicates)

    def cell(a: np.ndarray | None, i: int, q: int) -> float:
        return float(a[i, q]) if a is not None else math.nan

    status_s = (
        np.array(str_values(status), dtype=object).reshape(status.shape)
        if status is not None
        else None
    )

    rows: list[dict[str, Any]] = []
    diagnostics: list[dict[str, Any]] = []
    n_unmeasured = 0
    for i, level in enumerate(levels):
        for q, query in enumerate(queries):
            st = str(status_s[i, q]) if status_s is not None else ""
            s2 = float(sigma2[i, q]) if sigma2 is not None else math.nan
            nr = float(n_res[i, q]) if n_res is not None else math.nan
            if st == "" and not is_finite(s2) and not (nr > 0):
                n_unmeasured += 1
                continue
            spread = "—"
            if per_state is not None:
                v = per_state[:, i, q].astype(np.float64)
                v = v[np.isfinite(v)]
                if v.size:
                    spread = fmt_range(v.min(), v.max())
            window = "—"
            if cx is not None:
                x = cx[i, q].astype(np.float64)
                x = x[np.isfinite(x)]
                if x.size:
                    window = f"[{fmt_num(x.min(), 3)}, {fmt_num(x.max(), 3)}]"
            b = cell(ba, i, q)
            fl = cell(floor, i, q)
            r = res.get((i, q))
            if st not in ("", "ok"):
                flag = {"too_few": "too few residuals", "invariant": "no noise"}.get(st, st)
            else:
                flag = flag_text(b, fl, r, short=True, basis=basis)
            rows.append(
                {
                    "geolevel": level,
                    "level_sigma2": fmt_num(s2, 4),
                    "query": query,
                    "n_residuals": fmt_int(nr),
                    "estimate": estimate_text(b, cell(ci_lo, i, q), cell(ci_hi, i, q))
                    if is_finite(b)
                    else "—",
                    "floor": fmt_num(fl, 3),
                    "loss": fmt_num(r.loss, 3) if r is not None and r.known else "—",
                    "flag": flag or "—",
                    "flag_class": (
                        flag_class(flag, simulated=basis.simulated) if st in ("", "ok") else "other"
                    ),
                }
            )
            diagnostics.append(
                {
                    "geolevel": level,
                    "query": query,
                    "status": st or "—",
                    "status_class": st if st in {"ok", "too_few", "invariant"} else "other",
                    "epl": fmt_num(cell(pooled, i, q), 4),
                    "spread": spread,
                    "window": window,
                    "bandwidth": fmt_num(cell(bw, i, q), 3),
                    "slope": fmt_num(1.0 / s2 if is_finite(s2) and s2 > 0 else math.nan, 3),
                    "slope_hat": fmt_num(cell(slope_hat, i, q), 3),
                }
            )

    _mark_row_spans(rows, "geolevel")
    _mark_row_spans(diagnostics, "geolevel")

    pct = attr_str(epl.attrs, "percentiles", "5,95").replace(" ", "").split(",")
    pct_lo, pct_hi = (pct[0], pct[-1]) if pct else ("5", "95")
    bw_factor = attr_str(epl.attrs, "bandwidth_factor")
    window_note = (
        "For discrete-Gaussian noise the true per-query privacy loss is unbounded in the noise "
        "value x: the loss of a DG with variance σ² grows linearly in x with slope 1/σ², so any "
        "finite EPL describes a window, not the worst case: each estimate is the largest "
        f"EPL(x) between the {pct_lo}th and {pct_hi}th percentile of its residuals."
    )

    surfaces, surface_note = surface_figures(epl)
    composed = composed_section(epl, res, replicates, basis)
    return EplSection(
        surfaces=surfaces,
        surface_note=surface_note,
        composed=composed,
        rows=rows,
        diagnostics=diagnostics,
        n_unmeasured=n_unmeasured,
        method=attr_str(epl.attrs, "method"),
        bandwidth_factor=bw_factor,
        percentiles=(pct_lo, pct_hi),
        window_note=window_note,
        figure=epl_figure(epl, levels, queries, (pct_lo, pct_hi)),
        summary=epl_summary(epl, res, composed, basis, exact_eps),
        states=states,
        nation=nation,
    )


def _floor_count(n: int, above: int, p: float, basis: ReleaseBasis) -> str:
    """How many estimates lie above their floors, against what chance puts there; more than
    chance is described, not judged: for a simulated release its cause (its noise is the claimed
    noise), for a published one the claim verdict judges."""
    what = (
        "(what noise of exactly the claimed σ² gives at this sample size)"
        if basis.simulated
        else "(what the declared noise gives at this sample size, or a discrete Gaussian of the "
        "residuals' own variance where no declared noise was measured)"
    )
    floors = f"{'its floor' if above == 1 else 'their floors'} {what}"
    # a published release: the EPL describes; only the claim verdict judges
    seen = (
        "no loss beyond the claimed noise is seen"
        if basis.simulated
        else "the EPL alone shows nothing; the claim verdict judges the claim"
    )
    if above == 0:
        return f"All {n} estimates lie within their floors {what}: {seen}."
    chance = chance_of_at_least(above, n, p)
    verb = "lies" if above == 1 else "lie"
    share = f"{100 * p:.3g} %"
    if chance >= 0.05:
        return (
            f"{above} of {n} estimates {verb} above {floors}, no more than such noise puts there by "
            f"chance ({share}, about {n * p:.2g}): {seen}."
        )
    count = (
        f"{above} of {n} estimates {verb} above {floors}, more than such noise alone puts there "
        f"({share}, about {n * p:.2g}; {above} or more: probability {chance:.2g})"
    )
    if basis.simulated:
        return (
            f"{count}. The noise is the claimed noise — dpaudit drew it from the declared "
            f"allocation — so this is no loss. {_capital(basis.no_loss())}"
        )
    return f"{count}; whether the claim holds is the claim verdict's to say (its point above)."


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _above_exact(
    heads: dict[int, LevelEpl],
    exact_eps: Mapping[str, float],
    basis: ReleaseBasis,
    explained: bool = False,
) -> str:
    """The level whose headline EPL lies furthest above its exact ε, and why that is no loss
    (simulated; ``explained``: the floor count said why already) or which answer judges it
    (published); "" when none does."""
    above = [
        (h.value - exact_eps[h.level], h)
        for h in heads.values()
        if h.level in exact_eps and is_finite(exact_eps[h.level]) and h.value > exact_eps[h.level]
    ]
    if not above:
        return ""
    _, h = max(above, key=lambda t: t[0])
    more = (
        f" (and {len(above) - 1} other level{'s' if len(above) > 2 else ''})"
        if len(above) > 1
        else ""
    )
    text = (
        f"At level {h.level}{more} the EPL ({fmt_num(h.value, 3)}) lies above the exact ε "
        f"({fmt_num(exact_eps[h.level], 5)}), which is proved for the claimed noise"
    )
    if basis.simulated and explained:
        return f"{text}; dpaudit drew that noise, so this is no loss either."
    if basis.simulated:
        return f"{text}; dpaudit drew that noise, so this is no loss. {_capital(basis.no_loss())}"
    return f"{text}; an EPL is an estimate, not a bound: the claim verdict judges the claim."


def epl_summary(
    epl: xr.Dataset,
    res: dict[tuple[int, int], Resolution],
    composed: ComposedEpl | None,
    basis: ReleaseBasis | None = None,
    exact_eps: Mapping[str, float] | None = None,
) -> list[str]:
    """The EPL points of the summary box: the same bias-aware numbers as the at-a-glance table,
    each with its floor and whether it is resolved; then the composed EPL and how to read it.
    ``basis``: the store's release (simulated: an estimate above its floor or the exact ε is
    explained, never loss); ``exact_eps``: each level's exact ε at the headline δ."""
    basis = basis or ReleaseBasis("")
    heads = level_epls(epl, res, basis)
    if not heads:
        return ["No level–query pair has enough residuals for an empirical privacy loss."]
    best = max(heads.values(), key=lambda h: h.value)
    if not best.bias_aware:
        return [
            f"The largest empirical privacy loss is {best.text} at level {best.level} "
            f"(“{best.query}”), a Flaxman–Petti estimate biased upward at small samples (this "
            "store holds no bias-aware estimate)."
        ]
    levels = str_values(epl["geolevel"].values)
    ba = float_values(epl, "epl_bias_aware")
    floor = float_values(epl, "epl_null_upper")
    have = ok_mask(epl) & np.isfinite(ba) if ba is not None else ok_mask(epl)
    points = [
        f"The empirical privacy loss (EPL, bias-aware) is largest at level {best.level} "
        f"(“{best.query}”): {best.text}, {best.flag}."
    ]
    if floor is not None and ba is not None:
        points[0] += " " + (
            _floor_count(
                int(have.sum()),
                int(np.count_nonzero(have & (ba > floor))),
                1 - null_quantile(epl),
                basis,
            )
        )
    beyond = _above_exact(heads, exact_eps or {}, basis, basis.no_loss() in points[0])
    if beyond:
        points[0] += " " + beyond
    known = {k: r for k, r in res.items() if r.known}
    open_ = [r for r in known.values() if not r.resolved]
    if open_:
        points.append(_resolution_point(open_, known, levels, basis))
    elif known:
        points.append("Every EPL estimate is resolved.")
    if composed is not None and composed.summary:
        points.append(composed.summary)
    return points


def _resolution_point(
    open_: list[Resolution],
    known: dict[tuple[int, int], Resolution],
    levels: list[str],
    basis: ReleaseBasis,
) -> str:
    """How many estimates are not resolved, the replicates that would resolve those a run can
    (≤ :data:`PRACTICAL_REPLICATES`), and what dominates the others."""
    runs = open_[0].replicates
    text = f"{len(open_)} of {len(known)} estimates are not resolved" + (
        f" at {basis.runs(runs)}" if runs else ""
    )
    reachable = [r.needed for r in open_ if r.needed and r.needed <= PRACTICAL_REPLICATES]
    beyond = [r for r in open_ if r.needed and r.needed > PRACTICAL_REPLICATES]
    if reachable and not beyond:
        text += f" (all would be at ≥ {fmt_int(max(reachable))} {basis.run_word})"
    elif reachable:
        text += f" ({len(reachable)} would be at ≥ {fmt_int(max(reachable))} {basis.run_word})"
    if beyond:
        which = "all of them" if len(beyond) == len(open_) else f"the other {len(beyond)}"
        text += (
            f"; for {which} not even {fmt_int(PRACTICAL_REPLICATES)} {basis.run_word} would do: "
            + _dominating(beyond, basis)
        )
    done = [
        lvl
        for i, lvl in enumerate(levels)
        if any(k[0] == i for k in known) and all(r.resolved for k, r in known.items() if k[0] == i)
    ]
    if done:
        text += f"; every estimate of {', '.join(done)} is resolved"
    return text + "."


def _dominating(beyond: list[Resolution], basis: ReleaseBasis) -> str:
    """What dominates the estimates that no practical run resolves."""
    loss = max(r.loss for r in beyond)
    small = f"the claimed noise's loss over their windows is at most {fmt_num(loss, 2)}"
    if basis.topdown and basis.simulated:
        return (
            f"{small} (TopDown's post-processing narrows the residuals far below the claimed "
            "noise's spread), so its bias, not noise, dominates them"
        )
    return f"{small}, so small-sample effects over those windows dominate them"
