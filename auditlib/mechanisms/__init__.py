"""Noise distributions of DP mechanisms: samplers and exact pmfs/pdfs (scipy.stats-like).

* :class:`DiscreteGaussian` — N_Z(0, σ²), the 2020 Census noise (exact law; sampler with a stated
  total-variation bound).
* :class:`DiscreteGaussianTable` — the same law drawn from a guide table over exact 63-bit
  thresholds (several times faster; stated truncation and TV bound below 1e-15); the default of
  the TopDown measurements (:func:`discrete_gaussian_sampler` picks either by name).
* :class:`TwoSidedGeometric` — G(ε), ``P(k) ∝ e^{−ε|k|}`` (ε-DP for sensitivity 1).
* :class:`Laplace`, :class:`Gaussian` — continuous counterparts.

All samplers take an explicit :class:`numpy.random.Generator`.
"""

from auditlib.mechanisms.base import ContinuousNoise, DiscreteNoise
from auditlib.mechanisms.continuous import Gaussian, Laplace
from auditlib.mechanisms.dg_table import (
    DG_SAMPLERS,
    DiscreteGaussianTable,
    discrete_gaussian_sampler,
)
from auditlib.mechanisms.discrete_gaussian import (
    TRUNCATION_MASS,
    DiscreteGaussian,
    sample_discrete_gaussian,
)
from auditlib.mechanisms.geometric import TwoSidedGeometric

__all__ = [
    "DG_SAMPLERS",
    "TRUNCATION_MASS",
    "ContinuousNoise",
    "DiscreteGaussian",
    "DiscreteGaussianTable",
    "DiscreteNoise",
    "Gaussian",
    "Laplace",
    "TwoSidedGeometric",
    "discrete_gaussian_sampler",
    "sample_discrete_gaussian",
]
