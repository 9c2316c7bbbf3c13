"""The declared noise of one query as a law the residuals can be tested against.

A published release declares, per query, the noise it adds (an allocation row:
:meth:`auditlib.allocations.QueryBudget.noise_variance`): a discrete Gaussian of variance parameter
σ², a two-sided geometric or Laplace of scale b, a Gaussian of standard deviation σ. Under the
declaration the residuals (published − true) of that query are i.i.d. draws of the law, whatever
the true counts are (additive, count-independent noise: the assumption every residual test here
states).

:class:`NoiseLaw` gives the moments the scale test needs, exactly (closed forms, or sums over the
discrete Gaussian's support with its stated truncation), the cdf the fit test needs, and the path
``scaled(k)`` along which the noise's *variance parameter* grows by k — the same path as
:func:`auditlib.accounting.scale_components` (discrete Gaussian σ²·k; Gaussian σ, Laplace and
geometric scale b times √k), so that a confidence interval on k maps to one on ε(δ) through the
certified accountant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError

#: the mechanisms a law may name; ``parameter`` is σ² (discrete Gaussian), the scale b
#: (geometric: P(k) ∝ e^(−|k|/b); Laplace) or σ (Gaussian)
MECHANISMS: tuple[str, ...] = ("discrete_gaussian", "geometric", "laplace", "gaussian")
DISCRETE: tuple[str, ...] = ("discrete_gaussian", "geometric")


@dataclass(frozen=True)
class NoiseLaw:
    """One query's declared noise: ``mechanism`` and its ``parameter`` (see :data:`MECHANISMS`)."""

    mechanism: str
    parameter: float

    def __post_init__(self) -> None:
        if self.mechanism not in MECHANISMS:
            raise InvalidParameterError(
                f"Invalid mechanism: {self.mechanism!r}; allowed: {', '.join(MECHANISMS)}"
            )
        p = float(self.parameter)
        if not (math.isfinite(p) and p > 0.0):
            raise InvalidParameterError(
                f"Invalid {self.mechanism} parameter: {self.parameter!r}; pass a finite number > 0"
            )
        object.__setattr__(self, "parameter", p)

    @classmethod
    def of(cls, noise: Any) -> NoiseLaw:
        """The law of an allocation query's noise: a plain ``float`` is a discrete Gaussian σ², a
        :class:`~auditlib.simulate.noise.NoiseVariance` names its own mechanism."""
        mech = getattr(noise, "mechanism", None)
        if mech is None:
            return cls("discrete_gaussian", float(noise))
        return cls(str(mech), float(noise.parameter))

    @property
    def discrete(self) -> bool:
        """Draws on the integers (residuals must be whole numbers)."""
        return self.mechanism in DISCRETE

    def scaled(self, k: float) -> NoiseLaw:
        """The law with its variance parameter times ``k`` (σ²·k, or the scale times √k)."""
        if not (math.isfinite(k) and k > 0.0):
            raise InvalidParameterError(f"Invalid variance factor: {k!r}; pass a number > 0")
        if self.mechanism == "discrete_gaussian":
            return NoiseLaw(self.mechanism, self.parameter * k)
        return NoiseLaw(self.mechanism, self.parameter * math.sqrt(k))

    def moments(self) -> tuple[float, float]:
        """(E X², E X⁴) of one draw, exact (the discrete Gaussian: summed over its support, the
        truncated mass below 1e-15 of the total)."""
        p = self.parameter
        if self.mechanism == "gaussian":
            return p * p, 3.0 * p**4
        if self.mechanism == "laplace":
            return 2.0 * p * p, 24.0 * p**4
        if self.mechanism == "geometric":
            a = math.exp(-1.0 / p)
            one = -math.expm1(-1.0 / p)  # 1 − α without cancellation
            m2 = 2.0 * a / one**2
            m4 = 2.0 * a * (1.0 + 11.0 * a + 11.0 * a * a + a**3) / (one**4 * (1.0 + a))
            return m2, m4
        k, pmf = self.lattice_pmf()
        return float(np.sum(pmf * k * k)), float(np.sum(pmf * k**4))

    def lattice_pmf(self) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Support points and pmf of a discrete law (cut where the tail is below 1e-17)."""
        if self.mechanism == "discrete_gaussian":
            from auditlib.mechanisms import DiscreteGaussian

            dg = DiscreteGaussian(self.parameter)
            r = dg.support_radius
            k = np.arange(-r, r + 1, dtype=np.float64)
            return k, np.asarray(dg.pmf(k), dtype=np.float64)
        if self.mechanism == "geometric":
            from auditlib.mechanisms import TwoSidedGeometric

            g = TwoSidedGeometric(1.0 / self.parameter)
            r = math.ceil(self.parameter * 40.0) + 1  # α^r ≤ e^−40
            k = np.arange(-r, r + 1, dtype=np.float64)
            return k, np.asarray(g.pmf(k), dtype=np.float64)
        raise InvalidParameterError(f"{self.mechanism} noise is continuous: it has no pmf")

    def cdf(self, x: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """P(X ≤ x)."""
        from auditlib.mechanisms import DiscreteGaussian, Gaussian, Laplace, TwoSidedGeometric

        law: Any
        if self.mechanism == "discrete_gaussian":
            law = DiscreteGaussian(self.parameter)
        elif self.mechanism == "geometric":
            law = TwoSidedGeometric(1.0 / self.parameter)
        elif self.mechanism == "laplace":
            law = Laplace(self.parameter)
        else:
            law = Gaussian(self.parameter)
        return np.asarray(law.cdf(x), dtype=np.float64)

    def loss(self, count: int = 1) -> Any:
        """The accountant's component of ``count`` sensitivity-1 counts with this noise."""
        from auditlib.accounting import (
            DiscreteGaussianLoss,
            GaussianLoss,
            GeometricLoss,
            LaplaceLoss,
        )

        p = self.parameter
        if self.mechanism == "discrete_gaussian":
            return DiscreteGaussianLoss(p, count)
        if self.mechanism == "geometric":
            return GeometricLoss(1.0 / p, count)
        if self.mechanism == "laplace":
            return LaplaceLoss(p, count)
        return GaussianLoss(p, count)

    def describe(self) -> str:
        """``discrete Gaussian σ² = 5``, ``geometric b = 2``, …"""
        name = {
            "discrete_gaussian": "discrete Gaussian σ²",
            "geometric": "geometric b",
            "laplace": "Laplace b",
            "gaussian": "Gaussian σ",
        }[self.mechanism]
        return f"{name} = {self.parameter:.4g}"
