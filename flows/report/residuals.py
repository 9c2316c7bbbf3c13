"""The residuals section: the histograms of the noise residuals DP − truth per level
(:func:`flows.report.figures_residuals.residual_figure`), or why there are none."""

from __future__ import annotations

from dataclasses import dataclass

import xarray as xr

from flows.report.figures import ReportFigure
from flows.report.figures_residuals import residual_figure


@dataclass
class ResidualSection:
    figure: ReportFigure | None
    note: str


def residual_section(res: xr.Dataset, epl: xr.Dataset | None) -> ResidualSection:
    if "residual" not in res or "geolevel" not in res.coords:
        return ResidualSection(None, "The residuals group holds no residual variable.")
    return ResidualSection(residual_figure(res, epl), "")
