"""Empirical privacy loss (EPL) of DP releases from their residuals (Flaxman & Petti, 2020).

* :func:`epl` — the estimate, as the authors computed it (``method="flaxman_petti"``), on the
  lattice window of the paper's text (``"percentile_window"``) or with the wider kernel that cuts
  the small-sample bias (``"bias_aware"``); returns an :class:`EPLResult`.
* :func:`estimate_epl` — the bias-aware estimate with a bootstrap interval, the matched
  discrete-Gaussian floor, the slope of EPL(x) (1/σ², ρ estimates) and every knob; returns an
  :class:`EPLEstimate`. EPL(x) is evaluated on the residuals' own lattice (ℤ/P for ADPC,
  :func:`residual_lattice`); there the interval brackets the unsmoothed loss
  (``ci_target``, :mod:`auditlib.epl.extrapolate`).
* :func:`adpc_pmf` / :func:`windowed_loss` — exact losses of lattice noise over a window, the
  targets EPL is checked against.
* :func:`lattice_kde` / :func:`lattice_kde_logpdf` — an exact, fast Gaussian KDE for integer
  residuals (equal to ``scipy.stats.gaussian_kde`` at the same bandwidth).
* :func:`epl_surface` — EPL(x) on its grid with a pointwise bootstrap band, for stores.
* :func:`flaxman_petti_reference` — a plain scipy transcription, for cross-checks.
* :class:`LatticeHistogram`, :func:`histograms_by_query`, :func:`epl_rows` — the same numbers from
  residuals streamed chunk by chunk (an audit's geolevel, a Zarr array);
  :class:`BiasAwareSettings` — the bias-aware estimate's knobs as an audit sets them;
  :class:`EPLKnobs` — all of a level's EPL settings, held once.
"""

from auditlib.epl.bandwidth import BANDWIDTH_KINDS
from auditlib.epl.bias_aware import GRIDS, EPLEstimate, estimate_epl
from auditlib.epl.estimator import METHODS, MIN_RESIDUALS, STATUSES, EPLResult, epl
from auditlib.epl.exact import adpc_pmf, windowed_loss
from auditlib.epl.extrapolate import CI_TARGETS
from auditlib.epl.kde import (
    binning_error_bound,
    lattice_kde,
    lattice_kde_logpdf,
    scipy_bandwidth,
)
from auditlib.epl.lattice import Lattice, residual_lattice
from auditlib.epl.reference import flaxman_petti_reference
from auditlib.epl.rows import EPLKnobs, epl_rows
from auditlib.epl.settings import BANDWIDTH_RULES, BIAS_AWARE_FACTOR, CI_KINDS, BiasAwareSettings
from auditlib.epl.stream import (
    LatticeHistogram,
    histogram_of_zarr,
    histograms_by_query,
    lattice_spacing,
)
from auditlib.epl.surface import SURFACE_POINTS, EPLSurface, epl_surface

__all__ = [
    "BANDWIDTH_KINDS",
    "BANDWIDTH_RULES",
    "BIAS_AWARE_FACTOR",
    "CI_KINDS",
    "CI_TARGETS",
    "GRIDS",
    "METHODS",
    "MIN_RESIDUALS",
    "STATUSES",
    "SURFACE_POINTS",
    "BiasAwareSettings",
    "EPLEstimate",
    "EPLKnobs",
    "EPLResult",
    "EPLSurface",
    "Lattice",
    "LatticeHistogram",
    "adpc_pmf",
    "binning_error_bound",
    "epl",
    "epl_rows",
    "epl_surface",
    "estimate_epl",
    "flaxman_petti_reference",
    "histogram_of_zarr",
    "histograms_by_query",
    "lattice_kde",
    "lattice_kde_logpdf",
    "lattice_spacing",
    "residual_lattice",
    "scipy_bandwidth",
    "windowed_loss",
]
