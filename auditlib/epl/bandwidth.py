"""Kernel bandwidth rules for the EPL estimators.

Every rule returns an absolute bandwidth h (in residual units) for ``p̂(x) = (1/(n h)) Σ φ((x−r_i)/h)``:

``"factor"``     h = value × sd (ddof=1) — scipy's ``gaussian_kde(bw_method=value)``; Flaxman & Petti
                 use value = 0.1.
``"absolute"``   h = value.
``"scott"``      h = sd × n^(−1/5) — scipy's ``bw_method="scott"`` in one dimension (value ignored).
``"silverman"``  h = sd × (3n/4)^(−1/5) — scipy's ``bw_method="silverman"`` (value ignored).

Scott and Silverman are tuned for the density, not for the log-ratio of neighbouring values that
EPL takes, and their bandwidth shrinks with n; ``docs/epl.md`` compares them with fixed factors.
"""

from __future__ import annotations

import math

from auditlib.exceptions import InvalidParameterError, UnknownNameError

BANDWIDTH_KINDS = ("factor", "absolute", "scott", "silverman")


def check_positive(name: str, value: object, hint: str) -> float:
    """``value`` as a finite float > 0, else :class:`InvalidParameterError` naming it."""
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        v = math.nan
    if not math.isfinite(v) or v <= 0.0:
        raise InvalidParameterError(f"Invalid {name}: {value!r}; {hint}")
    return v


def resolve_bandwidth(kind: str, value: float | None, sd: float, n: int) -> float:
    """Absolute bandwidth h for ``kind`` (see the module docstring) at spread ``sd`` and size ``n``."""
    if kind not in BANDWIDTH_KINDS:
        raise UnknownNameError(f"Unknown bandwidth kind {kind!r}; choose one of {BANDWIDTH_KINDS}.")
    if kind == "scott":
        return sd * n ** (-0.2)
    if kind == "silverman":
        return sd * (0.75 * n) ** (-0.2)
    v = check_positive(
        "bandwidth",
        value,
        "pass a finite number > 0 (a multiple of the sd for kind 'factor', residual units for "
        "kind 'absolute').",
    )
    return v * sd if kind == "factor" else v


def check_percentiles(percentiles: object) -> tuple[float, float]:
    """The EPL window's percentiles (lo, hi) with 0 ≤ lo < hi ≤ 100, or a clear error."""
    try:
        lo, hi = (float(p) for p in percentiles)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        raise InvalidParameterError(
            f"Invalid percentiles: {percentiles!r}; pass a pair (lo, hi), e.g. (5, 95)."
        ) from None
    if not (0.0 <= lo < hi <= 100.0):
        raise InvalidParameterError(
            f"Invalid percentiles: {percentiles!r}; need 0 ≤ lo < hi ≤ 100, e.g. (5, 95)."
        )
    return lo, hi
