"""The knobs of the bias-aware EPL estimate an audit stores, in one validated value.

:class:`BiasAwareSettings` holds what :func:`auditlib.epl.estimate_epl` and
:func:`auditlib.epl.epl_surface` take besides the data and the seed: the bandwidth and its kind,
the window (percentiles and range multiplier), the neighbour shift Δ, the bootstrap size and
interval, and the matched reference's size and quantile. Its defaults (:data:`DEFAULTS`: h = 0.3 ×
sd, the window of the estimate it accompanies, Δ = 1, 200 bootstrap resamples, a 90 % basic
interval, 100 reference draws, their 95 % quantile) are set here only: :func:`~auditlib.epl.estimate_epl`,
:func:`~auditlib.epl.epl_surface` and the audit spec's ``[epl]`` keys take theirs from it; the
checks of the draws and fractions are here too.
``percentiles=None`` means "the window of the estimate it accompanies" (an audit's Flaxman–Petti
percentiles). Seeds are not settings: an audit keys them from its own seed
(:mod:`auditlib.seeds`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from auditlib.epl.bandwidth import BANDWIDTH_KINDS, check_percentiles, check_positive
from auditlib.exceptions import InvalidParameterError, UnknownNameError

#: Default bandwidth factor of the bias-aware estimate (h = factor × sd); see docs/epl.md.
BIAS_AWARE_FACTOR = 0.3
CI_KINDS = ("percentile", "basic")

#: Most bootstrap resamples (``n_boot``) or reference draws (``n_null``) one estimate takes, as the
#: spec allows. Each draw is one multinomial histogram and one product with the kernel matrix
#: (about a millisecond for a few thousand lattice points), so the bound is a couple of minutes.
MAX_DRAWS = 100_000


def check_draws(name: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or int(value) <= 0:
        raise InvalidParameterError(
            f"Invalid {name}: {value!r}; pass an integer ≥ 1 (e.g. 200), or None to skip."
        )
    if int(value) > MAX_DRAWS:
        raise InvalidParameterError(
            f"Invalid {name}: {value!r}; the largest allowed is {MAX_DRAWS} (MAX_DRAWS)."
        )
    return int(value)


def check_fraction(name: str, value: object) -> float:
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        v = math.nan
    if not (0.0 < v < 1.0):
        raise InvalidParameterError(
            f"Invalid {name}: {value!r}; pass a number in (0, 1), e.g. 0.9."
        )
    return v


#: bandwidth kinds whose h is a rule of the data (no value)
BANDWIDTH_RULES = tuple(k for k in BANDWIDTH_KINDS if k not in ("factor", "absolute"))


@dataclass(frozen=True)
class BiasAwareSettings:
    """Validated knobs of the bias-aware estimate (see the module docstring).

    ``bandwidth``: h = bandwidth × sd for ``bandwidth_kind="factor"`` (``None``: 0.3), h in
    residual units for ``"absolute"`` (required), ``None`` for the rules ``"scott"`` and
    ``"silverman"`` (they set h themselves). ``n_boot``/``n_null`` ``None`` skip those draws.
    """

    bandwidth: float | None = None
    bandwidth_kind: str = "factor"
    percentiles: tuple[float, float] | None = None
    range_multiplier: float = 1.0
    shift: float = 1.0
    n_boot: int | None = 200
    confidence: float = 0.9
    ci_kind: str = "basic"
    n_null: int | None = 100
    null_quantile: float = 0.95

    def __post_init__(self) -> None:
        if self.bandwidth_kind not in BANDWIDTH_KINDS:
            raise UnknownNameError(
                f"Unknown bandwidth kind {self.bandwidth_kind!r}; choose one of {BANDWIDTH_KINDS}."
            )
        if self.bandwidth_kind in BANDWIDTH_RULES:
            if self.bandwidth is not None:
                raise InvalidParameterError(
                    f"Invalid bandwidth: {self.bandwidth!r} with bandwidth_kind "
                    f"{self.bandwidth_kind!r}, a rule that sets h itself; drop the bandwidth."
                )
        elif self.bandwidth is None:
            if self.bandwidth_kind == "absolute":
                raise InvalidParameterError(
                    "Invalid bandwidth: None with bandwidth_kind 'absolute'; pass h in residual "
                    "units (e.g. 3.0)."
                )
        else:
            check_positive("bandwidth", self.bandwidth, "pass a finite number > 0.")
        if self.percentiles is not None:
            object.__setattr__(self, "percentiles", check_percentiles(self.percentiles))
        for name, hint in (
            ("range_multiplier", "pass a finite number > 0 (1 = the percentiles)."),
            ("shift", "pass the neighbour shift Δ > 0 (1 for counts)."),
        ):
            object.__setattr__(self, name, check_positive(name, getattr(self, name), hint))
        for name in ("n_boot", "n_null"):
            object.__setattr__(self, name, check_draws(name, getattr(self, name)))
        for name in ("confidence", "null_quantile"):
            object.__setattr__(self, name, check_fraction(name, getattr(self, name)))
        if self.ci_kind not in CI_KINDS:
            raise UnknownNameError(f"Unknown ci_kind {self.ci_kind!r}; choose one of {CI_KINDS}.")

    def bandwidth_value(self) -> float:
        """The bandwidth's value as :func:`~auditlib.epl.estimate_epl` reads it (NaN for a rule)."""
        if self.bandwidth_kind in BANDWIDTH_RULES:
            return math.nan
        if self.bandwidth is None:
            return BIAS_AWARE_FACTOR
        return float(self.bandwidth)

    def window(self, percentiles: tuple[float, float]) -> tuple[float, float]:
        """The percentiles of the window: its own, else ``percentiles``."""
        return self.percentiles if self.percentiles is not None else percentiles

    def surface_kwargs(self, percentiles: tuple[float, float]) -> dict[str, Any]:
        """Keywords of :func:`auditlib.epl.epl_surface` (no matched reference there)."""
        return {
            "bandwidth": None if self.bandwidth_kind in BANDWIDTH_RULES else self.bandwidth_value(),
            "bandwidth_kind": self.bandwidth_kind,
            "percentiles": self.window(percentiles),
            "range_multiplier": self.range_multiplier,
            "shift": self.shift,
            "n_boot": self.n_boot,
            "confidence": self.confidence,
            "ci_kind": self.ci_kind,
        }

    def estimate_kwargs(self, percentiles: tuple[float, float]) -> dict[str, Any]:
        """Keywords of :func:`auditlib.epl.estimate_epl`."""
        return {
            **self.surface_kwargs(percentiles),
            "n_null": self.n_null,
            "null_quantile": self.null_quantile,
        }

    def smallest_factor(self, n: int) -> float | None:
        """The smallest h/sd this estimate uses on at most ``n`` residuals (``None`` for an
        absolute h, whose ratio to the sd depends on the data)."""
        if self.bandwidth_kind == "absolute":
            return None
        if self.bandwidth_kind == "scott":
            return float(max(n, 1)) ** -0.2
        if self.bandwidth_kind == "silverman":
            return float(max(0.75 * n, 1.0)) ** -0.2
        return self.bandwidth_value()

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly (tuples as lists)."""
        out = asdict(self)
        if self.percentiles is not None:
            out["percentiles"] = list(self.percentiles)
        return out


#: the defaults of every bias-aware knob, the one place they are set: :func:`estimate_epl`'s
#: keywords, :func:`~auditlib.epl.epl_surface`'s and the audit spec's ``[epl]`` keys read them
DEFAULTS = BiasAwareSettings()
