"""A plain transcription of the authors' EPL computation with ``scipy.stats.gaussian_kde``.

Slow (n × grid kernel evaluations) and with the authors' float behaviour (the density underflows to
0 far outside the data); kept only to cross-check :func:`auditlib.epl.epl` and for benchmarks.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from auditlib.epl.kde import as_residuals


def flaxman_petti_reference(
    residuals: npt.ArrayLike,
    *,
    bandwidth_factor: float = 0.1,
    percentiles: tuple[float, float] = (5.0, 95.0),
    range_multiplier: float = 1.0,
) -> tuple[float, npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(EPL, grid x, EPL(x)) computed with scipy's KDE, exactly as in the authors' notebook."""
    r = as_residuals(residuals)
    lb, ub = np.percentile(r, list(percentiles))
    b = range_multiplier * max(abs(lb), abs(ub))
    edges = np.arange(-b, b, 1.0)
    centres = 0.5 * (edges[:-1] + edges[1:])
    from scipy.stats import gaussian_kde  # lazy: ≈ 0.5 s to import

    f = gaussian_kde(r, bw_method=bandwidth_factor)(centres)
    with np.errstate(divide="ignore", invalid="ignore"):
        epl_x = np.log(f[:-1] / f[1:])
    return float(np.nanmax(np.abs(epl_x))), centres[:-1], epl_x
