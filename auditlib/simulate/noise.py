"""The noise a measurement draws, carried with the variance it is weighted by.

A simulated measurement has been described by its discrete Gaussian σ² alone (a ``float``). An
allocation file may give a query two-sided geometric, Laplace or Gaussian noise instead
(:mod:`auditlib.allocation_file`); its measurement is then described by a :class:`NoiseVariance`:
a ``float`` equal to the noise's variance (so that every weight ``1/σ²`` of the least-squares
step, and every stored ``sigma2``, is the query's variance unchanged) that also names the
mechanism and its parameter. :func:`noise_sampler` draws either: a plain ``float`` as the discrete
Gaussian it always was, a :class:`NoiseVariance` from its own mechanism.
"""

from __future__ import annotations

import math
from typing import Any

from auditlib.exceptions import InvalidParameterError

#: the mechanisms a :class:`NoiseVariance` may name, and what its ``parameter`` is for each
PARAMETERS: dict[str, str] = {
    "geometric": "scale b (P(k) ∝ e^(-|k|/b))",
    "laplace": "scale b",
    "gaussian": "standard deviation σ",
}


def law_variance(mechanism: str, parameter: float) -> float:
    """The variance of one draw: two-sided geometric of scale ``b`` (``r = e^(-1/b)``:
    ``2r/(1-r)²``), Laplace ``2b²``, Gaussian ``σ²``."""
    if mechanism == "geometric":
        r = math.exp(-1.0 / parameter)
        return 2.0 * r / (-math.expm1(-1.0 / parameter)) ** 2
    if mechanism == "laplace":
        return 2.0 * parameter * parameter
    if mechanism == "gaussian":
        return parameter * parameter
    raise InvalidParameterError(
        f"Invalid mechanism: {mechanism!r}; allowed: {', '.join(PARAMETERS)}"
    )


class NoiseVariance(float):
    """The variance of a measurement's noise (a ``float``) and the noise itself: ``mechanism``
    (``geometric``, ``laplace`` or ``gaussian``) with its ``parameter`` (:data:`PARAMETERS`)."""

    mechanism: str
    parameter: float

    def __new__(cls, mechanism: str, parameter: float) -> NoiseVariance:
        p = float(parameter)
        if not (math.isfinite(p) and p > 0):
            raise InvalidParameterError(f"Invalid {mechanism} parameter: {parameter!r}; need > 0")
        obj = super().__new__(cls, law_variance(mechanism, p))
        obj.mechanism = mechanism
        obj.parameter = p
        return obj

    def __reduce__(self) -> tuple[Any, ...]:
        return (NoiseVariance, (self.mechanism, self.parameter))

    def __repr__(self) -> str:
        return f"NoiseVariance({self.mechanism!r}, {self.parameter!r})"


def noise_key(sigma2: float) -> tuple[str, float]:
    """A key telling measurements of different noise apart (a Laplace of variance 2 is not a
    discrete Gaussian of σ² = 2)."""
    if isinstance(sigma2, NoiseVariance):
        return (sigma2.mechanism, sigma2.parameter)
    return ("discrete_gaussian", float(sigma2))


def noise_sampler(sigma2: float, dg_sampler: str = "reference") -> Any:
    """A sampler (``rvs(size, rng)``) of the measurement's noise: a plain ``float`` is the discrete
    Gaussian of that σ² (``dg_sampler``: :func:`~auditlib.mechanisms.discrete_gaussian_sampler`'s
    name), a :class:`NoiseVariance` its own mechanism."""
    from auditlib.mechanisms import Gaussian, Laplace, TwoSidedGeometric, discrete_gaussian_sampler

    if not isinstance(sigma2, NoiseVariance):
        return discrete_gaussian_sampler(float(sigma2), dg_sampler)
    if sigma2.mechanism == "geometric":
        return TwoSidedGeometric(1.0 / sigma2.parameter)
    if sigma2.mechanism == "laplace":
        return Laplace(sigma2.parameter)
    return Gaussian(sigma2.parameter)
