"""Empirical privacy loss (EPL) of DP releases from their residuals (Flaxman & Petti, 2020).

* :func:`epl` — the estimate, as the authors computed it (``method="flaxman_petti"``) or on the
  lattice window of the paper's text (``"percentile_window"``); returns an :class:`EPLResult`.
* :func:`lattice_kde` / :func:`lattice_kde_logpdf` — an exact, fast Gaussian KDE for integer
  residuals (equal to ``scipy.stats.gaussian_kde`` at the same bandwidth).
* :func:`flaxman_petti_reference` — a plain scipy transcription, for cross-checks.
"""

from auditlib.epl.estimator import METHODS, MIN_RESIDUALS, STATUSES, EPLResult, epl
from auditlib.epl.kde import (
    binning_error_bound,
    lattice_kde,
    lattice_kde_logpdf,
    scipy_bandwidth,
)
from auditlib.epl.reference import flaxman_petti_reference

__all__ = [
    "METHODS",
    "MIN_RESIDUALS",
    "STATUSES",
    "EPLResult",
    "binning_error_bound",
    "epl",
    "flaxman_petti_reference",
    "lattice_kde",
    "lattice_kde_logpdf",
    "scipy_bandwidth",
]
