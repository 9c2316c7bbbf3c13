"""The MPL coverage section (Askin, Kutta & Dette, Fig. 4), when the store holds an ``mpl_coverage`` group
(``dpaudit mpl-coverage``): per mechanism × ε₀ the exact ε*_C, coverage, share above the claim and
median LB, and the eCDFs of LB of :func:`flows.report.figures_mpl.coverage_ecdf_figure`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import xarray as xr
from matplotlib.backends.backend_agg import FigureCanvasAgg

from flows.report.figures import ReportFigure, to_data_uri
from flows.report.format import fmt_num, is_finite
from flows.report.mpl_bound import WHY, fmt_lb
from flows.report.store_data import str_values, var_values


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
    mechs = str_values(ds["mechanism"].values)
    eps0 = [float(e) for e in np.asarray(ds["epsilon0"].values)]
    cov, ec = var_values(ds, "coverage"), var_values(ds, "epsilon_c")
    exceeds = var_values(ds, "exceeds_claim")
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
                    "median_lb": fmt_lb(float(np.median(vals)), 4) if vals.size else "—",
                }
            )
    fig = coverage_ecdf_figure(ds, cols=min(len(mechs), 3))
    FigureCanvasAgg(fig)
    alpha = ds.attrs.get("alpha")
    return MplCoverageSection(
        alpha=fmt_num(alpha, 3) if is_finite(alpha) else "—",
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
                "does not refute the claim. A bound at or below 0 says nothing (ε ≥ 0 always; "
                f"{WHY}): it is drawn at 0, so a curve's step at 0 is the share of vacuous bounds."
            ),
            src=to_data_uri(fig),
        ),
    )
