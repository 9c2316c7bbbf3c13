"""The spec's ``[epl]`` section: the empirical privacy loss estimate's knobs, with their bounds
(defaults from :data:`auditlib.epl.settings.DEFAULTS`, the one place they are set)."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, cast

from pydantic import Field, StrictInt, ValidationInfo, field_validator

from auditlib.epl.rows import EPLKnobs
from auditlib.epl.settings import DEFAULTS as EPL_DEFAULTS
from auditlib.epl.settings import MAX_DRAWS, BiasAwareSettings
from flows.spec.sections import Strict

#: the spec's bootstrap and reference sizes by default: the estimate's (set, never None in a spec)
EPL_N_BOOT = cast(int, EPL_DEFAULTS.n_boot)
EPL_N_NULL = cast(int, EPL_DEFAULTS.n_null)


class EPLSection(Strict):
    bandwidth_factor: Annotated[float, Field(gt=0, le=100)] = 0.1
    percentiles: tuple[float, float] = (5.0, 95.0)
    range_multiplier: Annotated[float, Field(gt=0, le=100)] = EPL_DEFAULTS.range_multiplier
    # the bias-aware estimate (auditlib.epl.estimate_epl) and the EPL(x) surfaces: defaults from
    # auditlib.epl.settings.DEFAULTS, the one place they are set
    bias_aware_bandwidth: Annotated[float, Field(gt=0, le=1e6)] | None = None
    bandwidth_kind: Literal["factor", "absolute", "scott", "silverman"] = "factor"
    bias_aware_percentiles: Literal["percentiles"] | tuple[float, float] = "percentiles"
    shift: Annotated[float, Field(gt=0, le=1000)] = EPL_DEFAULTS.shift
    n_boot: Annotated[StrictInt, Field(gt=0, le=MAX_DRAWS)] = EPL_N_BOOT
    confidence: Annotated[float, Field(gt=0, lt=1)] = EPL_DEFAULTS.confidence
    ci_kind: Literal["basic", "percentile"] = "basic"
    n_null: Annotated[StrictInt, Field(gt=0, le=MAX_DRAWS)] = EPL_N_NULL
    null_quantile: Annotated[float, Field(gt=0, lt=1)] = EPL_DEFAULTS.null_quantile

    @field_validator("percentiles")
    @classmethod
    def _window(cls, v: tuple[float, float]) -> tuple[float, float]:
        lo, hi = v
        if not (0 <= lo < hi <= 100):
            raise ValueError("must satisfy 0 <= lower < upper <= 100")
        return v

    @field_validator("bias_aware_percentiles", mode="before")
    @classmethod
    def _bias_aware_window(cls, v: Any) -> Any:
        if isinstance(v, str):
            if v != "percentiles":
                raise ValueError('use "percentiles" (the same window) or a pair such as [5, 95]')
            return v
        try:
            lo, hi = (float(p) for p in v)
        except (TypeError, ValueError):
            raise ValueError(
                'use "percentiles" (the same window) or a pair such as [5, 95]'
            ) from None
        if not (0 <= lo < hi <= 100):
            raise ValueError("must satisfy 0 <= lower < upper <= 100")
        return (lo, hi)

    @field_validator("bandwidth_kind")
    @classmethod
    def _bandwidth_value(cls, v: str, info: ValidationInfo) -> str:
        if "bias_aware_bandwidth" not in info.data:  # that key failed on its own
            return v
        h = info.data["bias_aware_bandwidth"]
        if v == "absolute" and h is None:
            raise ValueError(
                "needs epl.bias_aware_bandwidth, h in residual units (e.g. 3.0); set it"
            )
        if v in ("scott", "silverman") and h is not None:
            raise ValueError(
                f"is a rule that sets h from the data, so epl.bias_aware_bandwidth = {h!r} is "
                'not used; drop it, or use bandwidth_kind = "factor" to set h = value x sd'
            )
        return v

    def bias_aware_settings(self) -> BiasAwareSettings:
        """The bias-aware estimate's knobs (part of :meth:`knobs`)."""
        p = self.bias_aware_percentiles
        return BiasAwareSettings(
            bandwidth=self.bias_aware_bandwidth,
            bandwidth_kind=self.bandwidth_kind,
            percentiles=None if p == "percentiles" else tuple(p),  # type: ignore[arg-type]
            range_multiplier=self.range_multiplier,
            shift=self.shift,
            n_boot=self.n_boot,
            confidence=self.confidence,
            ci_kind=self.ci_kind,
            n_null=self.n_null,
            null_quantile=self.null_quantile,
        )

    def knobs(self) -> EPLKnobs:
        """The settings of the EPL tasks (``flows/audit/tasks.py``) this section sets."""
        b = self.bias_aware_settings()
        return EPLKnobs(self.bandwidth_factor, self.percentiles, self.range_multiplier, b)

    def store_attrs(self) -> dict[str, Any]:
        """Attributes of the ``epl`` group that describe the bias-aware estimate, its surfaces
        and ``kde_error``, with the knobs that produced them."""
        ba = self.bias_aware_settings()
        lo, hi = ba.window(self.percentiles)
        if self.bandwidth_kind == "factor":
            h = f"bandwidth {ba.bandwidth_value():g} sd"
        elif self.bandwidth_kind == "absolute":
            h = f"bandwidth {ba.bandwidth_value():g} (residual units)"
        else:
            h = f"bandwidth by {self.bandwidth_kind}'s rule"
        window = f"integer window {self.range_multiplier:g} x percentiles {lo:g}-{hi:g}"
        conf = f"{100 * self.confidence:g} % {self.ci_kind}"
        ratio = "log p(x)/p(x+1)" if self.shift == 1 else f"log p(x)/p(x+{self.shift:g})"
        return {
            "range_multiplier": self.range_multiplier,
            "bias_aware_settings": json.dumps(ba.to_dict(), sort_keys=True),
            "bias_aware": f"epl_bias_aware: {h}, {window}, shift {self.shift:g}; "
            f"epl_ci_low/high: {conf} bootstrap interval of it ({self.n_boot} resamples); "
            f"epl_null_upper: {100 * self.null_quantile:g} % quantile of the same estimator on "
            f"{self.n_null} draws of matched discrete-Gaussian noise (a small-sample reference, "
            "not a no-loss null); inv_sigma2_hat: slope of EPL(x), an estimate of 1/sigma^2 "
            "assuming Gaussian noise; bootstrap and reference draws keyed from the audit seed",
            "surface": f"surface*: the bias-aware EPL(x) = {ratio} at surface*_x with its "
            f"pointwise {conf} bootstrap band (multinomial on lattice counts, window and h "
            "fixed), per state and pooled; thinned to at most 101 points (ends and argmax kept)",
            "kde_error": "kde_error: bound on the relative error of every KDE behind a (geolevel, "
            "query)'s stored EPLs (pooled and per state, every bandwidth): 0 for lattice "
            "residuals (exact), the linear-binning bound for non-integer residuals binned on a "
            "fine lattice; NaN where nothing was estimated",
        }
