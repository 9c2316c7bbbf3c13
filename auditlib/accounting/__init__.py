"""Certified privacy accounting: exact discrete-Gaussian compositions and zCDP conversions.

* :class:`DiscreteGaussianComposition` -- certified brackets on ``delta(eps)`` and ``eps(delta)``
  of composed discrete Gaussian count queries, by direct convolution on an exact lattice (or, when
  the variances are not commensurate, on a grid with the losses rounded up and down).
* :func:`bureau_epsilon`, :func:`bureau_delta`, :func:`cks_epsilon`, :func:`cks_delta` -- rho-zCDP
  to (eps, delta) conversions (the Census Bureau's and Canonne-Kamath-Steinke's).
* :func:`tradeoff`, :func:`tradeoff_knots` -- certified f-DP trade-off curves of a composition;
  :func:`zcdp_tradeoff` the curve rho-zCDP implies through the Bureau's conversion,
  :func:`gdp_mu_estimate` the closest Gaussian-DP curve (an estimate).
* :func:`calibrate_factor`, :func:`calibrate_sigma2` -- certified variance factor (or reduced
  sigma2) at which eps(delta*) meets a target (:func:`calibrate_mixed` for mixed compositions);
  :func:`tail_probability` and :func:`paper_bound_epsilon` (:mod:`~auditlib.accounting.paper_bound`)
  -- Su, Su & Wang's bound ``delta(eps) <= P[L > eps]``.
* :class:`PrivacyLossComposition` -- the same brackets for mixed compositions of
  :class:`DiscreteGaussianLoss`, :class:`GeometricLoss`, :class:`LaplaceLoss` and
  :class:`GaussianLoss` components (exact lattice when commensurate, else the bracket grid).
* :class:`Bracket` -- the certified interval every accountant returns.

The derivation and the error budget are in ``docs/accounting.md``.
"""

from auditlib.accounting._validation import MAX_LATTICE, MAX_WORK, check_max_work
from auditlib.accounting.bracket import Bracket
from auditlib.accounting.calibrate import (
    Calibration,
    calibrate_factor,
    calibrate_mixed,
    calibrate_sigma2,
    scale_components,
)
from auditlib.accounting.composition import PrivacyLossComposition
from auditlib.accounting.discrete_gaussian_pld import DiscreteGaussianComposition
from auditlib.accounting.losses import (
    DiscreteGaussianLoss,
    GaussianLoss,
    GeometricLoss,
    LaplaceLoss,
)
from auditlib.accounting.paper_bound import paper_bound_epsilon, tail_probability
from auditlib.accounting.tradeoff import (
    MAX_TRADEOFF_POINTS,
    check_tradeoff_points,
    gaussian_tradeoff,
    gdp_mu_estimate,
    tradeoff,
    tradeoff_knots,
    zcdp_tradeoff,
)
from auditlib.accounting.zcdp import bureau_delta, bureau_epsilon, cks_delta, cks_epsilon

__all__ = [
    "MAX_LATTICE",
    "MAX_TRADEOFF_POINTS",
    "MAX_WORK",
    "Bracket",
    "Calibration",
    "DiscreteGaussianComposition",
    "DiscreteGaussianLoss",
    "GaussianLoss",
    "GeometricLoss",
    "LaplaceLoss",
    "PrivacyLossComposition",
    "bureau_delta",
    "bureau_epsilon",
    "calibrate_factor",
    "calibrate_mixed",
    "calibrate_sigma2",
    "check_max_work",
    "check_tradeoff_points",
    "cks_delta",
    "cks_epsilon",
    "gaussian_tradeoff",
    "gdp_mu_estimate",
    "paper_bound_epsilon",
    "scale_components",
    "tail_probability",
    "tradeoff",
    "tradeoff_knots",
    "zcdp_tradeoff",
]
