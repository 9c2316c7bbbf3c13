"""MPL figures render (Agg) from real datasets: a coverage group and an audit's mpl group."""

from __future__ import annotations

import io

import numpy as np
import pytest
import xarray as xr
from matplotlib.backends.backend_agg import FigureCanvasAgg

from auditlib.exceptions import InvalidParameterError
from flows.report.figures_mpl import coverage_ecdf_figure, loss_curve_figure


def _png(fig) -> bytes:  # type: ignore[no-untyped-def]
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def test_coverage_ecdf_figure_renders(real_coverage_group: xr.Dataset) -> None:
    ds = real_coverage_group
    fig = coverage_ecdf_figure(ds)
    axes = [a for a in fig.axes if a.get_visible()]
    assert len(axes) == 2 and axes[0].get_title() == "laplace"
    # one step curve per ε₀, reaching 1 at the largest LB
    steps = [ln for ln in axes[0].get_lines() if len(ln.get_xdata()) == 6]
    assert len(steps) == 2
    np.testing.assert_allclose(steps[0].get_ydata()[-1], 1.0)
    np.testing.assert_allclose(np.sort(steps[0].get_xdata()), np.sort(ds.lb.values[0, 0]))
    assert _png(fig)[:4] == b"\x89PNG"


def test_loss_curve_figure_renders(real_mpl_group: xr.Dataset) -> None:
    ds = real_mpl_group
    fig = loss_curve_figure(ds)
    ax = fig.axes[0]
    assert ax.get_title().startswith("State")
    star = next(ln for ln in ax.get_lines() if ln.get_marker() == "*")
    assert float(star.get_xdata()[0]) == float(ds.t_hat.values[0])
    assert float(star.get_ydata()[0]) == float(ds.eps_hat.values[0])
    assert _png(fig)[:4] == b"\x89PNG"
    one = loss_curve_figure(ds, geolevels=["County"])
    assert [a.get_title().split(" ")[0] for a in one.axes if a.get_visible()] == ["County"]
    with pytest.raises(InvalidParameterError, match="geolevel: 'Block'"):
        loss_curve_figure(ds, geolevels=["Block"])
    with pytest.raises(InvalidParameterError, match="missing"):
        loss_curve_figure(ds.drop_vars("lb"))
