"""Report sections that put the three answers side by side: the summary table, accuracy, MPL.

Each builder reads one or more groups of a result store (already opened as xarray Datasets) and
returns a small dataclass of formatted strings and embedded figures for the template. Groups that
are absent give ``None`` (the template then says so); nothing is recomputed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr
from matplotlib.backends.backend_agg import FigureCanvasAgg

from flows.report.common import (
    ReportFigure,
    _attr_str,
    _isfinite,
    _new_figure,
    _strs,
    _style_axes,
    _to_data_uri,
    fmt_bracket,
    fmt_delta,
    fmt_num,
    fmt_range,
)

BUREAU_COLOUR = "#c0392b"
REDUCED_COLOUR = "#1f5fa8"


def fmt_cut(lower: Any, upper: Any) -> str:
    """A certified variance cut: its lower end (guaranteed), in per cent with two decimals."""
    if not _isfinite(lower):
        return "—"
    lo = 100.0 * float(lower)
    if _isfinite(upper) and abs(100.0 * float(upper) - lo) >= 0.005:
        return f"{lo:.2f}–{100.0 * float(upper):.2f} %"
    return f"{lo:.2f} %"


def _var(ds: xr.Dataset | None, name: str) -> np.ndarray | None:
    if ds is None or name not in ds.variables:
        return None
    return np.asarray(ds[name].values)


def _level_index(ds: xr.Dataset | None) -> dict[str, int]:
    if ds is None or "geolevel" not in ds.coords:
        return {}
    return {g: i for i, g in enumerate(_strs(ds["geolevel"].values))}


# --------------------------------------------------------------------------------------------
# summary table: the three answers per product × universe × geolevel
# --------------------------------------------------------------------------------------------


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
    target = float(want) if want is not None and _isfinite(want) else 1e-10
    j = int(np.argmin([abs(math.log10(d) - math.log10(target)) for d in deltas]))
    return j, deltas[j]


def _epl_cell(epl: xr.Dataset | None, levels: Mapping[str, int], level: str) -> tuple[str, str]:
    """The level's largest EPL over its measured queries: ``(value [interval], floor)``."""
    if epl is None or level not in levels:
        return "not run", "—"
    i = levels[level]
    status = _var(epl, "epl_status")
    ok = (
        np.array([s == "ok" for s in _strs(status[i])])
        if status is not None
        else np.ones(epl.sizes.get("query", 0), dtype=bool)
    )
    ba = _var(epl, "epl_bias_aware")
    if ba is not None:
        v = np.where(ok, ba[i].astype(float), np.nan)
        if np.any(np.isfinite(v)):
            q = int(np.nanargmax(v))
            lo, hi = _var(epl, "epl_ci_low"), _var(epl, "epl_ci_high")
            floor = _var(epl, "epl_null_upper")
            txt = fmt_num(v[q], 3)
            if lo is not None and hi is not None and _isfinite(lo[i, q]) and _isfinite(hi[i, q]):
                txt += f" [{fmt_num(lo[i, q], 3)}, {fmt_num(hi[i, q], 3)}]"
            return txt, fmt_num(floor[i, q], 3) if floor is not None else "—"
    pooled = _var(epl, "epl_pooled")
    if pooled is not None:
        v = np.where(ok, pooled[i].astype(float), np.nan)
        if np.any(np.isfinite(v)):
            return fmt_num(float(np.nanmax(v)), 3), "—"
    return "—", "—"


def _mpl_cell(mpl: xr.Dataset | None, levels: Mapping[str, int], level: str) -> str:
    if mpl is None:
        return "not run"
    lb = _var(mpl, "lb")
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
            return _var(acc, prefix + name)

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
        s2min, s2max = _var(acc, "sigma2_min"), _var(acc, "sigma2_max")
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
        product=_attr_str(attrs, "allocation_id", "") or _attr_str(attrs, "release"),
        universe=" · ".join(
            v for v in (_attr_str(attrs, "universe", ""), _attr_str(attrs, "region", "")) if v
        )
        or "—",
        delta=fmt_delta(delta) if delta is not None else "—",
        rows=rows,
        mpl_alpha=fmt_num(alpha, 3) if _isfinite(alpha) else None,
        notes=notes,
    )


# --------------------------------------------------------------------------------------------
# accuracy under the Bureau's and the reduced noise (seed 004 §3.4)
# --------------------------------------------------------------------------------------------


@dataclass
class AccuracySection:
    rows: list[dict[str, str]]
    counts: list[int]
    figure: ReportFigure | None
    mae_figure: ReportFigure | None
    has_reduced: bool


def _representative_query(s2: np.ndarray) -> int | None:
    """The measured query whose Bureau σ² is the level's median (one σ² per level here)."""
    ok = np.flatnonzero(np.isfinite(s2) & (s2 > 0))
    if ok.size == 0:
        return None
    order = ok[np.argsort(s2[ok], kind="stable")]
    return int(order[(order.size - 1) // 2])


def _change(new: float, old: float) -> str:
    if not (_isfinite(new) and _isfinite(old)) or old <= 0:
        return "—"
    return f"{100.0 * (new - old) / old:+.2f} %"


def accuracy_section(ds: xr.Dataset) -> AccuracySection | None:
    if "mse" not in ds or "geolevel" not in ds.coords:
        return None
    levels = _strs(ds["geolevel"].values)
    noises = _strs(ds["noise"].values) if "noise" in ds.coords else ["bureau"]
    b = noises.index("bureau") if "bureau" in noises else 0
    r = noises.index("reduced") if "reduced" in noises else None
    counts = [int(c) for c in np.asarray(ds["count"].values)] if "count" in ds.coords else []
    s2, mse, mae = (np.asarray(ds[v].values, dtype=float) for v in ("sigma2", "mse", "mae"))
    mse_c = np.asarray(ds["mse_clipped"].values, dtype=float) if "mse_clipped" in ds else None
    mae_c = np.asarray(ds["mae_clipped"].values, dtype=float) if "mae_clipped" in ds else None
    picks: list[tuple[str, int]] = []
    rows = []
    for i, level in enumerate(levels):
        q = _representative_query(s2[i, :, b])
        if q is None:
            continue
        picks.append((level, q))

        def v(a: np.ndarray | None, k: int | None, *idx: int, i: int = i, q: int = q) -> float:
            if a is None or k is None:
                return math.nan
            return float(a[(i, q, k, *idx)])

        c0 = 0 if counts else None
        rows.append(
            {
                "geolevel": level,
                "sigma2": fmt_num(v(s2, b), 4),
                "reduced_sigma2": fmt_num(v(s2, r), 4),
                "mse": fmt_num(v(mse, b), 4),
                "mse_reduced": fmt_num(v(mse, r), 4),
                "mse_change": _change(v(mse, r), v(mse, b)),
                "mae": fmt_num(v(mae, b), 4),
                "mae_reduced": fmt_num(v(mae, r), 4),
                "mae_change": _change(v(mae, r), v(mae, b)),
                "mse0": fmt_num(v(mse_c, b, c0) if c0 is not None else math.nan, 4),
                "mse0_reduced": fmt_num(v(mse_c, r, c0) if c0 is not None else math.nan, 4),
            }
        )
    if not rows:
        return None

    def figure(metric: str, clipped: np.ndarray | None, plain: np.ndarray) -> ReportFigure | None:
        if clipped is None or not counts:
            return None
        fig, axes = _new_figure(len(picks))
        x = np.asarray(counts)
        for ax, (level, q) in zip(axes, picks, strict=True):
            i = levels.index(level)
            for k, colour, label in (
                (b, BUREAU_COLOUR, "Bureau σ²"),
                (r, REDUCED_COLOUR, "reduced σ²"),
            ):
                if k is None or not np.isfinite(plain[i, q, k]):
                    continue
                ax.plot(x, clipped[i, q, k], "o-", color=colour, ms=3, lw=1.4, label=label)
                ax.axhline(plain[i, q, k], color=colour, lw=0.9, ls="--")
            ax.set_ylim(bottom=0)
            ax.set_title(f"{level} (σ² = {fmt_num(s2[i, q, b], 4)})", fontsize=9)
            ax.set_xlabel("true count", fontsize=8)
            ax.set_ylabel(metric, fontsize=8)
            _style_axes(ax)
        if axes:
            axes[0].legend(fontsize=7, frameon=False, loc="lower right")
        return ReportFigure(
            title=f"{metric} of a count per geographic level, clipped at 0 and not",
            alt=(
                f"One panel per level ({', '.join(lv for lv, _ in picks)}) of the {metric} of a "
                "noisy count against its true count 0 to 10 after clipping at 0 (points), under "
                "the Bureau's (red) and the reduced (blue) noise; dashed: without clipping."
            ),
            caption=(
                f"Exact {metric} of one count released as max(0, count + noise) with "
                "discrete-Gaussian noise, against the true count (points, solid), and without "
                "post-processing (dashed: the large-count limit, where clipping never acts). Red: "
                "the Bureau's σ²; blue: the reduced σ² with the same exact ε(δ*) as the Bureau's "
                "claim. Clipping halves the error at count 0 and fades within a few σ."
            ),
            src=_to_data_uri(fig),
        )

    return AccuracySection(
        rows=rows,
        counts=counts,
        figure=figure("MSE", mse_c, mse),
        mae_figure=figure("MAE", mae_c, mae),
        has_reduced=r is not None and any(row["reduced_sigma2"] != "—" for row in rows),
    )


# --------------------------------------------------------------------------------------------
# maximum privacy loss (seed 002), when the store holds an mpl group
# --------------------------------------------------------------------------------------------


#: what each guard-rail flag of the mpl group means for the bound (docs/mpl.md)
MPL_FLAG_WORDS = {
    "floor_driven": (
        "floor-driven: a density at t̂ sits at the floor τ (no draws near t̂), so the bound is a "
        "statement about τ, not about the mechanism"
    ),
    "edge": (
        "edge: t̂ lies on the edge of the output region C, so the supremum may lie beyond it (for "
        "the discrete Gaussian it does: its loss grows with |t|, it is not pure DP)"
    ),
    "sparse_support": (
        "sparse support: fewer than 20 of the draws land at t̂ in one sample, so the normal "
        "approximation of ln f̂ is poor and the bound can be too high"
    ),
}


@dataclass
class MplSection:
    alpha: str
    rows: list[dict[str, str]]
    figure: ReportFigure | None
    flags: list[tuple[str, list[str]]] = field(default_factory=list)


def _mpl_flags(ds: xr.Dataset, levels: list[str]) -> list[tuple[str, list[str]]]:
    """Per level, the raised guard-rail flags in words (levels with none are left out)."""
    out = []
    for i, level in enumerate(levels):
        words = [
            text
            for flag, text in MPL_FLAG_WORDS.items()
            if flag in ds.variables and bool(np.asarray(ds[flag].values)[i])
        ]
        if words:
            out.append((level, words))
    return out


def _loss_curve_figure(ds: xr.Dataset, levels: list[str]) -> ReportFigure | None:
    """The loss curves of :func:`flows.report.figures_mpl.loss_curve_figure` (t̂, LB, ε*_C marked)."""
    from flows.report.figures_mpl import loss_curve_figure

    need = ("loss_curve", "loss_t", "lb", "eps_hat", "t_hat", "epsilon_c")
    if any(v not in ds.variables for v in need) or "mpl_pair" not in ds.coords:
        return None
    fig = loss_curve_figure(ds, cols=min(len(levels), 2))
    FigureCanvasAgg(fig)
    return ReportFigure(
        title="Estimated privacy-loss curves ℓ̂(t) per geographic level",
        alt=(
            f"One panel per level ({', '.join(levels)}) of the estimated loss ℓ̂(t) per pair "
            "of neighbouring data sets, with t̂, the lower bound and the exact ε*_C marked."
        ),
        caption=(
            "Step-1 estimated privacy loss ℓ̂(t) = |log f̂_D(t) − log f̂_D′(t)| over the released "
            "count t, one line per neighbouring pair; star: the chosen output t̂ and the step-1 "
            "maximum ε̂ (errs up: a maximum of noise); dashed: the lower confidence bound LB, "
            "re-estimated at t̂ on fresh draws; dotted red: the exact ε*_C over the pairs and C. "
            "Raised guard-rail flags are named under the panel title and in words above."
        ),
        src=_to_data_uri(fig),
    )


def mpl_section(ds: xr.Dataset) -> MplSection | None:
    levels = _strs(ds["geolevel"].values) if "geolevel" in ds.coords else []
    if not levels or "lb" not in ds:
        return None

    def col(name: str) -> list[str]:
        a = _var(ds, name)
        if a is None:
            return ["—"] * len(levels)
        if a.dtype.kind in "OUT":
            return _strs(a)
        return [fmt_num(float(x), 4) for x in a.astype(float)]

    rows = [
        {
            "geolevel": g,
            "query": qu,
            "sigma2": s2,
            "count": ct,
            "lb": lb,
            "eps_hat": eh,
            "t_hat": th,
            "epsilon_c": ec,
        }
        for g, qu, s2, ct, lb, eh, th, ec in zip(
            levels,
            col("query"),
            col("sigma2"),
            col("count"),
            col("lb"),
            col("eps_hat"),
            col("t_hat"),
            col("epsilon_c"),
            strict=True,
        )
    ]
    alpha = ds.attrs.get("alpha")
    return MplSection(
        alpha=fmt_num(alpha, 3) if _isfinite(alpha) else "—",
        rows=rows,
        figure=_loss_curve_figure(ds, levels),
        flags=_mpl_flags(ds, levels),
    )


# --------------------------------------------------------------------------------------------
# MPL coverage (seed 002, Fig. 4), when the store is one written by ``dpaudit mpl-coverage``
# --------------------------------------------------------------------------------------------


@dataclass
class MplCoverageSection:
    alpha: str
    rows: list[dict[str, str]]
    figure: ReportFigure | None
    repetitions: int


def mpl_coverage_section(ds: xr.Dataset) -> MplCoverageSection | None:
    """The coverage table and the LB eCDFs per mechanism × ε₀ of an ``mpl_coverage`` group."""
    from flows.report.figures_mpl import coverage_ecdf_figure

    if any(v not in ds.variables for v in ("lb", "epsilon_c", "coverage")):
        return None
    mechs = _strs(ds["mechanism"].values)
    eps0 = [float(e) for e in np.asarray(ds["epsilon0"].values)]
    cov, ec = _var(ds, "coverage"), _var(ds, "epsilon_c")
    exceeds = _var(ds, "exceeds_claim")
    lb = np.asarray(ds["lb"].values, dtype=float)
    rows = []
    for k, m in enumerate(mechs):
        for j, e0 in enumerate(eps0):
            vals = lb[k, j][np.isfinite(lb[k, j])]
            rows.append(
                {
                    "mechanism": m,
                    "eps0": fmt_num(e0, 3),
                    "epsilon_c": fmt_num(float(ec[k, j]) if ec is not None else math.nan, 4),
                    "coverage": fmt_num(float(cov[k, j]) if cov is not None else math.nan, 3),
                    "exceeds": (fmt_num(float(exceeds[k, j]), 3) if exceeds is not None else "—"),
                    "median_lb": fmt_num(float(np.median(vals)), 4) if vals.size else "—",
                }
            )
    fig = coverage_ecdf_figure(ds, cols=min(len(mechs), 3))
    FigureCanvasAgg(fig)
    alpha = ds.attrs.get("alpha")
    return MplCoverageSection(
        alpha=fmt_num(alpha, 3) if _isfinite(alpha) else "—",
        rows=rows,
        repetitions=int(lb.shape[-1]) if lb.ndim == 3 else 0,
        figure=ReportFigure(
            title="Empirical CDFs of the MPL lower bound per mechanism and ε₀",
            alt=(
                f"One panel per mechanism ({', '.join(mechs)}), one step curve per claimed ε₀ "
                "of the lower bounds over repetitions, with ε*_C dashed and ε₀ dotted."
            ),
            caption=(
                "Empirical CDF of LB over the repetitions, one curve per claimed ε₀ (as seed "
                "002, Fig. 4); dashed: the exact ε*_C over the tested pairs and region, dotted: "
                "ε₀. Coverage is the height of a curve at its dashed line and should be at least "
                "1 − α for a correct mechanism; a curve left of its dotted line is a bound that "
                "does not refute the claim."
            ),
            src=_to_data_uri(fig),
        ),
    )
