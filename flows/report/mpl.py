"""The maximum privacy loss section (Askin, Kutta & Dette), when the store holds an ``mpl`` group: per level
the lower bound LB with ε̂, t̂ and the exact ε*_C, the raised guard-rail flags in words, and the
loss curves of :func:`flows.report.figures_mpl.loss_curve_figure` as a captioned figure; with the
f-DP variables also the count's certified trade-off points beside the certified curves
(:func:`flows.report.figures_mpl.fdp_figure`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import xarray as xr
from matplotlib.backends.backend_agg import FigureCanvasAgg

from flows.report.figures import ReportFigure, to_data_uri
from flows.report.format import fmt_num, is_finite
from flows.report.mpl_bound import NOTE as VACUOUS_NOTE
from flows.report.mpl_bound import WHY, fmt_lb, vacuous
from flows.report.store_data import str_values, var_values

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
    fdp_figure: ReportFigure | None = None
    #: the sentence on vacuous bounds, when a level's bound is at or below 0
    vacuous_note: str | None = None


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
            "re-estimated at t̂ on fresh draws (at 0 and named vacuous when it is at or below 0: "
            f"{WHY}); dotted red: the exact ε*_C over the pairs and C. "
            "Raised guard-rail flags are named under the panel title and in words above."
        ),
        src=to_data_uri(fig),
    )


def _fdp_figure(ds: xr.Dataset, levels: list[str]) -> ReportFigure | None:
    """The count's empirical f-DP points beside the certified curves (:func:`fdp_figure`)."""
    from flows.report.figures_mpl import fdp_figure

    if any(v not in ds.variables for v in ("fdp_alpha_upper", "fdp_exact_lower", "alpha")):
        return None
    conf = 1.0 - float(ds.attrs.get("alpha", 0.05))
    return ReportFigure(
        title="The tested count's empirical trade-off points beside the certified curves",
        alt=(
            f"One panel per level ({', '.join(levels)}) of type II error β against type I error "
            "α: the certified exact curve (solid blue), the Bureau-implied curve (dashed red), the "
            "count's certified empirical points (black dots) and the band between them (shaded)."
        ),
        caption=(
            "Solid: certified lower end of the exact f-DP curve of the level's noise (the "
            "accounting section's curve, errs low); dashed: the curve implied by the Bureau's "
            "zCDP accounting, as drawn there. Dots: points certified from draws of the one "
            "released count on D vs D′ (the best MPL pair, fresh draws): with probability "
            f"≥ {conf:.2f} every dot lies on or above the count's true curve (they err high), so "
            "the count's curve lies in the shaded band between the solid curve and the dots' "
            "convex hull (a count is a part of the level's release: its curve is never below the "
            "level's). The gap in each title is the largest height of a dot above the solid curve; "
            "it errs high: near 0 the accounting is tight, a large gap is slack in the accounting "
            "or a weak test (one count, finitely many draws)."
        ),
        src=to_data_uri(fdp_figure(ds)),
    )


def mpl_section(ds: xr.Dataset) -> MplSection | None:
    levels = str_values(ds["geolevel"].values) if "geolevel" in ds.coords else []
    if not levels or "lb" not in ds:
        return None

    def col(name: str) -> list[str]:
        a = var_values(ds, name)
        if a is None:
            return ["—"] * len(levels)
        if a.dtype.kind in "OUT":
            return str_values(a)
        return [fmt_num(float(x), 4) for x in a.astype(float)]

    lbs = [float(x) for x in np.asarray(ds["lb"].values, dtype=float)]  # raw: maybe below 0
    rows = [
        {
            "geolevel": g,
            "query": qu,
            "sigma2": s2,
            "count": ct,
            "lb": fmt_lb(lb, 4),
            "lb_title": WHY if vacuous(lb) else "",
            "eps_hat": eh,
            "t_hat": th,
            "epsilon_c": ec,
        }
        for g, qu, s2, ct, lb, eh, th, ec in zip(
            levels,
            col("query"),
            col("sigma2"),
            col("count"),
            lbs,
            col("eps_hat"),
            col("t_hat"),
            col("epsilon_c"),
            strict=True,
        )
    ]
    alpha = ds.attrs.get("alpha")
    return MplSection(
        alpha=fmt_num(alpha, 3) if is_finite(alpha) else "—",
        rows=rows,
        figure=_loss_curve_figure(ds, levels),
        flags=_mpl_flags(ds, levels),
        fdp_figure=_fdp_figure(ds, levels),
        vacuous_note=VACUOUS_NOTE if any(vacuous(x) for x in lbs) else None,
    )
