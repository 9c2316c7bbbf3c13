"""The f-DP coverage section, when the store holds an ``fdp_coverage`` group (``dpaudit
fdp-coverage``, flows/experiments/fdp_coverage.py): per mechanism × claimed parameter × band the true μ or ε,
the coverage of the certified points and of the plug-in points, the median lower bound and the
share of repetitions refuting the claim; and the empirical CDFs of the lower bounds
(:func:`fdp_coverage_figure`).

A mechanism's parameter is μ (Gaussian, discrete-Gaussian count: ``claimed_mu`` finite) or ε
(Laplace, randomized response: ``claimed_epsilon`` finite); the section reads the bound on that one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from flows.report.figures import ReportFigure, to_data_uri
from flows.report.format import fmt_num
from flows.report.store_data import str_values

#: how each band certifies the points (flows/experiments/fdp_coverage.py BANDS)
BAND_WORDS = {"clopper-pearson": "Clopper–Pearson, Bonferroni", "dkw": "DKW"}


@dataclass
class FdpCoverageSection:
    conf: str
    repetitions: int
    rows: list[dict[str, str]]
    figure: ReportFigure | None


def _kind(ds: xr.Dataset, k: int) -> str:
    """``mu`` or ``epsilon``: what mechanism ``k`` claims (its claimed value is finite)."""
    claimed = np.asarray(ds["claimed_mu"].values[k], dtype=float)
    return "mu" if np.isfinite(claimed).all() else "epsilon"


def fdp_coverage_figure(ds: xr.Dataset, *, cols: int = 3) -> Figure:
    """Per mechanism: the eCDF over repetitions of the lower bound on its parameter (μ or ε), one
    colour per claimed parameter, solid Clopper–Pearson and dashed DKW; the true value dashed and
    the claim dotted."""
    mechs = str_values(ds["mechanism"].values)
    params = np.asarray(ds["parameter"].values, dtype=float)
    bands = str_values(ds["band"].values)
    c = max(1, min(cols, len(mechs)))
    rows = -(-len(mechs) // c)
    fig = Figure(figsize=(4.0 * c, 3.2 * rows), layout="constrained")
    axes = fig.subplots(rows, c, squeeze=False)
    for k, name in enumerate(mechs):
        ax: Any = axes[k // c][k % c]
        kind = _kind(ds, k)
        symbol = "μ" if kind == "mu" else "ε"
        for j, p in enumerate(params):
            color = f"C{j}"
            for b, band in enumerate(bands):
                lb = np.asarray(ds[f"{kind}_lower"].values[k, j, b], dtype=float)
                lb = np.sort(lb[np.isfinite(lb)])
                if lb.size:
                    y = np.arange(1, lb.size + 1) / lb.size
                    ax.step(
                        lb,
                        y,
                        where="post",
                        color=color,
                        linestyle="-" if b == 0 else "--",
                        label=f"{symbol}₀ = {p:g}, {band}",
                    )
            true = float(ds[kind].values[k, j])
            claim = float(ds[f"claimed_{kind}"].values[k, j])
            if math.isfinite(true):
                ax.axvline(true, color=color, linestyle="--", linewidth=0.8)
            if math.isfinite(claim) and claim != true:
                ax.axvline(claim, color=color, linestyle=":", linewidth=0.8)
        ax.set_title(name, fontsize="medium")
        ax.set_xlabel(f"{symbol} lower bound")
        ax.set_ylabel("eCDF")
        ax.set_ylim(0, 1.02)
        ax.legend(fontsize="x-small", loc="lower right")
    for k in range(len(mechs), rows * c):
        axes[k // c][k % c].set_visible(False)
    return fig


def fdp_coverage_section(ds: xr.Dataset) -> FdpCoverageSection | None:
    """The coverage table and the lower bounds' eCDFs of an ``fdp_coverage`` group."""
    need = ("coverage", "plugin_coverage", "detection", "mu_lower", "epsilon_lower", "claimed_mu")
    if any(v not in ds.variables for v in need):
        return None
    mechs = str_values(ds["mechanism"].values)
    params = [float(p) for p in np.asarray(ds["parameter"].values)]
    bands = str_values(ds["band"].values)
    rows = []
    for k, m in enumerate(mechs):
        kind = _kind(ds, k)
        for j, p in enumerate(params):
            for b, band in enumerate(bands):
                lb = np.asarray(ds[f"{kind}_lower"].values[k, j, b], dtype=float)
                lb = lb[np.isfinite(lb)]
                rows.append(
                    {
                        "mechanism": m,
                        "claim": f"{'μ' if kind == 'mu' else 'ε'} = {fmt_num(p, 3)}",
                        "true": fmt_num(float(ds[kind].values[k, j]), 4),
                        "band": BAND_WORDS.get(band, band),
                        "coverage": fmt_num(float(ds["coverage"].values[k, j, b]), 3),
                        "plugin": fmt_num(float(ds["plugin_coverage"].values[k, j, b]), 3),
                        "median_lb": fmt_num(float(np.median(lb)), 4) if lb.size else "—",
                        "refuted": fmt_num(float(ds["detection"].values[k, j, b]), 3),
                    }
                )
    fig = fdp_coverage_figure(ds)
    FigureCanvasAgg(fig)
    conf = ds.attrs.get("conf")
    return FdpCoverageSection(
        conf=fmt_num(conf, 3) if conf is not None else "—",
        repetitions=int(ds.sizes.get("rep", 0)),
        rows=rows,
        figure=ReportFigure(
            title="Empirical CDFs of the μ or ε lower bound per mechanism, claim and band",
            alt=(
                f"One panel per mechanism ({', '.join(mechs)}), one step curve per claimed "
                "parameter and band of the lower bounds over repetitions, with the true value "
                "dashed and the claim dotted."
            ),
            caption=(
                "Empirical CDF over the repetitions of the lower bound on the mechanism's "
                "parameter (μ for Gaussian entries, ε for Laplace and randomized response), one "
                "colour per claimed value; solid: Clopper–Pearson points, dashed: DKW points; "
                "vertical dashed: the true value, dotted: the claim when it differs (a broken "
                "entry). A bound right of its dotted line refutes the claim; a correct entry "
                "refutes it in at most 1 − conf of repetitions."
            ),
            src=to_data_uri(fig),
        ),
    )
