"""How an MPL lower bound on ε reaches a reader: ε ≥ 0 always, so a bound at or below 0 says nothing.

The estimate LB = ℓ̂* + z_α σ̂/c_N (z_α < 0) falls below 0 when the loss is too small for the draws
to see (the samples cannot tell the neighbours apart). The store keeps that raw estimate (its
coverage and its distribution over repetitions are statistics of the estimator); every table,
figure and command line shows it through :func:`fmt_lb` — "0 (vacuous)" — and never as a negative ε.
"""

from __future__ import annotations

import math
from typing import Any

from flows.report.format import fmt_num, is_finite

#: the cell text of a vacuous bound
VACUOUS = "0 (vacuous)"
#: why a vacuous bound is vacuous, for notes, tooltips and captions
WHY = "the samples cannot tell the neighbours apart"
#: the sentence under a table that shows a vacuous bound
NOTE = (
    "A lower bound on ε at or below 0 says nothing (ε ≥ 0 always): it is shown as "
    f"{VACUOUS} — {WHY}. The store keeps the raw estimate."
)


def vacuous(lb: Any) -> bool:
    """Whether ``lb`` is a finite lower bound on ε at or below 0."""
    return is_finite(lb) and float(lb) <= 0.0


def shown(lb: Any) -> float:
    """The bound as a reader sees it: max(LB, 0); NaN stays NaN (no bound)."""
    if not is_finite(lb):
        return math.nan if lb is None else float(lb)
    return max(float(lb), 0.0)


def fmt_lb(lb: Any, sig: int = 4) -> str:
    """An MPL lower bound to ``sig`` significant digits; :data:`VACUOUS` at or below 0."""
    return VACUOUS if vacuous(lb) else fmt_num(lb, sig)
