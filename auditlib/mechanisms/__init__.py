"""Noise distributions of DP mechanisms: samplers and exact pmfs/pdfs (scipy.stats-like).

* :class:`DiscreteGaussian` — N_Z(0, σ²), the 2020 Census noise (exact law; sampler with a stated
  total-variation bound).
* :class:`TwoSidedGeometric` — G(ε), ``P(k) ∝ e^{−ε|k|}`` (ε-DP for sensitivity 1).
* :class:`Laplace`, :class:`Gaussian` — continuous counterparts.

All samplers take an explicit :class:`numpy.random.Generator`.
"""

from auditlib.mechanisms.base import ContinuousNoise, DiscreteNoise
from auditlib.mechanisms.continuous import Gaussian, Laplace
from auditlib.mechanisms.discrete_gaussian import (
    TRUNCATION_MASS,
    DiscreteGaussian,
    sample_discrete_gaussian,
)
from auditlib.mechanisms.geometric import TwoSidedGeometric

__all__ = [
    "TRUNCATION_MASS",
    "ContinuousNoise",
    "DiscreteGaussian",
    "DiscreteNoise",
    "Gaussian",
    "Laplace",
    "TwoSidedGeometric",
    "sample_discrete_gaussian",
]
